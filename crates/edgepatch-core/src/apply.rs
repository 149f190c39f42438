//! Streaming apply: reads a patch front to back (so it can be applied while it
//! downloads), reads old data by random access through [`OldBuild`], and writes
//! the new build through [`BuildSink`]. Memory is bounded by one segment
//! (`MAX_SEGMENT_NEW`) whatever the file sizes; every file's BLAKE3 is checked
//! before the sink is told the file is finished, and the patch's own checksum is
//! checked before `apply_patch` returns Ok. The sink must treat everything as
//! staged until then.

use std::io::{self, Read};

use crate::error::{Error, Input, Result};
use crate::matcher::Op;
use crate::patch_format::*;

/// Random access to the old build. Paths are build paths ("" in a single-file patch).
pub trait OldBuild {
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
    fn create_directory(&mut self, path: &str) -> io::Result<()>;
    fn create_symlink(&mut self, path: &str, target: &str) -> io::Result<()>;
    fn begin_file(&mut self, path: &str, executable: bool, size: u64) -> io::Result<()>;
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
}

/// Where an interrupted apply can continue: after `segments_done` segments,
/// at byte `patch_offset` of the patch, with `new_offset` bytes of the delta
/// stream written. See [`PatchApplier::resume_point`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ResumePoint {
    pub segments_done: u64,
    pub patch_offset: u64,
    pub new_offset: u64,
}

#[derive(Debug, Clone, Copy, Default)]
pub struct ApplyProgress {
    pub patch_bytes_read: u64,
    pub new_bytes_written: u64,
    pub new_bytes_total: u64,
    pub entries_done: u64,
    pub entries_total: u64,
}

#[derive(Debug, Clone, Default)]
pub struct ApplySummary {
    pub entries: u64,
    pub files: u64,
    pub bytes_written: u64,
    pub patch_bytes: u64,
}

const CHUNK: usize = 256 << 10;

