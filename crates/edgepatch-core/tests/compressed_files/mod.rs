//! What the compressed-asset tests (compressed_patch.rs, brotli_patch.rs) share: a new build's
//! content made from an old one, and the diff they take it through.

use edgepatch_core::{diff_builds, Build, Capabilities, DiffOptions, DiffStats};
use edgepatch_testkit::rng::Rng;

/// Content with a few edits spread over it (a new build of the same game).
pub fn edited(content: &[u8], seed: u64) -> Vec<u8> {
    let mut rng = Rng::new(seed);
    let mut out = content.to_vec();
    for _ in 0..6 {
        let at = rng.below(out.len() - 100);
        out.splice(at..at + 10, b"changed!!!!!!".iter().copied());
    }
    out
}

/// The patch `old` -> `new` for `reader`, at level 9 on two threads.
pub fn diff(old: &Build, new: &Build, reader: Capabilities) -> (Vec<u8>, DiffStats) {
    let opts = DiffOptions { level: 9, threads: 2, reader, ..DiffOptions::default() };
    diff_builds(old, new, &opts, &|_, _| {}).unwrap()
}
