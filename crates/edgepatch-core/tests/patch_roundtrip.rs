//! Round trips through diff, the streaming applier and the reference applier,
//! on builds made here: single files, trees with every kind of change.

mod appliers;
mod fixture_builds;
mod reference_applier;

use appliers::apply_both;
use edgepatch_core::memory::{MemoryOldBuild, MemorySink};
use edgepatch_core::{apply_patch, diff_builds, Build, BuildEntry, DiffOptions, EntryContent};
use edgepatch_testkit::noise;
use fixture_builds::file;

fn dir(path: &str) -> BuildEntry {
    BuildEntry { path: path.into(), content: EntryContent::Directory }
}

fn round_trip(old: &Build, new: &Build, opts: &DiffOptions) -> Vec<u8> {
    let (patch, stats) = diff_builds(old, new, opts, &|_, _| {}).expect("diff");
    assert_eq!(stats.patch_bytes, patch.len() as u64);
    assert_eq!(&apply_both(&patch, old), new);
    patch
}

/// A "compiled binary" whose second version inserts bytes and shifts embedded addresses.
fn binary_pair(len: usize) -> (Vec<u8>, Vec<u8>) {
    let old = noise(7, len);
    let mut new = old[..len / 3].to_vec();
    new.extend_from_slice(b"inserted code here");
    for chunk in old[len / 3..].chunks(16) {
        let mut c = chunk.to_vec();
        if c.len() == 16 {
            let addr = u32::from_le_bytes(c[4..8].try_into().unwrap()).wrapping_add(18);
            c[4..8].copy_from_slice(&addr.to_le_bytes());
        }
        new.extend_from_slice(&c);
    }
    new[len / 2] ^= 0x55;
    (old, new)
}

#[test]
fn single_file_with_shifted_addresses_is_small() {
    let (old, new) = binary_pair(1 << 20);
    let patch = round_trip(&Build::single_file(old), &Build::single_file(new.clone()), &DiffOptions { level: 9, ..Default::default() });
    assert!(patch.len() < new.len() / 20, "patch {} for {} bytes", patch.len(), new.len());
}

#[test]
fn many_small_segments_and_one_thread_give_the_same_output() {
    let (old, new) = binary_pair(300_000);
    let (old, new) = (Build::single_file(old), Build::single_file(new));
    let one = DiffOptions { level: 3, threads: 1, segment_size: 64 << 10, ..Default::default() };
    let two = DiffOptions { threads: 2, ..one.clone() };
    let a = round_trip(&old, &new, &one);
    let b = round_trip(&old, &new, &two);
    assert_eq!(a, b, "diff output depends on the thread count");
}

#[test]
fn empty_and_identical_files() {
    let opts = DiffOptions { level: 3, ..Default::default() };
    round_trip(&Build::single_file(vec![]), &Build::single_file(vec![]), &opts);
    round_trip(&Build::single_file(vec![]), &Build::single_file(noise(1, 5000)), &opts);
    round_trip(&Build::single_file(noise(1, 5000)), &Build::single_file(vec![]), &opts);
    let same = noise(2, 100_000);
    let p = round_trip(&Build::single_file(same.clone()), &Build::single_file(same), &opts);
    assert!(p.len() < 200, "identical file patch is {} bytes", p.len());
}

#[test]
fn tree_with_every_kind_of_change() {
    let shared = noise(3, 200_000);
    let (bin_old, bin_new) = binary_pair(150_000);
    let mut moved_changed = noise(4, 40_000);
    let old = Build::from_entries(vec![
        dir("assets"),
        file("assets/music.ogg", shared.clone()),
        file("assets/empty", vec![]),
        file("game.wasm", bin_old),
        file("removed.txt", b"bye".to_vec()),
        dir("scripts"),
        file("scripts/ai.js", moved_changed.clone()),
        BuildEntry { path: "run.sh".into(), content: EntryContent::File { executable: false, data: b"#!/bin/sh\n".to_vec() } },
        BuildEntry { path: "link".into(), content: EntryContent::Symlink { target: "game.wasm".into() } },
    ])
    .unwrap();
    moved_changed[1000..1010].copy_from_slice(b"0123456789");
    let new = Build::from_entries(vec![
        dir("assets"),
        dir("assets/audio"),
        file("assets/audio/music.ogg", shared),
        file("assets/empty", vec![]),
        dir("cache"),
        file("game.wasm", bin_new),
        file("added.json", b"{\"level\": 2}".to_vec()),
        dir("src"),
        file("src/enemy-ai.js", moved_changed),
        BuildEntry { path: "run.sh".into(), content: EntryContent::File { executable: true, data: b"#!/bin/sh\n".to_vec() } },
        BuildEntry { path: "link".into(), content: EntryContent::Symlink { target: "assets/empty".into() } },
    ])
    .unwrap();
    let (patch, stats) = diff_builds(&old, &new, &DiffOptions { level: 9, ..Default::default() }, &|_, _| {}).unwrap();
    assert_eq!(stats.renamed, 1, "{stats:?}");
    assert_eq!(stats.unchanged, 1, "run.sh is unchanged content with a new mode: {stats:?}");
    assert_eq!(stats.removed, 4, "music.ogg, removed.txt, scripts/ and scripts/ai.js: {stats:?}");
    assert!(patch.len() < 20_000, "the rename and the moved+changed file must be nearly free: {} bytes", patch.len());
    assert_eq!(apply_both(&patch, &old), new);
}

