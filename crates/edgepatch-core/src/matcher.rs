//! Byte-granular matching of new data against old data, in the manner of bsdiff:
//! a suffix array of the old data finds the longest exact match at a position, and
//! matches are extended forwards and backwards into *approximate* matches whose
//! bytewise difference is mostly zero. Compiled code that shifted addresses turns
//! into long approximate matches with sparse, repetitive differences, which zstd
//! then compresses far better than literal bytes.

/// Longest run compared during one suffix-array search; longer matches are
/// found again in steps, which keeps a search cheap on repetitive data.
const MAX_SEARCH_LEN: usize = 1 << 16;
/// Matches at least this long look for the candidate nearest the expected position...
const MIN_NEAREST_LEN: usize = 12;
/// ...among at most this many neighbours on each side in the suffix array.
const NEAREST_CANDIDATES: usize = 24;
/// How much shorter than the longest a nearer match may be.
const NEAREST_SLACK: usize = 16;
/// A match on a recently used diagonal wins over a longer one by up to this much.
const REPEAT_BONUS: usize = 4;
/// Length of the byte strings whose presence in the old data `OldIndex` records
/// (hashed into a bit set), so the matcher can pass over new bytes that start no
/// match this long without a suffix-array search.
const GRAM: usize = 8;
/// The bit set has this many bits per old byte (rounded to a power of two), at
/// most `1 << MAX_GRAM_BITS_LOG`: with every 8-byte string distinct, about 1 in 5
/// absent strings still finds its bit set (and is searched as before).
const GRAM_BITS_PER_BYTE: usize = 4;
const MAX_GRAM_BITS_LOG: u32 = 28;

/// Rough compressed cost of a seek of `distance` bytes: near seeks repeat and
/// compress to almost nothing, far ones cost about their bit length.
fn seek_cost_bits(distance: usize) -> u32 {
    if distance < 64 {
        0
    } else {
        usize::BITS - distance.leading_zeros()
    }
}

/// One step of the delta program: the control stream's unit, defined by the format.
pub use edgepatch_format::patch_format::Op;

/// The suffix array of `old` (< 2 GiB). Natively libsais builds it: 7.5 s
/// against divsufsort's 14.8 s for the 101 MiB pair's old file (same array,
/// one thread; libsais's OpenMP build took 39 s on two loaded cores). In wasm,
/// and should libsais refuse, divsufsort: libsais compiled for wasm32 (commit
/// 2a48726) was within 10% of divsufsort there, either way by input (8 MiB of
/// three corpus files in V8): its lead natively comes from memory prefetches,
/// which wasm lacks.
fn suffix_array(old: &[u8]) -> Vec<i32> {
    let mut sa = vec![0i32; old.len()];
    if old.is_empty() {
        return sa;
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        // SAFETY: `old` and `sa` are valid for `old.len()` elements each, which
        // is below i32::MAX (asserted by the caller); fs = 0 asks for no extra
        // space after `sa`, and a null frequency table is allowed.
        let rc = unsafe { libsais_sys::libsais::libsais(old.as_ptr(), sa.as_mut_ptr(), old.len() as i32, 0, std::ptr::null_mut()) };
        if rc == 0 {
            return sa;
        }
    }
    divsufsort::sort_in_place(old, &mut sa);
    sa
}

/// A suffix array over the old data (the reference stream), with a 2-byte prefix
/// table, for longest-match searches.
pub struct OldIndex<'a> {
    old: &'a [u8],
    sa: Vec<i32>,
    /// Start in `sa` of the suffixes beginning with each 2-byte prefix (65537
    /// entries), so a search starts in a range ~65536 times smaller.
    buckets: Vec<u32>,
    /// One bit per hash of an 8-byte string (`GRAM`) occurring in `old`: a clear
    /// bit proves the string absent, so no match there reaches 8 bytes.
    grams: Vec<u64>,
    /// Right shift turning a 64-bit hash into a bit index of `grams`.
    gram_shift: u32,
}

