//! Encoding a planned segment: as copy operations (`ops_form`), and where those leave much
//! unexplained as a window (`window_form`); the smaller is kept.

use super::ops_form::{encode_ops_segment, OpsParams};
use super::window_form::{deep_text_window, lazy_window, narrow_to_window, text_window, wasm_code_window, window_of};
use super::{
    invalid, PatchGenerator, GENERATOR_SEARCH_STEP, TEXT_MIN_OPS_SHARE, WINDOW_FORM_MAX_LEVEL, WINDOW_TRIAL_CTRL_SHARE, WINDOW_TRIAL_EXTRA_SHARE,
    WINDOW_TRIAL_MIN_SHARE,
};
use crate::error::Result;
use crate::patch_format::{Segment, WindowCodec, WindowSegmentHeader, BASE_WINDOW_BACK};
use crate::window_plan::is_text_segment;
use crate::zstd_frame::{compress_frame, FrameSearch};

impl PatchGenerator {
    /// Encodes segment `i` from its new data and the old data of its planned
    /// ranges (concatenated, in order). Returns the segment's patch bytes.
    pub fn encode_segment(&mut self, i: u64, new: &[u8], old: Vec<u8>) -> Result<Vec<u8>> {
        self.check_turn(i, new)?;
        self.check_normalized(i, new)?;
        let (spans, window_spans, matches) = match self.planned.take() {
            Some((p, spans, window, matches)) if p == i => (spans, window, matches),
            _ => return Err(invalid(format!("segment {i} was not planned (call plan_segment first)"))),
        };
        let want: u64 = spans.iter().map(|s| s.1).sum();
        if old.len() as u64 != want {
            return Err(invalid(format!("segment {i}: {} old bytes given, the plan needs {want}", old.len())));
        }
        // Two encodings of the segment against the same old spans. The ops form (the native
        // diff's: byte-granular copies with difference bytes, found by a suffix array over the
        // spans) wins on compiled code, where approximate matches dominate, and is cheap. The
        // window form (one zstd frame over the spans and the recent new data) can only win
        // where the ops form leaves much unexplained: many short matches (text), or new bytes
        // that the old spans lack but the new build's previous 4 MiB (8 MiB for text where the
        // patch declares it) may hold. It is tried only then (it costs most of a generation's
        // CPU at high levels), and the smaller kept.
        let t = self.trace.start();
        // A part of a split module: a field stream or a section, diffed against the old
        // module's same part, its window always tried (as the in-memory diff's).
        let (a, _) = self.segment_bounds(i)?;
        let part = self.aligned_part(a, a + new.len() as u64);
        let is_text = part.is_none() && is_text_segment(new);
        // Text keeps a search at every position: there the ops form competes with the text
        // window, whose many short matches the spaced search would hand to it.
        let search_step = if is_text { 1 } else { GENERATOR_SEARCH_STEP };
        let block = self.block_size as u64;
        let params = OpsParams { level: self.level, search_step, lzma: self.lzma_streams(), run_coded: self.tree.run_coded_diff, trace: &self.trace };
        let (ops_form, copied) = encode_ops_segment(new, &old, &spans, (&matches, block), params)?;
        drop(matches);
        if let Some(t) = t {
            let of = part.map_or(String::new(), |p| format!(", part {}..{} against old {}..{}", p.new.0, p.new.1, p.old.0, p.old.1));
            self.trace.line(&format!(
                "segment {i} (new {a}..{}{of}): ops form {:.2}s ({:?} bytes)",
                a + new.len() as u64,
                t.elapsed().as_secs_f64(),
                ops_form.as_ref().map(|f| f.bytes.len())
            ));
        }
        // These rules read the zstd streams' sizes, on which they were measured (`OpsEncoding`).
        let control_heavy = ops_form.as_ref().is_some_and(|f| f.zstd_header.ctrl_comp * 5 > f.zstd_header.diff_comp + f.zstd_header.extra_comp);
        let try_window = part.is_some()
            || match &ops_form {
                None => true,
                Some(f) => {
                    let h = &f.zstd_header;
                    let rest = h.diff_comp + h.extra_comp;
                    f.zstd_len > new.len() as u64 / WINDOW_TRIAL_MIN_SHARE
                        && (control_heavy || (h.extra_comp > new.len() as u64 / WINDOW_TRIAL_EXTRA_SHARE && h.ctrl_comp * WINDOW_TRIAL_CTRL_SHARE > rest))
                }
            };
        let text = is_text && ops_form.as_ref().is_none_or(|f| control_heavy && f.zstd_len > new.len() as u64 / TEXT_MIN_OPS_SHARE);
        let ops_zstd_len = ops_form.as_ref().map(|f| f.zstd_len);
        let mut chosen = ops_form.map(|f| (f.bytes, Segment::Ops(f.header)));
        if try_window {
            let search = match (text, self.deep_text_windows) {
                (true, false) => text_window(self.level),
                (true, true) => deep_text_window(self.level),
                (false, _) => lazy_window(self.level),
            };
            let (spans, old, copied) = narrow_to_window(spans, old, copied, &window_spans, text);
            // The history's last `BASE_WINDOW_BACK` bytes go after the spans (`near`); text
            // reaches further back, into what goes before them (`far`, §2.6). A part's window
            // reaches back only within the part.
            let back = part.map_or(BASE_WINDOW_BACK, |p| (a - p.new.0).min(BASE_WINDOW_BACK));
            let (far, near) = self.history.split_at(self.history.len().saturating_sub(back as usize));
            let far = if text { far } else { &[][..] };
            let (spans, window) = window_of(spans, old, copied.filter(|_| text), far, near);
            let t = self.trace.start();
            // Long-distance matching needs a prefix to reach into.
            let search = FrameSearch { long_distance: search.long_distance.filter(|_| window.len() > far.len()), ..search };
            // A text segment with history past the base reach searches all of it. The header
            // declared the reach from names before any segment, so its appliers hold a ring
            // of that reach whatever a segment chooses (the in-memory diff, which declares a
            // reach only where a segment used it, keeps the near window unless the far saves
            // a tenth).
            // (Trying the near window too, and keeping it unless the far one saved a tenth,
            // cost a second frame per such segment: three-tree's native generation took
            // 5.7-6.2 s of CPU that way and 4.4-4.9 s this way, for a patch 2.2% smaller.)
            let mut frame = compress_frame(new, &window, search)?;
            // A window that beats the ops form over a transformed wasm module (§2.8) is mostly
            // new code, whose literals and short matches the optimal parser codes best: it is
            // searched again at the patch's level, with tables no larger than the lazy
            // window's. Measured in `diff --bounded` on resvg (its one segment): split
            // 482,468 -> 452,158 bytes for 0.6 s, renamed (normalized) 581,083 -> 527,549; the
            // other measured wasm pairs keep the ops form (BENCHMARKS.md, "Generator: the
            // field-split layout").
            // (Against the ops form's zstd size, as measured: LZMA streams would skip the deep
            // search where it wins, harfbuzz's first part among them.)
            let beats_ops = |len: usize| ops_zstd_len.is_none_or(|z| (len as u64) + 32 < z);
            if !text && self.level > WINDOW_FORM_MAX_LEVEL && beats_ops(frame.len()) && self.holds_transformed_module(i)? {
                let deep = compress_frame(new, &window, wasm_code_window(self.level))?;
                if t.is_some() {
                    self.trace.line(&format!("segment {i}: wasm code window at level {} ({} bytes)", self.level, deep.len()));
                }
                if deep.len() < frame.len() {
                    frame = deep;
                }
            }
            let back_len = far.len() + near.len();
            if let Some(t) = t {
                self.trace.line(&format!(
                    "segment {i}: window form {:.2}s ({} bytes; {} window bytes, back {back_len}, text {text})",
                    t.elapsed().as_secs_f64(),
                    frame.len(),
                    window.len()
                ));
            }
            let mut codec = WindowCodec::Zstd;
            if self.lzma_windows() > 0 && part.is_some() {
                (frame, codec) = crate::lzma::smallest_window_form(new, &window, frame, self.lzma_windows());
            }
            drop(window);
            let header = WindowSegmentHeader { new_len: new.len() as u64, spans, back_len: back_len as u64, comp_len: frame.len() as u64, codec };
            if chosen.as_ref().is_none_or(|(bytes, _)| frame.len() + 32 + header.spans.len() * 8 < bytes.len()) {
                let mut out = Vec::with_capacity(frame.len() + 32 + header.spans.len() * 8);
                header.encode(&mut out);
                out.extend_from_slice(&frame);
                chosen = Some((out, Segment::Window(header)));
            }
        }
        let (out, segment) = chosen.expect("a segment form");
        if matches!(segment, Segment::Ops(_)) {
            self.ops_segments += 1;
        }
        self.spans.push((self.out_len, out.len() as u64));
        self.segments.push(segment);
        // Keep the last `window_back()` bytes of the new stream.
        let reach = self.tree.window_back() as usize;
        let keep = reach.saturating_sub(new.len()).min(self.history.len());
        self.history.drain(..self.history.len() - keep);
        self.history.extend_from_slice(&new[new.len().saturating_sub(reach)..]);
        self.next += 1;
        Ok(self.emit(out))
    }

