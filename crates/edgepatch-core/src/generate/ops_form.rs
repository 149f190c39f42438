//! A segment as copy operations from the reference stream (the ops form), matched against
//! the planned old spans, and its streams compressed.

use super::diagonals::diagonal_ops;
use super::window_form::capped;
use super::{CopiedSpan, OpsForm, TEXT_WINDOW_SPAN_PADDING};
use crate::error::Result;
use crate::matcher::{match_new_data, split_streams, MatchParams, OldIndex, Op};
use crate::patch_format::{encode_control, encode_ops_streams, OpsForms, OpsStream, MAX_SEGMENT_CTRL, MAX_WINDOW_SPANS};
use crate::trace::Trace;
use crate::zstd_frame::compress_frame;

/// The segment `new` as copy operations from the reference stream (docs/FORMAT.md §2, "ops
/// segment"), matched against `old`: the concatenation of the reference spans `spans`
/// (start, len). Matching runs on the concatenation; a copy crossing from one span into the
/// next is split there, and every copy is moved to the span's place in the reference. None
/// when nothing in `old` matches (the window form is then all there is). Also returns the
/// old bytes the copies read (`copied_spans`), for a text window.
pub(super) fn encode_ops_segment(
    new: &[u8],
    old: &[u8],
    spans: &[(u64, u64)],
    (block_matches, block): (&[(u64, u64)], u64),
    params: OpsParams,
) -> Result<(Option<OpsForm>, Option<Vec<CopiedSpan>>)> {
    let OpsParams { level, search_step, lzma, run_coded, trace } = params;
    if old.is_empty() || old.len() >= i32::MAX as usize {
        return Ok((None, None));
    }
    // Where each span starts in `old` (window coordinates).
    let mut starts = Vec::with_capacity(spans.len());
    let mut at = 0u64;
    for &(_, len) in spans {
        starts.push(at);
        at += len;
    }
    let t = trace.start();
    let ops = match diagonal_ops(new, old, spans, &starts, block_matches, block) {
        Some(ops) => {
            // The suffix array's memory, taken and given back as its segments do, so that what
            // follows (streams, zstd) lands where it lands after one: a linear memory never
            // shrinks, and fast segments' buffers placed anywhere else left the next suffix
            // array no room (a 560 MiB game pack: 98.5 MB of wasm memory instead of 85.1 MB).
            drop(std::hint::black_box(Vec::<u8>::with_capacity(OldIndex::bytes_for(old.len()))));
            if let Some(t) = t {
                trace.line(&format!("  along the block matches' diagonals {:.2}s", t.elapsed().as_secs_f64()));
            }
            ops
        }
        None => {
            let index = OldIndex::new(old);
            if let Some(t) = t {
                trace.line(&format!("  suffix array of {} bytes {:.2}s", old.len(), t.elapsed().as_secs_f64()));
            }
            let ops = match_new_data(&index, new, MatchParams { search_step, ..MatchParams::default() }, &|_| {});
            if let Some(t) = t {
                trace.line(&format!("  matched {:.2}s", t.elapsed().as_secs_f64()));
            }
            ops
        }
    };
    if ops.iter().all(|op| op.copy_len == 0) {
        return Ok((None, None));
    }
    // Made now, while the suffix array's memory is free, and small: it outlives `ops`.
    let copied = copied_spans(&ops, spans);
    let (diff, extra) = split_streams(old, new, &ops);
    let mut remapped = Vec::with_capacity(ops.len() + spans.len());
    let (mut new_at, mut last_diagonal) = (0u64, 0i64);
    for op in &ops {
        let (mut w, mut left) = ((new_at as i64 + op.diagonal) as u64, op.copy_len);
        let mut piece_at = new_at;
        if left == 0 {
            remapped.push(Op { diagonal: last_diagonal, copy_len: 0, extra_len: op.extra_len });
        }
        while left > 0 {
            let k = starts.partition_point(|&s| s <= w) - 1;
            let (ref_start, len) = spans[k];
            let piece = left.min(starts[k] + len - w);
            let diagonal = (ref_start + (w - starts[k])) as i64 - piece_at as i64;
            left -= piece;
            remapped.push(Op { diagonal, copy_len: piece, extra_len: if left == 0 { op.extra_len } else { 0 } });
            last_diagonal = diagonal;
            w += piece;
            piece_at += piece;
        }
        new_at += op.copy_len + op.extra_len;
    }
    let ctrl = encode_control(&remapped);
    // `ops` was allocated above the suffix array: freed before the streams' zstd contexts are
    // allocated, so that they reuse the array's memory rather than grow the heap (wasm memory
    // never shrinks; holding `ops` longer cost 34 MB on freedoom2-wad).
    drop(ops);
    if ctrl.len() as u64 > MAX_SEGMENT_CTRL {
        return Ok((None, copied));
    }
    let t = trace.start();
    let encoded =
        encode_ops_streams(new.len() as u64, &ctrl, &diff, &extra, OpsForms { lzma, run_coded }, |data, stream| compress_capped(data, level, stream))?;
    let header = encoded.header;
    if let Some(t) = t {
        trace.line(&format!(
            "  ctrl {} -> {}, diff {} -> {}{}, extra {} -> {} ({:.2}s)",
            header.ctrl_raw,
            header.ctrl_comp,
            header.diff_raw,
            header.diff_comp,
            if header.diff_coded > 0 { " run-coded" } else { "" },
            header.extra_raw,
            header.extra_comp,
            t.elapsed().as_secs_f64()
        ));
    }
    Ok((Some(encoded), copied))
}

