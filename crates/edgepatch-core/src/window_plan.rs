//! How window segments choose their old spans, shared by the in-memory diff and the
//! bounded-memory generator: which segments are text, the parts of a module's field-split layout
//! diffed against the old module's same part, and the one span budget (densest spans first).

use std::borrow::Cow;

use crate::patch_format::MAX_WINDOW_BYTES;
use crate::wasm_transform::LayoutPart;

/// A segment is text when at least this share (percent) of its new bytes are printable ASCII,
/// tab, CR or LF.
const TEXT_MIN_PRINTABLE_PERCENT: u64 = 90;

/// Whether `new` is text: at least `TEXT_MIN_PRINTABLE_PERCENT` of its bytes printable ASCII,
/// tab, CR or LF.
pub(crate) fn is_text_segment(new: &[u8]) -> bool {
    let printable = new.iter().filter(|&&b| matches!(b, b'\t' | b'\n' | b'\r' | 0x20..=0x7e)).count() as u64;
    !new.is_empty() && printable * 100 >= new.len() as u64 * TEXT_MIN_PRINTABLE_PERCENT
}

/// A part of the delta stream diffed against one part of the reference only: a field stream or
/// a section of a module in the field-split layout, and the old module's same part
/// ([`stream_parts`]). Its segments' windows take that old part whole and reach back only
/// within the part: each field has statistics of its own, and its old stream is where its
/// matches are (wasm-vips: 242,459 bytes against 257,875 for the module's segments cut every 4
/// MiB; BENCHMARKS.md, "wasm transform: stream-aligned segments").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AlignedPart {
    /// (start, end) in the new module, or in the delta stream.
    pub(crate) new: (u64, u64),
    /// (start, end) in the old module split, or in the reference stream.
    pub(crate) old: (u64, u64),
}

/// Old spans (start, end, weight) of the reference stream with overlapping or touching ones
/// joined and their weights summed; ascending.
pub(crate) fn merge_weighted(mut spans: Vec<(u64, u64, u64)>) -> Vec<(u64, u64, u64)> {
    spans.sort_unstable();
    let mut merged: Vec<(u64, u64, u64)> = Vec::with_capacity(spans.len());
    for s in spans {
        match merged.last_mut() {
            Some(m) if s.0 <= m.1 => {
                m.1 = m.1.max(s.1);
                m.2 += s.2;
            }
            _ => merged.push(s),
        }
    }
    merged
}

/// What [`keep_densest`] does with a span that does not fit in what is left of the budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Overflow {
    /// Keep its first bytes, as many as are left, and stop (the generator's plan).
    Cut,
    /// Pass over it; a smaller, less dense one may still fit (the in-memory diff's window).
    Skip,
}

/// The one span budget of the diff and the generator: of `spans` (start, end, weight; each
/// non-empty, none overlapping), the densest (weight per byte) first, in the given order among
/// equals, while they fit in `budget` bytes, `*used` of which are already taken (it grows by what
/// is kept). Returns the kept spans as (start, end), in the order kept.
pub(crate) fn keep_densest(mut spans: Vec<(u64, u64, u64)>, budget: u64, used: &mut u64, overflow: Overflow) -> Vec<(u64, u64)> {
    spans.sort_by_key(|m| std::cmp::Reverse(m.2 * 1024 / (m.1 - m.0).max(1)));
    let mut kept = Vec::new();
    for (s, e, _) in spans {
        let left = budget.saturating_sub(*used);
        match overflow {
            Overflow::Cut if left == 0 => break,
            Overflow::Cut => {
                let len = (e - s).min(left);
                kept.push((s, s + len));
                *used += len;
            }
            Overflow::Skip if e - s <= left => {
                kept.push((s, e));
                *used += e - s;
            }
            Overflow::Skip => {}
        }
    }
    kept
}

/// The part of a window's `MAX_WINDOW_BYTES` that whole old files (or an aligned part's old
/// part) may take; the rest is for the spans the ops copy from.
pub(crate) const WHOLE_FILES_BUDGET: u64 = MAX_WINDOW_BYTES / 4 * 3;

/// A split module's parts shorter than this join the next (the last joins the one before):
/// a segment of a few bytes costs its headers and three frames that learned nothing.
const MIN_STREAM_SEGMENT: u64 = 4 << 10;