#[test]
fn applying_to_the_wrong_old_build_fails_cleanly() {
    let (old, new) = binary_pair(100_000);
    let (patch, _) = diff_builds(&Build::single_file(old.clone()), &Build::single_file(new), &DiffOptions::default(), &|_, _| {}).unwrap();
    let mut wrong = old.clone();
    wrong[500] ^= 1;
    let mut sink = MemorySink::default();
    let err = apply_patch(&patch[..], &mut MemoryOldBuild::new(&Build::single_file(wrong)), &mut sink, &mut |_| {}).unwrap_err();
    assert!(matches!(err, edgepatch_core::Error::FilesDigestMismatch { .. }), "{err}");
    assert!(sink.into_build().entries.is_empty(), "a file that failed verification was finished");
    let short = old[..old.len() - 1].to_vec();
    let err = apply_patch(&patch[..], &mut MemoryOldBuild::new(&Build::single_file(short)), &mut MemorySink::default(), &mut |_| {}).unwrap_err();
    assert!(err.to_string().contains("not the build this patch was made from"), "{err}");
}

#[test]
fn mixing_a_file_and_a_tree_is_refused() {
    let tree = Build::from_entries(vec![file("a", vec![1])]).unwrap();
    let err = diff_builds(&Build::single_file(vec![1]), &tree, &DiffOptions::default(), &|_, _| {}).unwrap_err();
    assert!(err.to_string().contains("both"), "{err}");
}

#[test]
fn pushing_in_chunks_of_any_size_gives_the_same_build() {
    use edgepatch_core::apply::PatchApplier;
    let (bin_old, bin_new) = binary_pair(200_000);
    let old = Build::from_entries(vec![dir("d"), file("d/a.bin", bin_old), file("same", noise(9, 3000))]).unwrap();
    let new = Build::from_entries(vec![dir("d"), file("d/a.bin", bin_new), file("same", noise(9, 3000)), file("z-empty", vec![])]).unwrap();
    let opts = DiffOptions { level: 3, segment_size: 50_000, ..Default::default() };
    let (patch, _) = diff_builds(&old, &new, &opts, &|_, _| {}).unwrap();
    for chunk in [1usize, 7, 4096, patch.len()] {
        let mut applier = PatchApplier::new();
        let mut sink = MemorySink::default();
        let mut source = MemoryOldBuild::new(&old);
        for piece in patch.chunks(chunk) {
            applier.push(piece, &mut source, &mut sink).unwrap();
        }
        applier.finish().unwrap();
        assert_eq!(sink.into_build(), new, "chunk size {chunk}");
    }
}

#[test]
fn an_absurd_size_claim_fails_at_once_instead_of_buffering() {
    use edgepatch_core::apply::PatchApplier;
    let mut header = b"EDGEPTCH\x01\x00\x00\x00".to_vec();
    header.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f, 0x05]); // tree "size" 2^32-1
    let mut applier = PatchApplier::new();
    let old = Build::default();
    let err = applier.push(&header, &mut MemoryOldBuild::new(&old), &mut MemorySink::default());
    assert!(err.is_err(), "a 4 GiB tree claim must be refused before its bytes arrive");
}

#[test]
fn unchanged_entries_of_a_large_tree_cost_next_to_nothing() {
    // 2,000 files in 40 directories; the new version changes 3 of them.
    let mut old_entries = Vec::new();
    let mut new_entries = Vec::new();
    for d in 0..40 {
        let dir = format!("modules/package-{d:02}/src");
        for e in [&mut old_entries, &mut new_entries] {
            e.push(BuildEntry { path: format!("modules/package-{d:02}"), content: EntryContent::Directory });
            e.push(BuildEntry { path: dir.clone(), content: EntryContent::Directory });
        }
        for f in 0..50 {
            let path = format!("{dir}/component-{f:02}-implementation.js");
            let data = noise((d * 50 + f) as u64, 300);
            let mut changed = data.clone();
            if [(3, 7), (17, 0), (39, 49)].contains(&(d, f)) {
                changed[150] ^= 0xff;
            }
            old_entries.push(file(&path, data));
            new_entries.push(file(&path, changed));
        }
    }
    old_entries.push(BuildEntry { path: "modules".into(), content: EntryContent::Directory });
    new_entries.push(BuildEntry { path: "modules".into(), content: EntryContent::Directory });
    let (old, new) = (Build::from_entries(old_entries).unwrap(), Build::from_entries(new_entries).unwrap());
    let (patch, stats) = diff_builds(&old, &new, &DiffOptions { level: 19, ..Default::default() }, &|_, _| {}).unwrap();
    assert_eq!((stats.unchanged, stats.delta_files), (1997, 3), "{stats:?}");
    // Each of the 2,043 entries named would take at least a byte or two; kept by runs, they take a few bytes in all.
    assert!(patch.len() < 600, "patch of 3 one-byte changes in a 2,000-file tree is {} bytes", patch.len());
    assert_eq!(apply_both(&patch, &old), new);
}
