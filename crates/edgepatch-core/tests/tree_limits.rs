//! One rule for how big a tree may be: every tree the writers accept, the appliers
//! accept, and a tree no applier would take is refused when the patch is made, not
//! when it is applied (docs/FORMAT.md §2.7, `patch_format::TreeBudget`).

mod appliers;
mod reference_applier;

use appliers::apply_both;
use edgepatch_core::error::ErrorKind;
use edgepatch_core::generate::PatchGenerator;
use edgepatch_core::signature::Signature;
use edgepatch_core::{diff_builds, Build, BuildEntry, DiffOptions, EntryContent, Error};

/// A build of `depth` nested directories `d/d/d/...` with one file at the bottom.
fn nested(depth: usize) -> Build {
    let mut entries = Vec::new();
    let mut path = String::new();
    for _ in 0..depth {
        if !path.is_empty() {
            path.push('/');
        }
        path.push('d');
        entries.push(BuildEntry { path: path.clone(), content: EntryContent::Directory });
    }
    entries.push(BuildEntry { path: format!("{path}/f.txt"), content: EntryContent::File { executable: false, data: b"hello\n".to_vec() } });
    Build::from_entries(entries).expect("a valid tree")
}

fn flat() -> Build {
    Build::from_entries(vec![BuildEntry { path: "a.txt".into(), content: EntryContent::File { executable: false, data: b"a\n".to_vec() } }]).unwrap()
}

fn opts() -> DiffOptions {
    DiffOptions { level: 3, threads: 1, ..Default::default() }
}

#[test]
fn a_two_thousand_level_tree_is_refused_when_the_patch_is_made() {
    let err = diff_builds(&flat(), &nested(2000), &opts(), &|_, _| {}).expect_err("no applier takes this tree");
    assert!(matches!(err, Error::TreeBeyondLimits { .. }), "{err:?}");
    assert_eq!(err.kind(), ErrorKind::Limit);
    let msg = err.to_string();
    assert!(msg.contains("cannot be patched") && msg.contains("paths and link targets"), "{msg}");
}

/// Around the limit, each depth is either refused by the writer or applied by both
/// appliers: never a patch that an applier refuses.
#[test]
fn every_tree_the_writer_accepts_applies() {
    let old = flat();
    let (mut written, mut refused) = (0, 0);
    for depth in (1_000..=1_300).step_by(25).chain([1, 64, 2_040]) {
        let new = nested(depth);
        match diff_builds(&old, &new, &opts(), &|_, _| {}) {
            Ok((patch, _)) => {
                assert_eq!(apply_both(&patch, &old), new, "depth {depth}");
                written += 1;
            }
            Err(e) => {
                assert!(matches!(e, Error::TreeBeyondLimits { .. }), "depth {depth}: {e}");
                refused += 1;
            }
        }
    }
    // The range straddles the limit: both outcomes happen.
    assert!(written >= 3 && refused >= 3, "written {written}, refused {refused}");
}

/// The generator behind the bounded diff and the Worker refuses the same tree at once.
#[test]
fn the_generator_refuses_the_same_tree() {
    let (old, new) = (flat(), nested(2000));
    let err = PatchGenerator::new(Some(&Signature::of_build(&old, 16 << 10)), &Signature::of_build(&new, 16 << 10), 3).err().expect("refused");
    assert!(matches!(err, Error::TreeBeyondLimits { .. }), "{err:?}");
}
