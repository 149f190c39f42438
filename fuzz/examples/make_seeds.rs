//! Writes seed corpora for the fuzz targets into fuzz/corpus/<target>/:
//! valid patches from the fixed old builds (src/lib.rs) to several new builds,
//! signatures of those builds, build and patch manifests, and normalized wasm
//! modules with their side info.
//!
//!     cd fuzz && cargo run --release --example make_seeds
//!
//! Every patch is checked to apply (fast and reference) before it is written.
//! Besides diff-made patches, some are rewritten to use window segments (see
//! `as_window_patch`), which the diff only emits for large segments.

use std::fs;
use std::path::{Path, PathBuf};

use edgepatch_core::inspect::inspect_patch;
use edgepatch_core::manifest::{EntryKind, EntrySource, Manifest, ManifestEntry, ManifestKind, SegmentRef};
use edgepatch_core::patch_format::{FileSource, Segment, TreeEntryKind, WindowCodec, WindowSegmentHeader, END_TAG};
use edgepatch_core::signature::Signature;
use edgepatch_core::{apply_patch, diff_builds, Build, BuildEntry, DiffOptions, EntryContent};
use edgepatch_fuzz::reference_apply;
use edgepatch_fuzz::*;
use edgepatch_testkit::leb128;

fn corpus(target: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus").join(target);
    fs::create_dir_all(&dir).unwrap();
    dir
}

fn write(dir: &Path, name: &str, bytes: &[u8]) {
    fs::write(dir.join(name), bytes).unwrap();
    println!("{:>8} bytes  {}", bytes.len(), dir.join(name).display());
}

/// Single-file new versions of the old single file.
fn single_variants() -> Vec<(&'static str, Vec<u8>)> {
    let old = mixed(1, 64);
    let mut insert = old.clone();
    insert.splice(500..500, b"INSERTED TEXT ".repeat(5));
    let mut delete = old.clone();
    delete.drain(1000..1400);
    let mut replace = old.clone();
    for b in &mut replace[200..260] {
        *b = b.wrapping_add(1);
    }
    let mut moved = old[2000..].to_vec();
    moved.extend_from_slice(&old[..2000]);
    let mut grown = old.clone();
    grown.extend_from_slice(&noise(99, 1500));
    grown.extend_from_slice(&old);
    vec![
        ("same", old.clone()),
        ("insert", insert),
        ("delete", delete),
        ("replace", replace),
        ("rotate", moved),
        ("grown", grown),
        ("empty", Vec::new()),
        ("unrelated", noise(7, 900)),
        ("tiny", b"x".to_vec()),
    ]
}

fn with(entries: Vec<BuildEntry>, f: impl FnOnce(&mut Vec<BuildEntry>)) -> Vec<BuildEntry> {
    let mut e = entries;
    f(&mut e);
    e
}

fn set_file(e: &mut [BuildEntry], path: &str, data: Vec<u8>) {
    for x in e.iter_mut() {
        if x.path == path {
            if let EntryContent::File { data: d, .. } = &mut x.content {
                *d = data;
                return;
            }
        }
    }
    panic!("no file {path}");
}