/// A split module's parts, each with its old module's same part (`new_parts`, `old_parts`:
/// [`layout_parts`] of each module; a part cuts where both modules have it, in order), short
/// ones joined to the next (the first takes the module's header, the last what follows).
///
/// [`layout_parts`]: crate::wasm_transform::layout_parts
pub(crate) fn stream_parts(new_len: u64, new_parts: &[(LayoutPart, u64)], old_len: u64, old_parts: &[(LayoutPart, u64)]) -> Vec<AlignedPart> {
    // The places both have, in order (each new one found after the last found).
    let mut cuts: Vec<(u64, u64)> = Vec::new();
    let mut from = 0;
    for (part, at) in new_parts {
        if let Some(i) = old_parts[from..].iter().position(|(p, _)| p == part) {
            cuts.push((*at, old_parts[from + i].1));
            from += i + 1;
        }
    }
    cuts.push((new_len, old_len));
    let short = |p: &AlignedPart| p.new.1 - p.new.0 < MIN_STREAM_SEGMENT;
    let mut parts: Vec<AlignedPart> = Vec::new();
    let mut start = (0, 0);
    for (ne, oe) in cuts {
        if ne <= start.0 || oe < start.1 {
            continue;
        }
        match parts.last_mut() {
            Some(p) if short(p) => {
                p.new.1 = ne;
                p.old.1 = oe;
            }
            _ => parts.push(AlignedPart { new: (start.0, ne), old: (start.1, oe) }),
        }
        start = (ne, oe);
    }
    if parts.len() >= 2 && parts.last().is_some_and(short) {
        let last = parts.pop().expect("two parts");
        let p = parts.last_mut().expect("one part");
        p.new.1 = last.new.1;
        p.old.1 = last.old.1;
    }
    parts
}

/// `old` in the field-split layout of `split` (a module in that layout and its side info),
/// and the parts of both paired as the patch's segments are cut ([`stream_parts`]). An owned
/// `old` is split in place (the generator's, for a Worker's heap); a borrowed one into a
/// buffer of its own.
pub(crate) fn split_old_paired(
    old: Cow<[u8]>,
    split: &[u8],
    side_info: &[u8],
) -> std::result::Result<(Vec<u8>, Vec<AlignedPart>), crate::wasm_transform::TransformError> {
    let old_len = old.len() as u64;
    let (old_split, old_parts) = match old {
        Cow::Owned(mut old) => {
            let parts = crate::wasm_transform::split_code_layout_in_place(&mut old, side_info)?;
            (old, parts)
        }
        Cow::Borrowed(old) => crate::wasm_transform::split_code_layout_parts(old, side_info)?,
    };
    let new_parts = crate::wasm_transform::layout_parts(split, side_info)?;
    Ok((old_split, stream_parts(split.len() as u64, &new_parts, old_len, &old_parts)))
}

/// What the diff chose for one wasm file whose transform it tried.
pub(crate) struct WasmChoice {
    /// The normalized form and its side info, if they are the smaller.
    pub(crate) transformed: Option<(Vec<u8>, Vec<u8>)>,
    /// The old module in the field-split layout, when the chosen form is in it
    /// (the reference then holds these bytes for the old file), and the parts of both
    /// modules that are diffed against each other.
    pub(crate) old_split: Option<(Vec<u8>, Vec<AlignedPart>)>,
    /// The segments of the chosen form diffed against the old file alone.
    pub(crate) segments: Vec<Vec<u8>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_parts_pair_what_both_modules_have_and_join_short_ones() {
        use LayoutPart::{AfterCode, Section, Stream};
        let k = MIN_STREAM_SEGMENT;
        // New: a type section, the code (two streams), a custom section "a".
        let new = [
            (Section(1, vec![]), 8),
            (Section(10, vec![]), 10 * k),
            (Stream(0), 10 * k + 3),
            (Stream(1), 20 * k),
            (AfterCode, 30 * k),
            (Section(0, b"a".to_vec()), 30 * k),
        ];
        // Old: an import section the new one lacks, no custom section.
        let old = [
            (Section(1, vec![]), 8),
            (Section(2, vec![]), 5 * k),
            (Section(10, vec![]), 9 * k),
            (Stream(0), 9 * k + 3),
            (Stream(1), 15 * k),
            (AfterCode, 25 * k),
        ];
        let parts = stream_parts(31 * k, &new, 26 * k, &old);
        let spans: Vec<_> = parts.iter().map(|p| (p.new, p.old)).collect();
        assert_eq!(
            spans,
            vec![
                // The header (8 bytes) joins the types; the code section's 3-byte start joins stream 0.
                ((0, 10 * k), (0, 9 * k)),
                ((10 * k, 20 * k), (9 * k, 15 * k)),
                ((20 * k, 30 * k), (15 * k, 25 * k)),
                // The custom section is the new module's only: what follows the code pairs with the old's rest.
                ((30 * k, 31 * k), (25 * k, 26 * k)),
            ]
        );
        // A short last part joins the one before.
        let parts = stream_parts(30 * k + 5, &new[..5], 25 * k, &old);
        assert_eq!(parts.last().map(|p| (p.new, p.old)), Some(((20 * k, 30 * k + 5), (15 * k, 25 * k))));
    }
}
