//! Hostile vectors: attack patches and manifests committed under
//! fixtures/hostile/ with the error kind each must be refused with
//! (fixtures/hostile/vectors.json), read by the Rust, wasm, Worker and browser
//! tests alike. This test also makes them (the patches in
//! hostile_vectors/patch.rs, the wasm transform's in hostile_vectors/wasm.rs,
//! the manifests in hostile_vectors/manifest.rs, and which reject rules of
//! docs/FORMAT.md each exercises in hostile_vectors/rules.rs): byte for byte,
//! and it fails if the committed files differ (regenerate
//! with `EDGEPATCH_UPDATE_HOSTILE=1 cargo test -p edgepatch-core --test
//! hostile_vectors`, see fixtures/README.md).
//!
//! Every vector is applied with a counting allocator in place: the peak of
//! what the applier allocates for it must stay under the budget of
//! docs/FORMAT.md §2.7 (a fixed budget plus a small multiple of the input).

use std::path::PathBuf;

use edgepatch_core::error::ErrorKind;
use edgepatch_core::memory::{MemoryOldBuild, MemorySink};
use edgepatch_core::{apply_patch, Build};
use edgepatch_testkit::leb128;

mod counting_allocator;
#[path = "hostile_vectors/encoding.rs"]
mod encoding;
#[path = "hostile_vectors/manifest.rs"]
mod manifest;
#[path = "hostile_vectors/patch.rs"]
mod patch;
#[path = "hostile_vectors/rules.rs"]
mod rules;
#[path = "hostile_vectors/wasm.rs"]
mod wasm;

use counting_allocator::Counting;
use encoding::PatchBytes;

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// What an applier may allocate for a hostile input (§2.7): the fixed segment
/// budget (about 100 MiB at most) plus 64 times the input's size.
fn budget(input_len: usize) -> usize {
    (100 << 20) + 64 * input_len
}

fn hostile_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/hostile")
}

struct Vector {
    name: &'static str,
    input: &'static str,
    attacks: &'static str,
    kind: ErrorKind,
    bytes: Vec<u8>,
    /// The reject rules of docs/FORMAT.md it exercises (set from hostile_vectors/rules.rs).
    rules: &'static [&'static str],
}

fn patch_vector(name: &'static str, attacks: &'static str, kind: ErrorKind, bytes: Vec<u8>) -> Vector {
    Vector { name, input: "patch", attacks, kind, bytes, rules: &[] }
}

/// Every vector, in the order of the committed index.
fn make_vectors() -> Vec<Vector> {
    let mut v = Vec::new();
    patch::push(&mut v);
    wasm::push(&mut v);
    let garbage = v[0].bytes.clone();
    manifest::push(&mut v, &garbage);
    for x in &mut v {
        x.rules = rules::of(x.name);
    }
    let names: std::collections::HashSet<&str> = v.iter().map(|x| x.name).collect();
    assert_eq!(names.len(), v.len(), "two vectors share a name");
    assert_eq!(rules::count(), v.len(), "hostile_vectors/rules.rs lists a vector that is not made");
    v
}

fn index_json(vectors: &[Vector]) -> serde_json::Value {
    let list: Vec<serde_json::Value> = vectors
        .iter()
        .map(|v| {
            serde_json::json!({
                "name": v.name,
                "input": v.input,
                "file": format!("{}.{}", v.name, v.input),
                "old": if v.input == "patch" { "empty-tree" } else { "" },
                "attacks": v.attacks,
                "kind": v.kind.as_str(),
                "rules": v.rules,
                "size": v.bytes.len(),
                "blake3": blake3::hash(&v.bytes).to_hex().to_string(),
            })
        })
        .collect();
    serde_json::json!({
        "comment": "Made by crates/edgepatch-core/tests/hostile_vectors.rs (EDGEPATCH_UPDATE_HOSTILE=1 regenerates). Every input must be refused with the error kind named here (docs/FORMAT.md §2.7); rules: the ids of the FORMAT.md reject rules it exercises ([reject: id]). old: the old build a patch is applied to; empty-tree = a directory build with no entries.",
        "vectors": list,
    })
}

/// Applies a patch to the empty old tree, returning the error kind (None if it applied).
fn apply_kind(patch: &[u8]) -> Option<ErrorKind> {
    let old = Build::from_entries(Vec::new()).unwrap();
    let mut sink = MemorySink::default();
    apply_patch(patch, &mut MemoryOldBuild::new(&old), &mut sink, &mut |_| {}).err().map(|e| e.kind())
}

/// [`apply_kind`] into a sink with scratch space (`BuildSink::write_scratch`), where the applier
/// keeps normalized forms and split old modules and inverts from there: the same outcome.
fn apply_kind_with_scratch(patch: &[u8]) -> Option<ErrorKind> {
    let old = Build::from_entries(Vec::new()).unwrap();
    let mut sink = MemorySink::with_scratch();
    apply_patch(patch, &mut MemoryOldBuild::new(&old), &mut sink, &mut |_| {}).err().map(|e| e.kind())
}

