//! The fast streaming applier against the independent reference applier
//! (tests/reference_applier/, written from docs/FORMAT.md alone): the golden
//! patch, diff-made patches (trees and single files, several levels and
//! segment sizes, window segments), each applied by both with identical
//! results; and every hostile vector refused by both.

mod appliers;
mod fixture_builds;
mod reference_applier;

use appliers::fast_apply as fast;
use edgepatch_core::{diff_builds, Build, BuildEntry, DiffOptions, EntryContent};
use edgepatch_testkit::{corpus, leb128, noise};
use fixture_builds::{fixtures_dir, load_tar};

fn sorted(mut b: Build) -> Build {
    b.entries.sort_by(|x, y| x.path.as_bytes().cmp(y.path.as_bytes()));
    b
}

/// Both appliers produce `new` from `old` with `patch`.
fn both_give(patch: &[u8], old: &Build, new: &Build, what: &str) {
    let reference = reference_applier::apply(patch, old).unwrap_or_else(|e| panic!("{what}: reference applier refused: {e}"));
    let fast = fast(patch, old).unwrap_or_else(|e| panic!("{what}: fast applier refused: {e}"));
    assert_eq!(sorted(reference), sorted(new.clone()), "{what}: reference applier output differs from the new build");
    assert_eq!(sorted(fast), sorted(new.clone()), "{what}: fast applier output differs from the new build");
}

fn file(path: &str, data: Vec<u8>) -> BuildEntry {
    BuildEntry { path: path.into(), content: EntryContent::File { executable: false, data } }
}

#[test]
fn golden_patch_applies_identically() {
    let (v1, v2) = (load_tar("game-v1.tar"), load_tar("game-v2.tar"));
    let patch = std::fs::read(fixtures_dir().join("golden/game-v1-to-v2.patch")).unwrap();
    both_give(&patch, &v1, &v2, "golden patch");
}

#[test]
fn diff_made_patches_apply_identically() {
    let (v1, v2) = (load_tar("game-v1.tar"), load_tar("game-v2.tar"));
    let empty = Build::from_entries(Vec::new()).unwrap();
    let pairs: Vec<(&str, &Build, &Build)> =
        vec![("v1->v2", &v1, &v2), ("v2->v1", &v2, &v1), ("empty->v2", &empty, &v2), ("v1->empty", &v1, &empty), ("v1->v1", &v1, &v1)];
    let (mut ops_segments, mut window_segments) = (0, 0);
    for (name, old, new) in pairs {
        // Small segments and a low level make many segments; 19 with big segments tries windows.
        for (level, segment_size) in [(19, 4 << 20), (3, 4096), (1, 777)] {
            let opts = DiffOptions { level, threads: 1, segment_size, ..DiffOptions::default() };
            let (patch, _) = diff_builds(old, new, &opts, &|_, _| {}).unwrap();
            both_give(&patch, old, new, &format!("{name} level {level} segments {segment_size}"));
            for segment in edgepatch_core::inspect::inspect_patch(patch.as_slice()).unwrap().layout.segments {
                match segment {
                    edgepatch_core::patch_format::Segment::Ops(_) => ops_segments += 1,
                    edgepatch_core::patch_format::Segment::Window(_) => window_segments += 1,
                }
            }
        }
    }
    // The diff makes window segments only where they beat ops by enough; window_segments_apply_identically covers them.
    assert!(ops_segments > 10, "ops segments exercised: {ops_segments} ops, {window_segments} window");
}

/// LZMA segments of both kinds (docs/FORMAT.md §2.3 `M`, §2.6 `L`): the arcade's re-emitted
/// module, stored split at level 19, and the fixture game's tree.
#[test]
fn lzma_segments_apply_identically() {
    use edgepatch_core::patch_format::{Segment, WindowCodec};
    let arcade = |v: &str| std::fs::read(fixtures_dir().join(format!("arcade/{v}/logic.wasm"))).unwrap();
    let (a, b) = (Build::single_file(arcade("v1")), Build::single_file(arcade("v2")));
    let (v1, v2) = (load_tar("game-v1.tar"), load_tar("game-v2.tar"));
    let (mut lzma_ops, mut lzma_windows) = (0, 0);
    for (name, old, new) in [("arcade logic.wasm", &a, &b), ("game v1->v2", &v1, &v2)] {
        let (patch, _) = diff_builds(old, new, &DiffOptions { threads: 1, ..DiffOptions::default() }, &|_, _| {}).unwrap();
        both_give(&patch, old, new, name);
        for segment in edgepatch_core::inspect::inspect_patch(patch.as_slice()).unwrap().layout.segments {
            match segment {
                Segment::Ops(h) if h.lzma.iter().any(Option::is_some) => lzma_ops += 1,
                Segment::Window(w) if matches!(w.codec, WindowCodec::Lzma { .. }) => lzma_windows += 1,
                _ => {}
            }
        }
    }
    assert!(lzma_ops > 0 && lzma_windows > 0, "{lzma_ops} LZMA ops segments, {lzma_windows} LZMA window segments");
}