/// Multiplicative hash of 8 bytes; the top bits are used.
fn gram_hash(bytes: &[u8]) -> u64 {
    u64::from_le_bytes(bytes[..GRAM].try_into().unwrap()).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

impl<'a> OldIndex<'a> {
    /// Bytes the index of `old_len` old bytes allocates (the suffix array, the prefix table,
    /// the presence bits).
    pub fn bytes_for(old_len: usize) -> usize {
        let bits_log = (old_len * GRAM_BITS_PER_BYTE).max(64).next_power_of_two().trailing_zeros().min(MAX_GRAM_BITS_LOG);
        4 * old_len + 4 * 65537 + (1 << (bits_log - 3))
    }

    /// Builds the index; needs 4 bytes per old byte. Old data must be < 2 GiB.
    pub fn new(old: &'a [u8]) -> OldIndex<'a> {
        assert!(old.len() < i32::MAX as usize, "old data over 2 GiB");
        let sa = suffix_array(old);
        let mut buckets = vec![0u32; 65537];
        for w in old.windows(2) {
            buckets[(usize::from(w[0]) << 8 | usize::from(w[1])) + 1] += 1;
        }
        // The one 1-byte suffix sorts before every 2-byte prefix starting with its byte.
        if let Some(&last) = old.last() {
            buckets[usize::from(last) << 8] += 1;
        }
        for i in 1..buckets.len() {
            buckets[i] += buckets[i - 1];
        }
        let bits_log = (old.len() * GRAM_BITS_PER_BYTE).max(64).next_power_of_two().trailing_zeros().min(MAX_GRAM_BITS_LOG);
        let gram_shift = 64 - bits_log;
        let mut grams = vec![0u64; 1 << (bits_log - 6)];
        for w in old.windows(GRAM) {
            let b = (gram_hash(w) >> gram_shift) as usize;
            grams[b >> 6] |= 1 << (b & 63);
        }
        OldIndex { old, sa, buckets, grams, gram_shift }
    }

    /// False when the first 8 bytes of `needle` (which must have 8) occur nowhere
    /// in the old data; true when they may.
    fn may_contain_gram(&self, needle: &[u8]) -> bool {
        let b = (gram_hash(needle) >> self.gram_shift) as usize;
        self.grams[b >> 6] >> (b & 63) & 1 != 0
    }

    /// The old data indexed.
    pub fn old(&self) -> &'a [u8] {
        self.old
    }

    /// Position and length of a longest prefix of `needle` found in the old
    /// data. Among equally long matches (duplicated content is common in builds)
    /// it takes the one nearest `expected`, so the delta program seeks little.
    fn longest_match(&self, needle: &[u8], expected: usize) -> (usize, usize) {
        if self.sa.is_empty() || needle.is_empty() {
            return (0, 0);
        }
        let needle = &needle[..needle.len().min(MAX_SEARCH_LEN)];
        let (mut lo, mut hi) = (0usize, self.sa.len() - 1);
        if needle.len() >= 2 {
            let key = usize::from(needle[0]) << 8 | usize::from(needle[1]);
            let (start, end) = (self.buckets[key] as usize, self.buckets[key + 1] as usize);
            if start == end {
                return (0, 0); // not even two bytes match anywhere
            }
            (lo, hi) = (start, end - 1);
        }
        // Binary search for where `needle` sorts, comparing as far as it goes (a suffix
        // that ends inside the needle while equal sorts before it). Every suffix between
        // lo and hi shares the shorter of their common prefixes with the needle, so each
        // comparison starts after it (same result, fewer bytes compared).
        let old = self.old;
        let lcp_at = |i: usize, from: usize| from + common_prefix(&old[self.sa[i] as usize + from..], &needle[from..]);
        let (mut llo, mut lhi) = (lcp_at(lo, 0), lcp_at(hi, 0));
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            let at = self.sa[mid] as usize;
            let l = lcp_at(mid, llo.min(lhi));
            if l == needle.len() || (at + l < old.len() && old[at + l] > needle[l]) {
                (hi, lhi) = (mid, l);
            } else {
                (lo, llo) = (mid, l);
            }
        }
        let (best_i, len) = if llo >= lhi { (lo, llo) } else { (hi, lhi) };
        if len < MIN_NEAREST_LEN {
            return (self.sa[best_i] as usize, len);
        }
        // Suffixes sharing a prefix are contiguous in the array: look at the
        // neighbours whose match is nearly as long, and trade length against
        // the cost of seeking far from where the old data was expected.
        let floor = len - (len / 4).min(NEAREST_SLACK);
        let score = |p: usize, l: usize| l as i64 * 8 - seek_cost_bits(p.abs_diff(expected)) as i64;
        let (mut best, mut best_len) = (self.sa[best_i] as usize, len);
        let mut best_score = score(best, len);
        for dir in [-1isize, 1] {
            let mut i = best_i as isize;
            // Moving away from best_i in sorted order, the common prefix with the needle
            // never grows: compare no further than the previous neighbour matched.
            let mut prev = len;
            for _ in 0..NEAREST_CANDIDATES {
                i += dir;
                if i < 0 || i as usize >= self.sa.len() {
                    break;
                }
                let l = common_prefix(&old[self.sa[i as usize] as usize..], &needle[..prev]);
                prev = l;
                if l < floor {
                    break;
                }
                let p = self.sa[i as usize] as usize;
                let sc = score(p, l);
                if sc > best_score {
                    (best, best_len, best_score) = (p, l, sc);
                }
            }
        }
        (best, best_len)
    }
}

fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + 8 <= n {
        let x = u64::from_le_bytes(a[i..i + 8].try_into().unwrap());
        let y = u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
        if x != y {
            return i + ((x ^ y).trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < n && a[i] == b[i] {
        i += 1;
    }
    i
}

/// Tunables of the match selection.
#[derive(Debug, Clone, Copy)]
pub struct MatchParams {
    /// A fresh exact match replaces the current alignment only when it is this
    /// many bytes longer than what the current alignment already matches.
    pub min_gain: usize,
    /// Where a search finds no match worth starting a copy at, the next search is this many
    /// bytes further on (1: every position, bsdiff's search). A copy that the skipped
    /// positions would have started is still found a few bytes into it, and the backward
    /// extension takes back the bytes passed over; only matches within `search_step` bytes
    /// of `min_gain` can be lost. The suffix-array searches are most of the matcher's time.
    pub search_step: usize,
}

impl Default for MatchParams {
    fn default() -> Self {
        MatchParams { min_gain: 8, search_step: 1 }
    }
}

/// Computes the delta program turning `old` (via `index`) into `new`.
/// `progress` is told how many new bytes were covered so far, now and then.
pub fn match_new_data(index: &OldIndex, new: &[u8], params: MatchParams, progress: &dyn Fn(u64)) -> Vec<Op> {
    let old = index.old();
    let (oldsize, newsize) = (old.len(), new.len());
    let mut ops = Vec::new();
    if oldsize == 0 {
        if newsize > 0 {
            ops.push(Op { diagonal: 0, copy_len: 0, extra_len: newsize as u64 });
        }
        return ops;
    }
    let matches_at = |o: isize, n: usize| o >= 0 && (o as usize) < oldsize && old[o as usize] == new[n];

    let (mut scan, mut len, mut pos) = (0usize, 0usize, 0usize);
    let (mut lastscan, mut lastpos, mut lastoffset) = (0usize, 0usize, 0isize);
    // Diagonals (old minus new position) of the ops before the current one: after
    // a detour the old alignment often resumes, and is then cheap to name.
    let mut recent = [0isize; 2];
    let mut reported = 0usize;
    while scan < newsize {
        let mut oldscore = 0usize;
        scan += len;
        let mut scsc = scan;
        let mut short_before = false;
        while scan < newsize {
            // Unmatched new data (content the old data lacks) costs a suffix-array search
            // per byte. Where nothing on the current alignment is pending (oldscore 0) and
            // the next 8 bytes occur nowhere in the old data, no search can end this loop:
            // that needs a match over min_gain (>= 8) bytes, or 12 on a recent diagonal.
            // Tested only after a search here found less than 8 bytes (inside a run of
            // unmatched bytes), so matched regions pay nothing for the filter.
            if short_before && oldscore == 0 && params.min_gain >= GRAM && scan + GRAM <= newsize && !index.may_contain_gram(&new[scan..]) {
                scan += 1;
                scsc = scsc.max(scan);
                continue;
            }
            let expected = (scan as isize + lastoffset).clamp(0, oldsize as isize - 1) as usize;
            (pos, len) = index.longest_match(&new[scan..], expected);
            for d in recent {
                let p = scan as isize + d;
                if p >= 0 && (p as usize) < oldsize && d != lastoffset {
                    let l = common_prefix(&old[p as usize..], &new[scan..(scan + MAX_SEARCH_LEN).min(newsize)]);
                    if l >= MIN_NEAREST_LEN && l + REPEAT_BONUS >= len {
                        (pos, len) = (p as usize, l);
                        break;
                    }
                }
            }
            while scsc < scan + len {
                if matches_at(scsc as isize + lastoffset, scsc) {
                    oldscore += 1;
                }
                scsc += 1;
            }
            if (len == oldscore && len != 0) || len > oldscore + params.min_gain {
                break;
            }
            if matches_at(scan as isize + lastoffset, scan) {
                oldscore = oldscore.saturating_sub(1);
            }
            short_before = len < GRAM;
            scan += 1;
            if params.search_step > 1 {
                // Pass positions without a search; `oldscore` stays the current alignment's
                // matches in [scan, scsc).
                let to = (scan + params.search_step - 1).min(newsize);
                while scan < to {
                    if scan < scsc && matches_at(scan as isize + lastoffset, scan) {
                        oldscore = oldscore.saturating_sub(1);
                    }
                    scan += 1;
                }
                scsc = scsc.max(scan);
            }
        }
        if len != oldscore || scan >= newsize {
            let scan_end = scan.min(newsize);
            // Forward extension of the previous match: keep it while over half matches.
            let (mut s, mut best, mut lenf, mut i) = (0isize, 0isize, 0usize, 0usize);
            while lastscan + i < scan_end && lastpos + i < oldsize {
                if old[lastpos + i] == new[lastscan + i] {
                    s += 1;
                }
                i += 1;
                if s * 2 - i as isize > best * 2 - lenf as isize {
                    best = s;
                    lenf = i;
                }
            }
            // Backward extension of the new match.
            let mut lenb = 0usize;
            if scan < newsize {
                let (mut s, mut best) = (0isize, 0isize);
                let mut i = 1usize;
                while scan >= lastscan + i && pos >= i {
                    if old[pos - i] == new[scan - i] {
                        s += 1;
                    }
                    if s * 2 - i as isize > best * 2 - lenb as isize {
                        best = s;
                        lenb = i;
                    }
                    i += 1;
                }
            }
            // Split an overlap where it scores best.
            if lastscan + lenf > scan_end - lenb {
                let overlap = (lastscan + lenf) - (scan_end - lenb);
                let (mut s, mut best, mut lens) = (0isize, 0isize, 0usize);
                for i in 0..overlap {
                    if new[lastscan + lenf - overlap + i] == old[lastpos + lenf - overlap + i] {
                        s += 1;
                    }
                    if new[scan_end - lenb + i] == old[pos - lenb + i] {
                        s -= 1;
                    }
                    if s > best {
                        best = s;
                        lens = i + 1;
                    }
                }
                lenf = lenf + lens - overlap;
                lenb -= lens;
            }
            let extra = (scan_end - lenb) - (lastscan + lenf);
            if lenf > 0 || extra > 0 {
                let diagonal = lastpos as isize - lastscan as isize;
                ops.push(Op { diagonal: diagonal as i64, copy_len: lenf as u64, extra_len: extra as u64 });
                if diagonal != recent[0] {
                    recent = [diagonal, recent[0]];
                }
            }
            lastscan = scan_end - lenb;
            lastpos = pos - lenb;
            lastoffset = pos as isize - scan as isize;
            if scan - reported > 1 << 20 {
                progress((scan - reported) as u64);
                reported = scan;
            }
        }
    }
    progress((newsize - reported) as u64);
    ops
}

/// Splits `new` into the diff stream (new minus old, bytewise, over copied
/// spans) and the extra stream (literal bytes), following `ops`.
pub fn split_streams(old: &[u8], new: &[u8], ops: &[Op]) -> (Vec<u8>, Vec<u8>) {
    let mut diff = Vec::new();
    let mut extra = Vec::new();
    let mut at = 0usize;
    for op in ops {
        let o = (at as i64 + op.diagonal) as usize;
        let c = op.copy_len as usize;
        diff.extend(new[at..at + c].iter().zip(&old[o..o + c]).map(|(n, o)| n.wrapping_sub(*o)));
        at += c;
        let e = op.extra_len as usize;
        extra.extend_from_slice(&new[at..at + e]);
        at += e;
    }
    debug_assert_eq!(at, new.len());
    (diff, extra)
}

/// New bytes rebuilt from `ops` and the two streams (what an apply does): for tests.
#[cfg(test)]
pub(crate) fn rebuild(old: &[u8], ops: &[Op], diff: &[u8], extra: &[u8]) -> Vec<u8> {
    let (mut out, mut d, mut e) = (Vec::new(), 0usize, 0usize);
    for op in ops {
        let o = (out.len() as i64 + op.diagonal) as usize;
        for k in 0..op.copy_len as usize {
            out.push(old[o + k].wrapping_add(diff[d]));
            d += 1;
        }
        out.extend_from_slice(&extra[e..e + op.extra_len as usize]);
        e += op.extra_len as usize;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suffix_array_is_divsufsorts() {
        // Text, runs, a periodic pattern, pseudo-random bytes, one byte: the
        // native libsais array must be the one divsufsort (wasm) builds.
        let mut x = 12345u32;
        let random: Vec<u8> = (0..100_000)
            .map(|_| {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                (x >> 16) as u8
            })
            .collect();
        let inputs: Vec<Vec<u8>> = vec![
            b"the quick brown fox jumps over the lazy dog; the quick brown cat".repeat(300),
            vec![7u8; 50_000],
            (0..60_000u32).map(|i| (i % 251 % 7) as u8).collect(),
            random,
            vec![1],
        ];
        for old in inputs {
            let mut expected = vec![0i32; old.len()];
            divsufsort::sort_in_place(&old, &mut expected);
            assert_eq!(suffix_array(&old), expected, "{} bytes", old.len());
        }
    }

    fn brute_longest(old: &[u8], needle: &[u8]) -> usize {
        (0..old.len()).map(|p| common_prefix(&old[p..], needle)).max().unwrap_or(0)
    }

    #[test]
    fn longest_match_agrees_with_brute_force() {
        let mut x = 12345u64;
        let mut rnd = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        for alphabet in [2u64, 4, 256] {
            let old: Vec<u8> = (0..3000).map(|_| rnd(alphabet) as u8).collect();
            let index = OldIndex::new(&old);
            for _ in 0..300 {
                let len = 1 + rnd(40) as usize;
                let needle: Vec<u8> = if rnd(2) == 0 {
                    let p = rnd(2990) as usize;
                    old[p..(p + len).min(old.len())].to_vec()
                } else {
                    (0..len).map(|_| rnd(alphabet) as u8).collect()
                };
                let (pos, l) = index.longest_match(&needle, rnd(3000) as usize);
                let best = brute_longest(&old, &needle);
                assert!(l <= best && common_prefix(&old[pos..], &needle) >= l, "reported match is not real");
                // Nearest-candidate choice may trade a little length (NEAREST_SLACK) for distance.
                assert!(l + NEAREST_SLACK.min(best / 4) >= best || best < 2, "alphabet {alphabet}: found {l}, best {best}");
            }
        }
    }

    /// The search before it skipped known-equal prefixes, kept as the reference
    /// the faster one must agree with exactly.
    fn longest_match_reference(index: &OldIndex, needle: &[u8], expected: usize) -> (usize, usize) {
        let (old, sa) = (index.old, &index.sa);
        if sa.is_empty() || needle.is_empty() {
            return (0, 0);
        }
        let needle = &needle[..needle.len().min(MAX_SEARCH_LEN)];
        let (mut lo, mut hi) = (0usize, sa.len() - 1);
        if needle.len() >= 2 {
            let key = usize::from(needle[0]) << 8 | usize::from(needle[1]);
            let (start, end) = (index.buckets[key] as usize, index.buckets[key + 1] as usize);
            if start == end {
                return (0, 0);
            }
            (lo, hi) = (start, end - 1);
        }
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            let suffix = &old[sa[mid] as usize..];
            if suffix[..suffix.len().min(needle.len())] < *needle {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        let match_at = |i: usize| common_prefix(&old[sa[i] as usize..], needle);
        let (llo, lhi) = (match_at(lo), match_at(hi));
        let (best_i, len) = if llo >= lhi { (lo, llo) } else { (hi, lhi) };
        if len < MIN_NEAREST_LEN {
            return (sa[best_i] as usize, len);
        }
        let floor = len - (len / 4).min(NEAREST_SLACK);
        let score = |p: usize, l: usize| l as i64 * 8 - seek_cost_bits(p.abs_diff(expected)) as i64;
        let (mut best, mut best_len) = (sa[best_i] as usize, len);
        let mut best_score = score(best, len);
        for dir in [-1isize, 1] {
            let mut i = best_i as isize;
            for _ in 0..NEAREST_CANDIDATES {
                i += dir;
                if i < 0 || i as usize >= sa.len() {
                    break;
                }
                let l = match_at(i as usize);
                if l < floor {
                    break;
                }
                let p = sa[i as usize] as usize;
                let sc = score(p, l);
                if sc > best_score {
                    (best, best_len, best_score) = (p, l, sc);
                }
            }
        }
        (best, best_len)
    }

    #[test]
    fn longest_match_is_the_reference_search() {
        // Repetitive data (long shared prefixes, many equal candidates), text-like and
        // random bytes; needles copied from the old data, mutated copies and random ones.
        let mut x = 99u64;
        let mut rnd = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let unit: Vec<u8> = (0..300).map(|_| rnd(4) as u8).collect();
        let mut repetitive = Vec::new();
        for _ in 0..40 {
            repetitive.extend_from_slice(&unit);
            repetitive.push(rnd(256) as u8);
        }
        let olds: Vec<Vec<u8>> =
            vec![repetitive, (0..20_000).map(|_| b"etaoin shrdlu"[rnd(13) as usize]).collect(), (0..20_000).map(|_| rnd(256) as u8).collect()];
        for old in &olds {
            let index = OldIndex::new(old);
            for _ in 0..2000 {
                let len = 1 + rnd(600) as usize;
                let mut needle: Vec<u8> = match rnd(3) {
                    0 => (0..len).map(|_| rnd(256) as u8).collect(),
                    _ => {
                        let p = rnd(old.len() as u64) as usize;
                        old[p..(p + len).min(old.len())].to_vec()
                    }
                };
                if rnd(2) == 0 && !needle.is_empty() {
                    let at = rnd(needle.len() as u64) as usize;
                    needle[at] ^= 1 + rnd(255) as u8;
                }
                let expected = rnd(old.len() as u64) as usize;
                assert_eq!(index.longest_match(&needle, expected), longest_match_reference(&index, &needle, expected));
            }
        }
    }

    #[test]
    fn gram_filter_never_hides_a_present_string() {
        // Every 8 bytes of the old data must test present; strings absent from it mostly
        // test absent (else the matcher would search as before, only slower).
        let mut x = 7u64;
        let mut rnd = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let old: Vec<u8> = (0..50_000).map(|_| rnd(256) as u8).collect();
        let index = OldIndex::new(&old);
        assert!(old.windows(GRAM).all(|w| index.may_contain_gram(w)));
        let absent = (0..10_000)
            .filter(|_| {
                let g: Vec<u8> = (0..GRAM).map(|_| rnd(256) as u8).collect();
                !index.may_contain_gram(&g)
            })
            .count();
        assert!(absent > 7_000, "{absent} of 10000 random strings tested absent");
        // Old data shorter than a string holds none.
        let tiny = OldIndex::new(b"abc");
        assert!(!tiny.may_contain_gram(b"abcdefgh"));
    }

    #[test]
    fn unmatched_new_data_still_matches_around_it() {
        // New data: a copy of old, 100 KB of bytes the old data lacks, another copy. The
        // skip over the middle must leave both copies found as copies of old bytes.
        let mut x = 5u64;
        let mut rnd = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let old: Vec<u8> = (0..200_000).map(|_| rnd(128) as u8).collect();
        let fresh: Vec<u8> = (0..100_000).map(|_| 128 + rnd(128) as u8).collect();
        let new: Vec<u8> = [&old[..80_000], &fresh[..], &old[120_000..]].concat();
        let index = OldIndex::new(&old);
        let ops = match_new_data(&index, &new, MatchParams::default(), &|_| {});
        let copied: u64 = ops.iter().map(|op| op.copy_len).sum();
        let extra: u64 = ops.iter().map(|op| op.extra_len).sum();
        assert_eq!(copied + extra, new.len() as u64);
        assert!((100_000..100_100).contains(&extra), "extra {extra}");
        let (diff, lit) = split_streams(&old, &new, &ops);
        assert_eq!(lit.len() as u64, extra);
        assert!(diff.iter().all(|&d| d == 0), "copies are exact here");
    }

    #[test]
    fn sparse_search_finds_every_copy_from_its_first_byte() {
        // Copies of old data (one with sparse changes) between runs of new bytes drawn from
        // the same alphabet, so every 8-byte string may occur in old and no run is passed by
        // the presence filter: the searches themselves are spaced by `search_step`. Each copy
        // must still start where it starts in the new data (the backward extension takes
        // back the positions not searched), and the ops must rebuild the new data.
        let mut x = 11u64;
        let mut rnd = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let old: Vec<u8> = (0..300_000).map(|_| rnd(4) as u8).collect();
        let mut new = Vec::new();
        let mut copies = Vec::new();
        for k in 0..20usize {
            let noise: Vec<u8> = (0..1000 + 37 * k).map(|_| rnd(4) as u8).collect();
            new.extend_from_slice(&noise);
            // A byte old lacks ends the noise, so no extension can reach across it.
            new.extend_from_slice(&[200; 8]);
            let from = 10_000 * k + 3 * k;
            copies.push((new.len(), from as i64 - new.len() as i64));
            let mut copy = old[from..from + 2_000 + 101 * k].to_vec();
            if k % 3 == 0 {
                for i in (50..copy.len()).step_by(97) {
                    copy[i] ^= 1;
                }
            }
            new.extend_from_slice(&copy);
        }
        let index = OldIndex::new(&old);
        for step in [1, 4] {
            let params = MatchParams { search_step: step, ..MatchParams::default() };
            let ops = match_new_data(&index, &new, params, &|_| {});
            let (diff, extra) = split_streams(&old, &new, &ops);
            assert_eq!(rebuild(&old, &ops, &diff, &extra), new, "step {step}");
            let mut at = 0u64;
            let starts: Vec<(u64, i64)> = ops
                .iter()
                .filter_map(|op| {
                    let s = (at, op.diagonal);
                    at += op.copy_len + op.extra_len;
                    (op.copy_len >= 1_000).then_some(s)
                })
                .collect();
            for &(start, diagonal) in &copies {
                assert!(starts.contains(&(start as u64, diagonal)), "step {step}: no copy from new byte {start} on diagonal {diagonal}");
            }
        }
    }
}
