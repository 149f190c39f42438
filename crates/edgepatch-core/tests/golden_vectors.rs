//! Golden test vectors: the patch from fixture game v1 to v2 and the signature
//! of v2, committed in fixtures/golden/ with their BLAKE3 (vectors.json), read
//! by every implementation's tests (Rust here; wasm, Worker and browser later).
//! If the encoder's output changes while the format versions stay the same,
//! this fails: bump the version, then regenerate with EDGEPATCH_UPDATE_GOLDEN=1.

mod fixture_builds;
mod reference_applier;

use edgepatch_core::inspect::{inspect_patch, patch_manifest};
use edgepatch_core::manifest::{EntrySource, ManifestView};
use edgepatch_core::memory::{MemoryOldBuild, MemorySink};
use edgepatch_core::patch_format::PATCH_VERSION;
use edgepatch_core::signature::{Signature, SIGNATURE_VERSION};
use edgepatch_core::{apply_patch, diff_builds, DiffOptions, EntryContent};
use fixture_builds::{fixtures_dir, load_tar};
use reference_applier::apply as reference_apply;

/// The settings the golden patch is made with (also in vectors.json).
fn golden_options() -> DiffOptions {
    DiffOptions { level: 19, threads: 2, ..DiffOptions::default() }
}
const GOLDEN_BLOCK_SIZE: u32 = 4096;

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn golden_vectors_match_the_encoder() {
    let v1 = load_tar("game-v1.tar");
    let v2 = load_tar("game-v2.tar");
    let (patch, _) = diff_builds(&v1, &v2, &golden_options(), &|_, _| {}).unwrap();
    let signature = Signature::of_build(&v2, GOLDEN_BLOCK_SIZE).encode();
    let info = inspect_patch(patch.as_slice()).unwrap();
    let tree = info.resolve(edgepatch_core::diff::build_listing(&v1)).unwrap();
    let hash_of = |i: usize| match &v2.entries.iter().find(|e| e.path == tree.entries[i].path).unwrap().content {
        EntryContent::File { data, .. } => *blake3::hash(data).as_bytes(),
        _ => unreachable!("files only"),
    };
    let manifest = patch_manifest(&tree, &info.layout, hash_of, *blake3::hash(&patch).as_bytes(), "game-v1", "game-v2").unwrap().encode().unwrap();
    let dir = fixtures_dir().join("golden");
    let vectors = serde_json::json!({
        "comment": "Made by crates/edgepatch-core/tests/golden_vectors.rs from fixtures/game-v1.tar and game-v2.tar",
        "patch": { "file": "game-v1-to-v2.patch", "format_version": PATCH_VERSION, "size": patch.len(), "blake3": hex(blake3::hash(&patch).as_bytes()),
                   "settings": { "level": golden_options().level, "segment_size": golden_options().segment_size } },
        "signature": { "file": "game-v2.signature", "format_version": SIGNATURE_VERSION, "block_size": GOLDEN_BLOCK_SIZE,
                       "size": signature.len(), "blake3": hex(blake3::hash(&signature).as_bytes()) },
        "manifest": { "file": "game-v1-to-v2.manifest", "format_version": edgepatch_core::manifest::FORMAT_VERSION, "from": "game-v1", "to": "game-v2",
                      "size": manifest.len(), "blake3": hex(blake3::hash(&manifest).as_bytes()) },
    });
    if std::env::var("EDGEPATCH_UPDATE_GOLDEN").is_ok() {
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("game-v1-to-v2.patch"), &patch).unwrap();
        std::fs::write(dir.join("game-v2.signature"), &signature).unwrap();
        std::fs::write(dir.join("game-v1-to-v2.manifest"), &manifest).unwrap();
        std::fs::write(dir.join("vectors.json"), serde_json::to_string_pretty(&vectors).unwrap() + "\n").unwrap();
    }
    let committed: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("vectors.json")).unwrap()).unwrap();
    for what in ["patch", "signature", "manifest"] {
        let same_version = committed[what]["format_version"] == vectors[what]["format_version"];
        // The manifest names the patch's size and BLAKE3: a new patch makes a new manifest.
        let same_input = what != "manifest" || committed["patch"] == vectors["patch"];
        assert!(
            committed[what] == vectors[what] || !same_version || !same_input,
            "{what} encoding changed but its format version did not: bump the version, then regenerate \
             with EDGEPATCH_UPDATE_GOLDEN=1.\ncommitted: {}\nnow:       {}",
            committed[what],
            vectors[what]
        );
        assert!(same_version, "{what} format version changed: regenerate with EDGEPATCH_UPDATE_GOLDEN=1");
    }
    assert_eq!(std::fs::read(dir.join("game-v1-to-v2.patch")).unwrap(), patch);
    assert_eq!(std::fs::read(dir.join("game-v2.signature")).unwrap(), signature);
    assert_eq!(std::fs::read(dir.join("game-v1-to-v2.manifest")).unwrap(), manifest);
}

#[test]
fn committed_golden_manifest_describes_the_patch() {
    let bytes = std::fs::read(fixtures_dir().join("golden/game-v1-to-v2.manifest")).unwrap();
    let view = ManifestView::open(&bytes).unwrap();
    let v2 = load_tar("game-v2.tar");
    assert_eq!(view.len(), v2.entries.len());
    let wasm = view.lookup("game.wasm").unwrap().expect("game.wasm listed");
    let EntryContent::File { data, .. } = &v2.entries.iter().find(|e| e.path == "game.wasm").unwrap().content else { panic!() };
    assert_eq!(wasm.blake3, *blake3::hash(data).as_bytes());
    assert!(matches!(wasm.source, EntrySource::Delta { .. }));
    let moved = view.lookup("assets/audio/theme.wav").unwrap().unwrap();
    assert_eq!(moved.source, EntrySource::CopyOf { old_path: "assets/music/theme.wav".into() });
    assert!(view.lookup("data/legacy.json").unwrap().is_none(), "removed file listed");
}

#[test]
fn committed_golden_patch_turns_v1_into_v2() {
    let v1 = load_tar("game-v1.tar");
    let v2 = load_tar("game-v2.tar");
    let patch = std::fs::read(fixtures_dir().join("golden/game-v1-to-v2.patch")).unwrap();
    let mut sink = MemorySink::default();
    apply_patch(&patch[..], &mut MemoryOldBuild::new(&v1), &mut sink, &mut |_| {}).unwrap();
    assert_eq!(sink.into_build(), v2);
    assert_eq!(reference_apply(&patch, &v1).unwrap(), v2);
    let sig = Signature::decode(&std::fs::read(fixtures_dir().join("golden/game-v2.signature")).unwrap()).unwrap();
    assert_eq!(sig, Signature::of_build(&v2, GOLDEN_BLOCK_SIZE));
}