#[test]
fn single_file_and_renamed_files_apply_identically() {
    let old = noise(11, 300_000);
    let mut new = old[..100_000].to_vec();
    new.extend_from_slice(b"an insertion in the middle of a binary");
    new.extend_from_slice(&old[120_000..]);
    for (level, segment_size) in [(19, 4 << 20), (3, 65536)] {
        let opts = DiffOptions { level, threads: 1, segment_size, ..DiffOptions::default() };
        let (a, b) = (Build::single_file(old.clone()), Build::single_file(new.clone()));
        let (patch, _) = diff_builds(&a, &b, &opts, &|_, _| {}).unwrap();
        both_give(&patch, &a, &b, "single file");
    }
    // A rename (a copy from another old path), an edit, a new symlink and an executable file.
    let a = Build::from_entries(vec![file("a.bin", noise(1, 50_000)), file("b.txt", b"hello\n".repeat(500)), file("keep", b"same".to_vec())]).unwrap();
    let mut text = b"hello\n".repeat(480);
    text.extend_from_slice(b"changed\n");
    let b = Build::from_entries(vec![
        BuildEntry { path: "bin".into(), content: EntryContent::Directory },
        BuildEntry { path: "bin/run".into(), content: EntryContent::File { executable: true, data: b"#!/bin/sh\n".to_vec() } },
        file("b.txt", text),
        file("keep", b"same".to_vec()),
        BuildEntry { path: "latest".into(), content: EntryContent::Symlink { target: "bin/run".into() } },
        file("moved.bin", noise(1, 50_000)),
    ])
    .unwrap();
    let (patch, _) = diff_builds(&a, &b, &DiffOptions { threads: 1, ..DiffOptions::default() }, &|_, _| {}).unwrap();
    both_give(&patch, &a, &b, "rename, edit, link, executable");
}

#[test]
fn both_appliers_refuse_every_hostile_vector() {
    let dir = fixtures_dir().join("hostile");
    let index: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("vectors.json")).unwrap()).unwrap();
    let empty = Build::from_entries(Vec::new()).unwrap();
    let mut patches = 0;
    for v in index["vectors"].as_array().unwrap().iter().filter(|v| v["input"] == "patch") {
        let bytes = std::fs::read(dir.join(v["file"].as_str().unwrap())).unwrap();
        let name = v["name"].as_str().unwrap();
        assert!(reference_applier::apply(&bytes, &empty).is_err(), "{name}: the reference applier accepted it");
        assert!(fast(&bytes, &empty).is_err(), "{name}: the fast applier accepted it");
        patches += 1;
    }
    assert!(patches >= 15, "only {patches} hostile patches");
}

#[test]
fn damaged_golden_patches_are_refused_by_both_or_neither_differs() {
    // Bytes flipped through the header and tree: whenever one applier accepts, both give the same build.
    let v1 = load_tar("game-v1.tar");
    let patch = std::fs::read(fixtures_dir().join("golden/game-v1-to-v2.patch")).unwrap();
    for i in (0..patch.len()).step_by(97) {
        let mut bad = patch.clone();
        bad[i] ^= 0x24;
        let n = bad.len() - 32;
        let sum = blake3::hash(&bad[..n]);
        bad[n..].copy_from_slice(sum.as_bytes());
        match (reference_applier::apply(&bad, &v1), fast(&bad, &v1)) {
            (Ok(a), Ok(b)) => assert_eq!(sorted(a), sorted(b), "byte {i}: both accept but differ"),
            (Err(_), Err(_)) => {}
            (r, f) => panic!("byte {i}: reference {:?}, fast {:?}", r.map(|_| "ok"), f.map(|_| "ok")),
        }
    }
}

fn compress_with_prefix(data: &[u8], prefix: &[u8]) -> Vec<u8> {
    use zstd::zstd_safe::{CCtx, CParameter};
    let mut cctx = CCtx::create();
    cctx.set_parameter(CParameter::CompressionLevel(19)).unwrap();
    cctx.ref_prefix(prefix).unwrap();
    let mut out = Vec::with_capacity(data.len() + 1024);
    cctx.compress2(&mut out, data).unwrap();
    out
}