/// Tree new versions of the old tree.
fn tree_variants() -> Vec<(&'static str, Vec<BuildEntry>)> {
    let base = old_tree_entries();
    let a = mixed(2, 24);
    vec![
        ("same", base.clone()),
        (
            "edit",
            with(base.clone(), |e| {
                let mut a2 = a.clone();
                a2.splice(100..100, b"NEW LINE\n".iter().copied());
                set_file(e, "assets/a.txt", a2);
                set_file(e, "readme.md", b"# game\nversion 2\n".to_vec());
            }),
        ),
        (
            "rename",
            with(base.clone(), |e| {
                e.retain(|x| x.path != "assets/b.bin");
                e.push(file("assets/deep/b-moved.bin", false, noise(3, 700)));
            }),
        ),
        (
            "mixed",
            with(base.clone(), |e| {
                e.retain(|x| x.path != "latest" && x.path != "empty");
                e.push(symlink("latest", "assets/a.txt"));
                e.push(dir("new"));
                e.push(dir("new/empty-dir"));
                e.push(file("new/tool", true, mixed(5, 20)));
                e.push(file("new/zero", false, Vec::new()));
                e.push(symlink("new/up", "../readme.md"));
                let mut b = noise(3, 700);
                b[10..20].copy_from_slice(b"0123456789");
                set_file(e, "assets/b.bin", b);
            }),
        ),
        ("only-dirs", vec![dir("assets"), dir("assets/deep"), dir("bin")]),
        ("empty", Vec::new()),
        (
            "concat",
            vec![file("all", false, {
                let mut v = a.clone();
                v.extend_from_slice(&noise(3, 700));
                v.extend_from_slice(&mixed(4, 10));
                v
            })],
        ),
    ]
}

fn check_applies(patch: &[u8], old: &Build, new: &Build) {
    let mut sink = MemSink::new(1 << 30);
    apply_patch(patch, &mut MemOld(old), &mut sink, &mut |_| {}).expect("seed patch applies");
    assert_eq!(sink.sorted_entries(), new.entries, "seed patch reproduces the new build");
    assert_eq!(reference_apply(patch, old).expect("reference applies seed").entries, new.entries);
}

fn varint(b: &[u8], at: &mut usize) -> u64 {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let x = b[*at];
        *at += 1;
        v |= u64::from(x & 0x7f) << shift;
        if x & 0x80 == 0 {
            break;
        }
    }
    v
}

/// The diff only tries window segments for segments whose ops encoding is over
/// 16 KiB, far bigger than good fuzz seeds. This rewrites a small diff-made
/// patch to carry its whole delta stream in `segments` window segments (zstd
/// with the reference stream as prefix), per docs/FORMAT.md. None if the patch
/// has no delta stream.
fn as_window_patch(patch: &[u8], old: &Build, new: &Build, segments: usize) -> Option<Vec<u8>> {
    let info = inspect_patch(patch).unwrap();
    let tree = &info.resolve(edgepatch_core::diff::build_listing(old)).unwrap();
    let data_of = |b: &Build, path: &str| -> Vec<u8> {
        b.entries
            .iter()
            .find_map(|e| match &e.content {
                EntryContent::File { data, .. } if e.path == path => Some(data.clone()),
                _ => None,
            })
            .unwrap()
    };
    let reference: Vec<u8> = tree.old_files.iter().filter(|f| f.in_reference).flat_map(|f| data_of(old, &f.path)).collect();
    let stream: Vec<u8> =
        tree.entries.iter().filter(|e| matches!(e.kind, TreeEntryKind::File { source: FileSource::Delta, .. })).flat_map(|e| data_of(new, &e.path)).collect();
    if stream.is_empty() {
        return None;
    }
    // Header and tree section are kept as they are.
    let mut at = 12;
    let _raw = varint(patch, &mut at);
    let comp = varint(patch, &mut at);
    let mut out = patch[..at + comp as usize].to_vec();
    let parts: Vec<&[u8]> = stream.chunks(stream.len().div_ceil(segments)).collect();
    for (i, part) in parts.iter().enumerate() {
        // Alternate between the whole reference and a few spans of it.
        let spans: Vec<(u64, u64)> = if i % 2 == 0 || reference.len() < 64 {
            if reference.is_empty() {
                vec![]
            } else {
                vec![(0, reference.len() as u64)]
            }
        } else {
            let r = reference.len() as u64;
            vec![(0, r / 4), (r / 3, r / 4), (r - r / 5, r / 5)]
        };
        let window: Vec<u8> = spans.iter().flat_map(|&(s, l)| reference[s as usize..(s + l) as usize].iter().copied()).collect();
        let mut cctx = zstd::zstd_safe::CCtx::create();
        cctx.set_parameter(zstd::zstd_safe::CParameter::CompressionLevel(19)).unwrap();
        cctx.set_parameter(zstd::zstd_safe::CParameter::WindowLog(((window.len() + part.len()).next_power_of_two().trailing_zeros()).clamp(10, 25))).unwrap();
        cctx.ref_prefix(&window).unwrap();
        let mut frame = Vec::with_capacity(zstd::zstd_safe::compress_bound(part.len()));
        cctx.compress2(&mut frame, part).unwrap();
        WindowSegmentHeader { new_len: part.len() as u64, spans, back_len: 0, comp_len: frame.len() as u64, codec: WindowCodec::Zstd }.encode(&mut out);
        out.extend_from_slice(&frame);
    }
    out.push(END_TAG);
    leb128::write_u64(&mut out, parts.len() as u64);
    leb128::write_u64(&mut out, stream.len() as u64);
    let hash = blake3::hash(&out);
    out.extend_from_slice(hash.as_bytes());
    let windows = inspect_patch(out.as_slice()).unwrap().layout.segments.iter().filter(|s| matches!(s, Segment::Window(_))).count();
    assert_eq!(windows, parts.len());
    Some(out)
}

