//! Truncated, bit-flipped, garbage and empty patches and signatures must give a
//! clear error and never a panic; damage that still decodes fails the files digest.

mod fixture_builds;
mod reference_applier;

use edgepatch_core::memory::{MemoryOldBuild, MemorySink};
use edgepatch_core::signature::Signature;
use edgepatch_core::{apply_patch, check_patch_checksum, Build, Error};
use edgepatch_testkit::Rng;
use fixture_builds::{fixtures_dir, load_tar};
use reference_applier::apply as reference_apply;

fn golden_patch() -> (Build, Vec<u8>) {
    (load_tar("game-v1.tar"), std::fs::read(fixtures_dir().join("golden/game-v1-to-v2.patch")).unwrap())
}

/// Applies with both appliers; both must fail. Returns the fast applier's error.
fn must_fail(old: &Build, patch: &[u8]) -> Error {
    let mut sink = MemorySink::default();
    let fast = apply_patch(patch, &mut MemoryOldBuild::new(old), &mut sink, &mut |_| {});
    assert!(reference_apply(patch, old).is_err(), "reference applier accepted a damaged patch");
    let _ = edgepatch_core::inspect::inspect_patch(patch);
    fast.expect_err("fast applier accepted a damaged patch")
}

#[test]
fn truncated_anywhere() {
    let (old, patch) = golden_patch();
    for len in 0..patch.len() {
        let err = must_fail(&old, &patch[..len]);
        let msg = err.to_string();
        assert!(msg.contains("truncated") || msg.contains("corrupt") || msg.contains("magic"), "cut at {len}: {msg}");
    }
}

#[test]
fn bytes_flipped_everywhere() {
    let (old, patch) = golden_patch();
    let mut damaged = patch.clone();
    // Every byte of the header and tree section, then a stride through the
    // segment data and the checksum (every byte would take minutes).
    let positions = (0..patch.len()).filter(|&i| i < 1024 || i % 7 == 0 || i + 40 > patch.len());
    for i in positions {
        let bit = 1u8 << (i % 8);
        damaged[i] ^= bit;
        must_fail(&old, &damaged);
        damaged[i] ^= bit;
    }
}

/// The pass a trusting caller makes before applying (`apply --trust-patch`) takes the patch
/// whole and refuses every damaged or cut copy of it, before any of it is decoded.
#[test]
fn the_checksum_pass_takes_the_patch_and_refuses_every_damaged_copy() {
    let (_, patch) = golden_patch();
    assert_eq!(check_patch_checksum(&patch[..]).unwrap(), patch.len() as u64);
    for len in 0..patch.len() {
        let err = check_patch_checksum(&patch[..len]).expect_err("a cut patch passed");
        assert!(matches!(err, Error::Truncated { .. } | Error::Corrupt { .. }), "cut at {len}: {err}");
    }
    let mut damaged = patch.clone();
    for i in 0..patch.len() {
        let bit = 1u8 << (i % 8);
        damaged[i] ^= bit;
        let err = check_patch_checksum(&damaged[..]).expect_err("a damaged patch passed");
        assert!(err.to_string().contains("checked before applying"), "byte {i}: {err}");
        damaged[i] ^= bit;
    }
    let mut longer = patch.clone();
    longer.push(0);
    assert!(check_patch_checksum(&longer[..]).is_err());
}

#[test]
fn garbage_empty_and_trailing_bytes() {
    let (old, patch) = golden_patch();
    assert!(matches!(must_fail(&old, b""), Error::Truncated { .. }));
    assert!(matches!(must_fail(&old, b"PK\x03\x04 this is a zip"), Error::BadMagic { .. }));
    let mut rng = Rng::new(99);
    for _ in 0..200 {
        let len = rng.below(4096);
        let mut junk = rng.bytes(len);
        must_fail(&old, &junk);
        // Garbage behind a valid header reaches the deeper decoders.
        junk.splice(0..0, patch[..12].iter().copied());
        must_fail(&old, &junk);
    }
    let mut longer = patch.clone();
    longer.push(0);
    assert!(must_fail(&old, &longer).to_string().contains("after the patch checksum"));
}

#[test]
fn wrong_version_is_named() {
    let (old, mut patch) = golden_patch();
    patch[8] = 9;
    let msg = must_fail(&old, &patch).to_string();
    assert!(msg.contains("version 9"), "{msg}");
}

