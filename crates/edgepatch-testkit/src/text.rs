//! Text-like test content: a game's script or data file as a bundler writes it (words of
//! code, numbers, line breaks), which deflate compresses the way it compresses real ones.

use crate::Rng;

/// `len` bytes of code-like words and numbers, the same for the same `seed`.
pub fn words(seed: u64, len: usize) -> Vec<u8> {
    const VOCABULARY: [&str; 10] = ["player", "sprite", "update(x, y)", "velocity", "return", "0x3f", "level", "\n", "{", "}"];
    let mut rng = Rng::new(seed);
    let mut out = Vec::with_capacity(len + 16);
    while out.len() < len {
        out.extend_from_slice(VOCABULARY[rng.below(VOCABULARY.len())].as_bytes());
        out.push(b' ');
        if rng.one_in(5) {
            out.extend_from_slice(format!("{}", rng.next_u64() % 1_000_000).as_bytes());
        }
    }
    out.truncate(len);
    out
}
