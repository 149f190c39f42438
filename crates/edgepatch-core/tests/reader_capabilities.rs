//! A writer given a reader's capabilities (docs/FORMAT.md §5) uses no format feature outside
//! them, in both writers (the in-memory diff and the generator), and the patch still applies
//! exactly. The build pair exercises every optional feature, so a writer that ignored the
//! reader would be caught: with this build's own set the same pair needs most of them.

mod appliers;
mod fixture_builds;
mod reference_applier;
mod wasm_modules;

use appliers::{apply_both, reader};
use edgepatch_core::generate::{drive, BuildReaders, PatchGenerator, WasmTransform};
use edgepatch_core::inspect::inspect_patch;
use edgepatch_core::signature::Signature;
use edgepatch_core::{diff_builds, Build, BuildEntry, Capabilities, Capability, DiffOptions, EntryContent, Error};
use edgepatch_testkit::noise;
use fixture_builds::file;

/// Old and new builds with an executable file (mode-blind digest), sparse byte changes
/// (run-coded diffs), re-emitted wasm code (field-split layout; LZMA at level 19), a module with
/// a function table (element entries), one with exported names (function keys), one with DWARF
/// line addresses, and a split module renamed by its content hash (split reference).
fn pair() -> (Build, Build) {
    let data = noise(5, 300_000);
    let mut data2 = data.clone();
    for i in (0..data2.len()).step_by(997) {
        data2[i] = data2[i].wrapping_add(3);
    }
    let (game1, game2) = wasm_modules::recompiled_versions(600);
    let (table1, table2) = wasm_modules::versions_with_table(800, 9);
    let (names1, names2) = wasm_modules::versions_with_names(800, 9);
    let (debug1, debug2) = wasm_modules::versions_with_debug_line(800, 9);
    let (hashed1, hashed2) = wasm_modules::recompiled_versions(500);
    let exe = |path: &str, data: Vec<u8>| BuildEntry { path: path.into(), content: EntryContent::File { executable: true, data } };
    let old = Build::from_entries(vec![
        exe("server", noise(8, 20_000)),
        file("data.pak", data),
        file("game.wasm", game1),
        file("table.wasm", table1),
        file("names.wasm", names1),
        file("debug.wasm", debug1),
        file("app.3f9a1c.wasm", hashed1),
    ])
    .unwrap();
    let new = Build::from_entries(vec![
        exe("server", noise(8, 20_000)),
        file("data.pak", data2),
        file("game.wasm", game2),
        file("table.wasm", table2),
        file("names.wasm", names2),
        file("debug.wasm", debug2),
        file("app.8b20de.wasm", hashed2),
    ])
    .unwrap();
    (old, new)
}

/// A reader from before LZMA segments, split references and the later side info versions.
fn yesterday() -> Capabilities {
    Capabilities::parse_list("current,-lzma-segments,-wasm-split-reference,-wasm-function-keys,-wasm-dwarf-addresses").unwrap()
}

fn readers() -> Vec<Capabilities> {
    vec![Capabilities::current(), yesterday(), Capabilities::BASELINE.with(Capability::WasmTransform), Capabilities::BASELINE]
}

fn required(patch: &[u8]) -> Capabilities {
    inspect_patch(patch).expect("inspect").required_capabilities()
}

fn diff(old: &Build, new: &Build, reader: Capabilities) -> Vec<u8> {
    let opts = DiffOptions { level: 19, threads: 2, segment_size: 256 << 10, reader, ..DiffOptions::default() };
    diff_builds(old, new, &opts, &|_, _| {}).expect("diff").0
}

