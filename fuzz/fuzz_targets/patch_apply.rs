//! Input: a patch. Applied to two fixed old builds (a single file and a small
//! tree) with the streaming applier, the reference applier and the inspector.
//! Nothing may panic; and whenever the streaming `apply_patch` returns Ok,
//! `reference_apply` must return Ok with exactly the same entries
//! (paths, kinds, executable bits, file contents, symlink targets), and
//! `inspect_patch` must accept the patch too. Run on the input as is and with
//! its BLAKE3 trailer repaired.
#![no_main]

use std::sync::OnceLock;

use edgepatch_core::{apply_patch, inspect::inspect_patch, Build};
use edgepatch_fuzz::reference_apply;
use edgepatch_fuzz::{old_single, old_tree, with_fixed_trailer, MemOld, MemSink};
use libfuzzer_sys::fuzz_target;

/// Output cap for the in-memory sink (the sink errors, it does not panic).
const SINK_LIMIT: u64 = 256 << 20;
/// `reference_apply` holds the whole new stream in memory by design; skip it
/// for (valid-looking) patches that declare more than this.
const REFERENCE_LIMIT: u64 = 256 << 20;

/// Refusals of `reference_apply` for rules docs/FORMAT.md §2.1 gives the writer, not an
/// applier that reads executable bits: flag bit 4 is set exactly when an old file is
/// executable, and the mode-blind digest is the old listing's digest with no file executable.
/// Such an applier "MUST compare with the old listing digest alone", so `apply_patch` (modes
/// known) accepts a patch whose mode-blind digest or flag is wrong, and the reference applier,
/// which checks both against the old build, refuses it (fuzz/regressions/patch_apply-1.bin).
const WRITER_RULES: [&str; 2] = ["mode-blind listing digest differs", "mode-blind digest flag and the old build's executable files disagree"];

fn olds() -> &'static [Build; 2] {
    static OLDS: OnceLock<[Build; 2]> = OnceLock::new();
    OLDS.get_or_init(|| [old_single(), old_tree()])
}

fn check(data: &[u8]) {
    let info = inspect_patch(data);
    let declared_new: Option<u64> = info.as_ref().ok().map(|i| i.layout.segments.iter().map(|s| s.new_len()).sum());

    for old in olds() {
        let mut sink = MemSink::new(SINK_LIMIT);
        let fast = apply_patch(data, &mut MemOld(old), &mut sink, &mut |_| {});
        let run_reference = fast.is_ok() || declared_new.is_none_or(|n| n <= REFERENCE_LIMIT);
        let reference = if run_reference { Some(reference_apply(data, old)) } else { None };

        if let Ok(summary) = &fast {
            assert_eq!(summary.patch_bytes, data.len() as u64, "apply_patch Ok but patch_bytes != input length");
            if let Err(e) = &info {
                panic!("apply_patch Ok but inspect_patch Err: {e}");
            }
            match reference {
                Some(Ok(new)) => assert!(
                    new.entries == sink.sorted_entries(),
                    "apply_patch and reference_apply disagree:\n fast: {:?}\n reference: {:?}",
                    sink.sorted_entries(),
                    new.entries
                ),
                Some(Err(e)) if WRITER_RULES.contains(&e.as_str()) => {}
                Some(Err(e)) => panic!("apply_patch Ok but reference_apply Err: {e}"),
                None => unreachable!(),
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    check(data);
    // The patch checksum is checked last, so only a repaired trailer lets a
    // mutated patch reach Ok and the differential check.
    if let Some(fixed) = with_fixed_trailer(data) {
        check(&fixed);
    }
});