#[test]
fn damage_behind_a_valid_checksum_is_caught_by_the_files_digest() {
    // At level 18 every stream is a zstd frame, which decodes flipped bytes into other bytes
    // more often than LZMA (whose decoder then rarely uses exactly every byte: the golden
    // patch's flips are all refused as corrupt before the digest).
    let old = load_tar("game-v1.tar");
    let new = load_tar("game-v2.tar");
    let opts = edgepatch_core::DiffOptions { level: 18, threads: 1, ..edgepatch_core::DiffOptions::default() };
    let (patch, _) = edgepatch_core::diff_builds(&old, &new, &opts, &|_, _| {}).unwrap();
    // Flip bytes and then recompute the trailer, as a buggy or hostile
    // producer would: whatever still decodes must fail the files digest.
    let body = patch.len() - 32;
    let mut digest_failures = 0;
    for i in (1024..body).step_by(97) {
        let mut damaged = patch.clone();
        damaged[i] ^= 0x20;
        let sum = *blake3::hash(&damaged[..body]).as_bytes();
        damaged[body..].copy_from_slice(&sum);
        // A flip that decodes to the same streams (a match offset of a repetitive
        // run-coded diff that copies the same bytes) is no damage: both appliers
        // make the new build exactly.
        if reference_apply(&damaged, &old).is_ok_and(|b| b == new) {
            continue;
        }
        digest_failures += matches!(must_fail(&old, &damaged), Error::FilesDigestMismatch { .. }) as u32;
    }
    assert!(digest_failures > 0, "no damage reached the files digest: the test does not test it");
}

#[test]
fn damaged_old_build_is_refused() {
    let (old, patch) = golden_patch();
    // A copied file (the moved theme.wav) and a reference file (game.wasm, which
    // the delta reads), each with one byte changed and its size kept.
    for path in ["assets/music/theme.wav", "game.wasm"] {
        let mut damaged = old.clone();
        let entry = damaged.entries.iter_mut().find(|e| e.path == path).expect("fixture has the file");
        let edgepatch_core::EntryContent::File { data, .. } = &mut entry.content else { panic!("{path} is a file") };
        let at = data.len() / 2;
        data[at] ^= 0x01;
        let err = must_fail(&damaged, &patch);
        assert!(matches!(err, Error::FilesDigestMismatch { .. }), "{path}: {err}");
        assert!(err.to_string().contains("old build differs"), "{err}");
    }
}

#[test]
fn signatures_truncated_flipped_or_garbage() {
    let bytes = std::fs::read(fixtures_dir().join("golden/game-v2.signature")).unwrap();
    Signature::decode(&bytes).unwrap();
    for len in 0..bytes.len() {
        assert!(Signature::decode(&bytes[..len]).is_err(), "cut at {len}");
    }
    let mut d = bytes.clone();
    for i in 0..bytes.len() {
        d[i] ^= 0x04;
        assert!(Signature::decode(&d).is_err(), "flip at {i}");
        d[i] ^= 0x04;
    }
    assert!(matches!(Signature::decode(b"EDGEPTCH\x01\x00"), Err(Error::BadMagic { .. })));
}

#[test]
fn old_build_with_other_entries_is_refused_before_anything_is_written() {
    let (old, patch) = golden_patch();
    // The patch keeps unchanged entries by their place in the old build's
    // listing: an extra, a missing or a resized entry must stop it up front.
    let mut extra = old.entries.clone();
    extra.push(edgepatch_core::BuildEntry {
        path: "zz-extra.txt".into(),
        content: edgepatch_core::EntryContent::File { executable: false, data: b"x".to_vec() },
    });
    let missing: Vec<_> = old.entries.iter().filter(|e| e.path != "style.css").cloned().collect();
    let mut exec = old.entries.clone();
    for e in &mut exec {
        if let edgepatch_core::EntryContent::File { executable, .. } = &mut e.content {
            *executable = !*executable;
            break;
        }
    }
    for entries in [extra, missing, exec] {
        let other = Build::from_entries(entries).unwrap();
        let mut sink = MemorySink::default();
        let err = apply_patch(&patch[..], &mut MemoryOldBuild::new(&other), &mut sink, &mut |_| {}).unwrap_err();
        assert!(err.to_string().contains("not the build this patch was made from"), "{err}");
        assert!(sink.into_build().entries.is_empty(), "something was written");
        assert!(reference_apply(&patch, &other).is_err());
    }
}
