//! Binding an apply to a patch manifest (src/manifest_binding.rs): a whole,
//! self-consistent patch that is not the one the manifest describes is refused
//! while it is written, and the patch hash survives a resume.

mod fixture_builds;

use edgepatch_core::inspect::{inspect_patch, patch_manifest};
use edgepatch_core::manifest::{self, Manifest};
use edgepatch_core::manifest_binding::{BoundSink, ManifestBinding, PatchStreamHash};
use edgepatch_core::memory::{MemoryOldBuild, MemorySink};
use edgepatch_core::{diff_builds, Build, DiffOptions, EntryContent, PatchApplier};
use edgepatch_testkit::noise;
use fixture_builds::{file, fixtures_dir, load_tar};

fn manifest_of(old: &Build, new: &Build, patch: &[u8]) -> Manifest {
    let info = inspect_patch(patch).unwrap();
    let tree = info.resolve(edgepatch_core::diff::build_listing(old)).unwrap();
    let hash_of = |i: usize| match &new.entries.iter().find(|e| e.path == tree.entries[i].path).unwrap().content {
        EntryContent::File { data, .. } => *blake3::hash(data).as_bytes(),
        _ => unreachable!("files only"),
    };
    patch_manifest(&tree, &info.layout, hash_of, *blake3::hash(patch).as_bytes(), "a", "b").unwrap()
}

/// Applies `patch` bound to `manifest`, in pieces of `piece` bytes; the patch hash is checked too.
fn bound_apply(old: &Build, patch: &[u8], manifest: &[u8], piece: usize) -> Result<Build, String> {
    let mut binding = ManifestBinding::new(manifest).map_err(|e| e.to_string())?;
    let mut hash = PatchStreamHash::new(&binding);
    let mut old_build = MemoryOldBuild::new(old);
    let mut sink = MemorySink::default();
    let mut applier = PatchApplier::new();
    for chunk in patch.chunks(piece) {
        hash.update(chunk);
        applier.push(chunk, &mut old_build, &mut BoundSink { binding: &mut binding, inner: &mut sink }).map_err(|e| e.to_string())?;
    }
    applier.finish().map_err(|e| e.to_string())?;
    binding.finish(false, &mut sink).map_err(|e| e.to_string())?;
    hash.check(&binding).map_err(|e| e.to_string())?;
    Ok(sink.into_build())
}

#[test]
fn golden_patch_applies_bound_to_its_manifest() {
    let v1 = load_tar("game-v1.tar");
    let v2 = load_tar("game-v2.tar");
    let dir = fixtures_dir().join("golden");
    let patch = std::fs::read(dir.join("game-v1-to-v2.patch")).unwrap();
    let manifest = std::fs::read(dir.join("game-v1-to-v2.manifest")).unwrap();
    let out = bound_apply(&v1, &patch, &manifest, 777).unwrap();
    assert_eq!(out, v2);
}

#[test]
fn a_whole_patch_of_another_build_is_refused_by_the_manifest() {
    let v1 = load_tar("game-v1.tar");
    let v2 = load_tar("game-v2.tar");
    let dir = fixtures_dir().join("golden");
    let manifest = std::fs::read(dir.join("game-v1-to-v2.manifest")).unwrap();
    // The forger's build: the same paths and sizes, one byte of one file changed.
    let mut forged = v2.clone();
    let target = forged.entries.iter_mut().find(|e| matches!(&e.content, EntryContent::File { data, .. } if data.len() > 10)).unwrap();
    let EntryContent::File { data, .. } = &mut target.content else { unreachable!() };
    data[5] ^= 1;
    let (forged_patch, _) = diff_builds(&v1, &forged, &DiffOptions::default(), &|_, _| {}).unwrap();
    let err = bound_apply(&v1, &forged_patch, &manifest, 4096).unwrap_err();
    assert!(err.contains("not in the signed manifest"), "{err}");

    // A manifest that lists a file the patch does not make, or a size the patch does not write.
    let real_patch = std::fs::read(dir.join("game-v1-to-v2.patch")).unwrap();
    let mut m = manifest::decode(&manifest).unwrap();
    let i = m.entries.iter().position(|e| e.kind == manifest::EntryKind::File && e.size > 0).unwrap();
    m.entries[i].size += 1;
    let err = bound_apply(&v1, &real_patch, &m.encode().unwrap(), 4096).unwrap_err();
    assert!(err.contains("not in the signed manifest"), "{err}");
    let mut m = manifest::decode(&manifest).unwrap();
    m.entries[i].blake3[0] ^= 1;
    let err = bound_apply(&v1, &real_patch, &m.encode().unwrap(), 4096).unwrap_err();
    assert!(err.contains("BLAKE3"), "{err}");
    let mut m = manifest::decode(&manifest).unwrap();
    m.patch_blake3[0] ^= 1;
    let err = bound_apply(&v1, &real_patch, &m.encode().unwrap(), 4096).unwrap_err();
    assert!(err.contains("the patch has BLAKE3"), "{err}");
}

