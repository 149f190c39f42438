//! A segment's window form: the old spans (or the pieces the copies read) and the recent new
//! data as one zstd frame's prefix, and the zstd searches each kind of segment gets.

use super::{CopiedSpan, Spans, WINDOW_FORM_MAX_LEVEL};
use crate::patch_format::MAX_WINDOW_BYTES;
use crate::zstd_frame::{FrameSearch, LongDistance};

/// Text segments (see `is_text_segment`) get a costlier window form, `text_window`:
/// zstd's optimal parser, which is what beats the ops form's many short copies on text, with
/// long-distance matching to reach the old spans that its small tables do not. Measured on
/// three-tree (BENCHMARKS.md, "Generator: trees"): 273,654 -> 235,837 bytes for ~3 s more CPU
/// natively; the same search on the control-heavy *binary* segments of freedoom2-wad and
/// concat-101mib saves 1.4-1.9% for up to +45% CPU, so binary segments keep the lazy window.
const TEXT_WINDOW_MAX_LEVEL: i32 = 16;
const TEXT_WINDOW_HASH_LOG: u32 = 21;
/// The optimal parser's binary tree covers the last 2^(this - 1) bytes (128 KiB): the recent
/// text; what is further back is reached by the hash table and long-distance matching.
const TEXT_WINDOW_CHAIN_LOG: u32 = 18;
const TEXT_WINDOW_LDM_MIN_MATCH: u32 = 32;
/// `deep_text_window`'s level and binary tree (2^23 bytes back).
const DEEP_TEXT_WINDOW_MAX_LEVEL: i32 = 19;
const DEEP_TEXT_WINDOW_CHAIN_LOG: u32 = 24;
/// One position in 2^this enters the long-distance table (zstd's default at these window
/// sizes is 1 in 2^7; 2^4 finds ~1% more for no measurable CPU).
const TEXT_WINDOW_LDM_HASH_RATE_LOG: u32 = 4;
/// zstd's match-finder tables are capped so that one context stays well under
/// 64 MiB at any level (measured: BENCHMARKS.md, "Generator").
const MAX_HASH_LOG: u32 = 22;
const MAX_CHAIN_LOG: u32 = 22;

/// The planned spans, their bytes and the ops' copied pieces cut down to a window's:
/// `window` (a subset of `spans` from `plan_segment`, at most `MAX_WINDOW_BYTES`), or for a
/// `text` window the copied pieces if they fit in that budget. As given when the plan is the
/// window's.
pub(super) fn narrow_to_window(
    spans: Vec<(u64, u64)>,
    old: Vec<u8>,
    copied: Option<Vec<CopiedSpan>>,
    window: &[(u64, u64)],
    text: bool,
) -> (Spans, Vec<u8>, Option<Vec<CopiedSpan>>) {
    if spans == window {
        return (spans, old, copied);
    }
    // Where each planned span starts in `old`.
    let mut starts = Vec::with_capacity(spans.len());
    let mut at = 0u64;
    for &(_, len) in &spans {
        starts.push(at);
        at += len;
    }
    let offset_of = |reference_at: u64| -> u64 {
        let k = spans.partition_point(|s| s.0 <= reference_at) - 1;
        starts[k] + (reference_at - spans[k].0)
    };
    let copied = copied.filter(|c| text && c.iter().map(|p| p.2).sum::<u64>() <= MAX_WINDOW_BYTES);
    if let Some(copied) = copied {
        // Only the pieces are read from `old`: renumber them into a window of their own.
        let mut bytes = Vec::with_capacity(copied.iter().map(|p| p.2 as usize).sum());
        let mut pieces = Vec::with_capacity(copied.len());
        for &(at, start, len) in &copied {
            pieces.push((bytes.len() as u64, start, len));
            bytes.extend_from_slice(&old[at as usize..(at + len) as usize]);
        }
        let spans = pieces.iter().map(|p| (p.1, p.2)).collect();
        return (spans, bytes, Some(pieces));
    }
    let mut bytes = Vec::with_capacity(window.iter().map(|w| w.1 as usize).sum());
    for &(start, len) in window {
        let at = offset_of(start) as usize;
        bytes.extend_from_slice(&old[at..at + len as usize]);
    }
    (window.to_vec(), bytes, None)
}

