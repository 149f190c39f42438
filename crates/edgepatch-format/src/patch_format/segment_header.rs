//! Segment headers (docs/FORMAT.md §2.3, §2.6): the sizes an ops segment or a window
//! segment announces before its data, their encoding and the checks on them.

use crate::error::{Error, Input, Result};
use crate::patch_format::{
    WindowCodec, LZMA_OPS_SEGMENT_TAG, LZMA_WINDOW_SEGMENT_TAG, MAX_SEGMENT_CTRL, MAX_SEGMENT_NEW, RUN_CODED_SEGMENT_TAG, SEGMENT_TAG, WINDOW_SEGMENT_TAG,
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
