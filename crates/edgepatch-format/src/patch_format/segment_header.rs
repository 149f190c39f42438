//! Segment headers (docs/FORMAT.md §2.3, §2.6): the sizes an ops segment or a window
//! segment announces before its data: their encoding, [`read_segment_header`] and the
//! checks on them.

use super::unit_source::UnitSource;
use crate::error::{Error, Input, Result};
use crate::patch_format::{
    WindowCodec, BASE_WINDOW_BACK, END_TAG, LZMA_OPS_SEGMENT_TAG, LZMA_WINDOW_SEGMENT_TAG, MAX_LZMA_DICTIONARY, MAX_SEGMENT_CTRL, MAX_SEGMENT_NEW,
    MAX_WINDOW_BYTES, MAX_WINDOW_SPANS, RUN_CODED_SEGMENT_TAG, SEGMENT_TAG, WINDOW_SEGMENT_TAG,
};
use crate::wire::put_varint;

/// Sizes of one segment as written in its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SegmentHeader {
    /// New bytes the segment produces.
    pub new_len: u64,
    /// Control stream bytes, decompressed.
    pub ctrl_raw: u64,
    /// Control stream bytes in the patch.
    pub ctrl_comp: u64,
    /// Difference bytes, decompressed.
    pub diff_raw: u64,
    /// Difference bytes in the patch.
    pub diff_comp: u64,
    /// 0 for a plain diff stream (tag `S`); else the size of its run-coded
    /// form (tag `R`, §2.3), which the diff frame decompresses to.
    pub diff_coded: u64,
    /// Extra (literal) bytes, decompressed.
    pub extra_raw: u64,
    /// Extra bytes in the patch.
    pub extra_comp: u64,
    /// The LZMA properties byte of each stream (control, diff, extra) stored as raw LZMA, None
    /// for a zstd frame; any LZMA stream makes the segment an `M` one (§2.3).
    pub lzma: [Option<u8>; 3],
}

impl SegmentHeader {
    /// Appends the header's encoding (tag and varints) to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        if self.lzma.iter().any(Option::is_some) {
            out.push(LZMA_OPS_SEGMENT_TAG);
            out.push(u8::from(self.diff_coded > 0));
            put_varint(out, self.new_len);
            put_varint(out, self.ctrl_raw);
            put_varint(out, self.ctrl_comp);
            put_varint(out, self.diff_raw);
            if self.diff_coded > 0 {
                put_varint(out, self.diff_coded);
            }
            for v in [self.diff_comp, self.extra_raw, self.extra_comp] {
                put_varint(out, v);
            }
            out.push(self.lzma.iter().enumerate().map(|(i, p)| u8::from(p.is_some()) << i).sum());
            out.extend(self.lzma.iter().flatten());
            return;
        }
        if self.diff_coded > 0 {
            out.push(RUN_CODED_SEGMENT_TAG);
            for v in [self.new_len, self.ctrl_raw, self.ctrl_comp, self.diff_raw, self.diff_coded, self.diff_comp, self.extra_raw, self.extra_comp] {
                put_varint(out, v);
            }
            return;
        }
        out.push(SEGMENT_TAG);
        for v in [self.new_len, self.ctrl_raw, self.ctrl_comp, self.diff_raw, self.diff_comp, self.extra_raw, self.extra_comp] {
            put_varint(out, v);
        }
    }

    /// Bytes the segment's three streams take in the patch.
    pub fn compressed_len(&self) -> u64 {
        self.ctrl_comp + self.diff_comp + self.extra_comp
    }

    /// Checks the sizes against the limits and each other.
    pub fn validate(&self, offset: u64) -> Result<()> {
        let bad = |what: String| Err(Error::Corrupt { input: Input::Patch, offset, what });
        let limit = |what: String| Err(Error::Limit { input: Input::Patch, offset, what });
        if self.new_len == 0 {
            return bad("segment produces 0 bytes".into());
        }
        if self.new_len > MAX_SEGMENT_NEW {
            return limit(format!("segment produces {} bytes, above the limit {MAX_SEGMENT_NEW}", self.new_len));
        }
        if self.diff_raw.checked_add(self.extra_raw) != Some(self.new_len) {
            return bad("segment diff and extra sizes do not add up to its output size".into());
        }
        if self.ctrl_raw == 0 {
            return bad("segment control stream is empty".into());
        }
        if self.ctrl_raw > MAX_SEGMENT_CTRL {
            return limit(format!("segment control size {} above the limit {MAX_SEGMENT_CTRL}", self.ctrl_raw));
        }
        if self.diff_coded > self.diff_raw {
            return bad(format!("run-coded diff of {} bytes for {} diff bytes: larger than the stream it codes", self.diff_coded, self.diff_raw));
        }
        // The diff frame holds the run-coded form when there is one.
        let diff_frame_raw = if self.diff_coded > 0 { self.diff_coded } else { self.diff_raw };
        for (raw, comp) in [(self.ctrl_raw, self.ctrl_comp), (diff_frame_raw, self.diff_comp), (self.extra_raw, self.extra_comp)] {
            // zstd never expands by more than a small bound; reject absurd claims.
            if comp > raw + raw / 64 + 1024 || (raw == 0) != (comp == 0) {
                return bad(format!("segment stream compressed size {comp} implausible for {raw} bytes"));
            }
        }
        Ok(())
    }
}

