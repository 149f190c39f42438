//! A seeded pseudo-random generator: the same values on every machine, no
//! dependency. [`Rng::new`] is the default (splitmix64). The other
//! constructors give the exact streams that existing data was made with: the
//! committed hostile vectors, the shared [`noise`], and tests whose
//! expectations were tuned on their data.

/// splitmix64's increment (2^64 / φ); also scrambles small seeds.
const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

#[derive(Clone, Copy, Debug)]
enum Algorithm {
    SplitMix64,
    XorShift64,
    XorShift64Star,
}

/// A seeded generator of `u64`s, and of bytes and numbers below a bound made from them.
#[derive(Clone, Debug)]
pub struct Rng {
    state: u64,
    algorithm: Algorithm,
}

impl Rng {
    /// The default generator: [`Rng::splitmix64`]. Any seed, 0 too.
    pub fn new(seed: u64) -> Self {
        Self::splitmix64(seed)
    }

    /// splitmix64 (Steele, Lea and Flood): the state advances by [`GOLDEN`] and
    /// each value is its mix. Any seed, 0 too.
    pub fn splitmix64(seed: u64) -> Self {
        Rng { state: seed, algorithm: Algorithm::SplitMix64 }
    }

    /// Marsaglia's xorshift64 (shifts 13, 7, 17) from the raw `state`, which
    /// must not be 0; each value is the new state.
    pub fn xorshift64(state: u64) -> Self {
        assert!(state != 0, "xorshift64 stays at 0 forever");
        Rng { state, algorithm: Algorithm::XorShift64 }
    }

    /// [`Rng::xorshift64`] from the state `seed * 0x9E3779B97F4A7C15 | 1`:
    /// small seeds, 0 too, give well-spread states.
    pub fn xorshift64_seeded(seed: u64) -> Self {
        Self::xorshift64(seed.wrapping_mul(GOLDEN) | 1)
    }

    /// xorshift64* (shifts 12, 25, 27, then a multiply) from the raw `state`,
    /// which must not be 0.
    pub fn xorshift64_star(state: u64) -> Self {
        assert!(state != 0, "xorshift64* stays at 0 forever");
        Rng { state, algorithm: Algorithm::XorShift64Star }
    }

    /// The next value.
    pub fn next_u64(&mut self) -> u64 {
        let x = &mut self.state;
        match self.algorithm {
            Algorithm::SplitMix64 => {
                *x = x.wrapping_add(GOLDEN);
                finish_splitmix(*x)
            }
            Algorithm::XorShift64 => {
                *x ^= *x << 13;
                *x ^= *x >> 7;
                *x ^= *x << 17;
                *x
            }
            Algorithm::XorShift64Star => {
                *x ^= *x >> 12;
                *x ^= *x << 25;
                *x ^= *x >> 27;
                x.wrapping_mul(0x2545_F491_4F6C_DD1D)
            }
        }
    }

    /// A number in `0..n` (the next value modulo `n`; `n` must not be 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// `true` once in `n` draws on average (the next value is a multiple of `n`).
    pub fn one_in(&mut self, n: u64) -> bool {
        self.next_u64().is_multiple_of(n)
    }

    /// Fills `buf`, each byte the top byte of one value.
    pub fn fill(&mut self, buf: &mut [u8]) {
        self.fill_from_bit(buf, 56);
    }

    /// Fills `buf`, each byte bits `shift..shift + 8` of one value (`shift` at most 56).
    pub fn fill_from_bit(&mut self, buf: &mut [u8], shift: u32) {
        assert!(shift <= 56, "a byte lies within the 64 bits");
        for b in buf {
            *b = (self.next_u64() >> shift) as u8;
        }
    }

    /// `n` bytes, each the top byte of one value.
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        self.bytes_from_bit(n, 56)
    }

    /// `n` bytes, each bits `shift..shift + 8` of one value (`shift` at most 56).
    pub fn bytes_from_bit(&mut self, n: usize, shift: u32) -> Vec<u8> {
        let mut out = vec![0; n];
        self.fill_from_bit(&mut out, shift);
        out
    }
}

/// splitmix64's output function.
fn finish_splitmix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A hash of `z`: the first value of [`Rng::splitmix64`]`(z)`. Made-up data
/// that must depend on an id alone (not on what was drawn before) uses it.
pub fn mix64(z: u64) -> u64 {
    finish_splitmix(z.wrapping_add(GOLDEN))
}

/// The tests' shared pseudo-random data: `len` bytes of
/// [`Rng::xorshift64_seeded`]`(seed)`, bits 24..32 of each value. Each
/// window of it is unique, so it compresses and matches only with itself.
pub fn noise(seed: u64, len: usize) -> Vec<u8> {
    Rng::xorshift64_seeded(seed).bytes_from_bit(len, 24)
}

#[cfg(test)]
mod tests {
    use super::*;

    // The expected values were made by the generators' first copies, which
    // the tests' data (and the committed hostile vectors) came from.

    #[test]
    fn noise_keeps_its_bytes() {
        assert_eq!(noise(5, 8), [175, 148, 24, 7, 119, 10, 136, 27]);
    }

    #[test]
    fn xorshift64_keeps_its_stream() {
        assert_eq!(Rng::xorshift64(GOLDEN).bytes_from_bit(8, 0), [173, 118, 54, 116, 236, 121, 207, 234]);
        assert_eq!(Rng::xorshift64_seeded(1).next_u64(), Rng::xorshift64(GOLDEN).next_u64());
    }

    #[test]
    fn xorshift64_star_keeps_its_stream() {
        let mut r = Rng::xorshift64_star(GOLDEN);
        assert_eq!([r.next_u64(), r.next_u64(), r.next_u64()], [0x0d83_b3e2_9a21_487a, 0x54c4_4c79_f1fe_9d67, 0xa845_f342_007a_0e78]);
    }

    #[test]
    fn splitmix64_keeps_its_stream() {
        assert_eq!([mix64(0), mix64(1), mix64(2)], [0xe220_a839_7b1d_cdaf, 0x910a_2dec_8902_5cc1, 0x9758_35de_1c97_56ce]);
        let mut r = Rng::new(0);
        assert_eq!(r.next_u64(), mix64(0));
        assert_eq!(r.next_u64(), mix64(GOLDEN));
    }

    #[test]
    fn below_and_bytes_stay_in_range() {
        let mut r = Rng::new(7);
        assert!((0..1000).all(|_| r.below(10) < 10));
        assert_eq!(r.bytes(33).len(), 33);
    }
}