/// The generator, as the Worker drives it: transforms the reader cannot apply are left out
/// (their modules stored as they are), LZMA asked for, the reader set before anything else.
fn generate(old: &Build, new: &Build, reader_set: Capabilities) -> Vec<u8> {
    let (os, ns) = (Signature::of_build(old, 16 << 10), Signature::of_build(new, 16 << 10));
    let mut g = PatchGenerator::new(Some(&os), &ns, 19).unwrap();
    g.set_reader(reader_set).unwrap();
    g.set_lzma_segments(true).unwrap();
    let (mut normalized, mut old_split) = (Vec::new(), Vec::new());
    for (path, data) in new.files() {
        let old_path = if path == "app.8b20de.wasm" { "app.3f9a1c.wasm" } else { path };
        let Some((_, old_data)) = old.files().find(|(p, _)| *p == old_path) else { continue };
        let prepared = match old_path == path {
            true => WasmTransform::prepare(path, old_data, data),
            false => WasmTransform::normalize_owned(path, old_data.to_vec(), data.to_vec()).and_then(|n| n.renamed(old_path).finish(old_data.to_vec())),
        };
        let Some(p) = prepared else { continue };
        if !p.transform.required_capabilities().is_subset(reader_set) {
            let refused = g.add_wasm_transform(p.transform).expect_err("a transform the reader cannot apply is refused");
            assert!(refused.to_string().contains("reader"), "{refused}");
            continue;
        }
        g.add_wasm_transform(p.transform).unwrap();
        normalized.push((path.to_string(), p.normalized));
        if let Some(o) = p.old_split {
            old_split.push((old_path.to_string(), o));
        }
    }
    let form = |list: Vec<(String, Vec<u8>)>| {
        move |path: &str, offset: u64, buf: &mut [u8]| -> edgepatch_core::Result<()> {
            let (_, d) = list.iter().find(|(p, _)| p == path).ok_or_else(|| Error::Invalid(format!("no form of {path}")))?;
            buf.copy_from_slice(&d[offset as usize..offset as usize + buf.len()]);
            Ok(())
        }
    };
    let (mut read_normalized, mut read_split) = (form(normalized), form(old_split));
    let readers = BuildReaders { old: &mut reader(old), new: &mut reader(new), normalized: Some(&mut read_normalized), old_split: Some(&mut read_split) };
    let mut patch = Vec::new();
    let g = drive(g, readers, &mut |b| {
        patch.extend_from_slice(b);
        Ok(())
    })
    .expect("generate");
    assert_eq!(g.required_capabilities(), required(&patch), "what the generator says its patch needs is what the patch needs");
    patch
}

#[test]
fn the_pair_needs_the_optional_features_when_the_reader_has_them() {
    let (old, new) = pair();
    let need = required(&diff(&old, &new, Capabilities::current()));
    for c in [Capability::WasmTransform, Capability::RunCodedOps, Capability::ModeBlindDigest, Capability::WasmSplitLayout, Capability::LzmaSegments] {
        assert!(need.contains(c), "the diff's patch for this build's reader should need {}: it needs {need}", c.name());
    }
    assert!(!need.is_subset(yesterday()), "the pair must exercise something yesterday's reader lacks: {need}");
}

#[test]
fn the_diff_writes_only_what_the_reader_declares_and_applies_exactly() {
    let (old, new) = pair();
    for reader_set in readers() {
        let patch = diff(&old, &new, reader_set);
        let need = required(&patch);
        assert!(need.is_subset(reader_set), "reader {reader_set}: the patch needs {}", need.difference(reader_set));
        assert_eq!(apply_both(&patch, &old), new, "reader {reader_set}");
    }
}

#[test]
fn the_generator_writes_only_what_the_reader_declares_and_applies_exactly() {
    let (old, new) = pair();
    let full = required(&generate(&old, &new, Capabilities::current()));
    assert!(!full.is_subset(yesterday()), "the generator's full patch must need something yesterday's reader lacks: {full}");
    for reader_set in readers() {
        let patch = generate(&old, &new, reader_set);
        let need = required(&patch);
        assert!(need.is_subset(reader_set), "reader {reader_set}: the patch needs {}", need.difference(reader_set));
        assert_eq!(apply_both(&patch, &old), new, "reader {reader_set}");
    }
}

#[test]
fn the_reader_is_set_before_transforms_and_generation() {
    let (old, new) = pair();
    let (os, ns) = (Signature::of_build(&old, 16 << 10), Signature::of_build(&new, 16 << 10));
    let mut g = PatchGenerator::new(Some(&os), &ns, 9).unwrap();
    g.header().unwrap();
    assert!(g.set_reader(Capabilities::BASELINE).is_err(), "the header is written: too late to change what it declares");
}