/// A single-file patch made of window segments (§2.6), written here by hand:
/// the first segment's window is spans of the old file, the later ones' also
/// reach back into the bytes produced before them.
fn window_patch(old: &[u8], new: &[u8], cuts: &[usize], spans: &[(u64, u64)]) -> Vec<u8> {
    let mut tree = Vec::new();
    leb128::write_u64(&mut tree, old.len() as u64);
    tree.extend_from_slice(&[0, 1, 0, 0, 2]); // no runs; one entry, path "" (shared 0, length 0), code 2
    leb128::write_u64(&mut tree, new.len() as u64);
    tree.extend_from_slice(&[1, 0, 1]); // one old file, the first, in the reference
    tree.extend_from_slice(blake3::hash(blake3::hash(new).as_bytes()).as_bytes());
    let frame = zstd::bulk::compress(&tree, 3).unwrap();
    let mut p = b"EDGEPTCH".to_vec();
    p.extend_from_slice(&2u16.to_le_bytes());
    p.extend_from_slice(&1u16.to_le_bytes());
    leb128::write_u64(&mut p, tree.len() as u64);
    leb128::write_u64(&mut p, frame.len() as u64);
    p.extend_from_slice(&frame);
    let mut window_of_spans = Vec::new();
    for &(start, len) in spans {
        window_of_spans.extend_from_slice(&old[start as usize..(start + len) as usize]);
    }
    let mut bounds = vec![0];
    bounds.extend_from_slice(cuts);
    bounds.push(new.len());
    for w in bounds.windows(2) {
        let (from, to) = (w[0], w[1]);
        let back = from.min(1000);
        let mut window = window_of_spans.clone();
        window.extend_from_slice(&new[from - back..from]);
        let comp = compress_with_prefix(&new[from..to], &window);
        p.push(b'W');
        leb128::write_u64(&mut p, (to - from) as u64);
        leb128::write_u64(&mut p, spans.len() as u64);
        let mut end = 0;
        for &(start, len) in spans {
            leb128::write_u64(&mut p, start - end);
            leb128::write_u64(&mut p, len);
            end = start + len;
        }
        leb128::write_u64(&mut p, back as u64);
        leb128::write_u64(&mut p, comp.len() as u64);
        p.extend_from_slice(&comp);
    }
    p.push(b'E');
    leb128::write_u64(&mut p, (bounds.len() - 1) as u64);
    leb128::write_u64(&mut p, new.len() as u64);
    let sum = blake3::hash(&p);
    p.extend_from_slice(sum.as_bytes());
    p
}

#[test]
fn window_segments_apply_identically() {
    let v1 = load_tar("game-v1.tar");
    let v2 = load_tar("game-v2.tar");
    let text = |b: &Build| b.files().find(|(p, _)| *p == "game.js").unwrap().1.to_vec();
    let (old, new) = (text(&v1), text(&v2));
    let n = old.len() as u64;
    for (cuts, spans) in [(vec![], vec![(0, n)]), (vec![20_000, 41_000], vec![(0, n / 3), (n / 2, n / 2)])] {
        let patch = window_patch(&old, &new, &cuts, &spans);
        let windows = edgepatch_core::inspect::inspect_patch(patch.as_slice()).unwrap().layout.segments.len();
        assert_eq!(windows, cuts.len() + 1);
        both_give(&patch, &Build::single_file(old.clone()), &Build::single_file(new.clone()), &format!("window segments cut at {cuts:?}"));
    }
}

#[test]
fn links_are_data_chains_and_targets_leaving_the_build_included() {
    let link = |path: &str, target: &str| BuildEntry { path: path.into(), content: EntryContent::Symlink { target: target.into() } };
    let empty = Build::from_entries(Vec::new()).unwrap();
    let opts = DiffOptions { threads: 1, ..DiffOptions::default() };
    // `y -> x` names the link x as its last component: nothing is followed through x.
    let fine = Build::from_entries(vec![file("f", b"data".to_vec()), link("x", "."), link("y", "x"), link("z", "f")]).unwrap();
    let (patch, _) = diff_builds(&empty, &fine, &opts, &|_, _| {}).unwrap();
    both_give(&patch, &empty, &fine, "links to links");
    // `s -> x/..` goes through the link x, `up -> ../../etc` leaves the build: both are data
    // to an applier, which never follows a link (the CLI's tests/links.rs shows nothing outside OUT is touched).
    let chain = Build::from_entries(vec![link("s", "x/.."), link("up", "../../etc"), link("x", ".")]).unwrap();
    let (patch, _) = diff_builds(&empty, &chain, &opts, &|_, _| {}).unwrap();
    both_give(&patch, &empty, &chain, "link chains and a link leaving the build");
}

