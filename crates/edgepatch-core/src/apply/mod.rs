//! Streaming apply: reads a patch front to back (so it can be applied while it
//! downloads), reads old data by random access through [`OldBuild`], and writes
//! the new build through [`BuildSink`]. Memory is bounded by one segment
//! (`MAX_SEGMENT_NEW`) whatever the file sizes; every file's BLAKE3 is checked
//! before the sink is told the file is finished, and the patch's own checksum is
//! checked before `apply_patch` returns Ok. The sink must treat everything as
//! staged until then.

//!
//! Its parts: `patch_reader` reads and checks the patch's units (header, tree,
//! segment headers, zstd frames); `delta_stream` turns segments into the new
//! content of the delta files (copies, difference bytes, windows); `applier` is the
//! push-driven [`PatchApplier`] with its resume points and file hashing.

mod applier;
mod delta_stream;
mod patch_reader;

use std::io::{self, Read};

use crate::error::{Error, Input, Result};
use crate::patch_format::*;

pub(crate) use crate::patch_format::read_segment_header;
pub use applier::PatchApplier;
pub(crate) use patch_reader::{read_header_and_tree, PatchInput};

/// Bytes moved per read or write of file content.
const CHUNK: usize = 256 << 10;

/// Random access to the old build. Paths are build paths ("" in a single-file patch).
pub trait OldBuild {
    /// The size of the file at `path` (an error if it is missing or not a file).
    fn file_size(&mut self, path: &str) -> io::Result<u64>;
    /// Fills all of `buf` from `offset` of the file.
    fn read_at(&mut self, path: &str, offset: u64, buf: &mut [u8]) -> io::Result<()>;
    /// Tree patches only: every entry of the old build (files with their size
    /// and executable bit, symlinks with their target, directories), sorted by
    /// path bytes. A patch keeps what did not change by position in this list
    /// instead of naming it; the list must be exactly the one the patch was
    /// made from (its digest is checked before anything is written).
    fn listing(&mut self) -> io::Result<Vec<ListedEntry>> {
        Err(io::Error::new(io::ErrorKind::Unsupported, "this old build cannot list its entries (needed for a tree patch)"))
    }
    /// Whether `listing` tells each file's executable bit. False where files have none
    /// (Windows): the listing then says no file is executable, and a patch made where
    /// some old file was is matched by its mode-blind digest (docs/FORMAT.md §2.1).
    fn modes_known(&self) -> bool {
        true
    }
}

/// The old build's listing: asked of `old` for a tree patch, made from the one
/// file's size for a single-file patch.
pub(crate) fn old_listing<O: OldBuild + ?Sized>(old: &mut O, single_file: bool) -> Result<Vec<ListedEntry>> {
    let whole = |e| Error::OldRead { path: "(the old build)".into(), source: e };
    if single_file {
        let size = old.file_size("").map_err(|e| Error::OldRead { path: display_path(""), source: e })?;
        return Ok(single_file_listing(size));
    }
    let mut listing = old.listing().map_err(whole)?;
    listing.sort_unstable_by(|a, b| a.path.as_bytes().cmp(b.path.as_bytes()));
    Ok(listing)
}

/// Where the new build goes. Nothing written is final until `apply_patch`
/// returned Ok; a sink stages and commits (see the CLI's directory sink).
pub trait BuildSink {
    /// The patch's head (its first `len` bytes: fixed header and compressed tree section)
    /// hashes to `blake3`; called before the tree is decompressed or decoded. A sink bound to
    /// a signed manifest that states the head's BLAKE3 refuses any other head here, so an
    /// unvouched tree never reaches a decoder. The default takes any.
    fn check_head(&mut self, len: u64, blake3: &[u8; 32]) -> io::Result<()> {
        let _ = (len, blake3);
        Ok(())
    }

    /// Whether side infos of this patch may go to decoders that trust them (the
    /// compressed-asset transform's preflate, which a hostile side info can keep running and
    /// allocating without end: docs/FORMAT.md §2.8.8): true where a signed manifest vouched
    /// for the head [`BuildSink::check_head`] saw, or where the caller trusts the patch (one it
    /// made itself: the CLI's `apply --trust-patch`, which checks the whole patch first with
    /// [`check_patch_checksum`]). The default: neither, and a patch that
    /// needs such a decoder is refused before anything is written.
    fn trusts_side_infos(&self) -> bool {
        false
    }

    /// The patch's tree, read and checked against the old build, before the applier writes
    /// anything (a resumed apply's too). A sink that knows what the new build must be (one
    /// bound to a signed manifest) refuses a tree that is not it here. The default takes any.
    fn check_tree(&mut self, tree: &PatchTree) -> io::Result<()> {
        let _ = tree;
        Ok(())
    }

