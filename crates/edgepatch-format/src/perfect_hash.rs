//! Minimal perfect hash (MPH) used by the manifest index.
//!
//! Hash-and-displace in the style of CHD / PTHash. The four lookup functions
//! below ([`key_hash`], [`bucket_of`], [`pilot_mix`], [`slot_of`]) are
//! normative: they are part of the manifest format (docs/FORMAT.md §4,
//! section "Index") and must never change without a format version bump.
//!
//! Lookup of key `k` in a table of `n` keys and `b` buckets with seed `seed`:
//!
//! ```text
//! h      = xxh3_64_with_seed(k, seed)
//! bucket = ((h >> 32) * b) >> 32                  // in [0, b)
//! slot   = (fmix(h ^ pilot_mix(pilots[bucket])) * n) >> 64   // 128-bit product; in [0, n)
//! ```
//!
//! Build: keys are distributed into buckets, buckets are processed from the
//! largest to the smallest (ties: lower bucket index first), and for each
//! bucket the smallest pilot `p = 0, 1, 2, ...` is chosen that sends all its
//! keys to slots not taken yet and distinct from each other. If a bucket
//! cannot be placed (two keys with equal 64-bit hashes, or the search limit is
//! hit) the whole build restarts with the next seed. Everything is
//! deterministic: same keys in the same order give the same seed and pilots.

use xxhash_rust::xxh3::xxh3_64_with_seed;

/// Average number of keys per bucket chosen by the builder (b = ceil(n / 2)).
/// Chosen by measurement: see docs/FORMAT.md §4 ("Builder notes").
pub(crate) const KEYS_PER_BUCKET: u32 = 2;

/// Seeds tried by the builder: 0, 1, ..., MAX_SEED_ATTEMPTS - 1.
const MAX_SEED_ATTEMPTS: u64 = 64;

/// 64-bit hash of a key (the path's UTF-8 bytes): XXH3-64 with a 64-bit seed.
#[inline]
pub(crate) fn key_hash(key: &[u8], seed: u64) -> u64 {
    xxh3_64_with_seed(key, seed)
}

/// Bucket of a key hash: the high 32 bits scaled into `[0, buckets)`.
/// `buckets` must be at least 1.
#[inline]
pub(crate) fn bucket_of(h: u64, buckets: u32) -> u32 {
    (((h >> 32) * u64::from(buckets)) >> 32) as u32
}

/// The SplitMix64 finalizer: a bijective 64-bit mixer.
#[inline]
pub(crate) fn fmix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Expands a 32-bit pilot into a 64-bit mask (the SplitMix64 output for state `pilot`).
#[inline]
pub(crate) fn pilot_mix(pilot: u32) -> u64 {
    fmix(u64::from(pilot).wrapping_add(0x9E37_79B9_7F4A_7C15))
}

/// Slot of a key hash given its bucket's pilot, in `[0, n)`. `n` must be at least 1.
///
/// The final `fmix` matters: without it the slots of two keys of one bucket
/// would differ by a pattern fixed by their hashes alone, whatever the pilot,
/// and some pairs could never be separated. The scaling into `[0, n)` is a
/// multiply-high ("fastrange"), not a division.
#[inline]
pub(crate) fn slot_of(h: u64, pilot: u32, n: u32) -> u32 {
    scale(fmix(h ^ pilot_mix(pilot)), n)
}

#[inline]
fn scale(x: u64, n: u32) -> u32 {
    ((u128::from(x) * u128::from(n)) >> 64) as u32
}

/// Number of buckets the builder uses for `n` keys.
pub(crate) fn bucket_count_for(n: u32) -> u32 {
    n.div_ceil(KEYS_PER_BUCKET)
}

/// A built minimal perfect hash.
#[derive(Debug, Clone)]
pub(crate) struct Mph {
    pub seed: u64,
    /// One pilot per bucket (`bucket_count_for(n)` of them).
    pub pilots: Vec<u32>,
    /// `slots[i]` is the slot of key `i`; a permutation of `0..n`.
    pub slots: Vec<u32>,
}

/// Builds an MPH over `keys`, which must be distinct and at most `u32::MAX`
/// many. Returns `None` only if no seed in the attempted range works (which
/// for distinct keys is astronomically unlikely).
pub(crate) fn build(keys: &[&[u8]]) -> Option<Mph> {
    build_with(keys, KEYS_PER_BUCKET)
}

