//! Reading a patch's units front to back (docs/FORMAT.md §1-2): the fixed header, the tree
//! section, segment headers (decoded by the format's readers) and their zstd frames and LZMA
//! streams, every byte counted and hashed so errors carry offsets and the trailer checksum
//! is checked without buffering the patch.

use std::io::{self, Read};

use super::{old_listing, resize_exact, OldBuild};
use crate::error::{zstd_error, Error, Input, Result};
use crate::patch_format::*;

/// Counts and hashes every byte read, so errors carry offsets and the trailer
/// checksum can be verified without buffering the patch.
pub(crate) struct PatchInput<R> {
    inner: R,
    hasher: blake3::Hasher,
    offset: u64,
}

impl<R: Read> PatchInput<R> {
    pub(crate) fn new(inner: R) -> Self {
        PatchInput { inner, hasher: blake3::Hasher::new(), offset: 0 }
    }

    /// Continues reading at `offset` with the hash of everything before it.
    pub(super) fn resume(inner: R, hasher: blake3::Hasher, offset: u64) -> Self {
        PatchInput { inner, hasher, offset }
    }

    pub(super) fn into_state(self) -> (blake3::Hasher, u64) {
        (self.hasher, self.offset)
    }

    pub(crate) fn offset(&self) -> u64 {
        self.offset
    }

    pub(crate) fn exact(&mut self, buf: &mut [u8], what: &str) -> Result<()> {
        let mut filled = 0;
        while filled < buf.len() {
            match self.inner.read(&mut buf[filled..]) {
                Ok(0) => return Err(Error::Truncated { input: Input::Patch, offset: self.offset + filled as u64, what: what.into() }),
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::Io { input: Input::Patch, source: e }),
            }
        }
        self.hasher.update(buf);
        self.offset += buf.len() as u64;
        Ok(())
    }

    /// Reads `comp_len` bytes of one zstd frame and decompresses exactly `raw_len` bytes into `out`.
    /// An ops segment's stream: a zstd frame, or raw LZMA with the properties byte `lzma`
    /// (§2.3), decoded into `out` (exactly `raw_len` bytes).
    pub(crate) fn ops_stream(&mut self, lzma: Option<u8>, comp_len: u64, raw_len: u64, comp: &mut Vec<u8>, out: &mut Vec<u8>, what: &str) -> Result<()> {
        let Some(props) = lzma else { return self.frame(comp_len, raw_len, comp, out, what) };
        let start = self.offset;
        resize_exact(comp, comp_len as usize);
        self.exact(comp, what)?;
        resize_exact(out, raw_len as usize);
        crate::lzma::decompress_stream_into(comp, props, out).map_err(|why| Error::Corrupt {
            input: Input::Patch,
            offset: start,
            what: format!("{what}: {why}"),
        })
    }

    pub(crate) fn frame(&mut self, comp_len: u64, raw_len: u64, comp: &mut Vec<u8>, out: &mut Vec<u8>, what: &str) -> Result<()> {
        out.clear();
        if raw_len == 0 {
            return Ok(());
        }
        let start = self.offset;
        resize_exact(comp, comp_len as usize);
        self.exact(comp, what)?;
        decompress_frame(comp, raw_len, out, start, what)
    }

    /// BLAKE3 of every byte read so far.
    fn hash_so_far(&self) -> [u8; 32] {
        *self.hasher.clone().finalize().as_bytes()
    }

    pub(crate) fn finish(self) -> Result<u64> {
        self.finish_checked(true)
    }

    /// `verify` false: a resumed apply has not seen the bytes before its
    /// resume point, so it cannot check the whole-patch checksum (every file's
    /// BLAKE3 is still checked).
    pub(super) fn finish_checked(mut self, verify: bool) -> Result<u64> {
        let expected = self.hasher.finalize();
        let at = self.offset;
        let mut stored = [0u8; 32];
        self.exact(&mut stored, "patch checksum")?;
        if verify && stored != *expected.as_bytes() {
            return Err(Error::Corrupt { input: Input::Patch, offset: at, what: "patch checksum (BLAKE3) does not match its content".into() });
        }
        let mut extra = [0u8; 1];
        match self.inner.read(&mut extra) {
            Ok(0) => Ok(self.offset),
            Ok(_) => Err(Error::Corrupt { input: Input::Patch, offset: self.offset, what: "bytes after the patch checksum".into() }),
            Err(e) => Err(Error::Io { input: Input::Patch, source: e }),
        }
    }
}

/// The format's unit decoders (the fixed header, segment headers) read through the same
/// counting, hashing reader.
impl<R: Read> UnitSource for PatchInput<R> {
    fn offset(&self) -> u64 {
        self.offset
    }

    fn exact(&mut self, buf: &mut [u8], what: &str) -> Result<()> {
        PatchInput::exact(self, buf, what)
    }
}