#[test]
fn a_large_regular_tree_compressing_1000x_applies() {
    // 40,000 files whose paths differ only in a counter, each a few bytes:
    // about the most compressible tree a real build makes (measured: 1,107x).
    // A limit on the tree's expansion over its compressed size would refuse
    // such builds; §2.7 bounds the tree in absolute terms instead.
    let mut entries = vec![BuildEntry { path: "assets".into(), content: EntryContent::Directory }];
    for d in 0..40 {
        entries.push(BuildEntry { path: format!("assets/level_{d:03}"), content: EntryContent::Directory });
        for f in 0..1000 {
            entries.push(file(&format!("assets/level_{d:03}/sprite_frame_{f:05}.png"), format!("{d}-{f}").into_bytes()));
        }
    }
    let new = Build::from_entries(entries).unwrap();
    let empty = Build::from_entries(Vec::new()).unwrap();
    let (patch, _) = diff_builds(&empty, &new, &DiffOptions { threads: 1, level: 19, ..DiffOptions::default() }, &|_, _| {}).unwrap();
    let mut at = 12;
    let (decoded, compressed) = (leb128::read_u64(&patch, &mut at), leb128::read_u64(&patch, &mut at));
    println!("tree: {decoded} bytes decoded from {compressed} ({:.1}x)", decoded as f64 / compressed as f64);
    assert!(decoded > 300 * compressed, "the tree compresses as this test means it to ({decoded} / {compressed})");
    both_give(&patch, &empty, &new, "40,000-file tree");
}

mod wasm_modules;

/// Transformed wasm files (docs/FORMAT.md §2.8): the reference applier's own
/// inverse, written from the document, gives the same files. With
/// EDGEPATCH_WASM_PAIRS set to a directory of `<pair>/{old,new}` (real
/// modules: Go, Emscripten, Rust), those pairs too.
#[test]
fn transformed_wasm_patches_apply_identically() {
    let mut pairs: Vec<(String, Vec<u8>, Vec<u8>)> = Vec::new();
    let (v1, v2) = wasm_modules::versions(3000, 20);
    pairs.push(("made-up".into(), v1, v2));
    let (g1, g2) = wasm_modules::go_like_versions(1500, 9);
    pairs.push(("made-up, Go-like".into(), g1, g2));
    let (s1, s2) = wasm_modules::go_like_segmented_versions(1500, 9);
    pairs.push(("made-up, Go-like data in segments".into(), s1, s2));
    let (l1, l2) = wasm_modules::llvm_like_versions(400, 96);
    pairs.push(("made-up, addresses in memarg offsets".into(), l1, l2));
    let (n1, n2) = wasm_modules::versions_with_names(3000, 20);
    pairs.push(("made-up, exports and names".into(), n1, n2));
    let (d1, d2) = wasm_modules::versions_with_debug_line(3000, 20);
    pairs.push(("made-up, DWARF line addresses".into(), d1, d2));
    pairs.extend(corpus::wasm_pairs().into_iter().map(|p| (p.name, p.old, p.new)));
    let mut transformed = 0;
    for (name, old, new) in pairs {
        let (a, b) = (Build::single_file(old.clone()), Build::single_file(new.clone()));
        let opts = DiffOptions { level: 3, threads: 2, ..DiffOptions::default() };
        let (patch, stats) = diff_builds(&a, &b, &opts, &|_, _| {}).unwrap();
        transformed += stats.wasm_transformed;
        both_give(&patch, &a, &b, &format!("{name} single file"));
        let ta = Build::from_entries(vec![file("game.wasm", old), file("readme.txt", b"v1".to_vec())]).unwrap();
        let tb = Build::from_entries(vec![file("game.wasm", new), file("readme.txt", b"v2".to_vec())]).unwrap();
        let (patch, _) = diff_builds(&ta, &tb, &opts, &|_, _| {}).unwrap();
        both_give(&patch, &ta, &tb, &format!("{name} in a tree"));
    }
    assert!(transformed >= 4, "the made-up pairs are transformed: {transformed}");
}