    /// Checks every chunk of a normalized form that ends in segment `i` against its
    /// transform's hash (a chunk is at most 1 MiB, so it starts at the latest in the history,
    /// the 4 MiB or more before the segment).
    fn check_normalized(&self, i: u64, new: &[u8]) -> Result<()> {
        if self.wasm.is_empty() {
            return Ok(());
        }
        let (a, b) = self.segment_bounds(i)?;
        for (_, (_, start, _), t) in self.delta_files_in(a, b) {
            let Some(t) = t else { continue };
            let history_start = a - self.history.len() as u64;
            // Hashed where the bytes lie (the history, then this segment): no copy of a chunk.
            self.wasm[t].check_chunks_ending_in(a.saturating_sub(*start), b - start, |from, to, hasher| {
                let (from, to) = (from + start, to + start);
                if from < a {
                    hasher.update(&self.history[(from - history_start) as usize..]);
                }
                hasher.update(&new[(from.max(a) - a) as usize..(to - a) as usize]);
            })?;
        }
        Ok(())
    }

    /// Whether segment `i` holds bytes of a module the patch stores transformed.
    fn holds_transformed_module(&self, i: u64) -> Result<bool> {
        let (a, b) = self.segment_bounds(i)?;
        Ok(self.delta_files_in(a, b).any(|(.., t)| t.is_some()))
    }

    pub(super) fn check_turn(&self, i: u64, new: &[u8]) -> Result<()> {
        if !self.header_done || i != self.next {
            return Err(invalid(format!("segment {i} out of turn: header first, then segments in order (next is {})", self.next)));
        }
        let (a, b) = self.segment_bounds(i)?;
        if new.len() as u64 != b - a {
            return Err(invalid(format!("segment {i}: {} new bytes given, it has {}", new.len(), b - a)));
        }
        Ok(())
    }
}
