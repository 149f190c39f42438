//! The patch's first and last bytes (header and tree; end marker, checksum, manifest), and a
//! generation split into steps: a step generator makes a run of segments (`start_at`), one
//! assembling generator takes them in order (`absorb_segment`) and makes the end.

use super::{invalid, ByteRange, PatchGenerator};
use crate::apply::{read_segment_header, PatchInput};
use crate::error::Result;
use crate::inspect::{patch_manifest, PatchLayout};
use crate::patch_format::{Segment, END_TAG};
use crate::tree_plan::encode_header_and_tree;
use crate::wire::put_varint;

impl PatchGenerator {
    pub(super) fn emit(&mut self, bytes: Vec<u8>) -> Vec<u8> {
        self.hasher.update(&bytes);
        self.out_len += bytes.len() as u64;
        bytes
    }

    /// The first bytes of the patch: header and tree.
    pub fn header(&mut self) -> Result<Vec<u8>> {
        if self.header_done {
            return Err(invalid("header() called twice"));
        }
        self.tree.lzma_segments = (self.lzma_windows() > 0 || self.lzma_streams()) && self.new_total > 0;
        let bytes = encode_header_and_tree(&self.tree, self.level)?;
        self.head_blake3 = *blake3::hash(&bytes).as_bytes();
        self.reserve_history();
        self.header_done = true;
        Ok(self.emit(bytes))
    }

    /// Allocates the history at its full size once, before the first segment's buffers: grown
    /// segment by segment, it landed between their freed pieces, the next large allocations
    /// found no piece big enough and the wasm memory (which never shrinks) grew: three-tree in
    /// the Worker 91.8 MiB that way, 74.1 MiB this way (BENCHMARKS.md, "Generator: text windows
    /// reaching 8 MiB").
    fn reserve_history(&mut self) {
        let reach = (self.tree.window_back() as usize).min(self.new_total as usize);
        self.history = Vec::with_capacity(reach);
    }

    /// The delta-stream bytes a step started at segment `first` needs as its history: the
    /// `window_back()` bytes before it (4 MiB, or 8 MiB where the patch declares
    /// `GENERATOR_TEXT_REACH`; fewer at the start).
    fn history_bounds(&self, first: u64) -> Result<(u64, u64)> {
        if first > self.segment_count() {
            return Err(invalid(format!("start_at({first}): the patch has {} segments", self.segment_count())));
        }
        let end = self.segment_start(first)?;
        Ok((end.saturating_sub(self.tree.window_back()), end))
    }

    /// The new-build ranges whose concatenation is the history `start_at(first, ..)` takes
    /// (none for 0).
    pub fn history_ranges(&self, first: u64) -> Result<Vec<ByteRange>> {
        let (a, b) = self.history_bounds(first)?;
        Ok(self.ranges_of(a, b))
    }

    /// Makes this generator one step of a split generation: it continues at segment `first`
    /// (no header), as if segments `0..first` had been encoded here. `history` is the new
    /// data of `history_ranges(first)`, concatenated (empty for 0): the window's back reach.
    /// Its segments are then byte-identical to one pass's; `finish` is refused (an
    /// assembling generator makes the end: `absorb_segment`).
    pub fn start_at(&mut self, first: u64, history: &[u8]) -> Result<()> {
        if self.header_done || self.next != 0 {
            return Err(invalid("start_at() on a generator that has begun (call it first, instead of header())"));
        }
        let (a, b) = self.history_bounds(first)?;
        if history.len() as u64 != b - a {
            return Err(invalid(format!("start_at({first}): {} history bytes given, the history is bytes {a}..{b}", history.len())));
        }
        // Exactly what encode_segment would have kept after segment first - 1.
        self.reserve_history();
        self.history.extend_from_slice(&history[history.len().saturating_sub(self.tree.window_back() as usize)..]);
        self.header_done = true;
        self.step = true;
        self.next = first;
        Ok(())
    }

    /// Takes segment `i` made by a step generator (`start_at`) into this patch, as if encoded
    /// here: after `header()`, every segment in order, then `finish()` and `manifest()`. The
    /// bytes are checked to be one whole segment of the right size (its header parsed as an
    /// applier does); the caller writes them to the patch after the header.
    pub fn absorb_segment(&mut self, i: u64, bytes: &[u8]) -> Result<()> {
        if !self.header_done || self.step || i != self.next {
            return Err(invalid(format!("segment {i} absorbed out of turn: header first, then segments in order (next is {})", self.next)));
        }
        let (a, b) = self.segment_bounds(i)?;
        let mut input = PatchInput::new(bytes);
        let segment = read_segment_header(&mut input, i, a, self.reference_len, self.tree.window_back())
            .map_err(|e| invalid(format!("segment {i}: {e}")))?
            .ok_or_else(|| invalid(format!("segment {i}: an end marker, not a segment")))?;
        if segment.new_len() != b - a {
            return Err(invalid(format!("segment {i} makes {} bytes, it has {}", segment.new_len(), b - a)));
        }
        if input.offset().checked_add(segment.compressed_len()) != Some(bytes.len() as u64) {
            return Err(invalid(format!("segment {i}: {} bytes given, its header says {}", bytes.len(), input.offset() + segment.compressed_len())));
        }
        if matches!(segment, Segment::Ops(_)) {
            self.ops_segments += 1;
        }
        self.spans.push((self.out_len, bytes.len() as u64));
        self.segments.push(segment);
        self.hasher.update(bytes);
        self.out_len += bytes.len() as u64;
        self.next += 1;
        Ok(())
    }

    /// The last bytes of the patch: the end marker and the checksum.
    pub fn finish(&mut self) -> Result<Vec<u8>> {
        if self.step {
            return Err(invalid("finish() on a step generator (start_at): the assembling generator finishes the patch"));
        }
        if !self.header_done || self.next != self.segment_count() || self.patch_blake3.is_some() {
            return Err(invalid(format!("finish() after {} of {} segments (header first, each segment once)", self.next, self.segment_count())));
        }
        let mut out = vec![END_TAG];
        put_varint(&mut out, self.next);
        put_varint(&mut out, self.new_total);
        let mut out = self.emit(out);
        out.extend_from_slice(self.hasher.finalize().as_bytes());
        self.out_len += 32;
        let mut whole = self.hasher.clone();
        whole.update(&out[out.len() - 32..]);
        self.patch_blake3 = Some(*whole.finalize().as_bytes());
        self.stats.segments = self.next;
        self.stats.patch_bytes = self.out_len;
        Ok(out)
    }

    /// The binary patch manifest (docs/FORMAT.md §4), once finished.
    pub fn manifest(&self, from_build: &str, to_build: &str) -> Result<Vec<u8>> {
        let blake3 = self.patch_blake3.ok_or_else(|| invalid("manifest() before finish()"))?;
        let layout =
            PatchLayout { segments: self.segments.clone(), segment_spans: self.spans.clone(), patch_bytes: self.out_len, head_blake3: self.head_blake3 };
        let m = patch_manifest(&self.tree, &layout, |i| self.new_hashes[i], blake3, from_build, to_build).map_err(|e| invalid(e.to_string()))?;
        m.encode().map_err(|e| invalid(e.to_string()))
    }
}
