//! The delta stream: the concatenated new content of all delta files, produced
//! segment by segment from copy operations (old bytes plus difference bytes, then
//! literal bytes) or from window segments (a zstd frame over old spans and recent
//! new bytes).

use std::io::Read;

use super::{display_path, patch_reader::*, release, resize_exact, shrink, BuildSink, OldBuild};
use crate::error::{Error, Input, Result};
use crate::matcher::Op;
use crate::patch_format::*;
use edgepatch_format::transform::TransformStop;

/// Old data an ops segment prefetches for its copies, at most (see `prefetch_copies`).
const PREFETCH_BUDGET: u64 = 8 << 20;
/// Bytes of split old modules kept between reads, at most (two modules at the cap).
const SPLIT_CACHE: u64 = 2 * MAX_WASM_TRANSFORM_BYTES;
/// Copy spans an ops segment considers for prefetching, at most: 6 MiB of
/// bookkeeping, not 24 bytes for each of a hostile segment's millions of ops.
const MAX_PREFETCH_SPANS: usize = 1 << 18;

/// The delta stream: produces the concatenated new content of all Delta files.
pub(super) struct DeltaStream {
    /// (old path index, start in reference stream, size), ascending.
    pub(super) reference: Vec<(usize, u64, u64)>,
    pub(super) reference_len: u64,
    pub(super) segment_at: u64,
    pub(super) ctrl: Vec<u8>,
    /// The current segment's ops, read one at a time from `ctrl`.
    pub(super) ops: OpCursor,
    /// Output position within the current segment.
    pub(super) segment_pos: u64,
    pub(super) diff: Vec<u8>,
    pub(super) diff_pos: usize,
    pub(super) extra: Vec<u8>,
    pub(super) extra_pos: usize,
    pub(super) comp: Vec<u8>,
    /// The old data the segment reads: a window segment's window, or the
    /// spans an ops segment's copies read, prefetched (`prefetch_copies`).
    /// One buffer for both, kept from segment to segment: freeing one kind's
    /// buffer and faulting in the other's at every change of segment kind
    /// cost a third of freedoom2-wad's page faults (11,500; 7,600 now).
    pub(super) old_data: Vec<u8>,
    /// Prefetched reference spans of the current ops segment: (start, end, offset in `old_data`).
    pub(super) prefetched: Vec<(u64, u64, usize)>,
    /// The last `reach` delta bytes produced (a ring), for window segments.
    /// Not kept during the last segment, which no window segment follows.
    pub(super) history: Vec<u8>,
    /// How far back window segments may reach: the patch's declared reach,
    /// else 4 MiB (`PatchTree::window_back`). The ring grows to it only as
    /// bytes are produced.
    pub(super) reach: u64,
    pub(super) cursor: u64,
    pub(super) copy_left: u64,
    pub(super) extra_left: u64,
    pub(super) segment_left: u64,
    pub(super) segments: u64,
    pub(super) produced: u64,
    /// Bytes of all delta files: the stream's length.
    pub(super) total: u64,
    /// False during the last segment: `history` is no longer filled (for a
    /// build under 4 MiB of changes, the only segment: a copy and up to
    /// 1,000 page faults saved).
    pub(super) keep_history: bool,
    /// Old files the reference presents in the field-split layout (the old
    /// module of a transformed file whose side info says so, docs/FORMAT.md
    /// §2.8.7): (index into `PatchTree::old_files`, index into
    /// `PatchTree::transforms` of the file whose side info says how), sorted.
    pub(super) split_files: Vec<(usize, usize)>,
    /// Those read so far: (index, its split layout), most recently used last. In
    /// the sink's scratch space where it has one (each module split once); else in
    /// memory, together at most `SPLIT_CACHE` bytes (plus the one being read): a
    /// patch that alternates between more split modules than that splits them again.
    pub(super) split_old: Vec<(usize, SplitOld)>,
    /// The sink's scratch space: split old modules, and the applier's normalized forms.
    pub(super) scratch: ScratchSpace,
}