    /// Creates the directory `path` (its parent was created before).
    fn create_directory(&mut self, path: &str) -> io::Result<()>;
    /// Creates the symlink `path` pointing at `target`, which is data: never follow it.
    fn create_symlink(&mut self, path: &str, target: &str) -> io::Result<()>;
    /// Starts the file `path` of `size` bytes; its content follows through `write_file`.
    fn begin_file(&mut self, path: &str, executable: bool, size: u64) -> io::Result<()>;
    /// Appends `data` to the file begun last.
    fn write_file(&mut self, data: &[u8]) -> io::Result<()>;
    /// The file's bytes are all written. Its BLAKE3 is checked, with every
    /// other file's, against the patch's files digest when the delta stream
    /// ends: nothing counts before `apply_patch` returned Ok.
    fn finish_file(&mut self) -> io::Result<()>;

    /// Resuming only ([`PatchApplier::resume`]): reopens a file of which the
    /// first `written` bytes were written before the interruption; the next
    /// `write_file` calls continue at byte `written` (anything after it is discarded).
    fn resume_file(&mut self, path: &str, executable: bool, size: u64, written: u64) -> io::Result<()> {
        let _ = (path, executable, size, written);
        Err(io::Error::new(io::ErrorKind::Unsupported, "this output cannot resume an interrupted apply"))
    }

    /// Resuming only: fills all of `buf` with bytes already written to the new
    /// file at `path`, from `offset` (to re-hash a partly written file and to
    /// rebuild the back-reference history without downloading anything again).
    fn read_written(&mut self, path: &str, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let _ = (path, offset, buf);
        Err(io::Error::new(io::ErrorKind::Unsupported, "this output cannot resume an interrupted apply"))
    }

    /// Offers to copy the old build's file `from`, unchanged, to the new file
    /// `path` (of `size` bytes) on the sink's own, e.g. on another thread while
    /// the applier decodes the delta files. `Ok(false)` (the default) leaves
    /// the copy to the applier, through `read_at` and `write_file`. A sink
    /// that takes it must read exactly `size` bytes and write them, and report
    /// their BLAKE3 through `finish_copies`; the files digest checks it.
    fn copy_old_file(&mut self, from: &str, path: &str, executable: bool, size: u64) -> io::Result<bool> {
        let _ = (from, path, executable, size);
        Ok(false)
    }

    /// Once every copy was offered: waits for the copies the sink took and
    /// returns the BLAKE3 of each, in the order they were offered. Called
    /// before the files digest is checked, so before the last file is finished.
    fn finish_copies(&mut self) -> io::Result<Vec<[u8; 32]>> {
        Ok(Vec::new())
    }

    /// Scratch space: one byte array, not part of the new build, that the applier writes
    /// what it would otherwise hold in memory to, and reads back by range: for each wasm file
    /// stored transformed (docs/FORMAT.md §2.8), its normalized form, and in the field-split
    /// layout its old module split (§2.8.7); each up to `MAX_WASM_TRANSFORM_BYTES`, each byte
    /// written once, in pieces of at most 256 KiB. The applier's first call writes nothing: it
    /// asks whether there is scratch space. `Ok(false)` (the default) says there is none: the
    /// applier then holds those bytes in memory (about twice the module at the peak, against a
    /// fraction of it). A sink that has scratch space discards it when the apply ends, however it
    /// ends; it needs no more trust than the sink's own files, whose every BLAKE3 is checked
    /// before anything is final.
    fn write_scratch(&mut self, offset: u64, data: &[u8]) -> io::Result<bool> {
        let _ = (offset, data);
        Ok(false)
    }

    /// Fills all of `buf` from `offset` of the scratch space (bytes `write_scratch` took).
    fn read_scratch(&mut self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let _ = (offset, buf);
        Err(io::Error::new(io::ErrorKind::Unsupported, "this output has no scratch space"))
    }
}

/// Where an interrupted apply can continue: after `segments_done` segments,
/// at byte `patch_offset` of the patch, with `new_offset` bytes of the delta
/// stream written. See [`PatchApplier::resume_point`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ResumePoint {
    /// Segments fully applied.
    pub segments_done: u64,
    /// Where the next segment starts in the patch.
    pub patch_offset: u64,
    /// Bytes of the delta stream (the delta files' new content) written so far.
    pub new_offset: u64,
}

/// How far an apply is, for progress reports.
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct ApplyProgress {
    /// Bytes of the patch consumed.
    pub patch_bytes_read: u64,
    /// Bytes of the new build written (copies included).
    pub new_bytes_written: u64,
    /// Bytes of the new build in all (known once the tree is read).
    pub new_bytes_total: u64,
    /// Entries (files, directories, links) finished.
    pub entries_done: u64,
    /// Entries of the new build in all (known once the tree is read).
    pub entries_total: u64,
}

