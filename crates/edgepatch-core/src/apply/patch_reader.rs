//! Reading a patch's units as the format defines them (docs/FORMAT.md §1-2): the
//! fixed header, the tree section, segment headers and their zstd frames, every
//! byte counted and hashed so errors carry offsets and the trailer checksum is
//! checked without buffering the patch.

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

/// Reads the fixed header and the tree section.
/// The header and the tree section as the patch states it, and where the tree starts.
pub(crate) fn read_header_and_tree<R: Read>(input: &mut PatchInput<R>) -> Result<(EncodedTree, u64)> {
    let (flags, raw, comp) = read_fixed_header(input)?;
    let (mut comp_buf, mut tree_bytes) = (Vec::new(), Vec::new());
    let tree_at = input.offset();
    input.frame(comp, raw, &mut comp_buf, &mut tree_bytes, "tree section")?;
    Ok((EncodedTree::decode(&tree_bytes, tree_at, flags)?, tree_at))
}

/// The header and tree resolved against the old build's listing.
pub(crate) fn read_tree_for<R: Read, O: OldBuild + ?Sized>(input: &mut PatchInput<R>, old: &mut O) -> Result<PatchTree> {
    let (encoded, tree_at) = read_header_and_tree(input)?;
    encoded.resolve_modes(old_listing(old, encoded.single_file)?, tree_at, old.modes_known())
}

/// Magic, version, flags and the tree section's sizes, all checked.
pub(super) fn read_fixed_header<R: Read>(input: &mut PatchInput<R>) -> Result<(u16, u64, u64)> {
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
    if flags
        & !(FLAG_SINGLE_FILE
            | FLAG_WASM_TRANSFORM
            | FLAG_WINDOW_REACH
            | FLAG_RUN_CODED_DIFF
            | FLAG_MODE_BLIND_DIGEST
            | FLAG_SPLIT_REFERENCE
            | FLAG_LZMA_SEGMENTS)
        != 0
    {
        return Err(Error::Corrupt { input: Input::Patch, offset: 10, what: format!("unknown flags {flags:#x}") });
    }
    let at = input.offset();
    let raw = input.varint("tree size")?;
    let comp = input.varint("tree compressed size")?;
    TreeBudget::check_section(raw).map_err(|what| Error::Limit { input: Input::Patch, offset: at, what })?;
    if raw == 0 || comp == 0 || comp > raw + raw / 64 + 1024 {
        return Err(Error::Corrupt { input: Input::Patch, offset: at, what: format!("tree sizes {raw}/{comp} out of range") });
    }
    Ok((flags, raw, comp))
}