/// [`build`] with another average bucket size (for measurements).
pub(crate) fn build_with(keys: &[&[u8]], keys_per_bucket: u32) -> Option<Mph> {
    let n = u32::try_from(keys.len()).ok()?;
    if n == 0 {
        return Some(Mph { seed: 0, pilots: Vec::new(), slots: Vec::new() });
    }
    let b = n.div_ceil(keys_per_bucket.max(1));
    let mut hashes = vec![0u64; keys.len()];
    for seed in 0..MAX_SEED_ATTEMPTS {
        for (h, k) in hashes.iter_mut().zip(keys) {
            *h = key_hash(k, seed);
        }
        if let Some((pilots, slots)) = place(&hashes, n, b) {
            return Some(Mph { seed, pilots, slots });
        }
    }
    None
}

/// One build attempt for fixed hashes. Returns (pilots, slot of each key).
fn place(hashes: &[u64], n: u32, b: u32) -> Option<(Vec<u32>, Vec<u32>)> {
    let nb = b as usize;
    // Bucket members in CSR form: members[start[k]..start[k + 1]] are the keys of bucket k.
    let mut start = vec![0u32; nb + 1];
    for &h in hashes {
        start[bucket_of(h, b) as usize + 1] += 1;
    }
    for k in 0..nb {
        start[k + 1] += start[k];
    }
    let mut fill: Vec<u32> = start[..nb].to_vec();
    let mut members = vec![0u32; hashes.len()];
    for (i, &h) in hashes.iter().enumerate() {
        let k = bucket_of(h, b) as usize;
        members[fill[k] as usize] = i as u32;
        fill[k] += 1;
    }
    drop(fill);

    // Largest buckets first; ties by bucket index (the sort key is unique, so
    // the order is fully determined).
    let mut order: Vec<u32> = (0..b).collect();
    order.sort_unstable_by_key(|&k| {
        let size = start[k as usize + 1] - start[k as usize];
        (std::cmp::Reverse(size), k)
    });

    let mut taken = vec![0u64; (n as usize).div_ceil(64)];
    let is_taken = |t: &[u64], s: u32| t[(s >> 6) as usize] >> (s & 63) & 1 == 1;
    let mut pilots = vec![0u32; nb];
    let mut slots = vec![0u32; hashes.len()];
    // Generous: the last singleton bucket needs about n tries on average.
    let limit = u64::from(n).saturating_mul(32).saturating_add(1 << 16).min(u64::from(u32::MAX)) as u32;
    let mut cur: Vec<u32> = Vec::new();
    let mut bucket_hashes: Vec<u64> = Vec::new();

    for &k in &order {
        let ms = &members[start[k as usize] as usize..start[k as usize + 1] as usize];
        if ms.is_empty() {
            break; // sorted by size: all remaining buckets are empty too
        }
        if ms.len() > 1 {
            // Keys with equal hashes can never be separated: new seed.
            bucket_hashes.clear();
            bucket_hashes.extend(ms.iter().map(|&i| hashes[i as usize]));
            bucket_hashes.sort_unstable();
            if bucket_hashes.windows(2).any(|w| w[0] == w[1]) {
                return None;
            }
        }
        let mut found = None;
        'pilot: for p in 0..=limit {
            let pm = pilot_mix(p);
            cur.clear();
            for &i in ms {
                let s = scale(fmix(hashes[i as usize] ^ pm), n);
                if is_taken(&taken, s) || cur.contains(&s) {
                    continue 'pilot;
                }
                cur.push(s);
            }
            found = Some(p);
            break;
        }
        let p = found?;
        pilots[k as usize] = p;
        for (&i, &s) in ms.iter().zip(&cur) {
            taken[(s >> 6) as usize] |= 1 << (s & 63);
            slots[i as usize] = s;
        }
    }
    Some((pilots, slots))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_a_permutation_and_lookup_agrees() {
        for n in [1usize, 2, 3, 5, 64, 1000, 12_345] {
            let keys: Vec<String> = (0..n).map(|i| format!("dir/{}/file_{i}.bin", i % 7)).collect();
            let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_bytes()).collect();
            let m = build(&refs).expect("build");
            let n32 = n as u32;
            let b = bucket_count_for(n32);
            assert_eq!(m.pilots.len(), b as usize);
            let mut seen = vec![false; n];
            for (i, k) in refs.iter().enumerate() {
                let h = key_hash(k, m.seed);
                let s = slot_of(h, m.pilots[bucket_of(h, b) as usize], n32);
                assert_eq!(s, m.slots[i]);
                assert!(!seen[s as usize]);
                seen[s as usize] = true;
            }
        }
    }

    #[test]
    fn reference_values_are_stable() {
        // Pin the normative functions (docs/FORMAT.md §4, "Index").
        assert_eq!(pilot_mix(0), 0xE220_A839_7B1D_CDAF);
        assert_eq!(bucket_of(u64::MAX, 10), 9);
        assert_eq!(bucket_of(0, 10), 0);
        assert_eq!(key_hash(b"", 0), 0x2D06_8005_38D3_94C2);
    }
}
