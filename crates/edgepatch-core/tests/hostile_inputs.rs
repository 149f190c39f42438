//! Truncated, bit-flipped, garbage and empty patches and signatures must give a
//! clear error, never a panic, and never a finished file that was not verified.

mod fixture_builds;

use edgepatch_core::memory::{MemoryOldBuild, MemorySink};
use edgepatch_core::signature::Signature;
use edgepatch_core::{apply_patch, reference_apply, Build, Error};
use fixture_builds::{fixtures_dir, load_tar};

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

#[test]
fn garbage_empty_and_trailing_bytes() {
    let (old, patch) = golden_patch();
    assert!(matches!(must_fail(&old, b""), Error::Truncated { .. }));
    assert!(matches!(must_fail(&old, b"PK\x03\x04 this is a zip"), Error::BadMagic { .. }));
    let mut x: u64 = 99;
    for _ in 0..200 {
        let len = (x % 4096) as usize;
        let mut junk: Vec<u8> = (0..len).map(|_| { x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407); (x >> 33) as u8 }).collect();
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
fn damaged_patch_finishes_no_unverified_file() {
    let (old, patch) = golden_patch();
    // Damage the middle of the delta data: files before it may finish (verified),
    // the damaged one and all after must not.
    let mut damaged = patch.clone();
    let mid = patch.len() / 2;
    damaged[mid] ^= 0x10;
    let v2 = load_tar("game-v2.tar");
    let mut sink = MemorySink::default();
    assert!(apply_patch(&damaged[..], &mut MemoryOldBuild::new(&old), &mut sink, &mut |_| {}).is_err());
    for e in sink.into_build().entries {
        assert!(v2.entries.contains(&e), "{} was finished with wrong content", e.path);
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
