//! What a signature vouches for (docs/UPDATE_PROTOCOL.md, "Signed statements"): the
//! statements, key ids and ed25519 verification of `edgepatch_format::statement`, re-exported
//! here, and [`PatchHasher`], a BLAKE3 of a patch that can be saved and continued when an
//! apply is resumed.

use blake3::hazmat::{merge_subtrees_non_root, merge_subtrees_root, ChainingValue, HasherExt, Mode};
pub use edgepatch_format::statement::*;

/// Bytes hashed at once, and the unit a saved state is aligned to: 16 BLAKE3
/// chunks, enough for the SIMD paths to work on many chunks in parallel.
const UNIT: usize = 16 * 1024;
const STATE_VERSION: u8 = 1;

/// BLAKE3 of a stream that can stop and continue in another process: its
/// [`state`](PatchHasher::state) (at most 16 KiB and 32 bytes per level of the
/// tree) is saved with an apply's resume point, and [`PatchHasher::from_state`] continues
/// where it left off. Gives exactly `blake3::hash` of everything fed to it.
///
/// Built on BLAKE3's tree (the `hazmat` module): the input is hashed in
/// 16 KiB-aligned subtrees whose chaining values are merged like a binary
/// counter; a subtree is finished only once a later byte has arrived, so none
/// of the saved chaining values can be the root.
#[derive(Clone, Default)]
pub struct PatchHasher {
    /// Chaining values of complete, aligned subtrees, largest first; their
    /// sizes are the binary digits of `units`.
    stack: Vec<ChainingValue>,
    units: u64,
    /// Bytes after the last complete unit: 0 only before the first byte,
    /// else 1..=UNIT (a full unit waits for a later byte to be finished).
    pending: Vec<u8>,
}

impl PatchHasher {
    /// A hasher at the patch's first byte.
    pub fn new() -> PatchHasher {
        PatchHasher::default()
    }

    /// Bytes hashed so far.
    pub fn len(&self) -> u64 {
        self.units * UNIT as u64 + self.pending.len() as u64
    }

