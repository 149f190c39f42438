//! Structure-aware: the input is an `arbitrary` description of a patch (a
//! tree section with hostile counts, front-coded paths, link targets and
//! sizes; ops and window segments with hostile lengths and diagonals; header
//! fields either true or overridden) encoded into a syntactically valid patch:
//! every compressed stream is a real zstd frame and the checksum is right, so
//! every input reaches the tree and op decoders that a mutating fuzzer rarely
//! gets past. Applied to both fixed old builds. Nothing may panic; the
//! applier's allocations stay under libFuzzer's `-malloc_limit_mb` (the run
//! sets it to the documented budget, fuzz/README.md); and if the streaming
//! applier succeeds, the reference applier must produce the same entries.
#![no_main]

use std::sync::OnceLock;

use edgepatch_core::{apply_patch, Build, Error};
use edgepatch_fuzz::hostile::{encode, encode_with_digest, PatchPlan};
use edgepatch_fuzz::reference_apply;
use edgepatch_fuzz::{old_single, old_tree, MemOld, MemSink};
use libfuzzer_sys::fuzz_target;

/// Output cap for the in-memory sink (the sink errors, it does not panic).
const SINK_LIMIT: u64 = 64 << 20;

fn olds() -> &'static [Build; 2] {
    static OLDS: OnceLock<[Build; 2]> = OnceLock::new();
    OLDS.get_or_init(|| [old_single(), old_tree()])
}

fn check(patch: &[u8], old: &Build) -> Option<[u8; 32]> {
    let mut sink = MemSink::new(SINK_LIMIT);
    match apply_patch(patch, &mut MemOld(old), &mut sink, &mut |_| {}) {
        Ok(summary) => {
            assert_eq!(summary.patch_bytes, patch.len() as u64);
            match reference_apply(patch, old) {
                Ok(new) => assert!(new.entries == sink.sorted_entries(), "apply_patch and reference_apply disagree"),
                Err(e) => panic!("apply_patch Ok but reference_apply Err: {e}"),
            }
            None
        }
        // The plan cannot know the files digest of what it produces: the
        // applier names it, and the patch is made again with it.
        Err(Error::FilesDigestMismatch { actual, .. }) => {
            let mut d = [0u8; 32];
            for (i, b) in d.iter_mut().enumerate() {
                *b = u8::from_str_radix(actual.get(2 * i..2 * i + 2)?, 16).ok()?;
            }
            Some(d)
        }
        Err(_) => None,
    }
}

fuzz_target!(|plan: PatchPlan| {
    for (i, old) in olds().iter().enumerate() {
        let tree = i == 1;
        if let Some(digest) = check(&encode(&plan, old, tree), old) {
            check(&encode_with_digest(&plan, old, tree, digest), old);
        }
    }
});