/// Reads the next segment header, or None at the end marker (whose counts are checked).
/// `produced`: delta bytes before this segment; `reach`: the patch's window
/// reach (`PatchTree::window_back`); both bound how far back a window may reach.
pub(crate) fn read_segment_header<R: Read>(
    input: &mut PatchInput<R>,
    segments_so_far: u64,
    produced: u64,
    reference_len: u64,
    reach: u64,
) -> Result<Option<Segment>> {
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
            let h = SegmentHeader {
                new_len: f[0],
                ctrl_raw: f[1],
                ctrl_comp: f[2],
                diff_raw: f[3],
                diff_comp: f[4],
                diff_coded: 0,
                extra_raw: f[5],
                extra_comp: f[6],
                lzma: [None; 3],
            };
            h.validate(at)?;
            Ok(Some(Segment::Ops(h)))
        }
        RUN_CODED_SEGMENT_TAG => {
            let mut f = [0u64; 8];
            for (v, what) in f.iter_mut().zip([
                "segment size",
                "control size",
                "control compressed size",
                "diff size",
                "run-coded diff size",
                "diff compressed size",
                "extra size",
                "extra compressed size",
            ]) {
                *v = input.varint(what)?;
            }
            if f[4] == 0 {
                return Err(corrupt("run-coded segment with an empty run-coded diff".into()));
            }
            let h = SegmentHeader {
                new_len: f[0],
                ctrl_raw: f[1],
                ctrl_comp: f[2],
                diff_raw: f[3],
                diff_coded: f[4],
                diff_comp: f[5],
                extra_raw: f[6],
                lzma: [None; 3],
                extra_comp: f[7],
            };
            h.validate(at)?;
            Ok(Some(Segment::Ops(h)))
        }
        LZMA_OPS_SEGMENT_TAG => {
            let run_coded = match input.u8("LZMA segment form")? {
                0 => false,
                1 => true,
                b => return Err(corrupt(format!("LZMA ops segment form {b}, not 0 or 1"))),
            };
            let mut v = |what: &str| input.varint(what);
            let (new_len, ctrl_raw, ctrl_comp, diff_raw) = (v("segment size")?, v("control size")?, v("control compressed size")?, v("diff size")?);
            let diff_coded = if run_coded { v("run-coded diff size")? } else { 0 };
            if run_coded && diff_coded == 0 {
                return Err(corrupt("run-coded segment with an empty run-coded diff".into()));
            }
            let (diff_comp, extra_raw, extra_comp) = (v("diff compressed size")?, v("extra size")?, v("extra compressed size")?);
            let mask = input.u8("LZMA streams")?;
            let raws = [ctrl_raw, if run_coded { diff_coded } else { diff_raw }, extra_raw];
            if mask == 0 || mask > 7 || (0..3).any(|i| mask >> i & 1 == 1 && raws[i] == 0) {
                return Err(corrupt(format!("LZMA streams {mask:#04x}: not a set of the segment's non-empty streams")));
            }
            let mut lzma = [None; 3];
            for (i, p) in lzma.iter_mut().enumerate() {
                if mask >> i & 1 == 1 {
                    *p = Some(input.u8("LZMA properties")?);
                }
            }
            let h = SegmentHeader { new_len, ctrl_raw, ctrl_comp, diff_raw, diff_coded, diff_comp, extra_raw, extra_comp, lzma };
            h.validate(at)?;
            Ok(Some(Segment::Ops(h)))
        }
        tag @ (WINDOW_SEGMENT_TAG | LZMA_WINDOW_SEGMENT_TAG) => {
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
            if back_len > reach {
                let declared = if reach > BASE_WINDOW_BACK { "the patch's declared reach" } else { "the reach of a patch that declares none" };
                return Err(limit(format!("window reaches {back_len} bytes back, above {declared} ({reach})")));
            }
            if back_len > produced {
                return Err(corrupt(format!("window reaches {back_len} bytes back, more than the {produced} delta bytes produced before it")));
            }
            let codec = if tag == LZMA_WINDOW_SEGMENT_TAG {
                let mut props = [0u8];
                input.exact(&mut props, "LZMA properties")?;
                WindowCodec::Lzma { props: props[0] }
            } else {
                WindowCodec::Zstd
            };
            let comp_len = input.varint("window segment compressed size")?;
            if comp_len == 0 || comp_len > new_len + new_len / 64 + 1024 {
                return Err(corrupt(format!("compressed size {comp_len} implausible for {new_len} bytes")));
            }
            if tag == LZMA_WINDOW_SEGMENT_TAG && total + back_len + new_len > MAX_LZMA_DICTIONARY {
                return Err(limit(format!(
                    "LZMA window segment's window and data take {} bytes, above the limit {MAX_LZMA_DICTIONARY}",
                    total + back_len + new_len
                )));
            }
            Ok(Some(Segment::Window(WindowSegmentHeader { new_len, spans, back_len, comp_len, codec })))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::put_varint;

    /// An `L` segment header: `new_len` bytes, one span of `span` bytes at 0, `back` bytes back.
    fn lzma_header(new_len: u64, span: u64, back: u64) -> Vec<u8> {
        let mut h = vec![LZMA_WINDOW_SEGMENT_TAG];
        put_varint(&mut h, new_len);
        put_varint(&mut h, 1);
        put_varint(&mut h, 0);
        put_varint(&mut h, span);
        put_varint(&mut h, back);
        h.push(0);
        put_varint(&mut h, 100);
        h
    }

    #[test]
    fn an_lzma_window_segment_is_refused_where_its_dictionary_passes_the_limit() {
        let read = |h: Vec<u8>| read_segment_header(&mut PatchInput::new(&h[..]), 1, MAX_WINDOW_BACK, MAX_WINDOW_BYTES, MAX_WINDOW_BACK);
        // 8 MiB of spans + 16 MiB back + 8 MiB new: exactly the limit.
        let at_limit = read(lzma_header(8 << 20, MAX_WINDOW_BYTES, MAX_WINDOW_BACK)).unwrap();
        assert!(matches!(at_limit, Some(Segment::Window(WindowSegmentHeader { codec: WindowCodec::Lzma { props: 0 }, .. }))));
        let over = read(lzma_header((8 << 20) + 1, MAX_WINDOW_BYTES, MAX_WINDOW_BACK)).unwrap_err();
        assert!(matches!(over, Error::Limit { .. }), "{over}");
        // The same header as a zstd window segment is within its limits.
        let mut w = lzma_header((8 << 20) + 1, MAX_WINDOW_BYTES, MAX_WINDOW_BACK);
        w[0] = WINDOW_SEGMENT_TAG;
        w.remove(w.len() - 2);
        assert!(matches!(read(w).unwrap(), Some(Segment::Window(WindowSegmentHeader { codec: WindowCodec::Zstd, .. }))));
    }
}