/// A window form's spans and window bytes (`far`, the spans' old bytes, then `near`: §2.6):
/// all of the planned spans and their bytes `old`, or, given `copied`, only those pieces of them.
pub(super) fn window_of(spans: Vec<(u64, u64)>, old: Vec<u8>, copied: Option<Vec<CopiedSpan>>, far: &[u8], near: &[u8]) -> (Vec<(u64, u64)>, Vec<u8>) {
    match copied {
        Some(copied) => {
            let mut window = Vec::with_capacity(far.len() + copied.iter().map(|c| c.2 as usize).sum::<usize>() + near.len());
            window.extend_from_slice(far);
            for &(at, _, len) in &copied {
                window.extend_from_slice(&old[at as usize..(at + len) as usize]);
            }
            drop(old);
            window.extend_from_slice(near);
            (copied.iter().map(|&(_, start, len)| (start, len)).collect(), window)
        }
        None if far.is_empty() => {
            let mut window = old;
            window.extend_from_slice(near);
            (spans, window)
        }
        None => {
            let mut window = Vec::with_capacity(far.len() + old.len() + near.len());
            window.extend_from_slice(far);
            window.extend_from_slice(&old);
            drop(old);
            window.extend_from_slice(near);
            (spans, window)
        }
    }
}

/// The level's search with zstd's tables capped (a 12-16 MiB prefix would otherwise want
/// 64+ MiB of them).
pub(super) fn capped(level: i32) -> FrameSearch {
    FrameSearch { hash_log: Some(MAX_HASH_LOG), chain_log: Some(MAX_CHAIN_LOG), ..FrameSearch::level(level) }
}

/// Binary segments' window form: the ops form found the copies, the window only mops up
/// (lazy2 at 12).
pub(super) fn lazy_window(level: i32) -> FrameSearch {
    capped(level.min(WINDOW_FORM_MAX_LEVEL))
}

/// The window form of a segment holding transformed wasm code: the patch's level (btultra2 at 19,
/// as the in-memory diff) within the lazy window's table caps, so its tables take no more
/// memory than the lazy window's (freed before it). Measured on resvg's segment: 454,184
/// bytes; with each table a quarter of that, and long-distance matching to reach the old
/// module's streams, 464,404.
pub(super) fn wasm_code_window(level: i32) -> FrameSearch {
    capped(level.min(DEEP_TEXT_WINDOW_MAX_LEVEL))
}

/// `set_deep_text_windows`' text window form: the in-memory diff's level (btultra2 at 19) with
/// the binary tree over 2^(DEEP_TEXT_WINDOW_CHAIN_LOG - 1) bytes (tree and tables ~100 MB),
/// long-distance matching as `text_window`. Measured on three-tree: chain logs 22, 23, 24 gave
/// 220,910, 216,002, 211,201 bytes for the same CPU (the tree's size is not its cost).
pub(super) fn deep_text_window(level: i32) -> FrameSearch {
    let level = level.min(DEEP_TEXT_WINDOW_MAX_LEVEL);
    FrameSearch { level, hash_log: Some(MAX_HASH_LOG), chain_log: Some(DEEP_TEXT_WINDOW_CHAIN_LOG), ..text_window(level) }
}

/// Text segments' window form: the optimal parser (btopt at 16) over recent text,
/// long-distance matching into the old spans.
pub(super) fn text_window(level: i32) -> FrameSearch {
    FrameSearch {
        hash_log: Some(TEXT_WINDOW_HASH_LOG),
        chain_log: Some(TEXT_WINDOW_CHAIN_LOG),
        long_distance: Some(LongDistance { min_match: Some(TEXT_WINDOW_LDM_MIN_MATCH), hash_rate_log: Some(TEXT_WINDOW_LDM_HASH_RATE_LOG) }),
        ..FrameSearch::level(level.min(TEXT_WINDOW_MAX_LEVEL))
    }
}
