//! Copy operations along the block matches' diagonals: a segment the block matches almost
//! cover is matched without the suffix array.

use crate::matcher::Op;

/// A segment whose block matches leave at most 1/`DIAGONAL_MAX_UNCOVERED` of it uncovered is
/// matched along their diagonals instead of by the suffix-array search, if that leaves at most
/// 1/`DIAGONAL_MAX_LITERAL` of it literal (256 bytes of a 4 MiB segment).
const DIAGONAL_MAX_UNCOVERED: u64 = 8;
const DIAGONAL_MAX_LITERAL: u64 = 16 << 10;

/// Copy operations along the block matches' diagonals, for a segment the block matches almost
/// cover (a large file with scattered edits: a game's data pack, most segments of a big build).
/// The suffix array over the planned old spans costs most of such a segment's CPU and finds
/// the same copies: the matched blocks lie on a few diagonals, and what lies between them is
/// taken as bsdiff takes it, each side's copy extended over the gap while its bytes agree more
/// often than not (the difference bytes carry the rest), the remainder literal. `starts[k]` is
/// where span `k` begins in `old`; `matches` are (position in `new`, position in the reference
/// stream) of whole `block`-byte old blocks. None where the matches cover less or leave more
/// literal.
pub(super) fn diagonal_ops(new: &[u8], old: &[u8], spans: &[(u64, u64)], starts: &[u64], matches: &[(u64, u64)], block: u64) -> Option<Vec<Op>> {
    let len = new.len() as u64;
    // (start, end, diagonal) in `new`, contiguous blocks of one diagonal joined.
    let mut runs: Vec<(u64, u64, i64)> = Vec::new();
    for &(n, o) in matches {
        let k = spans.partition_point(|s| s.0 <= o).checked_sub(1)?;
        let (span_start, span_len) = spans[k];
        if o + block > span_start + span_len || n + block > len {
            continue; // a block the plan cut off (over the budget): not in `old`
        }
        let diagonal = (starts[k] + o - span_start) as i64 - n as i64;
        match runs.last_mut() {
            Some(r) if r.1 == n && r.2 == diagonal => r.1 = n + block,
            Some(r) if r.1 > n => return None, // overlapping matches: never made by find_block_matches
            _ => runs.push((n, n + block, diagonal)),
        }
    }
    let covered: u64 = runs.iter().map(|r| r.1 - r.0).sum();
    if runs.is_empty() || covered < len - len / DIAGONAL_MAX_UNCOVERED {
        return None;
    }
    // Whether new[at] equals the old byte `diagonal` away (false outside `old`).
    let agrees = |at: u64, diagonal: i64| usize::try_from(at as i64 + diagonal).ok().and_then(|o| old.get(o)).is_some_and(|&b| b == new[at as usize]);
    // The bytes after `from` (before it, going back) a copy on `diagonal` takes over a gap of
    // `gap` bytes, with its running agreement count per length: the longest best score of
    // 2 x agreeing - length, as bsdiff extends.
    let extend = |from: u64, gap: u64, diagonal: i64, back: bool| -> (u64, Vec<u32>) {
        let (mut agreeing, mut best, mut best_len) = (0i64, 0i64, 0u64);
        let mut prefix = Vec::with_capacity(gap as usize + 1);
        prefix.push(0u32);
        for t in 0..gap {
            let at = if back { from - 1 - t } else { from + t };
            agreeing += agrees(at, diagonal) as i64;
            prefix.push(agreeing as u32);
            if 2 * agreeing - (t as i64 + 1) > best {
                (best, best_len) = (2 * agreeing - (t as i64 + 1), t + 1);
            }
        }
        (best_len, prefix)
    };
    let mut ops = Vec::with_capacity(runs.len() + 1);
    // Before the first run: its copy extended back, the rest literal.
    let (first_start, _, first_diagonal) = runs[0];
    let (back, _) = extend(first_start, first_start, first_diagonal, true);
    if back < first_start {
        ops.push(Op { diagonal: first_diagonal, copy_len: 0, extra_len: first_start - back });
    }
    let mut copy_start = first_start - back;
    for (k, &(_, end, diagonal)) in runs.iter().enumerate() {
        let next = runs.get(k + 1).copied();
        let gap_end = next.map_or(len, |r| r.0);
        let gap = gap_end - end;
        let (mut forward, forward_prefix) = extend(end, gap, diagonal, false);
        let mut backward = 0;
        if let Some((next_start, _, next_diagonal)) = next {
            let (b, backward_prefix) = extend(next_start, gap, next_diagonal, true);
            backward = b;
            if forward + backward > gap {
                // Both copies want the middle: split where together they agree most.
                let (lo, hi) = (gap - backward, forward);
                let agreeing_at = |split: u64| forward_prefix[split as usize] + backward_prefix[(gap - split) as usize];
                let split = (lo..=hi).max_by_key(|&split| (agreeing_at(split), std::cmp::Reverse(split))).unwrap_or(lo);
                (forward, backward) = (split, gap - split);
            }
        }
        let op = Op { diagonal, copy_len: end + forward - copy_start, extra_len: gap - forward - backward };
        match ops.last_mut() {
            // One copy across a gap its diagonal explains (an edit: difference bytes).
            Some(last) if last.extra_len == 0 && last.diagonal == diagonal => (last.copy_len, last.extra_len) = (last.copy_len + op.copy_len, op.extra_len),
            _ => ops.push(op),
        }
        copy_start = gap_end - backward;
    }
    // Literal bytes left where the suffix array may find copies on other diagonals (a header
    // whose edit moved what follows it, text): its search is worth its cost there.
    let literal: u64 = ops.iter().map(|op| op.extra_len).sum();
    (literal <= len / DIAGONAL_MAX_LITERAL).then_some(ops)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use xxhash_rust::xxh3::xxh3_64;

    use super::*;
    use crate::matcher::{rebuild, split_streams};
    use crate::signature::find_block_matches;

    fn noise(mut x: u64, n: usize) -> Vec<u8> {
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    /// `diagonal_ops` of `new` against `old` laid at reference position 1000 (one span), with
    /// the block matches a generator's plan finds (4 KiB blocks).
    fn along_diagonals(old: &[u8], new: &[u8]) -> Option<Vec<Op>> {
        const BLOCK: usize = 4096;
        let blocks: HashMap<u64, u64> = old.chunks_exact(BLOCK).enumerate().map(|(k, b)| (xxh3_64(b), (k * BLOCK) as u64 + 1000)).collect();
        let matches = find_block_matches(new, BLOCK, |_, window| blocks.get(&xxh3_64(window)).copied());
        diagonal_ops(new, old, &[(1000, old.len() as u64)], &[0], &matches, BLOCK as u64)
    }

    #[test]
    fn scattered_edits_and_a_short_insertion_are_matched_along_the_diagonals() {
        let old = noise(1, 1 << 20);
        let mut new = old.clone();
        for k in 0..20 {
            new[k * 50_000 + 777] ^= 0x5a;
        }
        new.splice(600_000..600_000, noise(2, 40));
        let ops = along_diagonals(&old, &new).expect("block matches cover the segment");
        let (diff, extra) = split_streams(&old, &new, &ops);
        assert_eq!(rebuild(&old, &ops, &diff, &extra), new);
        // The inserted bytes are literal (give or take a byte that happens to agree), the edits
        // are difference bytes on the copies, nothing else differs.
        assert!((36..=40).contains(&extra.len()), "{} literal bytes", extra.len());
        assert_eq!(diff.iter().filter(|&&d| d != 0).count(), 20);
        assert_eq!(ops.len(), 2, "two diagonals: {ops:?}");
    }

    /// Any block matches (true ones among made-up ones that do not match, overlap or fall
    /// outside the spans, as a hostile signature could name), any spans: never a panic, and
    /// whatever ops come back rebuild the new bytes exactly.
    #[test]
    fn any_matches_give_ops_that_rebuild_or_none() {
        const BLOCK: usize = 512;
        let mut taken = 0;
        for case in 0..300u64 {
            let mut r = noise(case + 11, 64);
            let mut next = |n: u64| -> u64 {
                r.rotate_left(7);
                let x = u64::from_le_bytes(r[..8].try_into().unwrap()) ^ (case << 32);
                r[..8].copy_from_slice(&x.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_le_bytes());
                x.wrapping_mul(0x2545_F491_4F6C_DD1D) % n.max(1)
            };
            let old: Vec<u8> = noise(case, 16 << 10 | next(8 << 10) as usize).iter().map(|b| b % (4 + case % 200) as u8).collect();
            let mut new = old.clone();
            for _ in 0..next(6) {
                let at = next(new.len() as u64) as usize;
                match next(3) {
                    0 => new[at] ^= 1 + next(255) as u8,
                    1 => drop(new.splice(at..at, noise(case + 99, next(300) as usize + 1))),
                    _ => drop(new.drain(at..(at + next(300) as usize).min(new.len()))),
                }
            }
            // Two spans of the old data laid apart in the reference stream.
            let cut = next(old.len() as u64);
            let spans = [(100, cut), (200_000, old.len() as u64 - cut)];
            let starts = [0, cut];
            let to_reference = |w: u64| if w < cut { 100 + w } else { 200_000 + w - cut };
            let blocks: HashMap<u64, u64> = old.chunks_exact(BLOCK).enumerate().map(|(k, b)| (xxh3_64(b), to_reference((k * BLOCK) as u64))).collect();
            let mut matches = find_block_matches(&new, BLOCK, |_, window| blocks.get(&xxh3_64(window)).copied());
            for _ in 0..next(3) {
                matches.push((next(new.len() as u64), next(300_000)));
            }
            if next(2) == 0 {
                matches.sort_unstable();
            }
            if let Some(ops) = diagonal_ops(&new, &old, &spans, &starts, &matches, BLOCK as u64) {
                let (diff, extra) = split_streams(&old, &new, &ops);
                assert_eq!(rebuild(&old, &ops, &diff, &extra), new, "case {case}");
                taken += 1;
            }
        }
        assert!(taken > 30, "the path was taken in {taken} of 300 cases");
    }

    #[test]
    fn what_block_matches_leave_unexplained_goes_to_the_suffix_array() {
        let old = noise(3, 1 << 20);
        // An edit near the start moves what follows it: the bytes before the first matched
        // block lie on another diagonal, which only the suffix array would find.
        let mut moved = old.clone();
        moved.splice(100..100, noise(4, 7));
        assert!(along_diagonals(&old, &moved).is_none());
        // 160 KiB of new data: more than 1/8 of the segment uncovered.
        let mut fresh = old.clone();
        fresh.splice(500_000..500_000, noise(5, 160 << 10));
        assert!(along_diagonals(&old, &fresh).is_none());
        // The same bytes: one copy.
        assert_eq!(along_diagonals(&old, &old).unwrap(), vec![Op { diagonal: 0, copy_len: old.len() as u64, extra_len: 0 }]);
    }
}