fn patches() -> Vec<(String, Build, Build)> {
    let mut out = Vec::new();
    for (name, data) in single_variants() {
        out.push((format!("single-{name}"), old_single(), Build::single_file(data)));
    }
    for (name, entries) in tree_variants() {
        out.push((format!("tree-{name}"), old_tree(), Build::from_entries(entries).unwrap()));
    }
    out
}

fn main() {
    let dir = corpus("patch_apply");
    let mut window_segments = 0;
    for (name, old, new) in patches() {
        // Different levels and segment sizes give different segment mixes
        // (ops segments, window segments, several segments).
        for (tag, level, segment_size) in [("l3", 3, 8 << 20), ("l19-seg1k", 19, 1024), ("l1-seg300", 1, 300)] {
            let opts = DiffOptions { threads: 1, level, segment_size, ..Default::default() };
            let (patch, _) = diff_builds(&old, &new, &opts, &|_, _| {}).expect("diff");
            check_applies(&patch, &old, &new);
            let info = inspect_patch(patch.as_slice()).unwrap();
            window_segments += info.layout.segments.iter().filter(|s| matches!(s, Segment::Window(_))).count();
            write(&dir, &format!("{name}-{tag}.patch"), &patch);
            if tag == "l3" {
                for n in [1, 3] {
                    if let Some(w) = as_window_patch(&patch, &old, &new, n) {
                        check_applies(&w, &old, &new);
                        window_segments += n;
                        write(&dir, &format!("{name}-window{n}.patch"), &w);
                    }
                }
            }
        }
    }
    println!("window segments in patch seeds: {window_segments}");

    let dir = corpus("signature_decode");
    for (name, _, new) in patches() {
        write(&dir, &format!("{name}.sig"), &Signature::of_build(&new, 512).encode());
    }
    write(&dir, "old-tree-4k.sig", &Signature::of_build(&old_tree(), 4096).encode());

    let dir = corpus("manifest_decode");
    for (name, m) in manifests() {
        write(&dir, &format!("{name}.manifest"), &m.encode().unwrap());
    }

    // wasm_inverse: each real module's normalized form and side info as a raw input (those
    // under the 64 KiB -max_len scripts/fuzz.sh runs with), and one structured input per
    // form (its mode byte picks the form, no edits yet).
    let dir = corpus("wasm_inverse");
    for (k, (name, n)) in edgepatch_fuzz::wasm::normalized_forms().iter().enumerate() {
        let back = edgepatch_core::wasm_transform::inverse(&n.bytes, &n.side_info).expect("a forward transform inverts");
        assert!(!back.is_empty());
        let raw = edgepatch_fuzz::wasm::raw_input(n);
        if raw.len() <= 64 << 10 {
            write(&dir, &format!("raw-{name}.bin"), &raw);
        }
        write(&dir, &format!("form-{name}.bin"), &[k as u8 + 1]);
    }
}