impl DeltaStream {
    pub(super) fn new(tree: &PatchTree) -> Self {
        let mut reference = Vec::new();
        let mut start = 0;
        // An old file read split takes its layout's length (decoded, for a compressed asset).
        for (i, len) in tree.reference_lens().into_iter().enumerate() {
            if len > 0 {
                reference.push((i, start, len));
                start += len;
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
            reach: tree.window_back(),
            cursor: 0,
            copy_left: 0,
            extra_left: 0,
            segment_left: 0,
            segments: 0,
            produced: 0,
            total: tree.delta_bytes(),
            keep_history: true,
            split_files: split_old_files(tree),
            split_old: Vec::new(),
            scratch: ScratchSpace::default(),
        }
    }

    pub(super) fn corrupt(&self, what: String) -> Error {
        Error::Corrupt { input: Input::Patch, offset: self.segment_at, what: format!("segment {}: {what}", self.segments) }
    }

    pub(super) fn load_segment<R: Read, O: OldBuild, S: BuildSink>(
        &mut self,
        input: &mut PatchInput<R>,
        old: &mut OldReads<O, S>,
        tree: &PatchTree,
    ) -> Result<()> {
        self.segment_at = input.offset();
        let segment = read_segment_header(input, self.segments, self.produced, self.reference_len, self.reach)?.ok_or_else(|| Error::Truncated {
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
                release(&mut self.old_data);
                self.prefetched.clear();
                // The window (§2.6): back bytes beyond the last BASE_WINDOW_BACK, the spans,
                // then the last BASE_WINDOW_BACK back bytes. It is laid out in the history's
                // own buffer, around the back bytes already there, so they are not held twice
                // (a copy of them cost three-tree 8 MiB of peak memory at an 8 MiB reach):
                // [older][far back][near back] -> [older][far back][spans][near back].
                let back = w.back_len as usize;
                let near = back.min(BASE_WINDOW_BACK as usize);
                let spans_len = (w.window_len() - w.back_len) as usize;
                let mut buf = self.history_in_order();
                let held = buf.len();
                if back > held {
                    self.restore_history(buf);
                    return Err(self.corrupt(format!("window reaches {back} bytes back, {held} are kept")));
                }
                resize_exact(&mut buf, held + spans_len);
                buf.copy_within(held - near..held, held - near + spans_len);
                let decoded = self.decode_window(&mut buf, held - back, held - near, &w, input, old, tree);
                // The history again: the spans out, the ring's order back.
                buf.copy_within(held - near + spans_len..held + spans_len, held - near);
                buf.truncate(held);
                shrink(&mut buf, held);
                self.restore_history(buf);
                decoded?;
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
        if h.lzma.iter().any(Option::is_some) && !tree.lzma_segments {
            return Err(self.corrupt("LZMA ops segment in a patch without the LZMA flag".into()));
        }
        input.ops_stream(h.lzma[0], h.ctrl_comp, h.ctrl_raw, &mut self.comp, &mut self.ctrl, "segment control")?;
        if h.diff_coded > 0 {
            if !tree.run_coded_diff {
                return Err(self.corrupt("run-coded segment in a patch without the run-coded flag".into()));
            }
            // The extra stream's buffer holds the coded form until the extra frame replaces it.
            input.ops_stream(h.lzma[1], h.diff_comp, h.diff_coded, &mut self.comp, &mut self.extra, "segment run-coded diff")?;
            expand_run_coded(&self.extra, h.diff_raw, &mut self.diff).map_err(|why| self.corrupt(format!("run-coded diff: {why}")))?;
        } else {
            input.ops_stream(h.lzma[1], h.diff_comp, h.diff_raw, &mut self.comp, &mut self.diff, "segment diff")?;
        }
        input.ops_stream(h.lzma[2], h.extra_comp, h.extra_raw, &mut self.comp, &mut self.extra, "segment extra")?;
        self.ops = OpCursor::new(&self.ctrl, h.new_len, h.diff_raw, h.extra_raw, self.segment_at)?;
        self.prefetch_copies(old, tree)?;
        (self.segment_pos, self.diff_pos, self.extra_pos) = (0, 0, 0);
        (self.cursor, self.copy_left, self.extra_left) = (0, 0, 0);
        self.segment_left = h.new_len;
        Ok(())
    }

    pub(super) fn next_op(&mut self) -> Result<()> {
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
    pub(super) fn fill<O: OldBuild, S: BuildSink>(&mut self, out: &mut [u8], old: &mut OldReads<O, S>, tree: &PatchTree) -> Result<()> {
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
    pub(super) fn extra_run(&mut self, max: usize) -> Result<Option<std::ops::Range<usize>>> {
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
    pub(super) fn check_segment_used_up(&self) -> Result<()> {
        if self.segment_left > 0 || self.ops.remaining() != 0 || self.diff_pos != self.diff.len() || self.extra_pos != self.extra.len() {
            return Err(self.corrupt("unused bytes left at the end of the segment".into()));
        }
        Ok(())
    }

    /// Fills a window segment's window, laid out in `buf` from `start` (its back bytes already
    /// in place, the spans' room at `spans_at`), with the spans of reference data, reads the
    /// segment's frame and decodes it into `extra`.
    #[allow(clippy::too_many_arguments)]
    fn decode_window<R: Read, O: OldBuild, S: BuildSink>(
        &mut self,
        buf: &mut [u8],
        start: usize,
        spans_at: usize,
        w: &WindowSegmentHeader,
        input: &mut PatchInput<R>,
        old: &mut OldReads<O, S>,
        tree: &PatchTree,
    ) -> Result<()> {
        let mut filled = spans_at;
        for &(span, len) in &w.spans {
            self.cursor = span;
            while self.cursor < span + len {
                let want = (span + len - self.cursor) as usize;
                let n = self.read_reference(&mut buf[filled..filled + want], old, tree)?;
                filled += n;
                self.cursor += n as u64;
            }
        }
        resize_exact(&mut self.comp, w.comp_len as usize);
        input.exact(&mut self.comp, "window segment frame")?;
        if matches!(w.codec, WindowCodec::Lzma { .. }) && !tree.lzma_segments {
            return Err(self.corrupt("LZMA window segment in a patch without the LZMA flag".into()));
        }
        decompress_with_window(&self.comp, &buf[start..], w, &mut self.extra, self.segment_at)
    }

    /// Takes the history out, oldest byte first: a full ring is rotated to its order (the
    /// oldest byte is where the next one goes); one still growing is in order already.
    fn history_in_order(&mut self) -> Vec<u8> {
        let mut h = std::mem::take(&mut self.history);
        if !h.is_empty() && h.len() as u64 == self.reach {
            h.rotate_left((self.produced % self.reach) as usize);
        }
        h
    }

    /// Puts back a history [`history_in_order`] took, in the ring's order.
    fn restore_history(&mut self, mut h: Vec<u8>) {
        if !h.is_empty() && h.len() as u64 == self.reach {
            h.rotate_right((self.produced % self.reach) as usize);
        }
        self.history = h;
    }

    /// Counts produced bytes and keeps the last `reach` of them for later
    /// window segments.
    pub(super) fn remember(&mut self, data: &[u8]) {
        if !self.keep_history {
            self.produced += data.len() as u64;
            return;
        }
        let ring = self.reach as usize;
        let mut data = data;
        if self.history.len() < ring {
            // Grow with the output rather than zero-filling the whole ring up
            // front: a small build never touches (or page-faults in) the reach.
            // (A doubling growth would cost up to twice the reach in a wasm
            // linear memory, which never shrinks; exact is at most the reach.)
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
        let mut at = (self.produced % self.reach) as usize;
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
    pub(super) fn prefetch_copies<O: OldBuild, S: BuildSink>(&mut self, old: &mut OldReads<O, S>, tree: &PatchTree) -> Result<()> {
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
    pub(super) fn read_reference<O: OldBuild, S: BuildSink>(&mut self, buf: &mut [u8], old: &mut OldReads<O, S>, tree: &PatchTree) -> Result<usize> {
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
        if let Ok(k) = self.split_files.binary_search_by_key(&file, |s| s.0) {
            let t = self.split_files[k].1;
            match self.split_old.iter().position(|s| s.0 == file) {
                Some(k) => {
                    let hit = self.split_old.remove(k);
                    self.split_old.push(hit);
                }
                None => {
                    // Room first, so that the old ones are freed before the new one is read
                    // (only modules held in memory count; the scratch space keeps the others).
                    while self.split_old.iter().map(|s| s.1.memory_len()).sum::<u64>() + size > SPLIT_CACHE {
                        let Some(k) = self.split_old.iter().position(|s| s.1.memory_len() > 0) else { break };
                        self.split_old.remove(k);
                    }
                    let held = self.split_old_module(old, path, tree.old_files[file].size, size, &tree.transforms[t].side_info).map_err(|e| match e {
                        Error::Corrupt { what, .. } => self.corrupt(what),
                        e => e,
                    })?;
                    self.split_old.push((file, held));
                }
            }
            match &self.split_old.last().expect("found or read above").1 {
                SplitOld::Memory(split) => buf[..n].copy_from_slice(&split[offset as usize..offset as usize + n]),
                SplitOld::Scratch(at) => old.sink.read_scratch(at + offset, &mut buf[..n]).map_err(scratch_err)?,
            }
            return Ok(n);
        }
        old.old.read_at(path, offset, &mut buf[..n]).map_err(|e| Error::OldRead { path: display_path(path), source: e })?;
        Ok(n)
    }

    /// The old module at `path` split, where the delta stream reads it from: in the sink's
    /// scratch space if it has one, split as it is read (neither the module nor its split form
    /// is held in memory), else in memory.
    /// `size` is the old file's, `layout_len` its split layout's (the same, but for a compressed
    /// asset's old file read decoded).
    fn split_old_module<O: OldBuild, S: BuildSink>(
        &mut self,
        old: &mut OldReads<O, S>,
        path: &str,
        size: u64,
        layout_len: u64,
        side_info: &[u8],
    ) -> Result<SplitOld> {
        check_split_size(path, size)?;
        check_split_size(path, layout_len)?;
        let Some(at) = self.scratch.take(old.sink, layout_len)? else {
            return Ok(SplitOld::Memory(read_split(old.old, path, size, layout_len, side_info)?));
        };
        crate::transforms::transform_for(side_info)
            .split_old_read(
                size,
                &mut |offset, buf| {
                    old.old.read_at(path, offset, buf).map_err(|e| TransformStop::Caller(Error::OldRead { path: display_path(path), source: e }))
                },
                side_info,
                &mut |offset, bytes| ScratchSpace::write(old.sink, at + offset, bytes).map_err(TransformStop::Caller),
            )
            .map_err(|e| split_error(path, e))?;
        Ok(SplitOld::Scratch(at))
    }
}

/// A module that does not split is not the old module the patch was made from; a side info
/// that does not say how to split is a corrupt patch; the applier's own reads and writes fail
/// with their errors.
fn split_error(path: &str, e: TransformStop) -> Error {
    match e {
        TransformStop::Caller(e) => e,
        TransformStop::NotInput(e) => Error::WrongOldBuild { what: format!("{}: {e}", display_path(path)) },
        TransformStop::Corrupt(e) => Error::Corrupt { input: Input::Patch, offset: 0, what: format!("{}: {e}", display_path(path)) },
    }
}

/// The sink's scratch space (`BuildSink::write_scratch`) as the applier uses it: whether the
/// sink has one (unknown until the first write) and how much of it is taken. A region is
/// taken once, for one split old module or one normalized form, and never reused: the scratch
/// space grows to the sum of them (on disk, not in memory).
#[derive(Default)]
pub(super) struct ScratchSpace {
    has: Option<bool>,
    end: u64,
}

impl ScratchSpace {
    /// Takes a region of `len` bytes; None: the sink has no scratch space (it said so at its
    /// first write, an empty one that asks), and the caller holds the bytes itself.
    pub(super) fn take<S: BuildSink>(&mut self, sink: &mut S, len: u64) -> Result<Option<u64>> {
        if self.has.is_none() {
            self.has = Some(sink.write_scratch(self.end, &[]).map_err(scratch_err)?);
        }
        if self.has == Some(false) {
            return Ok(None);
        }
        let at = self.end;
        self.end += len;
        Ok(Some(at))
    }

    /// Writes more of a region taken.
    pub(super) fn write<S: BuildSink>(sink: &mut S, at: u64, data: &[u8]) -> Result<()> {
        match sink.write_scratch(at, data) {
            Ok(true) => Ok(()),
            Ok(false) => Err(scratch_err(std::io::Error::other("the scratch space refused bytes after taking others"))),
            Err(e) => Err(scratch_err(e)),
        }
    }
}

/// A split old module ([`DeltaStream::split_old`]): held in memory, or in the sink's scratch
/// space from this offset.
pub(super) enum SplitOld {
    Memory(Vec<u8>),
    Scratch(u64),
}

impl SplitOld {
    /// Bytes it holds in memory.
    pub(super) fn memory_len(&self) -> u64 {
        match self {
            SplitOld::Memory(bytes) => bytes.len() as u64,
            SplitOld::Scratch(_) => 0,
        }
    }
}

pub(super) fn scratch_err(e: std::io::Error) -> Error {
    Error::Output { path: "(the output's scratch space)".into(), source: e }
}

/// What the delta stream reads old data through: the old build, and the sink, whose scratch
/// space (`BuildSink::write_scratch`) keeps the old modules read split.
pub(super) struct OldReads<'a, O, S> {
    pub(super) old: &'a mut O,
    pub(super) sink: &'a mut S,
}

/// The old files the transformed files in the field-split layout are diffed
/// against (`PatchTree::split_old_file`), with the transform's index, sorted
/// by old file (each at most once: `EncodedTree::resolve` refuses a second).
fn split_old_files(tree: &PatchTree) -> Vec<(usize, usize)> {
    let mut files: Vec<(usize, usize)> = tree.transforms.iter().enumerate().filter_map(|(t, w)| tree.split_old_file(w).map(|f| (f, t))).collect();
    files.sort_unstable();
    files
}

/// The whole old module at `path`, in the field-split layout. A module that is
/// not the one the patch was made from may not split: that is the wrong old build.
fn read_split<O: OldBuild>(old: &mut O, path: &str, size: u64, layout_len: u64, side_info: &[u8]) -> Result<Vec<u8>> {
    check_split_size(path, size)?;
    if edgepatch_format::compressed_side_info::is_compressed(side_info) {
        // Another length (a compressed asset's old file decoded): not in place.
        let mut split = vec![0u8; layout_len as usize];
        crate::transforms::transform_for(side_info)
            .split_old_read(
                size,
                &mut |offset, buf| old.read_at(path, offset, buf).map_err(|e| TransformStop::Caller(Error::OldRead { path: display_path(path), source: e })),
                side_info,
                &mut |offset, bytes| {
                    let end = offset.checked_add(bytes.len() as u64).filter(|&e| e <= layout_len);
                    let end = end.ok_or_else(|| TransformStop::NotInput("the split old file is longer than its layout".into()))?;
                    split[offset as usize..end as usize].copy_from_slice(bytes);
                    Ok(())
                },
            )
            .map_err(|e| split_error(path, e))?;
        return Ok(split);
    }
    let mut module = vec![0u8; size as usize];
    old.read_at(path, 0, &mut module).map_err(|e| Error::OldRead { path: display_path(path), source: e })?;
    // In place: one module-sized buffer, not two.
    crate::transforms::transform_for(side_info).split_old_in_place(&mut module, side_info).map_err(|e| split_error(path, e))?;
    Ok(module)
}

fn check_split_size(path: &str, size: u64) -> Result<()> {
    if size > MAX_WASM_TRANSFORM_BYTES {
        // The old build is the one the patch names (its listing matched): the patch is wrong.
        return Err(Error::Corrupt {
            input: Input::Patch,
            offset: 0,
            what: format!("{}: the old module of a split-layout file is {size} bytes, over the {MAX_WASM_TRANSFORM_BYTES}-byte cap", display_path(path)),
        });
    }
    Ok(())
}