/// A window segment: its new bytes are one zstd frame compressed with a prefix
/// made of spans of the old reference stream (better than ops for text, where
/// many short matches make the control stream dominate).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WindowSegmentHeader {
    /// New bytes the segment produces.
    pub new_len: u64,
    /// (start in the reference stream, length), ascending and disjoint.
    pub spans: Vec<(u64, u64)>,
    /// New-stream bytes just before this segment in the window: the last
    /// `BASE_WINDOW_BACK` of them follow the spans, any before those precede them (§2.6).
    pub back_len: u64,
    /// Bytes of the zstd frame (or LZMA data) in the patch.
    pub comp_len: u64,
    /// How the segment's data is compressed.
    pub codec: WindowCodec,
}

impl WindowSegmentHeader {
    /// Bytes of the window: the spans plus the back bytes.
    pub fn window_len(&self) -> u64 {
        self.spans.iter().map(|s| s.1).sum::<u64>() + self.back_len
    }

    /// Appends the header's encoding (tag and varints) to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(match self.codec {
            WindowCodec::Zstd => WINDOW_SEGMENT_TAG,
            WindowCodec::Lzma { .. } => LZMA_WINDOW_SEGMENT_TAG,
        });
        put_varint(out, self.new_len);
        put_varint(out, self.spans.len() as u64);
        let mut end = 0;
        for &(start, len) in &self.spans {
            put_varint(out, start - end);
            put_varint(out, len);
            end = start + len;
        }
        put_varint(out, self.back_len);
        if let WindowCodec::Lzma { props } = self.codec {
            out.push(props);
        }
        put_varint(out, self.comp_len);
    }
}

/// A segment as announced by its header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    /// A segment of copy/add ops (bsdiff-like).
    Ops(SegmentHeader),
    /// A segment compressed against a window of old bytes.
    Window(WindowSegmentHeader),
}

impl Segment {
    /// New bytes the segment produces.
    pub fn new_len(&self) -> u64 {
        match self {
            Segment::Ops(h) => h.new_len,
            Segment::Window(w) => w.new_len,
        }
    }

    /// Bytes the segment takes in the patch after its header.
    pub fn compressed_len(&self) -> u64 {
        match self {
            Segment::Ops(h) => h.compressed_len(),
            Segment::Window(w) => w.comp_len,
        }
    }
}

/// Reads the next segment header, or None at the end marker (whose counts are checked).
/// `produced`: delta bytes before this segment; `reach`: the patch's window
/// reach (`PatchTree::window_back`); both bound how far back a window may reach.
pub fn read_segment_header<S: UnitSource + ?Sized>(
    input: &mut S,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patch_format::MAX_WINDOW_BACK;

    /// A patch in memory, read from its start.
    struct Bytes<'a>(&'a [u8], usize);

    impl UnitSource for Bytes<'_> {
        fn offset(&self) -> u64 {
            self.1 as u64
        }

        fn exact(&mut self, buf: &mut [u8], what: &str) -> Result<()> {
            let end = self.1 + buf.len();
            let bytes = self.0.get(self.1..end).ok_or_else(|| Error::Truncated { input: Input::Patch, offset: self.0.len() as u64, what: what.into() })?;
            buf.copy_from_slice(bytes);
            self.1 = end;
            Ok(())
        }
    }

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
        let read = |h: Vec<u8>| read_segment_header(&mut Bytes(&h, 0), 1, MAX_WINDOW_BACK, MAX_WINDOW_BYTES, MAX_WINDOW_BACK);
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