fn entry(path: &str, kind: EntryKind, size: u64, target: Option<&str>, source: EntrySource) -> ManifestEntry {
    ManifestEntry {
        path: path.into(),
        kind,
        executable: path.starts_with("bin/"),
        // Stored decoded (record flags bit 1): the seeds' files named .gz.
        decoded: kind == EntryKind::File && path.ends_with(".gz"),
        size,
        blake3: *blake3::hash(path.as_bytes()).as_bytes(),
        symlink_target: target.map(Into::into),
        source,
    }
}

fn manifests() -> Vec<(String, Manifest)> {
    let build_entries: Vec<ManifestEntry> = old_tree_entries()
        .iter()
        .map(|e| match &e.content {
            EntryContent::File { data, .. } => entry(&e.path, EntryKind::File, data.len() as u64, None, EntrySource::None),
            EntryContent::Symlink { target } => entry(&e.path, EntryKind::Symlink, target.len() as u64, Some(target), EntrySource::None),
            EntryContent::Directory => entry(&e.path, EntryKind::Directory, 0, None, EntrySource::None),
        })
        .collect();
    let patch_entries = vec![
        entry("assets", EntryKind::Directory, 0, None, EntrySource::None),
        entry("assets/a.txt", EntryKind::File, 1200, None, EntrySource::Delta { new_offset: 0 }),
        entry("assets/moved.bin", EntryKind::File, 700, None, EntrySource::CopyOf { old_path: "assets/b.bin".into() }),
        entry("bin", EntryKind::Directory, 0, None, EntrySource::None),
        entry("bin/run", EntryKind::File, 900, None, EntrySource::Unchanged),
        entry("latest", EntryKind::Symlink, 7, Some("bin/run"), EntrySource::None),
        entry("données/日本語.bin", EntryKind::File, 77, None, EntrySource::Delta { new_offset: 1200 }),
        entry("Build/data.json.gz", EntryKind::File, 40, None, EntrySource::Delta { new_offset: 1277 }),
    ];
    let seg = |i: u64| SegmentRef { patch_offset: 100 + 500 * i, patch_len: 500, new_offset: 640 * i, new_len: 640 };
    let many: Vec<ManifestEntry> = (0..40).map(|i| entry(&format!("f{i:03}"), EntryKind::File, i, None, EntrySource::Delta { new_offset: i * i })).collect();
    vec![
        (
            "build".into(),
            Manifest {
                kind: ManifestKind::Build,
                from_build: None,
                to_build: "build-1".into(),
                patch_size: 0,
                patch_blake3: [0; 32],
                head_blake3: None,
                segments: vec![],
                entries: build_entries,
            },
        ),
        (
            "patch".into(),
            Manifest {
                kind: ManifestKind::Patch,
                from_build: Some("build-1".into()),
                to_build: "build-2".into(),
                patch_size: 1100,
                patch_blake3: [7; 32],
                head_blake3: Some([9; 32]),
                segments: vec![seg(0), seg(1)],
                entries: patch_entries,
            },
        ),
        (
            "empty".into(),
            Manifest {
                kind: ManifestKind::Build,
                from_build: None,
                to_build: String::new(),
                patch_size: 0,
                patch_blake3: [0; 32],
                head_blake3: None,
                segments: vec![],
                entries: vec![],
            },
        ),
        (
            "many".into(),
            Manifest {
                kind: ManifestKind::Patch,
                from_build: Some("a".into()),
                to_build: "b".into(),
                patch_size: 5000,
                patch_blake3: [1; 32],
                head_blake3: None,
                segments: (0..5).map(seg).collect(),
                entries: many,
            },
        ),
    ]
}
