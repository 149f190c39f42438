//! Hostile manifests: the golden manifest with one field made hostile (its
//! trailer recomputed), and garbage.

use edgepatch_core::error::ErrorKind;

use super::{hostile_dir, Vector};

/// `base` with `value` written at `at`, its trailing BLAKE3 recomputed.
fn with_manifest_field(base: &[u8], at: usize, value: &[u8]) -> Vec<u8> {
    let mut m = base.to_vec();
    m[at..at + value.len()].copy_from_slice(value);
    let n = m.len() - 32;
    let sum = blake3::hash(&m[..n]);
    m[n..].copy_from_slice(sum.as_bytes());
    m
}

/// Appends the manifest vectors; `garbage` is random bytes, not a manifest.
pub fn push(v: &mut Vec<Vector>, garbage: &[u8]) {
    let golden = std::fs::read(hostile_dir().parent().unwrap().join("golden/game-v1-to-v2.manifest")).unwrap();
    let manifest_vector = |name, attacks, kind, bytes| Vector { name, input: "manifest", attacks, kind, bytes, rules: &[] };
    v.push(manifest_vector(
        "manifest-oversized",
        "a manifest header claiming 4 GiB (total_len u32::MAX)",
        ErrorKind::Truncated,
        with_manifest_field(&golden, 12, &u32::MAX.to_le_bytes()),
    ));
    v.push(manifest_vector(
        "manifest-entry-count",
        "an entry count of 2^24 + 1",
        ErrorKind::Corrupt,
        with_manifest_field(&golden, 16, &((1u32 << 24) + 1).to_le_bytes()),
    ));
    v.push(manifest_vector(
        "manifest-count-vs-bytes",
        "2^24 entries claimed in a 2 KB manifest",
        ErrorKind::Corrupt,
        with_manifest_field(&golden, 16, &(1u32 << 24).to_le_bytes()),
    ));
    v.push(manifest_vector(
        "manifest-records-offset",
        "a records offset past the end",
        ErrorKind::Corrupt,
        with_manifest_field(&golden, 44, &u32::MAX.to_le_bytes()),
    ));
    v.push(manifest_vector("manifest-garbage", "random bytes, not a manifest", ErrorKind::Magic, garbage.to_vec()));
    v.push(manifest_vector(
        "manifest-version",
        "a format_version of 2 (only 1 exists)",
        ErrorKind::Version,
        with_manifest_field(&golden, 8, &2u16.to_le_bytes()),
    ));
    v.push(manifest_vector(
        "manifest-build-id-not-utf8",
        "a to_build id whose first byte is 0xFF (not UTF-8)",
        ErrorKind::Corrupt,
        with_manifest_field(&golden, 98, &[0xFF]),
    ));
    v.push(manifest_vector("manifest-kind", "a manifest kind of 3 (only 1 and 2 exist)", ErrorKind::Corrupt, with_manifest_field(&golden, 10, &[3])));
    v.push(manifest_vector(
        "manifest-head-in-build-manifest",
        "a build manifest (kind 1) whose flags say a head BLAKE3 follows its build ids",
        ErrorKind::Corrupt,
        with_manifest_field(&golden, 10, &[1]),
    ));
    v.push(manifest_vector(
        "manifest-unknown-flag",
        "header flags bit 2, which no field has",
        ErrorKind::Corrupt,
        with_manifest_field(&golden, 11, &[golden[11] | 4]),
    ));
    // The header and 4 bytes, total_len saying so: no room for the build id and the trailer.
    let mut short = golden[..100].to_vec();
    short[12..16].copy_from_slice(&100u32.to_le_bytes());
    v.push(manifest_vector("manifest-short", "a 100-byte manifest whose total_len says 100 (fewer than 96 + 32 bytes)", ErrorKind::Truncated, short));
    let mut flipped = golden.clone();
    *flipped.last_mut().unwrap() ^= 1;
    v.push(manifest_vector("manifest-trailer", "the golden manifest with one bit of its BLAKE3 trailer flipped", ErrorKind::Corrupt, flipped));
}
