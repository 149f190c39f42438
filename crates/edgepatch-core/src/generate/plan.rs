//! Planning a segment: where its new bytes lie in the new build, and which old spans it is
//! compressed against (block matches, the old data between them, the aligned part of the
//! old file or module), as ranges of the old build to read.

use xxhash_rust::xxh3::xxh3_64;

use super::{invalid, ByteRange, FileForm, PatchGenerator, ALIGN_MARGIN, GAP_SLACK, MATCH_PADDING};
use crate::error::Result;
use crate::patch_format::MAX_WINDOW_BYTES;
use crate::signature::find_block_matches;
use crate::window_plan::{keep_densest, merge_weighted, AlignedPart, Overflow, WHOLE_FILES_BUDGET};

impl PatchGenerator {
    pub(super) fn segment_bounds(&self, i: u64) -> Result<(u64, u64)> {
        if i >= self.segment_count() {
            return Err(invalid(format!("segment {i} out of range (the patch has {})", self.segment_count())));
        }
        Ok((self.segment_start(i)?, self.segment_start(i + 1)?))
    }

    /// The part of a split module that holds all of `[a, b)` of the delta stream, if any
    /// (segments never straddle a part's ends).
    pub(super) fn aligned_part(&self, a: u64, b: u64) -> Option<AlignedPart> {
        self.aligned[..self.aligned.partition_point(|p| p.new.0 <= a)].last().filter(|p| b <= p.new.1).copied()
    }

    /// The delta files with bytes in `[a, b)` of the new stream: (index in `delta`, the file
    /// (path, start, size), its index in `wasm` if the patch stores it transformed).
    pub(super) fn delta_files_in(&self, a: u64, b: u64) -> impl Iterator<Item = (usize, &(String, u64, u64), Option<usize>)> {
        let first = self.delta.partition_point(|(_, start, size)| start + size <= a);
        self.delta[first..]
            .iter()
            .zip(&self.delta_transform[first..])
            .enumerate()
            .take_while(move |(_, ((_, start, _), _))| *start < b)
            .map(move |(k, (d, t))| (first + k, d, *t))
    }

    /// The new-build byte ranges whose concatenation is segment `i`'s new data.
    pub fn new_ranges(&self, i: u64) -> Result<Vec<ByteRange>> {
        let (a, b) = self.segment_bounds(i)?;
        Ok(self.ranges_of(a, b))
    }

    /// The new-build byte ranges whose concatenation is `[a, b)` of the delta stream.
    pub(super) fn ranges_of(&self, a: u64, b: u64) -> Vec<ByteRange> {
        self.delta_files_in(a, b)
            .map(|(_, (path, start, size), t)| {
                let (from, to) = (a.max(*start), b.min(start + size));
                let form = if t.is_some() { FileForm::Normalized } else { FileForm::AsIs };
                ByteRange { path: path.clone(), offset: from - start, len: to - from, form }
            })
            .collect()
    }

    /// Chooses the old spans (at most `MAX_WINDOW_BYTES`) segment `i` is
    /// compressed against; returns them as old-build byte ranges to read.
    pub fn plan_segment(&mut self, i: u64, new: &[u8]) -> Result<Vec<ByteRange>> {
        self.check_turn(i, new)?;
        let (seg_start, _) = self.segment_bounds(i)?;
        // (start, end, weight per byte x 1024) candidate spans of the reference stream.
        let mut candidates: Vec<(u64, u64, u64)> = Vec::new();
        let matches = self.block_matches(new);
        for &(_, o) in &matches {
            candidates.push((o.saturating_sub(MATCH_PADDING), o + self.block_size as u64 + MATCH_PADDING, 4));
        }
        for pair in matches.windows(2) {
            let ((n1, o1), (n2, o2)) = (pair[0], pair[1]);
            if o2 > o1 && o2 - o1 <= 2 * (n2 - n1) + GAP_SLACK {
                candidates.push((o1, o2 + self.block_size as u64, 2));
            }
        }
        // Position alignment within each changed file's old version, or within the old module's
        // same part for a part of a split module: a part of at most `WHOLE_FILES_BUDGET` is
        // taken whole, and is the whole window (as the in-memory diff's stream-aligned segments).
        let (a, b) = (seg_start, seg_start + new.len() as u64);
        let align = |(na, nb): (u64, u64), (old_start, old_end): (u64, u64)| {
            let scale = |x: u64| (x as u128 * (old_end - old_start) as u128 / (nb - na).max(1) as u128) as u64;
            let (oa, ob) = (old_start + scale(a.max(na) - na), old_start + scale(b.min(nb) - na));
            (oa.saturating_sub(ALIGN_MARGIN).max(old_start), (ob + ALIGN_MARGIN).min(old_end), 1)
        };
        let part = self.aligned_part(a, b).filter(|p| p.old.1 > p.old.0);
        let whole_part = part.filter(|p| p.old.1 - p.old.0 <= WHOLE_FILES_BUDGET);
        match (whole_part, part) {
            (Some(p), _) => candidates.push((p.old.0, p.old.1, 8)),
            (None, Some(p)) => candidates.push(align(p.new, p.old)),
            (None, None) => {
                for (k, (_, start, size), _) in self.delta_files_in(a, b) {
                    if let Some((old_start, old_size)) = self.counterpart[k] {
                        candidates.push(align((*start, start + size), (old_start, old_start + old_size)));
                    }
                }
            }
        }
        let spans = choose_spans(candidates.clone(), self.reference_len, self.old_budget);
        let mut window = if self.old_budget > MAX_WINDOW_BYTES { choose_spans(candidates, self.reference_len, MAX_WINDOW_BYTES) } else { spans.clone() };
        if let Some(p) = whole_part {
            // The part is the densest candidate and within the budget, so a planned span holds it.
            if spans.iter().any(|&(s, len)| s <= p.old.0 && p.old.1 <= s + len) {
                window = vec![(p.old.0, p.old.1 - p.old.0)];
            }
        }
        // The window's spans are cut from the planned ones (`narrow_to_window`): a smaller budget
        // keeps a prefix of what a larger one keeps, its last span cut shorter (`Overflow::Cut`;
        // test `a_window_is_within_the_planned_spans`), and the whole part is the window only
        // when a planned span holds it.
        debug_assert!(window.iter().all(|&(ws, wl)| spans.iter().any(|&(s, len)| s <= ws && ws + wl <= s + len)));
        let ranges = self.reference_ranges(&spans);
        self.planned = Some((i, spans, window, matches));
        Ok(ranges)
    }