/// What a finished apply wrote.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct ApplySummary {
    /// Entries of the new build (files, directories, links).
    pub entries: u64,
    /// Regular files of the new build.
    pub files: u64,
    /// Bytes of file content written.
    pub bytes_written: u64,
    /// Bytes of patch read.
    pub patch_bytes: u64,
}

pub(crate) fn display_path(path: &str) -> String {
    if path.is_empty() {
        "(the file)".into()
    } else {
        path.to_string()
    }
}

/// A sink's error: a manifest's refusal keeps its type, anything else is an output failure.
pub(super) fn out_err(path: &str, e: io::Error) -> Error {
    match crate::error::ManifestRefusal::of(&e) {
        Some(r) => Error::NotInManifest { what: r.what.clone() },
        None => Error::Output { path: display_path(path), source: e },
    }
}

/// Applies a patch read from `patch`. On Ok, everything the sink received is
/// verified and final; on Err, the caller must discard what the sink staged.
pub fn apply_patch<R: Read, O: OldBuild, S: BuildSink>(
    mut patch: R,
    old: &mut O,
    sink: &mut S,
    progress: &mut dyn FnMut(&ApplyProgress),
) -> Result<ApplySummary> {
    let mut applier = PatchApplier::new();
    let mut chunk = vec![0u8; CHUNK];
    loop {
        let n = read_patch(&mut patch, &mut chunk)?;
        if n == 0 {
            break;
        }
        applier.push(&chunk[..n], old, sink)?;
        progress(&applier.progress());
    }
    let summary = applier.finish()?;
    Ok(summary)
}

/// Checks a whole patch's trailer checksum (the BLAKE3 of every byte before its last 32) in
/// one pass, before anything of it is applied; returns the patch's length. A caller that
/// trusts a patch's side infos without a signed manifest (`apply --trust-patch`: a patch the
/// user made, read from disk) calls this first, so bytes damaged since it was made never
/// reach a decoder that trusts them ([`BuildSink::trusts_side_infos`]): the applier itself
/// checks the checksum only once it has read the last byte.
pub fn check_patch_checksum<R: Read>(mut patch: R) -> Result<u64> {
    let mut hasher = blake3::Hasher::new();
    // The bytes read but not yet hashed: the last 32 may be the checksum.
    let mut tail: Vec<u8> = Vec::with_capacity(CHUNK + 32);
    let mut chunk = vec![0u8; CHUNK];
    let mut total = 0u64;
    loop {
        let n = read_patch(&mut patch, &mut chunk)?;
        if n == 0 {
            break;
        }
        total += n as u64;
        tail.extend_from_slice(&chunk[..n]);
        if tail.len() > 32 {
            let hashed = tail.len() - 32;
            hasher.update(&tail[..hashed]);
            tail.drain(..hashed);
        }
    }
    if tail.len() < 32 {
        return Err(Error::Truncated { input: Input::Patch, offset: total, what: "patch checksum".into() });
    }
    if tail[..] != hasher.finalize().as_bytes()[..] {
        return Err(Error::Corrupt {
            input: Input::Patch,
            offset: total - 32,
            what: "patch checksum (BLAKE3) does not match its content, checked before applying: the patch was damaged after it was made".into(),
        });
    }
    Ok(total)
}

/// The next bytes of a patch into `buf` (0 at its end), past interruptions.
fn read_patch<R: Read>(patch: &mut R, buf: &mut [u8]) -> Result<usize> {
    loop {
        match patch.read(buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            r => return r.map_err(|e| Error::Io { input: Input::Patch, source: e }),
        }
    }
}

/// Gives up a buffer between segments that do not need it. Natively it is
/// freed (peak RSS tracks live memory); in wasm it is kept for reuse, because
/// a linear memory never shrinks and freeing and reallocating multi-MiB
/// buffers fragments it until it grows (measured: 71 MB of wasm memory for
/// the 101 MiB pair when freed, see BENCHMARKS.md).
/// `resize` without the amortized growth (which can double a multi-MiB buffer).
pub(super) fn resize_exact(buf: &mut Vec<u8>, len: usize) {
    if len > buf.capacity() {
        buf.reserve_exact(len - buf.len());
    }
    buf.resize(len, 0);
}

/// Natively gives back a buffer's capacity beyond `keep` (for a mapped
/// multi-MiB buffer, a shrink of the mapping in place: no copy). In wasm the
/// buffer is kept whole, as `release` keeps buffers there.
pub(super) fn shrink(buf: &mut Vec<u8>, keep: usize) {
    if !cfg!(target_arch = "wasm32") && buf.capacity() > keep {
        buf.truncate(keep);
        buf.shrink_to(keep);
    }
}

pub(super) fn release(buf: &mut Vec<u8>) {
    if cfg!(target_arch = "wasm32") {
        buf.clear();
    } else {
        *buf = Vec::new();
    }
}