/// Reads the fixed header and the tree section.
/// The header and the tree section as the patch states it, and where the tree starts.
///
/// `check_head(len, blake3)` sees the patch's head (its first `len` bytes: the fixed header
/// and the compressed tree section) before the tree is decompressed or decoded: a client
/// bound to a signed manifest refuses a head the manifest does not vouch for there, so no
/// byte of an unvouched tree (its side infos included) reaches a decoder.
pub(crate) fn read_header_and_tree<R: Read>(input: &mut PatchInput<R>, check_head: impl FnOnce(u64, [u8; 32]) -> Result<()>) -> Result<(EncodedTree, u64)> {
    let header = FixedHeader::read(input)?;
    let tree_at = input.offset();
    let mut comp = Vec::new();
    resize_exact(&mut comp, header.tree_comp_len as usize);
    input.exact(&mut comp, "tree section")?;
    check_head(input.offset(), input.hash_so_far())?;
    let mut tree_bytes = Vec::new();
    decompress_frame(&comp, header.tree_len, &mut tree_bytes, tree_at, "tree section")?;
    Ok((EncodedTree::decode(&tree_bytes, tree_at, header.flags)?, tree_at))
}

/// The header and tree resolved against the old build's listing.
pub(crate) fn read_tree_for<R: Read, O: OldBuild + ?Sized>(
    input: &mut PatchInput<R>,
    old: &mut O,
    check_head: impl FnOnce(u64, [u8; 32]) -> Result<()>,
) -> Result<PatchTree> {
    let (encoded, tree_at) = read_header_and_tree(input, check_head)?;
    encoded.resolve_modes(old_listing(old, encoded.single_file)?, tree_at, old.modes_known())
}

/// A zstd stream in a patch is exactly one zstd frame (§1): libzstd would
/// also decode concatenated frames and skip skippable ones.
pub(super) fn check_one_frame(comp: &[u8]) -> std::result::Result<(), String> {
    const ZSTD_MAGIC: [u8; 4] = 0xFD2F_B528u32.to_le_bytes();
    if comp.get(..4) != Some(&ZSTD_MAGIC[..]) {
        return Err("not a zstd frame (a skippable frame or other bytes)".into());
    }
    match zstd::zstd_safe::find_frame_compressed_size(comp) {
        Ok(n) if n == comp.len() => Ok(()),
        Ok(n) => Err(format!("{} bytes after the zstd frame's {n} (a stream is one frame)", comp.len() - n)),
        Err(code) => Err(zstd_error(code)),
    }
}

/// Decompresses a window segment's frame with `window` as its zstd prefix.
/// A window segment's data (`comp`, `w.comp_len` bytes) decompressed against its `window`
/// into `out`, as its codec says; exactly `w.new_len` bytes or an error.
pub(crate) fn decompress_with_window(comp: &[u8], window: &[u8], w: &WindowSegmentHeader, out: &mut Vec<u8>, offset: u64) -> Result<()> {
    let corrupt = |why: String| Error::Corrupt { input: Input::Patch, offset, what: format!("window segment: {why}") };
    let new_len = w.new_len;
    out.clear();
    if let WindowCodec::Lzma { props } = w.codec {
        // Its bound (window and data within MAX_LZMA_DICTIONARY) was checked with the header.
        resize_exact(out, new_len as usize);
        return crate::lzma::decompress_into(comp, window, props, out).map_err(corrupt);
    }
    check_one_frame(comp).map_err(corrupt)?;
    out.reserve_exact(new_len as usize);
    let mut d = zstd::zstd_safe::DCtx::create();
    d.set_parameter(zstd::zstd_safe::DParameter::WindowLogMax(MAX_WINDOW_LOG + 1)).map_err(|c| corrupt(zstd_error(c)))?;
    d.ref_prefix(window).map_err(|c| corrupt(zstd_error(c)))?;
    let n = d.decompress(out, comp).map_err(|c| corrupt(zstd_error(c)))?;
    if n as u64 != new_len {
        return Err(corrupt(format!("decompressed to {n} bytes, header says {new_len}")));
    }
    Ok(())
}

/// Decompresses `comp`, one zstd frame read at patch offset `start`, to exactly `raw_len` bytes in `out`.
fn decompress_frame(comp: &[u8], raw_len: u64, out: &mut Vec<u8>, start: u64, what: &str) -> Result<()> {
    out.clear();
    out.reserve_exact(raw_len as usize);
    let corrupt = |why: String| Error::Corrupt { input: Input::Patch, offset: start, what: format!("{what}: {why}") };
    check_one_frame(comp).map_err(corrupt)?;
    let mut d = zstd::bulk::Decompressor::new().map_err(|e| corrupt(e.to_string()))?;
    d.set_parameter(zstd::zstd_safe::DParameter::WindowLogMax(MAX_WINDOW_LOG)).map_err(|e| corrupt(e.to_string()))?;
    // Decompress into spare capacity bounded by raw_len: a frame that wants more fails.
    let n = d.decompress_to_buffer(comp, out).map_err(|e| corrupt(format!("zstd: {e}")))?;
    if n as u64 != raw_len {
        return Err(corrupt(format!("decompressed to {n} bytes, header says {raw_len}")));
    }
    Ok(())
}
