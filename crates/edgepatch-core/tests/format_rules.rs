//! docs/FORMAT.md's reject rules against the hostile vectors: every decoder or applier
//! rejection there carries an id (`[reject: id]`), every hostile vector of
//! fixtures/hostile/vectors.json names the ids it exercises (`rules`, from
//! tests/hostile_vectors/rules.rs), and this test fails when a rule has no vector, a vector
//! names a rule the document does not state, or an id is tagged twice. A rule without a
//! vector yet is listed in [`WITHOUT_VECTOR`] with why.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

/// Rules no hostile vector exercises yet, each with why.
const WITHOUT_VECTOR: &[(&str, &str)] = &[
    ("old-files-present", "vectors apply to the empty old build, with no file to miss; hostile_inputs.rs damages old builds"),
    ("new-tree-entries", "needs an old build keeping over 2^22 - 2^20 entries; vectors apply to the empty old build"),
    ("zstd-window", "the core decodes the tree section one-shot, where libzstd does not apply its window limit: a tree frame declaring 2^25 is accepted"),
    ("lzma-window-dictionary", "needs an `L` segment after more than 16 MiB of output, so its window and output pass 32 MiB"),
    ("element-sections-size", "needs a transformed module with over 4 MiB of element entries"),
    ("split-reference-shared", "needs two split-layout files with valid side infos reading one old file"),
    ("resume-point", "a resume point is an applier call, not patch bytes (resume.rs refuses points that do not fit)"),
    ("body-walk", "no vector yet: a code body that does not walk in the interleaved layout"),
    ("size-width", "no vector yet: a body size that does not fit its size width"),
    ("signature", "signatures are not hostile-vector inputs (hostile_inputs.rs truncates, flips and garbles them)"),
    ("manifest-records-region", "the stored offsets are checked first (manifest-offsets), so needs consistent counts and offsets"),
    ("manifest-record-bounds", "checked when a record is read; shared manifest vectors must fail ManifestReader's open (wasm, Worker), which reads none"),
    ("manifest-record-strings", "checked when a record is read; shared manifest vectors must fail ManifestReader's open (wasm, Worker), which reads none"),
    ("manifest-record-kind", "checked when a record is read; shared manifest vectors must fail ManifestReader's open (wasm, Worker), which reads none"),
    ("manifest-record-link", "checked when a record is read; shared manifest vectors must fail ManifestReader's open (wasm, Worker), which reads none"),
    ("manifest-record-source", "checked when a record is read; shared manifest vectors must fail ManifestReader's open (wasm, Worker), which reads none"),
    ("manifest-segment-offsets", "checked when a segment is read; shared manifest vectors must fail ManifestReader's open (wasm, Worker), which reads none"),
    ("manifest-order", "checked on full decode only; shared manifest vectors must fail ManifestReader's open (wasm, Worker)"),
    ("manifest-index", "checked on full decode only; shared manifest vectors must fail ManifestReader's open (wasm, Worker)"),
];

fn repo_file(path: &str) -> String {
    let at = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").join(path);
    std::fs::read_to_string(&at).unwrap_or_else(|e| panic!("{}: {e}", at.display()))
}

/// Every `[reject: id]` of `text`, with how often it occurs.
fn tagged_rules(text: &str) -> BTreeMap<String, usize> {
    const TAG: &str = "[reject: ";
    let mut ids = BTreeMap::new();
    for (at, _) in text.match_indices(TAG) {
        let rest = &text[at + TAG.len()..];
        let end = rest.find(']').unwrap_or_else(|| panic!("unclosed {TAG} at byte {at}"));
        let id = &rest[..end];
        assert!(!id.is_empty() && id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'), "bad rule id {id:?} at byte {at}");
        *ids.entry(id.to_string()).or_insert(0) += 1;
    }
    ids
}

/// Every rule a committed hostile vector names, with the vectors naming it.
fn vector_rules() -> BTreeMap<String, Vec<String>> {
    let index: serde_json::Value = serde_json::from_str(&repo_file("fixtures/hostile/vectors.json")).unwrap();
    let mut rules: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for v in index["vectors"].as_array().unwrap() {
        let name = v["name"].as_str().unwrap();
        let named = v["rules"].as_array().unwrap_or_else(|| panic!("{name}: no rules"));
        assert!(!named.is_empty(), "{name}: names no rule");
        for r in named {
            rules.entry(r.as_str().unwrap().to_string()).or_default().push(name.to_string());
        }
    }
    rules
}

#[test]
fn every_format_reject_rule_has_a_hostile_vector_and_every_vector_rule_is_in_format() {
    let doc = tagged_rules(&repo_file("docs/FORMAT.md"));
    assert!(doc.len() >= 80, "only {} tagged reject rules in docs/FORMAT.md", doc.len());
    let twice: Vec<_> = doc.iter().filter(|&(_, &n)| n > 1).map(|(id, _)| id.as_str()).collect();
    assert!(twice.is_empty(), "rule ids tagged more than once in docs/FORMAT.md: {twice:?}");

    let vectors = vector_rules();
    let allowed: BTreeSet<&str> = WITHOUT_VECTOR.iter().map(|(id, _)| *id).collect();
    assert_eq!(allowed.len(), WITHOUT_VECTOR.len(), "WITHOUT_VECTOR lists a rule twice");

    let untested: Vec<&str> = doc.keys().map(String::as_str).filter(|id| !vectors.contains_key(*id) && !allowed.contains(id)).collect();
    assert!(untested.is_empty(), "reject rules of docs/FORMAT.md no hostile vector names (add one, or list it in WITHOUT_VECTOR with why): {untested:?}");
    let unstated: Vec<String> = vectors.iter().filter(|(id, _)| !doc.contains_key(*id)).map(|(id, names)| format!("{id} ({})", names.join(", "))).collect();
    assert!(unstated.is_empty(), "hostile vectors name rules docs/FORMAT.md does not tag: {unstated:?}");
    let stale: Vec<&str> = allowed.iter().copied().filter(|id| !doc.contains_key(*id) || vectors.contains_key(*id)).collect();
    assert!(stale.is_empty(), "WITHOUT_VECTOR lists rules the document does not tag, or that a vector now names: {stale:?}");
    println!("{} reject rules, {} with hostile vectors, {} without yet", doc.len(), doc.len() - allowed.len(), allowed.len());
}