/// How `encode_ops_segment` searches and compresses: the zstd level, the matcher's search step
/// (`MatchParams::search_step`), whether the streams are tried as LZMA too (§2.3 `M`) and the
/// diff stream run-coded (the reader's capabilities), and where its timing lines go.
#[derive(Clone, Copy)]
pub(super) struct OpsParams<'a> {
    pub(super) level: i32,
    pub(super) search_step: usize,
    pub(super) lzma: bool,
    pub(super) run_coded: bool,
    pub(super) trace: &'a Trace,
}

/// The old bytes `ops` copy from, each padded by `TEXT_WINDOW_SPAN_PADDING` and merged, cut at
/// the planned spans' boundaries, ascending. None when the ops copy nothing or the pieces
/// would be more spans than a window segment may list (the planned spans are used whole then).
fn copied_spans(ops: &[Op], spans: &[(u64, u64)]) -> Option<Vec<CopiedSpan>> {
    let old_len: u64 = spans.iter().map(|s| s.1).sum();
    let mut sources: Vec<(u64, u64)> = Vec::new();
    let mut new_at = 0i64;
    for op in ops {
        if op.copy_len > 0 {
            let start = (new_at + op.diagonal) as u64;
            sources.push((start.saturating_sub(TEXT_WINDOW_SPAN_PADDING), (start + op.copy_len + TEXT_WINDOW_SPAN_PADDING).min(old_len)));
        }
        new_at += (op.copy_len + op.extra_len) as i64;
    }
    if sources.is_empty() {
        return None;
    }
    sources.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::with_capacity(sources.len());
    for (a, b) in sources {
        match merged.last_mut() {
            Some(m) if a <= m.1 => m.1 = m.1.max(b),
            _ => merged.push((a, b)),
        }
    }
    // Cut at the planned spans' boundaries (each planned span is one reference range).
    let mut out = Vec::with_capacity(merged.len());
    let (mut k, mut span_at) = (0usize, 0u64);
    for (mut a, b) in merged {
        while a < b {
            while span_at + spans[k].1 <= a {
                span_at += spans[k].1;
                k += 1;
            }
            let end = b.min(span_at + spans[k].1);
            out.push((a, spans[k].0 + (a - span_at), end - a));
            a = end;
        }
    }
    (out.len() as u64 <= MAX_WINDOW_SPANS).then_some(out)
}

/// One zstd frame of `data` (a stream of an ops segment), with the match finder's tables
/// capped as the window form's are, so a generation stays within an isolate's memory.
/// At levels 16-18 (17: the Worker's default) the extra stream (literal new bytes, compressed
/// with no reference) gets level 19's search (btultra2 where 17 is btopt; 3-byte matches as
/// before): where the stream is large, as in a Go module's or duckdb's data, that is 4.6% and
/// 2.8% of the patch for 18% and 6% more CPU; elsewhere the stream is small and so are the
/// gain and the cost (BENCHMARKS.md, "Generator: the extra stream at level 19"). The diff
/// stream keeps the level's parameters (a shallower search cost esbuild-wasm-adj 0.7% of its
/// patch for 0.1 s).
fn compress_capped(data: &[u8], level: i32, stream: OpsStream) -> Result<Vec<u8>> {
    if data.is_empty() {
        return Ok(Vec::new());
    }
    let level = match stream {
        OpsStream::Extra if (16..19).contains(&level) => 19,
        _ => level,
    };
    compress_frame(data, &[], capped(level))
}