/// A patch whose header or tree section is not the signed one is refused before its tree is
/// decompressed or decoded (the head BLAKE3 the manifest states), in a new apply and in a
/// resumed one: no byte of an unvouched tree, side infos included, reaches a decoder.
#[test]
fn an_unvouched_header_or_tree_is_refused_before_it_is_decoded() {
    let v1 = load_tar("game-v1.tar");
    let v2 = load_tar("game-v2.tar");
    let dir = fixtures_dir().join("golden");
    let patch = std::fs::read(dir.join("game-v1-to-v2.patch")).unwrap();
    let manifest = std::fs::read(dir.join("game-v1-to-v2.manifest")).unwrap();
    let m = manifest::decode(&manifest).unwrap();
    assert!(m.head_blake3.is_some(), "the writer states the head's BLAKE3");
    let head_len = m.segments[0].patch_offset as usize;

    for at in [head_len / 2, head_len - 20, head_len - 1] {
        let mut forged = patch.clone();
        forged[at] ^= 0x40;
        let err = bound_apply(&v1, &forged, &manifest, 4096).unwrap_err();
        assert!(err.contains("header and tree") && err.contains("not in the signed manifest"), "byte {at}: {err}");
        // Unbound, the same bytes reach the decoders, which find them damaged.
        let unbound =
            edgepatch_core::apply_patch(forged.as_slice(), &mut MemoryOldBuild::new(&v1), &mut MemorySink::default(), &mut |_| {}).unwrap_err().to_string();
        assert!(!unbound.contains("signed manifest"), "{unbound}");

        // Resuming with a forged head: refused the same way.
        let mut binding = ManifestBinding::new(&manifest).unwrap();
        let point = edgepatch_core::ResumePoint { segments_done: 1, patch_offset: head_len as u64, new_offset: 1 };
        let err = PatchApplier::resume(
            &forged[..head_len],
            point,
            &mut MemoryOldBuild::new(&v1),
            &mut BoundSink { binding: &mut binding, inner: &mut MemorySink::default() },
        )
        .err()
        .unwrap()
        .to_string();
        assert!(err.contains("header and tree"), "resume, byte {at}: {err}");
    }

    // A manifest that does not state the head (written before the field existed) still binds
    // the files and the whole patch as before.
    let old_style = Manifest { head_blake3: None, ..m };
    assert_eq!(bound_apply(&v1, &patch, &old_style.encode().unwrap(), 4096).unwrap(), v2);
}

#[test]
fn patch_hash_and_file_checks_survive_a_resume() {
    let a = noise(11, 3 << 20);
    let mut a2 = a.clone();
    for i in (0..a2.len()).step_by(5003) {
        a2[i] ^= 0x33;
    }
    let old = Build::from_entries(vec![file("a.bin", a), file("keep.txt", b"same".to_vec())]).unwrap();
    let new = Build::from_entries(vec![file("a.bin", a2), file("c.bin", noise(12, 1 << 20)), file("keep.txt", b"same".to_vec())]).unwrap();
    let opts = DiffOptions { level: 3, segment_size: 1 << 20, ..DiffOptions::default() };
    let (patch, _) = diff_builds(&old, &new, &opts, &|_, _| {}).unwrap();
    let manifest = manifest_of(&old, &new, &patch).encode().unwrap();
    assert!(manifest::decode(&manifest).unwrap().segments.len() >= 3);

    // First session: push until the second resume point, keep its hash state.
    let mut binding = ManifestBinding::new(&manifest).unwrap();
    let mut hash = PatchStreamHash::new(&binding);
    let mut old_build = MemoryOldBuild::new(&old);
    let mut sink = MemorySink::default();
    let mut applier = PatchApplier::new();
    let mut pushed = 0usize;
    let (point, state) = loop {
        let chunk = &patch[pushed..(pushed + 1000).min(patch.len())];
        hash.update(chunk);
        applier.push(chunk, &mut old_build, &mut BoundSink { binding: &mut binding, inner: &mut sink }).unwrap();
        pushed += chunk.len();
        if let Some(p) = applier.resume_point().filter(|p| p.segments_done >= 2) {
            break (p, hash.state_at(p.patch_offset).expect("a state at every segment boundary"));
        }
    };
    drop(applier);

    // Second session: only the state and the resume point survive.
    let head_len = binding.header_and_tree_len().unwrap() as usize;
    let resume = |sink: &mut MemorySink, state: &[u8]| -> Result<(), String> {
        let mut binding = ManifestBinding::new(&manifest).unwrap();
        let mut hash = PatchStreamHash::resume(&binding, state, &patch[..head_len]).map_err(|e| e.to_string())?;
        let mut old_build = MemoryOldBuild::new(&old);
        let mut applier = PatchApplier::resume(&patch[..head_len], point, &mut old_build, &mut BoundSink { binding: &mut binding, inner: sink })
            .map_err(|e| e.to_string())?;
        for chunk in patch[point.patch_offset as usize..].chunks(1000) {
            hash.update(chunk);
            applier.push(chunk, &mut old_build, &mut BoundSink { binding: &mut binding, inner: sink }).map_err(|e| e.to_string())?;
        }
        applier.finish().map_err(|e| e.to_string())?;
        binding.finish(true, sink).map_err(|e| e.to_string())?;
        hash.check(&binding).map_err(|e| e.to_string())
    };
    // A state from another position is refused.
    let mut wrong = state.clone();
    wrong[33..41].copy_from_slice(&1u64.to_le_bytes());
    assert!(resume(&mut MemorySink::default(), &wrong).is_err());
    // Different header and tree bytes on resume are refused.
    let mut other_head = state.clone();
    other_head[0] ^= 1;
    assert!(resume(&mut MemorySink::default(), &other_head).unwrap_err().contains("header and tree"));
    let mut good_sink = sink;
    resume(&mut good_sink, &state).unwrap();
    assert_eq!(good_sink.into_build(), new);
}