    /// (position in `new`, position in the reference stream) of old blocks found
    /// in `new` by the rolling weak hash and confirmed by the strong hash.
    fn block_matches(&self, new: &[u8]) -> Vec<(u64, u64)> {
        if self.blocks.is_empty() {
            return Vec::new();
        }
        find_block_matches(new, self.block_size, |weak, window| {
            let candidates = self.blocks.get(&weak)?;
            let strong = xxh3_64(window);
            candidates.iter().find(|(s, _)| *s == strong).map(|(_, at)| *at)
        })
    }

    /// Reference-stream spans as ranges of old files.
    fn reference_ranges(&self, spans: &[(u64, u64)]) -> Vec<ByteRange> {
        let mut out = Vec::new();
        for &(start, len) in spans {
            let mut at = start;
            while at < start + len {
                let k = self.reference.partition_point(|(_, s, _)| *s <= at) - 1;
                let (path, s, size) = &self.reference[k];
                let n = (start + len).min(s + size) - at;
                let form = if self.reference_split[k] { FileForm::OldSplit } else { FileForm::AsIs };
                out.push(ByteRange { path: path.clone(), offset: at - s, len: n, form });
                at += n;
            }
        }
        out
    }
}

/// Merges candidate spans (start, end, weight per byte; weights add where they overlap),
/// keeps the densest within `budget` bytes (cutting the last one that does not fit), and
/// returns them as ascending, disjoint (start, len).
fn choose_spans(mut candidates: Vec<(u64, u64, u64)>, reference_len: u64, budget: u64) -> Vec<(u64, u64)> {
    candidates.retain_mut(|c| {
        c.1 = c.1.min(reference_len);
        if c.0 >= c.1 {
            return false;
        }
        c.2 *= c.1 - c.0;
        true
    });
    let mut kept = keep_densest(merge_weighted(candidates), budget, &mut 0, Overflow::Cut);
    kept.sort_unstable();
    kept.into_iter().map(|(s, e)| (s, e - s)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_is_within_the_planned_spans() {
        // Random candidates (start, end, weight) over 64 MiB; the window's budget (16 MiB, as
        // MAX_WINDOW_BYTES) and several plan budgets at and above it.
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |m: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % m
        };
        for round in 0..200 {
            let candidates: Vec<(u64, u64, u64)> = (0..1 + next(60))
                .map(|_| {
                    let start = next(64 << 20);
                    (start, start + 1 + next(8 << 20), 1 + next(8))
                })
                .collect();
            let window = choose_spans(candidates.clone(), 64 << 20, 16 << 20);
            for budget in [16 << 20, 17 << 20, 32 << 20, 96 << 20] {
                let spans = choose_spans(candidates.clone(), 64 << 20, budget);
                for &(ws, wl) in &window {
                    assert!(
                        spans.iter().any(|&(s, len)| s <= ws && ws + wl <= s + len),
                        "round {round}, budget {budget}: window span ({ws}, {wl}) outside {spans:?}"
                    );
                }
            }
        }
    }
}