#[test]
fn hostile_vectors_are_current_and_each_is_refused_with_its_kind_within_budget() {
    let vectors = make_vectors();
    let dir = hostile_dir();
    let index = index_json(&vectors);
    if std::env::var("EDGEPATCH_UPDATE_HOSTILE").is_ok() {
        std::fs::create_dir_all(&dir).unwrap();
        for v in &vectors {
            std::fs::write(dir.join(format!("{}.{}", v.name, v.input)), &v.bytes).unwrap();
        }
        std::fs::write(dir.join("vectors.json"), serde_json::to_string_pretty(&index).unwrap() + "\n").unwrap();
    }
    let committed: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("vectors.json")).unwrap()).unwrap();
    assert_eq!(committed, index, "fixtures/hostile/ differs from what this test makes: regenerate with EDGEPATCH_UPDATE_HOSTILE=1 (fixtures/README.md)");
    drop(vectors);

    // From the committed files, as every other implementation reads them.
    let mut seen = std::collections::HashSet::new();
    for v in committed["vectors"].as_array().unwrap() {
        let name = v["name"].as_str().unwrap();
        let bytes = std::fs::read(dir.join(v["file"].as_str().unwrap())).unwrap();
        assert_eq!(blake3::hash(&bytes).to_hex().as_str(), v["blake3"].as_str().unwrap(), "{name}: file differs from the index");
        let expected = ErrorKind::from_name(v["kind"].as_str().unwrap()).unwrap();
        seen.insert(expected);
        let base = counting_allocator::reset_peak();
        let kind = match v["input"].as_str().unwrap() {
            "patch" => apply_kind(&bytes),
            "manifest" => edgepatch_core::manifest::decode(&bytes).err().map(|e| e.kind()),
            other => panic!("{name}: unknown input {other}"),
        };
        let peak = counting_allocator::peak() - base;
        println!("{name}: {} bytes, refused as {kind:?}, peak allocation {} KiB", bytes.len(), peak >> 10);
        assert_eq!(kind, Some(expected), "{name} ({}): wrong outcome", v["attacks"]);
        assert!(peak <= budget(bytes.len()), "{name}: allocated {peak} bytes, budget {}", budget(bytes.len()));
        if v["input"] == "patch" {
            assert_eq!(apply_kind_with_scratch(&bytes), Some(expected), "{name}: another outcome with scratch space");
        }
    }
    for kind in [
        ErrorKind::Magic,
        ErrorKind::Version,
        ErrorKind::Truncated,
        ErrorKind::Corrupt,
        ErrorKind::Limit,
        ErrorKind::Path,
        ErrorKind::Link,
        ErrorKind::Digest,
        ErrorKind::OldBuild,
    ] {
        assert!(seen.contains(&kind), "no vector of kind {kind}");
    }
    // In this same test: the counters are global, and tests run in parallel.
    let peak = worst_case_tree_entries_peak();
    assert!(peak <= 120 << 20, "the most entries a patch may name cost {} MiB (FORMAT.md §2.7 says about 115)", peak >> 20);
}

#[test]
fn error_kind_names_are_stable_and_round_trip() {
    let names: Vec<&str> = ErrorKind::ALL.iter().map(|k| k.as_str()).collect();
    assert_eq!(names, ["magic", "version", "truncated", "corrupt", "limit", "path", "link", "digest", "unvouched", "old_build", "output", "io", "invalid"]);
    for k in ErrorKind::ALL {
        assert_eq!(ErrorKind::from_name(k.as_str()), Some(k));
    }
    assert_eq!(ErrorKind::from_name("nope"), None);
}

/// The tree's fixed budget at its worst: 2^20 named one-byte paths (a 4 MiB
/// tree section, a 411-byte patch), the most a patch may name. Not a
/// committed vector (nothing new to refuse); measured here because it sets
/// the tree's budget in FORMAT.md §2.7. Returns the peak allocation.
fn worst_case_tree_entries_peak() -> usize {
    let n = 1u64 << 20;
    let mut t = vec![0];
    leb128::write_u64(&mut t, n);
    for _ in 0..n {
        t.extend_from_slice(&[0, 1, b'a']);
    }
    t.extend(std::iter::repeat_n(0u8, n as usize));
    t.push(0);
    t.extend_from_slice(&[0u8; 32]);
    let patch = PatchBytes::new(&t).encode();
    drop(t);
    let base = counting_allocator::reset_peak();
    let kind = apply_kind(&patch);
    let peak = counting_allocator::peak() - base;
    println!("{n} named entries: patch {} bytes, refused as {kind:?}, peak allocation {} MiB", patch.len(), peak >> 20);
    assert_eq!(kind, Some(ErrorKind::Path), "the paths repeat");
    peak
}