/// Old data an ops segment prefetches for its copies, at most (see `prefetch_copies`).
const PREFETCH_BUDGET: u64 = 8 << 20;
/// Copy spans an ops segment considers for prefetching, at most: 6 MiB of
/// bookkeeping, not 24 bytes for each of a hostile segment's millions of ops.
const MAX_PREFETCH_SPANS: usize = 1 << 18;

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
    fn resume(inner: R, hasher: blake3::Hasher, offset: u64) -> Self {
        PatchInput { inner, hasher, offset }
    }

    fn into_state(self) -> (blake3::Hasher, u64) {
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

    pub(crate) fn u8(&mut self, what: &str) -> Result<u8> {
        let mut b = [0u8; 1];
        self.exact(&mut b, what)?;
        Ok(b[0])
    }

    pub(crate) fn varint(&mut self, what: &str) -> Result<u64> {
        let start = self.offset;
        let mut v: u64 = 0;
        for shift in (0..64).step_by(7) {
            let b = self.u8(what)?;
            if shift == 63 && b > 1 {
                break;
            }
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(Error::Corrupt { input: Input::Patch, offset: start, what: format!("{what}: varint overflows 64 bits") })
    }

    /// Reads `comp_len` bytes of one zstd frame and decompresses exactly `raw_len` bytes into `out`.
    pub(crate) fn frame(&mut self, comp_len: u64, raw_len: u64, comp: &mut Vec<u8>, out: &mut Vec<u8>, what: &str) -> Result<()> {
        out.clear();
        if raw_len == 0 {
            return Ok(());
        }
        let start = self.offset;
        resize_exact(comp, comp_len as usize);
        self.exact(comp, what)?;
        out.reserve_exact(raw_len as usize);
        let corrupt = |why: String| Error::Corrupt { input: Input::Patch, offset: start, what: format!("{what}: {why}") };
        check_one_frame(comp).map_err(corrupt)?;
        let mut d = zstd::bulk::Decompressor::new().map_err(|e| corrupt(e.to_string()))?;
        d.set_parameter(zstd::zstd_safe::DParameter::WindowLogMax(MAX_WINDOW_LOG)).map_err(|e| corrupt(e.to_string()))?;
        // Decompress into spare capacity bounded by raw_len: a frame that wants more fails.
        let n = d.decompress_to_buffer(comp.as_slice(), out).map_err(|e| corrupt(format!("zstd: {e}")))?;
        if n as u64 != raw_len {
            return Err(corrupt(format!("decompressed to {n} bytes, header says {raw_len}")));
        }
        Ok(())
    }

    pub(crate) fn finish(self) -> Result<u64> {
        self.finish_checked(true)
    }

    /// `verify` false: a resumed apply has not seen the bytes before its
    /// resume point, so it cannot check the whole-patch checksum (every file's
    /// BLAKE3 is still checked).
    fn finish_checked(mut self, verify: bool) -> Result<u64> {
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

/// Reads the fixed header and the tree section.
/// The header and the tree section as the patch states it, and where the tree starts.
pub(crate) fn read_header_and_tree<R: Read>(input: &mut PatchInput<R>) -> Result<(EncodedTree, u64)> {
    let (flags, raw, comp) = read_fixed_header(input)?;
    let (mut comp_buf, mut tree_bytes) = (Vec::new(), Vec::new());
    let tree_at = input.offset();
    input.frame(comp, raw, &mut comp_buf, &mut tree_bytes, "tree section")?;
    Ok((EncodedTree::decode(&tree_bytes, tree_at, flags & FLAG_SINGLE_FILE != 0)?, tree_at))
}

/// The header and tree resolved against the old build's listing.
pub(crate) fn read_tree_for<R: Read, O: OldBuild + ?Sized>(input: &mut PatchInput<R>, old: &mut O) -> Result<PatchTree> {
    let (encoded, tree_at) = read_header_and_tree(input)?;
    encoded.resolve(old_listing(old, encoded.single_file)?, tree_at)
}

/// Magic, version, flags and the tree section's sizes, all checked.
fn read_fixed_header<R: Read>(input: &mut PatchInput<R>) -> Result<(u16, u64, u64)> {
    let mut magic = [0u8; 8];
    input.exact(&mut magic, "magic")?;
    if magic != PATCH_MAGIC {
        return Err(Error::BadMagic { input: Input::Patch });
    }
    let mut v = [0u8; 2];
    input.exact(&mut v, "version")?;
    let version = u16::from_le_bytes(v);
    if version != PATCH_VERSION {
        return Err(Error::UnsupportedVersion { input: Input::Patch, found: version, supported: PATCH_VERSION });
    }
    input.exact(&mut v, "flags")?;
    let flags = u16::from_le_bytes(v);
    if flags & !FLAG_SINGLE_FILE != 0 {
        return Err(Error::Corrupt { input: Input::Patch, offset: 10, what: format!("unknown flags {flags:#x}") });
    }
    let at = input.offset();
    let raw = input.varint("tree size")?;
    let comp = input.varint("tree compressed size")?;
    if raw > MAX_TREE_BYTES {
        return Err(Error::Limit { input: Input::Patch, offset: at, what: format!("tree section of {raw} bytes, above the limit {MAX_TREE_BYTES}") });
    }
    if raw == 0 || comp == 0 || comp > raw + raw / 64 + 1024 {
        return Err(Error::Corrupt { input: Input::Patch, offset: at, what: format!("tree sizes {raw}/{comp} out of range") });
    }
    Ok((flags, raw, comp))
}

/// Reads the next segment header, or None at the end marker (whose counts are checked).
pub(crate) fn read_segment_header<R: Read>(input: &mut PatchInput<R>, segments_so_far: u64, produced: u64, reference_len: u64) -> Result<Option<Segment>> {
    // `produced`: delta bytes before this segment, which bounds how far back a window may reach.
    let at = input.offset();
    let corrupt = |what: String| Error::Corrupt { input: Input::Patch, offset: at, what };
    let limit = |what: String| Error::Limit { input: Input::Patch, offset: at, what };
    match input.u8("segment or end marker")? {
        SEGMENT_TAG => {
            let mut f = [0u64; 7];
            for (v, what) in f.iter_mut().zip([
                "segment size",
                "control size",
                "control compressed size",
                "diff size",
                "diff compressed size",
                "extra size",
                "extra compressed size",
            ]) {
                *v = input.varint(what)?;
            }
            let h = SegmentHeader { new_len: f[0], ctrl_raw: f[1], ctrl_comp: f[2], diff_raw: f[3], diff_comp: f[4], extra_raw: f[5], extra_comp: f[6] };
            h.validate(at)?;
            Ok(Some(Segment::Ops(h)))
        }
        WINDOW_SEGMENT_TAG => {
            let new_len = input.varint("segment size")?;
            if new_len == 0 {
                return Err(corrupt("window segment produces 0 bytes".into()));
            }
            if new_len > MAX_SEGMENT_NEW {
                return Err(limit(format!("segment produces {new_len} bytes, above the limit {MAX_SEGMENT_NEW}")));
            }
            let count = input.varint("window span count")?;
            if count > MAX_WINDOW_SPANS {
                return Err(limit(format!("{count} window spans, above the limit {MAX_WINDOW_SPANS}")));
            }
            let (mut spans, mut end, mut total) = (Vec::with_capacity(count as usize), 0u64, 0u64);
            for _ in 0..count {
                let start = end.checked_add(input.varint("window span gap")?);
                let len = input.varint("window span length")?;
                let stop = start.and_then(|s| s.checked_add(len)).filter(|&e| e <= reference_len && len > 0);
                let stop = stop.ok_or_else(|| corrupt("window span empty or outside the old data".into()))?;
                total += len; // each len is within the reference: no overflow until the total passes the limit
                if total > MAX_WINDOW_BYTES {
                    return Err(limit(format!("window spans over {MAX_WINDOW_BYTES} bytes")));
                }
                spans.push((stop - len, len));
                end = stop;
            }
            let back_len = input.varint("window back length")?;
            if back_len > MAX_WINDOW_BACK {
                return Err(limit(format!("window reaches {back_len} bytes back, above the limit {MAX_WINDOW_BACK}")));
            }
            if back_len > produced {
                return Err(corrupt(format!(
                    "window reaches {back_len} bytes back, more than {} available (limit {MAX_WINDOW_BACK})",
                    produced.min(MAX_WINDOW_BACK)
                )));
            }
            let comp_len = input.varint("window segment compressed size")?;
            if comp_len == 0 || comp_len > new_len + new_len / 64 + 1024 {
                return Err(corrupt(format!("compressed size {comp_len} implausible for {new_len} bytes")));
            }
            Ok(Some(Segment::Window(WindowSegmentHeader { new_len, spans, back_len, comp_len })))
        }
        END_TAG => {
            let count = input.varint("segment count")?;
            let total = input.varint("delta size")?;
            if count != segments_so_far || total != produced {
                return Err(corrupt(format!("end marker says {count} segments / {total} bytes, stream had {segments_so_far} / {produced}")));
            }
            Ok(None)
        }
        t => Err(corrupt(format!("expected a segment or the end marker, found byte {t:#04x}"))),
    }
}

/// A zstd stream in a patch is exactly one zstd frame (§1): libzstd would
/// also decode concatenated frames and skip skippable ones.
fn check_one_frame(comp: &[u8]) -> std::result::Result<(), String> {
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
pub(crate) fn decompress_with_window(comp: &[u8], window: &[u8], new_len: u64, out: &mut Vec<u8>, offset: u64) -> Result<()> {
    let corrupt = |why: String| Error::Corrupt { input: Input::Patch, offset, what: format!("window segment: {why}") };
    out.clear();
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

pub(crate) fn zstd_error(code: usize) -> String {
    format!("zstd: {}", zstd::zstd_safe::get_error_name(code))
}

/// The delta stream: produces the concatenated new content of all Delta files.
struct DeltaStream {
    /// (old path index, start in reference stream, size), ascending.
    reference: Vec<(usize, u64, u64)>,
    reference_len: u64,
    segment_at: u64,
    ctrl: Vec<u8>,
    /// The current segment's ops, read one at a time from `ctrl`.
    ops: OpCursor,
    /// Output position within the current segment.
    segment_pos: u64,
    diff: Vec<u8>,
    diff_pos: usize,
    extra: Vec<u8>,
    extra_pos: usize,
    comp: Vec<u8>,
    /// The old data the segment reads: a window segment's window, or the
    /// spans an ops segment's copies read, prefetched (`prefetch_copies`).
    /// One buffer for both, kept from segment to segment: freeing one kind's
    /// buffer and faulting in the other's at every change of segment kind
    /// cost a third of freedoom2-wad's page faults (11,500; 7,600 now).
    old_data: Vec<u8>,
    /// Prefetched reference spans of the current ops segment: (start, end, offset in `old_data`).
    prefetched: Vec<(u64, u64, usize)>,
    /// The last MAX_WINDOW_BACK delta bytes produced (a ring), for window segments.
    /// Not kept during the last segment, which no window segment follows.
    history: Vec<u8>,
    cursor: u64,
    copy_left: u64,
    extra_left: u64,
    segment_left: u64,
    segments: u64,
    produced: u64,
    /// Bytes of all delta files: the stream's length.
    total: u64,
    /// False during the last segment: `history` is no longer filled (for a
    /// build under 4 MiB of changes, the only segment: a copy and up to
    /// 1,000 page faults saved).
    keep_history: bool,
}

impl DeltaStream {
    fn new(tree: &PatchTree) -> Self {
        let mut reference = Vec::new();
        let mut start = 0;
        for (i, f) in tree.old_files.iter().enumerate() {
            if f.in_reference && f.size > 0 {
                reference.push((i, start, f.size));
                start += f.size;
            }
        }
        DeltaStream {
            reference,
            reference_len: start,
            segment_at: 0,
            ctrl: Vec::new(),
            ops: OpCursor::default(),
            segment_pos: 0,
            diff: Vec::new(),
            diff_pos: 0,
            extra: Vec::new(),
            extra_pos: 0,
            comp: Vec::new(),
            old_data: Vec::new(),
            prefetched: Vec::new(),
            history: Vec::new(),
            cursor: 0,
            copy_left: 0,
            extra_left: 0,
            segment_left: 0,
            segments: 0,
            produced: 0,
            total: tree
                .entries
                .iter()
                .map(|e| match e.kind {
                    TreeEntryKind::File { size, source: FileSource::Delta, .. } => size,
                    _ => 0,
                })
                .sum(),
            keep_history: true,
        }
    }

    fn corrupt(&self, what: String) -> Error {
        Error::Corrupt { input: Input::Patch, offset: self.segment_at, what: format!("segment {}: {what}", self.segments) }
    }

    fn load_segment<R: Read, O: OldBuild>(&mut self, input: &mut PatchInput<R>, old: &mut O, tree: &PatchTree) -> Result<()> {
        self.segment_at = input.offset();
        let segment = read_segment_header(input, self.segments, self.produced, self.reference_len)?.ok_or_else(|| Error::Truncated {
            input: Input::Patch,
            offset: self.segment_at,
            what: "delta stream ended before all files were produced".into(),
        })?;
        self.segments += 1;
        let new_len = match &segment {
            Segment::Ops(h) => h.new_len,
            Segment::Window(w) => w.new_len,
        };
        if new_len > self.total - self.produced {
            return Err(self.corrupt(format!("segment of {new_len} bytes, only {} bytes of delta files are left", self.total - self.produced)));
        }
        self.keep_history = self.produced + new_len < self.total;
        let h = match segment {
            Segment::Ops(h) => h,
            Segment::Window(w) => {
                // Only one kind of segment's buffers is held at a time.
                release(&mut self.diff);
                release(&mut self.ctrl);
                self.prefetched.clear();
                let mut window = std::mem::take(&mut self.old_data);
                // Every byte is overwritten below: only growth needs zeroing.
                let len = w.window_len() as usize;
                if window.len() < len {
                    resize_exact(&mut window, len);
                }
                window.truncate(len);
                let mut filled = 0;
                for &(start, len) in &w.spans {
                    self.cursor = start;
                    while self.cursor < start + len {
                        let want = (start + len - self.cursor) as usize;
                        let n = self.read_reference(&mut window[filled..filled + want], old, tree)?;
                        filled += n;
                        self.cursor += n as u64;
                    }
                }
                let back = w.back_len as usize;
                if back > 0 {
                    let ring = MAX_WINDOW_BACK as usize;
                    let end = (self.produced % MAX_WINDOW_BACK) as usize;
                    let dst = &mut window[filled..filled + back];
                    if back <= end {
                        dst.copy_from_slice(&self.history[end - back..end]);
                    } else {
                        let wrap = back - end;
                        dst[..wrap].copy_from_slice(&self.history[ring - wrap..]);
                        dst[wrap..].copy_from_slice(&self.history[..end]);
                    }
                }
                self.old_data = window;
                resize_exact(&mut self.comp, w.comp_len as usize);
                input.exact(&mut self.comp, "window segment frame")?;
                decompress_with_window(&self.comp, &self.old_data, w.new_len, &mut self.extra, self.segment_at)?;
                self.diff.clear();
                // The frame's output read as one op of extra bytes.
                self.ctrl = encode_control(&[Op { diagonal: 0, copy_len: 0, extra_len: w.new_len }]);
                self.ops = OpCursor::new(&self.ctrl, w.new_len, 0, w.new_len, self.segment_at)?;
                (self.segment_pos, self.diff_pos, self.extra_pos) = (0, 0, 0);
                (self.cursor, self.copy_left, self.extra_left) = (0, 0, 0);
                self.segment_left = w.new_len;
                return Ok(());
            }
        };
        // Before the streams arrive: natively an ops segment holds no more old
        // data than its prefetch budget. Keeping a window segment's whole
        // window cost 3.9 MB of peak RSS on the 101 MiB pair (32.8 MB).
        shrink(&mut self.old_data, PREFETCH_BUDGET as usize);
        input.frame(h.ctrl_comp, h.ctrl_raw, &mut self.comp, &mut self.ctrl, "segment control")?;
        input.frame(h.diff_comp, h.diff_raw, &mut self.comp, &mut self.diff, "segment diff")?;
        input.frame(h.extra_comp, h.extra_raw, &mut self.comp, &mut self.extra, "segment extra")?;
        self.ops = OpCursor::new(&self.ctrl, h.new_len, h.diff_raw, h.extra_raw, self.segment_at)?;
        self.prefetch_copies(old, tree)?;
        (self.segment_pos, self.diff_pos, self.extra_pos) = (0, 0, 0);
        (self.cursor, self.copy_left, self.extra_left) = (0, 0, 0);
        self.segment_left = h.new_len;
        Ok(())
    }

    fn next_op(&mut self) -> Result<()> {
        let op = self.ops.next_op(&self.ctrl);
        let Op { diagonal, copy_len: copy, extra_len: extra } = op.ok_or_else(|| self.corrupt("control stream ended before the segment's output".into()))?;
        let start = (self.segment_pos as i64).checked_add(diagonal).filter(|c| *c >= 0 && (*c as u64) <= self.reference_len);
        let start = start.ok_or_else(|| self.corrupt(format!("diagonal {diagonal} at {} leaves the old data", self.segment_pos)))? as u64;
        if copy > self.reference_len - start {
            return Err(self.corrupt(format!("copy of {copy} bytes at {start} runs past the old data ({} bytes)", self.reference_len)));
        }
        if copy > (self.diff.len() - self.diff_pos) as u64 || extra > (self.extra.len() - self.extra_pos) as u64 {
            return Err(self.corrupt("operation needs more diff or extra bytes than the segment has".into()));
        }
        if copy.checked_add(extra).is_none_or(|n| n > self.segment_left || n == 0) {
            return Err(self.corrupt("operation produces more bytes than the segment, or none".into()));
        }
        (self.cursor, self.copy_left, self.extra_left) = (start, copy, extra);
        self.segment_pos += copy + extra;
        Ok(())
    }

    /// Fills `out` with the next bytes of the current segment (at most what is left of it).
    fn fill<O: OldBuild>(&mut self, out: &mut [u8], old: &mut O, tree: &PatchTree) -> Result<()> {
        debug_assert!(out.len() as u64 <= self.segment_left);
        let mut at = 0;
        while at < out.len() {
            if self.copy_left > 0 {
                let n = (self.copy_left.min((out.len() - at) as u64)) as usize;
                let n = self.read_reference(&mut out[at..at + n], old, tree)?;
                let diff = &self.diff[self.diff_pos..self.diff_pos + n];
                for (o, d) in out[at..at + n].iter_mut().zip(diff) {
                    *o = o.wrapping_add(*d);
                }
                self.diff_pos += n;
                self.cursor += n as u64;
                self.copy_left -= n as u64;
                self.segment_left -= n as u64;
                self.remember(&out[at..at + n]);
                at += n;
            } else if self.extra_left > 0 {
                let n = (self.extra_left.min((out.len() - at) as u64)) as usize;
                out[at..at + n].copy_from_slice(&self.extra[self.extra_pos..self.extra_pos + n]);
                self.extra_pos += n;
                self.extra_left -= n as u64;
                self.segment_left -= n as u64;
                self.remember(&out[at..at + n]);
                at += n;
            } else if self.segment_left > 0 {
                self.next_op()?;
            } else {
                return Err(self.corrupt("asked for more bytes than the segment holds".into()));
            }
        }
        Ok(())
    }

    /// When the output goes on with extra bytes: up to `max` of them, as a
    /// range of `extra` (counted as produced and remembered, like `fill`).
    fn extra_run(&mut self, max: usize) -> Result<Option<std::ops::Range<usize>>> {
        while self.copy_left == 0 && self.extra_left == 0 && self.segment_left > 0 {
            self.next_op()?;
        }
        // Short runs (between an ops segment's copies) are gathered into `buf`:
        // one sink write per 256 KiB, not one per run.
        if self.copy_left > 0 || self.extra_left < (64 << 10) {
            return Ok(None);
        }
        let n = self.extra_left.min(max as u64) as usize;
        let range = self.extra_pos..self.extra_pos + n;
        self.extra_pos += n;
        self.extra_left -= n as u64;
        self.segment_left -= n as u64;
        let extra = std::mem::take(&mut self.extra);
        self.remember(&extra[range.clone()]);
        self.extra = extra;
        Ok(Some(range))
    }

    /// A segment must be used up exactly before the next unit.
    fn check_segment_used_up(&self) -> Result<()> {
        if self.segment_left > 0 || self.ops.remaining() != 0 || self.diff_pos != self.diff.len() || self.extra_pos != self.extra.len() {
            return Err(self.corrupt("unused bytes left at the end of the segment".into()));
        }
        Ok(())
    }

    /// Counts produced bytes and keeps the last MAX_WINDOW_BACK of them for
    /// later window segments.
    fn remember(&mut self, data: &[u8]) {
        if !self.keep_history {
            self.produced += data.len() as u64;
            return;
        }
        let ring = MAX_WINDOW_BACK as usize;
        let mut data = data;
        if self.history.len() < ring {
            // Grow with the output rather than zero-filling the whole ring up
            // front: a small build never touches (or page-faults in) 4 MiB.
            self.history.reserve_exact(ring - self.history.len());
            if self.produced == self.history.len() as u64 {
                let n = data.len().min(ring - self.history.len());
                self.history.extend_from_slice(&data[..n]);
                self.produced += n as u64;
                data = &data[n..];
                if data.is_empty() {
                    return;
                }
            } else {
                self.history.resize(ring, 0);
            }
        }
        let mut at = (self.produced % MAX_WINDOW_BACK) as usize;
        self.produced += data.len() as u64;
        if data.len() > ring {
            at = (at + data.len() - ring) % ring;
            data = &data[data.len() - ring..];
        }
        let first = data.len().min(ring - at);
        self.history[at..at + first].copy_from_slice(&data[..first]);
        self.history[..data.len() - first].copy_from_slice(&data[first..]);
    }

    /// Reads the old data an ops segment's copies need in few large reads
    /// instead of one per copy (tens of thousands of short reads per segment
    /// on compiled code: a syscall each natively, a JS call each in wasm):
    /// copy spans less than `PREFETCH_GAP` apart are merged and read whole, up
    /// to `PREFETCH_BUDGET` bytes per segment, densest clusters first; the rest
    /// is read directly. An ops segment then holds at most as much as a window
    /// segment (8 MiB of old data besides its streams). Measured on
    /// freedoom2-wad: 69k reads -> 3.6k.
    fn prefetch_copies<O: OldBuild>(&mut self, old: &mut O, tree: &PatchTree) -> Result<()> {
        const PREFETCH_GAP: u64 = 16 << 10;
        const PREFETCH_CLUSTER: u64 = 1 << 20;
        self.prefetched.clear();
        // Copies mostly follow a diagonal: merging in op order first keeps this
        // list short (no per-op allocation), then a sort merges the rest.
        // (start, end, copies in it)
        let mut merged: Vec<(u64, u64, u32)> = Vec::new();
        let push = |merged: &mut Vec<(u64, u64, u32)>, (a, b, n): (u64, u64, u32)| match merged.last_mut() {
            // Clusters stay under 1 MiB, so that a long run of copies fills the budget instead of exceeding it.
            Some(m) if a <= m.1 + PREFETCH_GAP && b + PREFETCH_GAP >= m.0 && m.1.max(b) - m.0.min(a) <= PREFETCH_CLUSTER => {
                *m = (m.0.min(a), m.1.max(b), m.2 + n)
            }
            _ => merged.push((a, b, n)),
        };
        // `OpCursor::new` checked that the ops produce the segment's bytes
        // (at most 16 MiB), so `at` stays small.
        let mut at = 0i64;
        let mut ops = self.ops.clone();
        while let Some(op) = ops.next_op(&self.ctrl) {
            // Invalid ops are left for `next_op` to report.
            if let Some(start) = at.checked_add(op.diagonal).filter(|s| *s >= 0).map(|s| s as u64) {
                if op.copy_len > 0 && op.copy_len <= self.reference_len.saturating_sub(start) {
                    // Past this many spans the rest are read directly: the list stays small whatever the op count.
                    if merged.len() >= MAX_PREFETCH_SPANS {
                        break;
                    }
                    push(&mut merged, (start, start + op.copy_len, 1));
                }
            }
            at = at.saturating_add(op.copy_len.saturating_add(op.extra_len).min(i64::MAX as u64) as i64);
        }
        merged.sort_unstable();
        // Sorted and made disjoint (a span overlapping a full cluster starts where it ends).
        let mut sorted: Vec<(u64, u64, u32)> = Vec::with_capacity(merged.len());
        for (mut a, b, n) in merged {
            if let Some(last) = sorted.last() {
                a = a.max(last.1.min(b));
            }
            if a < b {
                push(&mut sorted, (a, b, n));
            }
        }
        // The budget goes to the clusters that save the most reads per byte.
        // One long copy is read in large chunks anyway: only clusters of short ones gain.
        sorted.retain(|c| c.2 >= 4);
        sorted.sort_unstable_by_key(|&(a, b, n)| std::cmp::Reverse(u64::from(n) * 1024 * 1024 / (b - a)));
        let mut total = 0;
        sorted.retain(|&(a, b, _)| {
            let keep = total + (b - a) <= PREFETCH_BUDGET;
            total += if keep { b - a } else { 0 };
            keep
        });
        sorted.sort_unstable();
        let mut window = std::mem::take(&mut self.old_data);
        // Every byte is overwritten below: only growth needs zeroing.
        if window.len() < total as usize {
            resize_exact(&mut window, total as usize);
        }
        window.truncate(total as usize);
        let mut prefetched = Vec::with_capacity(sorted.len());
        let mut offset = 0;
        for (a, b, _) in sorted {
            self.cursor = a;
            while self.cursor < b {
                let filled = offset + (self.cursor - a) as usize;
                let n = self.read_reference(&mut window[filled..offset + (b - a) as usize], old, tree)?;
                self.cursor += n as u64;
            }
            prefetched.push((a, b, offset));
            offset += (b - a) as usize;
        }
        // Only now: while filling, reads go to the old build.
        self.prefetched = prefetched;
        self.old_data = window;
        Ok(())
    }

    /// Reads reference bytes at the cursor, up to the end of the old file it is
    /// in (or of the prefetched span it is in).
    /// (A read-ahead block cache for short copies was measured: no gain natively
    /// within noise, and 8x the bytes read on freedoom2-wad, which costs in OPFS.)
    fn read_reference<O: OldBuild>(&mut self, buf: &mut [u8], old: &mut O, tree: &PatchTree) -> Result<usize> {
        let k = self.prefetched.partition_point(|&(start, _, _)| start <= self.cursor);
        if k > 0 {
            let (start, end, offset) = self.prefetched[k - 1];
            if self.cursor < end {
                let from = offset + (self.cursor - start) as usize;
                let n = buf.len().min((end - self.cursor) as usize);
                buf[..n].copy_from_slice(&self.old_data[from..from + n]);
                return Ok(n);
            }
        }
        let k = self.reference.partition_point(|&(_, start, _)| start <= self.cursor) - 1;
        let (file, start, size) = self.reference[k];
        let offset = self.cursor - start;
        let n = buf.len().min((size - offset) as usize);
        let path = &tree.old_files[file].path;
        old.read_at(path, offset, &mut buf[..n]).map_err(|e| Error::OldRead { path: display_path(path), source: e })?;
        Ok(n)
    }
}

/// Gives up a buffer between segments that do not need it. Natively it is
/// freed (peak RSS tracks live memory); in wasm it is kept for reuse, because
/// a linear memory never shrinks and freeing and reallocating multi-MiB
/// buffers fragments it until it grows (measured: 71 MB of wasm memory for
/// the 101 MiB pair when freed, see BENCHMARKS.md).
/// `resize` without the amortized growth (which can double a multi-MiB buffer).
fn resize_exact(buf: &mut Vec<u8>, len: usize) {
    if len > buf.capacity() {
        buf.reserve_exact(len - buf.len());
    }
    buf.resize(len, 0);
}

/// Natively gives back a buffer's capacity beyond `keep` (for a mapped
/// multi-MiB buffer, a shrink of the mapping in place: no copy). In wasm the
/// buffer is kept whole, as `release` keeps buffers there.
fn shrink(buf: &mut Vec<u8>, keep: usize) {
    if !cfg!(target_arch = "wasm32") && buf.capacity() > keep {
        buf.truncate(keep);
        buf.shrink_to(keep);
    }
}

fn release(buf: &mut Vec<u8>) {
    if cfg!(target_arch = "wasm32") {
        buf.clear();
    } else {
        *buf = Vec::new();
    }
}

pub(crate) fn display_path(path: &str) -> String {
    if path.is_empty() {
        "(the file)".into()
    } else {
        path.to_string()
    }
}

fn hex(h: &[u8]) -> String {
    h.iter().map(|b| format!("{b:02x}")).collect()
}

/// BLAKE3 of the first `len` bytes already written to the new file at `path` (resuming).
fn hash_written<S: BuildSink>(sink: &mut S, path: &str, len: u64, buf: &mut [u8]) -> Result<blake3::Hasher> {
    let mut hasher = blake3::Hasher::new();
    let mut done = 0;
    while done < len {
        let chunk = &mut buf[..(len - done).min(CHUNK as u64) as usize];
        sink.read_written(path, done, chunk).map_err(|e| out_err(path, e))?;
        hasher.update(chunk);
        done += chunk.len() as u64;
    }
    Ok(hasher)
}

/// What the applier expects next in the patch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    HeaderAndTree,
    SegmentOrEnd,
    Checksum,
    Done,
}

/// The delta-stream files in entry order, and how far the current one is.
struct DeltaFiles {
    entries: Vec<usize>,
    next: usize,
    open: Option<(usize, u64, blake3::Hasher)>,
}

/// A push-driven applier: give it the patch in chunks of any size as they
/// arrive (`push`), then call `finish`. It processes the patch unit by unit
/// (header and tree, each segment, the end), so it holds at most one unit of
/// input. Directories, symlinks and files copied from the old build are written
/// as soon as the tree is read; delta files as their segments arrive.
pub struct PatchApplier {
    pending: Vec<u8>,
    hasher: blake3::Hasher,
    /// Patch bytes consumed (before `pending`).
    offset: u64,
    expect: Expect,
    tree: PatchTree,
    delta: Option<DeltaStream>,
    files: DeltaFiles,
    buf: Vec<u8>,
    /// BLAKE3 over the files' BLAKE3s as they complete (`PatchTree::digest_order`),
    /// until it is checked (then None).
    digest: Option<blake3::Hasher>,
    /// Once the sink took a copy (`BuildSink::copy_old_file`), whose BLAKE3
    /// arrives only at the end: every file's BLAKE3 in digest order, None for
    /// those the sink copies, until the digest is checked.
    held_hashes: Option<Vec<Option<[u8; 32]>>>,
    progress: ApplyProgress,
    summary: ApplySummary,
    /// Started by `resume`: the patch checksum cannot be checked.
    resumed: bool,
    resume_point: Option<ResumePoint>,
    /// Size of the unit being received, once its header has arrived (checked against the limits).
    unit_hint: u64,
}

/// A claimed unit size is trusted for preallocation up to this (a 4 MiB
/// segment compresses to less); larger units grow as their bytes arrive, so a
/// hostile header cannot make the applier reserve memory it never fills.
const MAX_UNIT_HINT: u64 = 8 << 20;

impl Default for PatchApplier {
    fn default() -> Self {
        Self::new()
    }
}

impl PatchApplier {
    pub fn new() -> Self {
        PatchApplier {
            pending: Vec::new(),
            hasher: blake3::Hasher::new(),
            offset: 0,
            expect: Expect::HeaderAndTree,
            tree: PatchTree::default(),
            delta: None,
            files: DeltaFiles { entries: Vec::new(), next: 0, open: None },
            buf: Vec::new(),
            digest: Some(blake3::Hasher::new()),
            held_hashes: None,
            progress: ApplyProgress::default(),
            summary: ApplySummary::default(),
            resumed: false,
            resume_point: None,
            unit_hint: 0,
        }
    }

    pub fn progress(&self) -> ApplyProgress {
        self.progress
    }

    /// The tree, once the header and tree have been read.
    pub fn tree(&self) -> Option<&PatchTree> {
        (self.expect != Expect::HeaderAndTree).then_some(&self.tree)
    }

    /// Where an interrupted apply could continue, once the sink has made durable
    /// everything it was given so far: the end of the last segment completed
    /// (None before the first: start over). Still valid after `push` failed
    /// (an output error, a dropped connection): the failed segment is redone.
    /// The point names the patch byte to continue from; bytes already pushed
    /// beyond it are simply pushed again after `resume`.
    pub fn resume_point(&self) -> Option<ResumePoint> {
        self.resume_point
    }

    /// Continues an interrupted apply at `at` (from [`resume_point`]):
    /// `header_and_tree` is the patch's bytes before its first segment (its
    /// manifest's first `patch_offset`); push the patch from `at.patch_offset`
    /// on. Directories, symlinks, copied files and the delta files before
    /// `at.new_offset` are taken as already written and verified (the sink kept
    /// them); the file being written at the interruption is re-hashed and
    /// reopened through the sink's `read_written`/`resume_file`, and the last
    /// 4 MiB of delta output (window segments reach back into it) is read back
    /// the same way: nothing is downloaded or written twice. Every later file
    /// is verified as usual; the whole-patch checksum is not (see `finish_checked`).
    ///
    /// [`resume_point`]: PatchApplier::resume_point
    pub fn resume<O: OldBuild, S: BuildSink>(header_and_tree: &[u8], at: ResumePoint, old: &mut O, sink: &mut S) -> Result<PatchApplier> {
        let mut input = PatchInput::new(header_and_tree);
        let tree = read_tree_for(&mut input, old)?;
        let tree_end = input.offset();
        let bad = |what: String| Error::Invalid(format!("cannot resume: {what}"));
        if tree_end != header_and_tree.len() as u64 {
            return Err(bad(format!("{} bytes given for a header and tree of {tree_end}", header_and_tree.len())));
        }
        let mut a = PatchApplier { tree, expect: Expect::SegmentOrEnd, resumed: true, ..PatchApplier::new() };
        a.check_old_build(old)?;
        let mut delta = DeltaStream::new(&a.tree);
        let delta_total = delta.total;
        if at.segments_done == 0 || at.new_offset == 0 || at.new_offset > delta_total || at.patch_offset < tree_end || at.new_offset < at.segments_done {
            return Err(bad(format!("resume point {at:?} does not fit this patch ({delta_total} delta bytes, tree ends at byte {tree_end})")));
        }
        // Everything that is not a delta file, and every delta file that ends before the point, is done.
        // The files digest needs the BLAKE3 of each of those files: they are
        // read back from the output (written and durable, not downloaded again).
        let (mut copies, mut done_before) = (Vec::new(), Vec::new());
        let mut start = 0u64;
        let back_from = at.new_offset.saturating_sub(MAX_WINDOW_BACK);
        let mut history = vec![0u8; (at.new_offset - back_from) as usize];
        for (i, entry) in a.tree.entries.iter().enumerate() {
            let TreeEntryKind::File { executable, size, source, .. } = &entry.kind else {
                a.progress.entries_done += 1;
                continue;
            };
            let path = entry.path.as_str();
            if let FileSource::Copy { .. } = source {
                copies.push(i);
                count_file_done(&mut a.summary, &mut a.progress, *size);
                a.progress.new_bytes_written += size;
                continue;
            }
            let end = start + size;
            // The part of this file inside the history window.
            let (h0, h1) = (start.max(back_from), end.min(at.new_offset));
            if h0 < h1 {
                let dst = &mut history[(h0 - back_from) as usize..(h1 - back_from) as usize];
                sink.read_written(path, h0 - start, dst).map_err(|e| out_err(path, e))?;
            }
            if end <= at.new_offset {
                done_before.push(i);
                count_file_done(&mut a.summary, &mut a.progress, *size);
                a.progress.new_bytes_written += size;
                a.files.next += 1;
            } else if start < at.new_offset {
                let written = at.new_offset - start;
                let hasher = hash_written(sink, path, written, &mut a.buf)?;
                sink.resume_file(path, *executable, *size, written).map_err(|e| out_err(path, e))?;
                a.progress.new_bytes_written += written;
                a.files.open = Some((i, size - written, hasher));
                a.files.next += 1;
            }
            a.files.entries.push(i);
            start = end;
        }
        for i in copies.into_iter().chain(done_before) {
            let TreeEntryKind::File { size, .. } = a.tree.entries[i].kind else { unreachable!("files only") };
            let path = a.tree.entries[i].path.as_str();
            let hasher = hash_written(sink, path, size, &mut a.buf)?;
            a.file_hashed(hasher);
        }
        delta.produced = back_from;
        delta.remember(&history);
        debug_assert_eq!(delta.produced, at.new_offset);
        delta.segments = at.segments_done;
        a.delta = Some(delta);
        a.offset = at.patch_offset;
        a.progress.patch_bytes_read = at.patch_offset;
        Ok(a)
    }

    /// Feeds the next bytes of the patch; processes every unit they complete.
    pub fn push<O: OldBuild, S: BuildSink>(&mut self, data: &[u8], old: &mut O, sink: &mut S) -> Result<()> {
        if self.expect == Expect::Done && !data.is_empty() {
            return Err(Error::Corrupt { input: Input::Patch, offset: self.offset, what: "bytes after the patch checksum".into() });
        }
        // Grows to the unit being received (its size is known from its header),
        // not to the next power of two: steady, bounded memory in wasm.
        let want = self.pending.len() + data.len();
        if want > self.pending.capacity() {
            let hint = self.unit_hint.min(MAX_UNIT_HINT) as usize;
            self.pending.reserve_exact(want.max(hint) - self.pending.len());
        }
        self.pending.extend_from_slice(data);
        self.progress.patch_bytes_read += data.len() as u64;
        while let Some(len) = self.next_unit_len()? {
            // The buffer is kept (not reallocated per unit): steady memory in wasm.
            let mut unit = std::mem::take(&mut self.pending);
            self.process_unit(&unit[..len], old, sink)?;
            unit.drain(..len);
            self.pending = unit;
        }
        if self.expect == Expect::Done && !self.pending.is_empty() {
            return Err(Error::Corrupt { input: Input::Patch, offset: self.offset, what: "bytes after the patch checksum".into() });
        }
        Ok(())
    }

    /// Ends the patch: everything must have arrived and checked out.
    pub fn finish(self) -> Result<ApplySummary> {
        if self.expect != Expect::Done {
            let what = match self.expect {
                Expect::HeaderAndTree => "header or tree",
                Expect::SegmentOrEnd => "delta stream ended before all files were produced",
                _ => "patch checksum",
            };
            return Err(Error::Truncated { input: Input::Patch, offset: self.offset + self.pending.len() as u64, what: what.into() });
        }
        Ok(self.summary)
    }

    /// Size of the next unit if `pending` holds all of it; its header is parsed
    /// (and checked against the limits) by the same code that processes it.
    fn next_unit_len(&mut self) -> Result<Option<usize>> {
        let need_more = |e: &Error, end: u64| matches!(e, Error::Truncated { offset, .. } if *offset >= end);
        let end = self.offset + self.pending.len() as u64;
        let mut peek = PatchInput::resume(self.pending.as_slice(), blake3::Hasher::new(), self.offset);
        let body = match self.expect {
            Expect::Done => return Ok(None),
            Expect::Checksum => return Ok((self.pending.len() >= 32).then_some(32)),
            Expect::HeaderAndTree => read_fixed_header(&mut peek).map(|(_, _, comp)| comp),
            Expect::SegmentOrEnd => {
                let delta = self.delta.as_ref().expect("delta stream after the tree");
                read_segment_header(&mut peek, delta.segments, delta.produced, delta.reference_len).map(|s| s.map_or(0, |s| s.compressed_len()))
            }
        };
        match body {
            Ok(body) => {
                let len = (peek.offset() - self.offset).saturating_add(body);
                self.unit_hint = len;
                Ok((len <= self.pending.len() as u64).then_some(len as usize))
            }
            Err(e) if need_more(&e, end) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn process_unit<O: OldBuild, S: BuildSink>(&mut self, unit: &[u8], old: &mut O, sink: &mut S) -> Result<()> {
        let hasher = std::mem::replace(&mut self.hasher, blake3::Hasher::new());
        let mut input = PatchInput::resume(unit, hasher, self.offset);
        match self.expect {
            Expect::HeaderAndTree => {
                self.tree = read_tree_for(&mut input, old)?;
                (self.hasher, self.offset) = input.into_state();
                self.start(old, sink)?;
                self.expect = Expect::SegmentOrEnd;
            }
            Expect::SegmentOrEnd => {
                let mut delta = self.delta.take().expect("delta stream after the tree");
                let at = input.offset();
                let is_segment = matches!(unit.first(), Some(&SEGMENT_TAG) | Some(&WINDOW_SEGMENT_TAG));
                if is_segment {
                    delta.load_segment(&mut input, old, &self.tree)?;
                    (self.hasher, self.offset) = input.into_state();
                    self.drain_segment(&mut delta, old, sink)?;
                    delta.check_segment_used_up()?;
                    self.resume_point = Some(ResumePoint { segments_done: delta.segments, patch_offset: self.offset, new_offset: delta.produced });
                } else {
                    read_segment_header(&mut input, delta.segments, delta.produced, delta.reference_len)?;
                    (self.hasher, self.offset) = input.into_state();
                    if self.files.open.is_some() || self.files.next < self.files.entries.len() {
                        return Err(Error::Corrupt { input: Input::Patch, offset: at, what: "delta stream ended before all files were produced".into() });
                    }
                    if self.digest.is_some() {
                        self.check_digest(sink)?;
                    }
                    self.expect = Expect::Checksum;
                }
                self.delta = Some(delta);
            }
            Expect::Checksum => {
                let patch_bytes = input.finish_checked(!self.resumed)?;
                self.offset = patch_bytes;
                self.summary.patch_bytes = patch_bytes;
                self.summary.entries = self.tree.entries.len() as u64;
                self.progress.entries_done = self.progress.entries_total;
                self.expect = Expect::Done;
            }
            Expect::Done => unreachable!("no unit after the checksum"),
        }
        Ok(())
    }

    /// Fails fast, before anything is written, if the old build is not the
    /// expected one; sets the totals.
    fn check_old_build<O: OldBuild>(&mut self, old: &mut O) -> Result<()> {
        let tree = &self.tree;
        for f in &tree.old_files {
            let size = old.file_size(&f.path).map_err(|e| Error::OldRead { path: display_path(&f.path), source: e })?;
            if size != f.size {
                return Err(Error::OldRead {
                    path: display_path(&f.path),
                    source: io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("is {size} bytes, the patch expects {}: not the build this patch was made from", f.size),
                    ),
                });
            }
        }
        self.progress.entries_total = tree.entries.len() as u64;
        self.progress.new_bytes_total = tree.entries.iter().map(|e| if let TreeEntryKind::File { size, .. } = e.kind { size } else { 0 }).sum();
        self.buf.resize(CHUNK, 0);
        Ok(())
    }

    /// After the tree: checks the old build, writes everything that needs no
    /// delta data, and lines up the delta files.
    fn start<O: OldBuild, S: BuildSink>(&mut self, old: &mut O, sink: &mut S) -> Result<()> {
        self.check_old_build(old)?;
        let tree = &self.tree;
        for (i, entry) in tree.entries.iter().enumerate() {
            let path = entry.path.as_str();
            match &entry.kind {
                TreeEntryKind::Directory => sink.create_directory(path).map_err(|e| out_err(path, e))?,
                TreeEntryKind::Symlink { target } => sink.create_symlink(path, target).map_err(|e| out_err(path, e))?,
                TreeEntryKind::File { source: FileSource::Delta, .. } => {
                    self.files.entries.push(i);
                    continue;
                }
                TreeEntryKind::File { executable, size, source: FileSource::Copy { old_index } } => {
                    let from = &tree.old_files[*old_index].path;
                    if sink.copy_old_file(from, path, *executable, *size).map_err(Error::Copy)? {
                        self.held_hashes.get_or_insert_with(Vec::new).push(None);
                        self.summary.files += 1;
                        self.summary.bytes_written += size;
                        self.progress.new_bytes_written += size;
                        self.progress.entries_done += 1;
                        continue;
                    }
                    sink.begin_file(path, *executable, *size).map_err(|e| out_err(path, e))?;
                    let mut hasher = blake3::Hasher::new();
                    let mut done = 0;
                    while done < *size {
                        let chunk = &mut self.buf[..(size - done).min(CHUNK as u64) as usize];
                        old.read_at(from, done, chunk).map_err(|e| Error::OldRead { path: display_path(from), source: e })?;
                        hasher.update(chunk);
                        sink.write_file(chunk).map_err(|e| out_err(path, e))?;
                        done += chunk.len() as u64;
                    }
                    record_hash(&mut self.digest, &mut self.held_hashes, hasher);
                    sink.finish_file().map_err(|e| out_err(path, e))?;
                    self.summary.files += 1;
                    self.summary.bytes_written += size;
                    self.progress.new_bytes_written += size;
                }
            }
            self.progress.entries_done += 1;
        }
        self.delta = Some(DeltaStream::new(tree));
        if self.files.entries.is_empty() {
            self.check_digest(sink)?;
        }
        // Empty delta files need no segment.
        self.distribute(&[], sink)
    }

    fn file_hashed(&mut self, hasher: blake3::Hasher) {
        record_hash(&mut self.digest, &mut self.held_hashes, hasher);
    }

    /// Once every file is hashed: the files digest must match. Waits for the
    /// copies the sink took, if any.
    fn check_digest<S: BuildSink>(&mut self, sink: &mut S) -> Result<()> {
        let mut digest = self.digest.take().expect("files digest checked once");
        if let Some(held) = self.held_hashes.take() {
            let copied = sink.finish_copies().map_err(Error::Copy)?;
            let taken = held.iter().filter(|h| h.is_none()).count();
            if copied.len() != taken {
                return Err(Error::Copy(io::Error::other(format!("the output copied {} files, {taken} were handed to it", copied.len()))));
            }
            let mut copied = copied.iter();
            for hash in &held {
                digest.update(hash.as_ref().or_else(|| copied.next()).expect("counted above"));
            }
        }
        let actual = digest.finalize();
        if actual.as_bytes() != &self.tree.files_digest {
            return Err(Error::FilesDigestMismatch { expected: hex(&self.tree.files_digest), actual: actual.to_hex().to_string() });
        }
        Ok(())
    }

    fn drain_segment<O: OldBuild, S: BuildSink>(&mut self, delta: &mut DeltaStream, old: &mut O, sink: &mut S) -> Result<()> {
        let mut buf = std::mem::take(&mut self.buf);
        let result = self.drain_into(delta, old, sink, &mut buf);
        self.buf = buf;
        result
    }

    fn drain_into<O: OldBuild, S: BuildSink>(&mut self, delta: &mut DeltaStream, old: &mut O, sink: &mut S, buf: &mut [u8]) -> Result<()> {
        let as_corrupt = |delta: &DeltaStream, e| match e {
            Error::Invalid(what) => delta.corrupt(what),
            e => e,
        };
        while delta.segment_left > 0 {
            // Extra bytes (all of a window segment's output) go out from where
            // they were decompressed, without a copy through `buf`.
            if let Some(range) = delta.extra_run(CHUNK)? {
                let extra = std::mem::take(&mut delta.extra);
                let written = self.distribute(&extra[range], sink);
                delta.extra = extra;
                written.map_err(|e| as_corrupt(delta, e))?;
                continue;
            }
            let n = delta.segment_left.min(CHUNK as u64) as usize;
            delta.fill(&mut buf[..n], old, &self.tree)?;
            self.distribute(&buf[..n], sink).map_err(|e| as_corrupt(delta, e))?;
        }
        Ok(())
    }

    /// Writes delta bytes into the delta files in order, verifying and finishing
    /// each as it completes (and any empty ones that follow).
    fn distribute<S: BuildSink>(&mut self, mut data: &[u8], sink: &mut S) -> Result<()> {
        loop {
            if self.files.open.is_none() {
                let Some(&i) = self.files.entries.get(self.files.next) else { break };
                let TreeEntryKind::File { executable, size, .. } = &self.tree.entries[i].kind else { unreachable!("delta entries are files") };
                if *size > 0 && data.is_empty() {
                    break;
                }
                let path = self.tree.entries[i].path.as_str();
                sink.begin_file(path, *executable, *size).map_err(|e| out_err(path, e))?;
                self.files.next += 1;
                self.files.open = Some((i, *size, blake3::Hasher::new()));
            }
            let (i, left, hasher) = self.files.open.as_mut().expect("a file is open");
            let path = self.tree.entries[*i].path.as_str();
            let n = (*left).min(data.len() as u64) as usize;
            hasher.update(&data[..n]);
            sink.write_file(&data[..n]).map_err(|e| out_err(path, e))?;
            *left -= n as u64;
            data = &data[n..];
            self.progress.new_bytes_written += n as u64;
            if *left == 0 {
                let (i, _, hasher) = self.files.open.take().expect("a file is open");
                self.file_hashed(hasher);
                // The last file is finished only after the digest of all of them matched.
                if self.files.next == self.files.entries.len() {
                    self.check_digest(sink)?;
                }
                let TreeEntryKind::File { size, .. } = &self.tree.entries[i].kind else { unreachable!() };
                let path = self.tree.entries[i].path.as_str();
                sink.finish_file().map_err(|e| out_err(path, e))?;
                count_file_done(&mut self.summary, &mut self.progress, *size);
            } else if data.is_empty() {
                break;
            }
        }
        if !data.is_empty() {
            return Err(Error::Invalid("delta stream is longer than its files".into()));
        }
        Ok(())
    }
}

/// A file's BLAKE3 goes into the files digest, or is held in digest order
/// while copies the sink took are outstanding (`PatchApplier::held_hashes`).
/// (Free of `PatchApplier` so `start` can call it while it borrows the tree.)
fn record_hash(digest: &mut Option<blake3::Hasher>, held: &mut Option<Vec<Option<[u8; 32]>>>, hasher: blake3::Hasher) {
    let hash = hasher.finalize();
    match held {
        Some(held) => held.push(Some(*hash.as_bytes())),
        None => {
            digest.as_mut().expect("files digest not yet checked").update(hash.as_bytes());
        }
    }
}

/// A file is complete and verified (its bytes are counted as they are written).
fn count_file_done(summary: &mut ApplySummary, progress: &mut ApplyProgress, size: u64) {
    summary.files += 1;
    summary.bytes_written += size;
    progress.entries_done += 1;
}

fn out_err(path: &str, e: io::Error) -> Error {
    Error::Output { path: display_path(path), source: e }
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
        let n = match patch.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Error::Io { input: Input::Patch, source: e }),
        };
        applier.push(&chunk[..n], old, sink)?;
        progress(&applier.progress());
    }
    let summary = applier.finish()?;
    Ok(summary)
}