    /// Whether nothing was hashed yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn push_unit(&mut self, unit: &[u8]) {
        debug_assert_eq!(unit.len(), UNIT);
        let mut hasher = blake3::Hasher::new();
        hasher.set_input_offset(self.units * UNIT as u64);
        hasher.update(unit);
        let mut cv = hasher.finalize_non_root();
        self.units += 1;
        // Merge equal-sized subtrees: one merge per trailing zero bit of `units`.
        let mut n = self.units;
        while n & 1 == 0 {
            let left = self.stack.pop().expect("a subtree per set bit");
            cv = merge_subtrees_non_root(&left, &cv, Mode::Hash);
            n >>= 1;
        }
        self.stack.push(cv);
    }

    /// Hashes the next bytes.
    pub fn update(&mut self, mut data: &[u8]) {
        if data.is_empty() {
            return;
        }
        if !self.pending.is_empty() || data.len() <= UNIT {
            let take = (UNIT - self.pending.len()).min(data.len());
            self.pending.extend_from_slice(&data[..take]);
            data = &data[take..];
            if data.is_empty() {
                return;
            }
            let unit = std::mem::take(&mut self.pending);
            self.push_unit(&unit);
            self.pending = unit;
            self.pending.clear();
        }
        while data.len() > UNIT {
            self.push_unit(&data[..UNIT]);
            data = &data[UNIT..];
        }
        self.pending.extend_from_slice(data);
    }

    /// The BLAKE3 of everything hashed (the hasher can continue).
    pub fn finalize(&self) -> [u8; 32] {
        if self.stack.is_empty() {
            return *blake3::hash(&self.pending).as_bytes();
        }
        let mut hasher = blake3::Hasher::new();
        hasher.set_input_offset(self.units * UNIT as u64);
        hasher.update(&self.pending);
        let mut cv = hasher.finalize_non_root();
        for (i, left) in self.stack.iter().enumerate().rev() {
            if i == 0 {
                return *merge_subtrees_root(left, &cv, Mode::Hash).as_bytes();
            }
            cv = merge_subtrees_non_root(left, &cv, Mode::Hash);
        }
        unreachable!("the loop returns at the bottom of a non-empty stack")
    }

    /// The state to save: version `u8`, `units` `u64`, the stack's chaining
    /// values (one per set bit of `units`), then the pending bytes.
    pub fn state(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(9 + 32 * self.stack.len() + self.pending.len());
        out.push(STATE_VERSION);
        out.extend_from_slice(&self.units.to_le_bytes());
        for cv in &self.stack {
            out.extend_from_slice(cv);
        }
        out.extend_from_slice(&self.pending);
        out
    }

    /// Continues from a saved [`state`](PatchHasher::state); refuses any byte
    /// string that `state` could not have produced.
    pub fn from_state(state: &[u8]) -> Result<PatchHasher, TrustError> {
        let bad = |why: &str| TrustError::Invalid { what: "patch hash state", why: why.into() };
        if state.len() < 9 || state[0] != STATE_VERSION {
            return Err(bad("unknown version or truncated"));
        }
        let units = u64::from_le_bytes(state[1..9].try_into().expect("8 bytes"));
        if units > u64::MAX / UNIT as u64 / 2 {
            return Err(bad("impossible length"));
        }
        let levels = units.count_ones() as usize;
        let rest = &state[9..];
        if rest.len() < 32 * levels {
            return Err(bad("truncated"));
        }
        let (cvs, pending) = rest.split_at(32 * levels);
        if pending.len() > UNIT || (pending.is_empty() && units > 0) {
            return Err(bad("pending bytes out of range"));
        }
        let stack = cvs.chunks_exact(32).map(|c| c.try_into().expect("32 bytes")).collect();
        Ok(PatchHasher { stack, units, pending: pending.to_vec() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17) as u8).collect()
    }
    #[test]
    fn patch_hasher_equals_blake3_for_many_lengths_and_splits() {
        let all = data(5 * UNIT + 3000);
        let lengths = [0, 1, 1023, 1024, 1025, UNIT - 1, UNIT, UNIT + 1, 2 * UNIT, 3 * UNIT + 7, 4 * UNIT, 4 * UNIT + 1, all.len()];
        for &n in &lengths {
            let input = &all[..n];
            let want = *blake3::hash(input).as_bytes();
            for split in [1usize, 7, 1000, UNIT - 1, UNIT, UNIT + 5, 3 * UNIT] {
                let mut h = PatchHasher::new();
                for (i, piece) in input.chunks(split).enumerate() {
                    h.update(piece);
                    if i == 1 {
                        // Save and continue from the saved state, as a resumed apply does.
                        h = PatchHasher::from_state(&h.state()).unwrap();
                    }
                }
                assert_eq!(h.len(), n as u64);
                assert_eq!(h.finalize(), want, "length {n}, pieces of {split}");
            }
        }
    }
    #[test]
    fn hostile_states_are_refused() {
        assert!(PatchHasher::from_state(&[]).is_err());
        assert!(PatchHasher::from_state(&[2, 0, 0, 0, 0, 0, 0, 0, 0]).is_err());
        // One unit claimed, no chaining value.
        assert!(PatchHasher::from_state(&[1, 1, 0, 0, 0, 0, 0, 0, 0]).is_err());
        let mut big = vec![1, 0, 0, 0, 0, 0, 0, 0, 0];
        big.extend(std::iter::repeat_n(0u8, UNIT + 1));
        assert!(PatchHasher::from_state(&big).is_err());
        let mut huge = vec![1];
        huge.extend_from_slice(&u64::MAX.to_le_bytes());
        assert!(PatchHasher::from_state(&huge).is_err());
    }
}
