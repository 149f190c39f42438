//! `edgepatch diff` refuses a tree that `edgepatch apply` would refuse (one rule for
//! both: docs/FORMAT.md §2.7), before writing anything, with an error that says why.

// Unix only: a tree 1,500 levels deep is past Windows' path limits, and under Wine each level
// costs a walk of the whole path. The rule itself is the core's, tested on every system
// (crates/edgepatch-core/tests/tree_limits.rs).
#![cfg(unix)]

use std::fs;

mod common;
use common::edgepatch;

#[test]
fn diff_refuses_a_tree_nested_too_deep_for_any_applier() {
    let tmp = tempfile::tempdir().unwrap();
    let (old, new, patch) = (tmp.path().join("old"), tmp.path().join("new"), tmp.path().join("update.patch"));
    fs::create_dir_all(&old).unwrap();
    fs::write(old.join("a.txt"), b"a\n").unwrap();
    // 1,500 levels: 3,000 path bytes at the bottom, each level's directory naming its whole path.
    let deep = (0..1500).fold(new.clone(), |p, _| p.join("d"));
    fs::create_dir_all(&deep).unwrap();
    fs::write(deep.join("f.txt"), b"hello\n").unwrap();

    for json in [false, true] {
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"diff", &old, &new, &patch];
        if json {
            args.insert(1, &"--json");
        }
        let out = edgepatch(&args);
        assert!(!out.status.success(), "diff wrote a patch no applier takes");
        let said = String::from_utf8_lossy(if json { &out.stdout } else { &out.stderr }).into_owned();
        assert!(said.contains("cannot be patched") && said.contains("paths and link targets"), "{said}");
        assert!(!patch.exists(), "a refused diff left {}", patch.display());
    }
}
