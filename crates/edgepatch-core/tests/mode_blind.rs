//! The mode-blind listing digest (docs/FORMAT.md §2.1, flag bit 4): a tree patch whose old
//! build has an executable file also binds the old listing as a system without executable
//! bits lists it, so that such a system (Windows) can apply a patch made on Linux. A system
//! that knows modes still checks them; a patch of a build without executable files is
//! unchanged.

use std::io;

use edgepatch_core::apply::OldBuild;
use edgepatch_core::error::ErrorKind;
use edgepatch_core::memory::{MemoryOldBuild, MemorySink};
use edgepatch_core::patch_format::{ListedEntry, FLAG_MODE_BLIND_DIGEST};
use edgepatch_core::{apply_patch, diff_builds, Build, BuildEntry, DiffOptions, EntryContent};
use edgepatch_testkit::noise;

fn build(executable: bool, tail: &[u8]) -> Build {
    let mut data = noise(7, 40_000);
    data.extend_from_slice(tail);
    Build::from_entries(vec![
        BuildEntry { path: "bin".into(), content: EntryContent::Directory },
        BuildEntry { path: "bin/game".into(), content: EntryContent::File { executable, data: noise(8, 30_000) } },
        BuildEntry { path: "data.pak".into(), content: EntryContent::File { executable: false, data } },
    ])
    .unwrap()
}

fn flags(patch: &[u8]) -> u16 {
    u16::from_le_bytes([patch[10], patch[11]])
}

/// The old build listed with no file executable: as a system without executable bits lists
/// it (`modes_known` false), or as a Unix build whose bits were removed (true).
struct NoModes<'a> {
    old: MemoryOldBuild<'a>,
    modes_known: bool,
}

impl<'a> NoModes<'a> {
    fn new(build: &'a Build, modes_known: bool) -> Self {
        NoModes { old: MemoryOldBuild::new(build), modes_known }
    }
}

impl OldBuild for NoModes<'_> {
    fn file_size(&mut self, path: &str) -> io::Result<u64> {
        self.old.file_size(path)
    }
    fn read_at(&mut self, path: &str, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.old.read_at(path, offset, buf)
    }
    fn listing(&mut self) -> io::Result<Vec<ListedEntry>> {
        Ok(self
            .old
            .listing()?
            .into_iter()
            .map(|mut e| {
                if let edgepatch_core::patch_format::ListedKind::File { executable, .. } = &mut e.kind {
                    *executable = false;
                }
                e
            })
            .collect())
    }
    fn modes_known(&self) -> bool {
        self.modes_known
    }
}

#[test]
fn a_system_without_executable_bits_applies_a_patch_of_a_build_with_them_and_one_with_them_still_checks_them() {
    let (old, new) = (build(true, b"one"), build(true, b"two"));
    let (patch, _) = diff_builds(&old, &new, &DiffOptions::default(), &|_, _| {}).unwrap();
    assert_eq!(flags(&patch) & FLAG_MODE_BLIND_DIGEST, FLAG_MODE_BLIND_DIGEST, "an executable old file: the flag is set");

    // Knowing modes, with the bit: applies.
    let mut sink = MemorySink::default();
    apply_patch(&patch[..], &mut MemoryOldBuild::new(&old), &mut sink, &mut |_| {}).unwrap();
    assert_eq!(sink.into_build(), new);

    // Without modes: applies through the mode-blind digest; the content is the new build's
    // (the kept file's executable bit cannot be read there, so it is not set).
    let mut sink = MemorySink::default();
    apply_patch(&patch[..], &mut NoModes::new(&old, false), &mut sink, &mut |_| {}).unwrap();
    let got = sink.into_build();
    assert_eq!(got.files().collect::<Vec<_>>(), new.files().collect::<Vec<_>>());

    // Knowing modes and listing none: another build (the mode-blind digest is not enough).
    let err = apply_patch(&patch[..], &mut NoModes::new(&old, true), &mut MemorySink::default(), &mut |_| {}).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::OldBuild, "{err}");

    // Without modes, another build (one file's bytes and size differ) is still refused.
    let other = build(true, b"three");
    let err = apply_patch(&patch[..], &mut NoModes::new(&other, false), &mut MemorySink::default(), &mut |_| {}).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::OldBuild, "{err}");
}

#[test]
fn a_patch_of_a_build_without_executable_files_has_no_mode_blind_digest() {
    let (old, new) = (build(false, b"one"), build(false, b"two"));
    let (patch, _) = diff_builds(&old, &new, &DiffOptions::default(), &|_, _| {}).unwrap();
    assert_eq!(flags(&patch) & FLAG_MODE_BLIND_DIGEST, 0);
    // Its listing digest is the mode-blind one: a system without modes applies it as it is.
    let mut sink = MemorySink::default();
    apply_patch(&patch[..], &mut NoModes::new(&old, false), &mut sink, &mut |_| {}).unwrap();
    assert_eq!(sink.into_build(), new);
}

/// Flag bit 4 where it does not belong, or cleared where it does: refused (corrupt, or
/// truncated where the digest it declares is missing) while the tree is read, before anything
/// is written.
#[test]
fn a_mode_blind_flag_that_disagrees_with_the_tree_is_refused_before_anything_is_written() {
    let with_exec = diff_builds(&build(true, b"one"), &build(true, b"two"), &DiffOptions::default(), &|_, _| {}).unwrap().0;
    let without = diff_builds(&build(false, b"one"), &build(false, b"two"), &DiffOptions::default(), &|_, _| {}).unwrap().0;
    let single = diff_builds(&Build::single_file(noise(1, 9_000)), &Build::single_file(noise(2, 9_000)), &DiffOptions::default(), &|_, _| {}).unwrap().0;
    let toggled = |patch: &[u8]| {
        let mut p = patch.to_vec();
        p[10] ^= FLAG_MODE_BLIND_DIGEST as u8;
        p
    };
    for (what, patch, old, kind) in [
        ("cleared: bytes after the tree", toggled(&with_exec), build(true, b"one"), ErrorKind::Corrupt),
        ("set without the digest: the tree ends early", toggled(&without), build(false, b"one"), ErrorKind::Truncated),
        ("set on a single-file patch", toggled(&single), Build::single_file(noise(1, 9_000)), ErrorKind::Corrupt),
    ] {
        let mut sink = MemorySink::default();
        let err = apply_patch(&patch[..], &mut MemoryOldBuild::new(&old), &mut sink, &mut |_| {}).unwrap_err();
        assert_eq!(err.kind(), kind, "{what}: {err}");
        assert!(sink.into_build().entries.is_empty(), "{what}: something was written");
    }
}
