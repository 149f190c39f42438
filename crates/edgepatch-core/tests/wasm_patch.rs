//! Patches that store a wasm module in its normalized form (docs/FORMAT.md
//! §2.8): the diff uses the transform only where it makes the file's patch
//! smaller, the applier rebuilds the exact bytes, resume points avoid the
//! transformed file, and every malformed transform table or side info is
//! refused with a typed error.

mod appliers;
mod fixture_builds;
mod reference_applier;
mod wasm_modules;

use appliers::{fast_apply as apply, with_tree};
use edgepatch_core::error::ErrorKind;
use edgepatch_core::inspect::inspect_patch;
use edgepatch_core::memory::{MemoryOldBuild, MemorySink};
use edgepatch_core::patch_format::{
    FLAG_RUN_CODED_DIFF, FLAG_SINGLE_FILE, FLAG_SPLIT_REFERENCE, FLAG_WASM_TRANSFORM, MAX_WASM_SIDE_INFO, MAX_WASM_TRANSFORM_BYTES,
};
use edgepatch_core::{diff_builds, Build, DiffOptions, PatchApplier, ResumePoint};
use edgepatch_testkit::{leb128, noise};
use fixture_builds::file;

fn diff(old: &Build, new: &Build, wasm_transform: bool, segment_size: u64) -> (Vec<u8>, edgepatch_core::DiffStats) {
    let opts = DiffOptions { level: 9, threads: 2, segment_size, wasm_transform, ..DiffOptions::default() };
    diff_builds(old, new, &opts, &|_, _| {}).unwrap()
}

/// The header flags, less the run-coded diff flag (the writer's choice per segment, not this file's subject).
fn flags(patch: &[u8]) -> u16 {
    u16::from_le_bytes([patch[10], patch[11]]) & !FLAG_RUN_CODED_DIFF
}

#[test]
fn a_single_module_is_stored_normalized_when_smaller_and_applies_exactly() {
    let (v1, v2) = wasm_modules::versions(3000, 20);
    let (old, new) = (Build::single_file(v1), Build::single_file(v2));
    let (with, stats) = diff(&old, &new, true, 4 << 20);
    let (without, plain_stats) = diff(&old, &new, false, 4 << 20);
    assert_eq!((stats.wasm_transformed, plain_stats.wasm_transformed), (1, 0));
    assert_eq!(flags(&with), FLAG_SINGLE_FILE | FLAG_WASM_TRANSFORM);
    assert_eq!(flags(&without), FLAG_SINGLE_FILE, "no transform: the patch is what a writer without it makes");
    assert!(with.len() < without.len(), "transformed {} bytes, plain {}", with.len(), without.len());
    assert_eq!(apply(&with, &old).unwrap(), new);
    assert_eq!(apply(&without, &old).unwrap(), new);
}

#[test]
fn a_module_in_a_tree_among_other_files_applies_exactly() {
    let (v1, v2) = wasm_modules::versions(2000, 7);
    let a = noise(1, 200_000);
    let mut a2 = a.clone();
    a2[1000] ^= 1;
    let old = Build::from_entries(vec![file("a.bin", a), file("game.wasm", v1.clone()), file("same.txt", b"same".to_vec())]).unwrap();
    let new = Build::from_entries(vec![file("a.bin", a2), file("game.wasm", v2), file("same.txt", b"same".to_vec()), file("z.wasm", v1)]).unwrap();
    let (patch, stats) = diff(&old, &new, true, 64 << 10);
    // z.wasm is a copy of an old file; game.wasm is transformed against the old game.wasm.
    assert_eq!(stats.wasm_transformed, 1);
    assert_eq!(flags(&patch), FLAG_WASM_TRANSFORM);
    assert_eq!(apply(&patch, &old).unwrap(), new);
}

/// The field-split layout (docs/FORMAT.md §2.8.7): taken where a module's code
/// was re-emitted, applied by both appliers; an old module that no longer
/// splits is the wrong old build, and nothing is written.
#[test]
fn re_emitted_code_is_stored_in_the_split_layout_and_applies_exactly() {
    let (v1, v2) = wasm_modules::recompiled_versions(600);
    let (old, new) = (Build::single_file(v1.clone()), Build::single_file(v2));
    let (patch, stats) = diff(&old, &new, true, 4 << 20);
    assert_eq!(stats.wasm_transformed, 1);
    let info = inspect_patch(&patch[..]).unwrap();
    let side = &info.tree.transforms[0].side_info;
    assert!(edgepatch_core::wasm_transform::side_info_has_code_layout(side), "side info version 3: the split layout");
    assert_eq!(appliers::apply_both(&patch, &old), new);
    // The old module damaged so that its code no longer walks (an unknown opcode in the first body).
    let mut damaged = v1;
    let at = damaged.iter().position(|&b| b == 0x7f).expect("the first body's local type") + 1;
    damaged[at] = 0xff;
    let err = apply(&patch, &Build::single_file(damaged)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::OldBuild, "{err}");
}

/// Three split modules in one tree: each file's segments read its own old module
/// split, and the applier keeps the split old modules between reads.
#[test]
fn three_modules_in_the_split_layout_in_one_tree_apply_exactly() {
    let (a1, a2) = wasm_modules::recompiled_versions(500);
    let (b1, b2) = wasm_modules::recompiled_versions(300);
    let old = Build::from_entries(vec![file("a.wasm", a1), file("b.wasm", b1.clone()), file("c.wasm", b1)]).unwrap();
    let new = Build::from_entries(vec![file("a.wasm", a2), file("b.wasm", b2.clone()), file("c.wasm", b2)]).unwrap();
    let (patch, stats) = diff(&old, &new, true, 64 << 10);
    assert_eq!(stats.wasm_transformed, 3);
    let info = inspect_patch(&patch[..]).unwrap();
    assert!(info.tree.transforms.iter().all(|t| edgepatch_core::wasm_transform::side_info_has_code_layout(&t.side_info)));
    assert_eq!(appliers::apply_both(&patch, &old), new);
}

/// A split module's segments are cut at its sections and field streams, each matched against
/// the old module's same part, in a tree as alone: behind another changed file (so both its
/// new and its old part sit further on), it applies exactly and its share of the tree's patch
/// is its patch alone. (Not a check of the parts' places: on this made-up module the ops
/// segments win, and those read the whole reference.)
#[test]
fn a_split_module_in_a_tree_is_diffed_part_by_part_as_alone() {
    let (v1, v2) = wasm_modules::recompiled_versions(600);
    let v1_len = v1.len();
    let a = noise(3, 300_000);
    let mut a2 = a.clone();
    a2[5000] ^= 1;
    let (module_alone, _) = diff(&Build::single_file(v1.clone()), &Build::single_file(v2.clone()), true, 4 << 20);
    let (other_alone, _) = diff(&Build::single_file(a.clone()), &Build::single_file(a2.clone()), true, 4 << 20);
    let old = Build::from_entries(vec![file("a.bin", a), file("b.wasm", v1)]).unwrap();
    let new = Build::from_entries(vec![file("a.bin", a2), file("b.wasm", v2)]).unwrap();
    let (patch, stats) = diff(&old, &new, true, 4 << 20);
    assert_eq!(stats.wasm_transformed, 1);
    let info = inspect_patch(&patch[..]).unwrap();
    assert!(edgepatch_core::wasm_transform::side_info_has_code_layout(&info.tree.transforms[0].side_info));
    assert_eq!(appliers::apply_both(&patch, &old), new);
    assert!(
        patch.len() <= module_alone.len() + other_alone.len() + 256,
        "tree {} bytes, module alone {}, other file alone {}",
        patch.len(),
        module_alone.len(),
        other_alone.len()
    );
    // A segment ends where the module starts, and each window segment of the module reads
    // only the old module (which follows a.bin's 300,000 bytes in the reference stream) and
    // reaches back only within the module.
    let (mut at, mut windows, mut ends) = (0, 0, vec![]);
    for seg in &info.layout.segments {
        if let edgepatch_core::patch_format::Segment::Window(w) = seg {
            if at >= 300_000 {
                windows += 1;
                assert!(w.spans.iter().all(|&(s, len)| s >= 300_000 && s + len <= 300_000 + v1_len as u64), "{:?}", w.spans);
                assert!(w.back_len <= at - 300_000, "reaches back past the module: {} at {at}", w.back_len);
            }
        }
        at += seg.new_len();
        ends.push(at);
    }
    assert!(ends.contains(&300_000), "{ends:?}");
    assert!(windows > 0, "no window segment in the module");
}

/// A function table's indices are renumbered with the functions (side info
/// version 4, docs/FORMAT.md §2.8.4): both appliers rebuild the exact module,
/// and the patch is smaller than with the table stored as it is.
#[test]
fn a_function_table_is_renumbered_and_applies_exactly() {
    let (v1, v2) = wasm_modules::versions_with_table(3000, 20);
    let (old, new) = (Build::single_file(v1), Build::single_file(v2));
    let (patch, stats) = diff(&old, &new, true, 4 << 20);
    assert_eq!(stats.wasm_transformed, 1);
    let info = inspect_patch(&patch[..]).unwrap();
    assert_eq!(info.tree.transforms[0].side_info[4], 4, "side info version 4: element entries");
    assert_eq!(appliers::apply_both(&patch, &old), new);
    // The same modules with the table left out: what the table costs once renumbered.
    let (p1, p2) = wasm_modules::versions(3000, 20);
    let (bare, _) = diff(&Build::single_file(p1), &Build::single_file(p2), true, 4 << 20);
    assert!(patch.len() < bare.len() + 200, "the renumbered table costs {} bytes", patch.len() as i64 - bare.len() as i64);
}

/// Exports, the start function and the name section are renumbered with the functions (side
/// info version 5, docs/FORMAT.md §2.8.3): both appliers rebuild the exact module, and what
/// names the functions costs the patch almost nothing once renumbered.
#[test]
fn exports_and_names_are_renumbered_and_apply_exactly() {
    let (v1, v2) = wasm_modules::versions_with_names(3000, 20);
    let (old, new) = (Build::single_file(v1), Build::single_file(v2));
    let (patch, stats) = diff(&old, &new, true, 4 << 20);
    assert_eq!(stats.wasm_transformed, 1);
    let info = inspect_patch(&patch[..]).unwrap();
    assert_eq!(info.tree.transforms[0].side_info[4], 5, "side info version 5: sections naming functions");
    assert_eq!(appliers::apply_both(&patch, &old), new);
    // The same modules without exports and names: what they cost once renumbered.
    let (p1, p2) = wasm_modules::versions(3000, 20);
    let (bare, _) = diff(&Build::single_file(p1), &Build::single_file(p2), true, 4 << 20);
    assert!(patch.len() < bare.len() + 300, "renumbered exports and names cost {} bytes", patch.len() as i64 - bare.len() as i64);
}

/// A debug build's DWARF addresses code by offset into the code section (line sequences'
/// starts, ranges, locations), which the inserted functions move (side info version 6,
/// docs/FORMAT.md §2.8.3 "DWARF addresses"): both appliers rebuild the exact module, with
/// scratch space and without, and the moved addresses cost the patch little once rewritten.
#[test]
fn dwarf_addresses_are_rewritten_and_apply_exactly() {
    let (v1, v2) = wasm_modules::versions_with_debug_line(3000, 20);
    let (old, new) = (Build::single_file(v1), Build::single_file(v2));
    let (patch, stats) = diff(&old, &new, true, 4 << 20);
    assert_eq!(stats.wasm_transformed, 1);
    let info = inspect_patch(&patch[..]).unwrap();
    assert_eq!(info.tree.transforms[0].side_info[4], 6, "side info version 6: DWARF addresses");
    assert_eq!(appliers::apply_both(&patch, &old), new);
    // The same modules without their DWARF sections: what those cost once rewritten.
    let (p1, p2) = wasm_modules::versions(3000, 20);
    let (bare, _) = diff(&Build::single_file(p1), &Build::single_file(p2), true, 4 << 20);
    // Measured: they cost 3,991 bytes (a 5,909-byte patch; the plain diff's is 38,265), a
    // third of them the code address map (2,010 more bytes of side info: the calls' LEB128s
    // change width in some of these bodies, and each such body moves the ones after it).
    assert!(patch.len() < bare.len() + 4_500, "the DWARF sections cost {} bytes", patch.len() as i64 - bare.len() as i64);
    let (plain, _) = diff(&old, &new, false, 4 << 20);
    assert!(patch.len() * 5 < plain.len(), "{} bytes, the plain diff {}", patch.len(), plain.len());
}

#[test]
fn a_module_the_transform_does_not_help_is_stored_as_it_is() {
    // Same functions, one constant changed: nothing to renumber.
    let (v1, _) = wasm_modules::versions(500, 0);
    let mut v2 = v1.clone();
    let at = v2.len() - 10;
    v2[at] ^= 0x01;
    let (old, new) = (Build::single_file(v1), Build::single_file(v2));
    let (with, stats) = diff(&old, &new, true, 4 << 20);
    let (without, _) = diff(&old, &new, false, 4 << 20);
    assert_eq!(stats.wasm_transformed, 0);
    assert_eq!(with, without);
}

/// A tree whose module spans many 64 KiB segments, with more than 4 MiB of
/// delta after it.
fn resume_pair() -> (Build, Build) {
    let (v1, v2) = wasm_modules::versions(4000, 30);
    let (a, z) = (noise(1, 300_000), noise(2, (4 << 20) + 300_000));
    let (mut a2, mut z2) = (a.clone(), z.clone());
    for i in (0..a2.len()).step_by(5000) {
        a2[i] ^= 0x21;
    }
    for i in (0..z2.len()).step_by(7001) {
        z2[i] ^= 0x42;
    }
    let old = Build::from_entries(vec![file("a.bin", a), file("m.wasm", v1), file("z.bin", z)]).unwrap();
    let new = Build::from_entries(vec![file("a.bin", a2), file("m.wasm", v2), file("z.bin", z2)]).unwrap();
    (old, new)
}

/// The module's range of the delta stream.
fn transformed_range(patch: &[u8], old: &Build) -> (u64, u64) {
    let tree = inspect_patch(patch).unwrap().resolve(edgepatch_core::diff::build_listing(old)).unwrap();
    assert_eq!(tree.transforms.len(), 1);
    let i = tree.transforms[0].entry;
    let start: u64 = (0..i).map(|j| tree.delta_len(j)).sum();
    (start, start + tree.delta_len(i))
}

fn header_and_tree(patch: &[u8]) -> &[u8] {
    let info = inspect_patch(patch).unwrap();
    &patch[..info.layout.segment_spans[0].0 as usize]
}

#[test]
fn resume_points_avoid_the_transformed_module_and_resuming_gives_the_same_build() {
    let (old, new) = resume_pair();
    let (patch, stats) = diff(&old, &new, true, 64 << 10);
    assert_eq!(stats.wasm_transformed, 1);
    let (start, end) = transformed_range(&patch, &old);
    assert!(end - start > 3 * (64 << 10), "the module spans several segments: {start}..{end}");
    // Every point the applier offers, in order.
    let mut points: Vec<ResumePoint> = Vec::new();
    {
        let mut sink = MemorySink::default();
        let mut oldb = MemoryOldBuild::new(&old);
        let mut a = PatchApplier::new();
        for chunk in patch.chunks(4 << 10) {
            a.push(chunk, &mut oldb, &mut sink).unwrap();
            if let Some(p) = a.resume_point().filter(|p| points.last() != Some(p)) {
                points.push(p);
            }
        }
        a.finish().unwrap();
        assert_eq!(sink.into_build(), new);
    }
    for p in &points {
        let inside = p.new_offset > start && p.new_offset < end + (4 << 20);
        assert!(!inside, "resume point {p:?} inside or within 4 MiB after the module at {start}..{end}");
    }
    let before = points.iter().rev().find(|p| p.new_offset <= start).expect("a point before the module");
    let after = points.iter().find(|p| p.new_offset >= end).expect("a point after the module's reach");
    for point in [*before, *after, points[0], *points.last().unwrap()] {
        let mut oldb = MemoryOldBuild::new(&old);
        let mut sink = MemorySink::default();
        // What an interrupted apply left: everything up to the point.
        let mut a = PatchApplier::new();
        for chunk in patch[..point.patch_offset as usize].chunks(4 << 10) {
            a.push(chunk, &mut oldb, &mut sink).unwrap();
        }
        drop(a);
        let mut b = PatchApplier::resume(header_and_tree(&patch), point, &mut oldb, &mut sink).unwrap();
        b.push(&patch[point.patch_offset as usize..], &mut oldb, &mut sink).unwrap();
        b.finish().unwrap();
        assert_eq!(sink.into_build(), new, "resumed at {point:?}");
    }
}

#[test]
fn resume_refuses_a_point_inside_the_transformed_module() {
    let (old, new) = resume_pair();
    let (patch, _) = diff(&old, &new, true, 64 << 10);
    let (start, end) = transformed_range(&patch, &old);
    let info = inspect_patch(patch.as_slice()).unwrap();
    // The segment boundary inside the module: a point a correct applier never offers.
    let mut produced = 0u64;
    let mut inside = None;
    for (k, (s, span)) in info.layout.segments.iter().zip(&info.layout.segment_spans).enumerate() {
        produced += s.new_len();
        if produced > start && produced < end {
            inside = Some(ResumePoint { segments_done: k as u64 + 1, patch_offset: span.0 + span.1, new_offset: produced });
            break;
        }
    }
    let point = inside.expect("a segment ends inside the module");
    let mut oldb = MemoryOldBuild::new(&old);
    let mut sink = MemorySink::default();
    let Err(err) = PatchApplier::resume(header_and_tree(&patch), point, &mut oldb, &mut sink) else { panic!("a point inside the module was accepted") };
    assert_eq!(err.kind(), ErrorKind::Invalid);
    assert!(err.to_string().contains("transformed wasm file"), "{err}");
}

// ---- refusals: a valid transformed single-file patch, its tree rewritten ----

/// A transformed single-file patch split into: the tree before its transform
/// table, the table's one row (size, side info), and the bytes after the tree.
struct Parts {
    old: Build,
    tree_head: Vec<u8>,
    size: u64,
    side: Vec<u8>,
    rest: Vec<u8>,
}

fn parts() -> Parts {
    let (v1, v2) = wasm_modules::versions(1500, 5);
    let (old, new) = (Build::single_file(v1), Build::single_file(v2));
    let (patch, stats) = diff(&old, &new, true, 4 << 20);
    assert_eq!(stats.wasm_transformed, 1);
    let info = inspect_patch(patch.as_slice()).unwrap();
    let t = &info.tree.transforms[0];
    let mut at = 12;
    let raw = leb128::read_u64(&patch, &mut at) as usize;
    let comp = leb128::read_u64(&patch, &mut at) as usize;
    let tree = zstd::bulk::decompress(&patch[at..at + comp], raw).unwrap();
    let mut table = Vec::new();
    for v in [1, 0, t.size, t.side_info.len() as u64] {
        leb128::write_u64(&mut table, v);
    }
    table.extend_from_slice(&t.side_info);
    assert!(tree.ends_with(&table));
    Parts {
        old,
        tree_head: tree[..tree.len() - table.len()].to_vec(),
        size: t.size,
        side: t.side_info.clone(),
        rest: patch[at + comp..patch.len() - 32].to_vec(),
    }
}

impl Parts {
    /// The patch with this tree (after the files digest: `table`) and header flags.
    fn patch(&self, flags: u16, table: &[u8]) -> Vec<u8> {
        let mut tree = self.tree_head.clone();
        tree.extend_from_slice(table);
        let frame = zstd::bulk::compress(&tree, 3).unwrap();
        let mut p = b"EDGEPTCH".to_vec();
        p.extend_from_slice(&2u16.to_le_bytes());
        p.extend_from_slice(&flags.to_le_bytes());
        leb128::write_u64(&mut p, tree.len() as u64);
        leb128::write_u64(&mut p, frame.len() as u64);
        p.extend_from_slice(&frame);
        p.extend_from_slice(&self.rest);
        let sum = blake3::hash(&p);
        p.extend_from_slice(sum.as_bytes());
        p
    }

    fn row(&self, count: u64, gap: u64, size: u64, side_len: u64, side: &[u8]) -> Vec<u8> {
        let mut t = Vec::new();
        for v in [count, gap, size, side_len] {
            leb128::write_u64(&mut t, v);
        }
        t.extend_from_slice(side);
        t
    }

    fn refused(&self, flags: u16, table: &[u8], kind: ErrorKind, says: &str) {
        let err = apply(&self.patch(flags, table), &self.old).expect_err("refused");
        assert_eq!(err.kind(), kind, "{err}");
        assert!(err.to_string().contains(says), "{err:?} does not say {says:?}");
    }
}

// Bit 3 allows run-coded segments (the rebuilt patches keep the writer's segments).
const FLAGS: u16 = FLAG_SINGLE_FILE | FLAG_WASM_TRANSFORM | FLAG_RUN_CODED_DIFF;

#[test]
fn the_rebuilt_parts_make_the_valid_patch() {
    let p = parts();
    let table = p.row(1, 0, p.size, p.side.len() as u64, &p.side);
    assert!(apply(&p.patch(FLAGS, &table), &p.old).is_ok());
}

#[test]
fn refuses_an_empty_transform_table() {
    let p = parts();
    p.refused(FLAGS, &[0], ErrorKind::Corrupt, "empty transform table");
}

#[test]
fn refuses_a_transform_of_a_file_beyond_the_delta_files() {
    let p = parts();
    p.refused(FLAGS, &p.row(1, 1, p.size, p.side.len() as u64, &p.side), ErrorKind::Corrupt, "beyond the delta files");
}

#[test]
fn refuses_more_rows_than_delta_files() {
    let p = parts();
    let mut table = p.row(2, 0, p.size, p.side.len() as u64, &p.side);
    table.extend(p.row(0, 0, p.size, p.side.len() as u64, &p.side)[1..].to_vec());
    p.refused(FLAGS, &table, ErrorKind::Limit, "wasm transform count");
}

#[test]
fn refuses_a_file_size_of_zero_or_above_the_cap() {
    let p = parts();
    p.refused(FLAGS, &p.row(1, 0, 0, p.side.len() as u64, &p.side), ErrorKind::Limit, "transformed file of 0 bytes");
    p.refused(FLAGS, &p.row(1, 0, MAX_WASM_TRANSFORM_BYTES + 1, p.side.len() as u64, &p.side), ErrorKind::Limit, "transformed file of");
}

#[test]
fn refuses_an_empty_or_oversized_side_info() {
    let p = parts();
    p.refused(FLAGS, &p.row(1, 0, p.size, 0, &[]), ErrorKind::Limit, "side info of 0 bytes");
    p.refused(FLAGS, &p.row(1, 0, p.size, MAX_WASM_SIDE_INFO + 1, &p.side), ErrorKind::Limit, "side info of");
}

#[test]
fn refuses_a_side_info_running_past_the_tree() {
    let p = parts();
    p.refused(FLAGS, &p.row(1, 0, p.size, p.side.len() as u64 + 1, &p.side), ErrorKind::Truncated, "side info");
}

#[test]
fn refuses_bytes_after_the_transform_table() {
    let p = parts();
    let mut table = p.row(1, 0, p.size, p.side.len() as u64, &p.side);
    table.push(0);
    p.refused(FLAGS, &table, ErrorKind::Corrupt, "bytes after the wasm transform table");
}

#[test]
fn refuses_a_table_without_the_flag() {
    let p = parts();
    p.refused(FLAG_SINGLE_FILE, &p.row(1, 0, p.size, p.side.len() as u64, &p.side), ErrorKind::Corrupt, "bytes after the files digest");
}

#[test]
fn refuses_a_side_info_that_does_not_decode() {
    let p = parts();
    let mut side = p.side.clone();
    side[0] = b'X';
    p.refused(FLAGS, &p.row(1, 0, p.size, side.len() as u64, &side), ErrorKind::Corrupt, "side info corrupt");
    let mut side = p.side.clone();
    side.push(0);
    p.refused(FLAGS, &p.row(1, 0, p.size, side.len() as u64, &side), ErrorKind::Corrupt, "bytes after the end");
}

#[test]
fn refuses_a_module_that_inverts_to_another_size() {
    let p = parts();
    p.refused(FLAGS, &p.row(1, 0, p.size + 1, p.side.len() as u64, &p.side), ErrorKind::Corrupt, "the tree says");
    p.refused(FLAGS, &p.row(1, 0, p.size - 1, p.side.len() as u64, &p.side), ErrorKind::Corrupt, "longer than its");
}

#[test]
fn refuses_a_side_info_that_inverts_to_other_bytes() {
    // A side info for another module: decodes, inverts, but not to this file (the files digest).
    let (a, b) = wasm_modules::versions(1500, 9);
    let other = edgepatch_core::wasm_transform::forward(Some(&edgepatch_core::wasm_transform::reference(&a).unwrap()), &b).unwrap();
    let p = parts();
    let result = apply(&p.patch(FLAGS, &p.row(1, 0, p.size, other.side_info.len() as u64, &other.side_info)), &p.old);
    let err = result.expect_err("refused");
    assert!(matches!(err.kind(), ErrorKind::Digest | ErrorKind::Corrupt), "{err}");
}

#[test]
fn refuses_a_normalized_form_that_is_not_wasm() {
    // A tree patch: the table names the plain file (noise), not the module.
    let (v1, v2) = wasm_modules::versions(1500, 5);
    let old = Build::from_entries(vec![file("a.wasm", v1), file("b.bin", noise(3, 5000))]).unwrap();
    let new = Build::from_entries(vec![file("a.wasm", v2), file("b.bin", noise(4, 5000))]).unwrap();
    let (patch, stats) = diff(&old, &new, true, 4 << 20);
    assert_eq!(stats.wasm_transformed, 1);
    let info = inspect_patch(patch.as_slice()).unwrap();
    let t = &info.tree.transforms[0];
    let mut at = 12;
    let raw = leb128::read_u64(&patch, &mut at) as usize;
    let comp = leb128::read_u64(&patch, &mut at) as usize;
    let tree = zstd::bulk::decompress(&patch[at..at + comp], raw).unwrap();
    let mut table = Vec::new();
    for v in [1, 0, t.size, t.side_info.len() as u64] {
        leb128::write_u64(&mut table, v);
    }
    table.extend_from_slice(&t.side_info);
    let head = &tree[..tree.len() - table.len()];
    let mut moved = Vec::new();
    for v in [1, 1, 5000, t.side_info.len() as u64] {
        leb128::write_u64(&mut moved, v);
    }
    moved.extend_from_slice(&t.side_info);
    let parts = Parts { old: old.clone(), tree_head: head.to_vec(), size: 0, side: Vec::new(), rest: patch[at + comp..patch.len() - 32].to_vec() };
    let err = apply(&parts.patch(FLAG_WASM_TRANSFORM | FLAG_RUN_CODED_DIFF, &moved), &old).expect_err("refused");
    assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
    assert!(err.to_string().contains("b.bin") && err.to_string().contains("normalized wasm corrupt"), "{err}");
}

#[test]
fn refuses_unknown_flags_still() {
    let p = parts();
    p.refused(FLAGS | 128, &p.row(1, 0, p.size, p.side.len() as u64, &p.side), ErrorKind::Corrupt, "unknown flags");
}

/// A split-layout file whose old module is over the format's 64 MiB cap (the patch's tree names
/// an old file of 64 MiB + 1 bytes at its path, and the old build has it) is refused as a
/// corrupt patch when its segments first read that module, before the applier holds it.
#[test]
fn a_split_old_module_over_the_cap_is_refused() {
    use edgepatch_core::patch_format::single_file_listing;
    let (v1, v2) = wasm_modules::recompiled_versions(600);
    let (patch, _) = diff(&Build::single_file(v1.clone()), &Build::single_file(v2), true, 4 << 20);
    let info = inspect_patch(&patch[..]).unwrap();
    let mut tree = info.resolve(single_file_listing(v1.len() as u64)).unwrap();
    assert!(edgepatch_core::wasm_transform::side_info_has_code_layout(&tree.transforms[0].side_info));
    // The same patch, its tree naming an old file over the cap.
    let big = MAX_WASM_TRANSFORM_BYTES + 1;
    tree.old_listing = single_file_listing(big);
    tree.old_files[0].size = big;
    let hostile = with_tree(&patch, &tree);
    let mut old_module = vec![0u8; big as usize];
    old_module[..v1.len()].copy_from_slice(&v1);
    let err = apply(&hostile, &Build::single_file(old_module)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
    assert!(err.to_string().contains("over the 67108864-byte cap"), "{err}");
}

/// Two files in the field-split layout reading one old file split (a hostile row: a writer names
/// an old file for one module at most, and the applier would split it by one side info) are
/// refused before anything is read; so is a row naming an old file the reference does not hold.
#[test]
fn two_split_files_reading_one_old_file_are_refused() {
    let (a1, a2) = wasm_modules::recompiled_versions(600);
    let (b1, b2) = wasm_modules::recompiled_versions(400);
    let old = Build::from_entries(vec![file("a.wasm", a1), file("b.wasm", b1), file("c.txt", b"kept".to_vec())]).unwrap();
    let new = Build::from_entries(vec![file("a.wasm", a2), file("b.wasm", b2), file("c.txt", b"kept".to_vec())]).unwrap();
    let (patch, _) = diff(&old, &new, true, 4 << 20);
    let info = inspect_patch(&patch[..]).unwrap();
    let tree = info.resolve(edgepatch_core::diff::build_listing(&old)).unwrap();
    assert_eq!(tree.transforms.iter().filter(|w| tree.split_old_file(w).is_some()).count(), 2, "both split");
    assert_eq!(apply(&with_tree(&patch, &tree), &old).unwrap(), apply(&patch, &old).unwrap(), "the rebuilt patch applies");
    let a = tree.old_files.iter().position(|f| f.path == "a.wasm").unwrap();
    let mut twice = tree.clone();
    twice.transforms[1].split_reference = Some(a);
    let err = apply(&with_tree(&patch, &twice), &old).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
    assert!(err.to_string().contains("read old file \"a.wasm\" split"), "{err}");
    let mut elsewhere = tree.clone();
    elsewhere.transforms[0].split_reference = Some(tree.old_files.len());
    assert!(elsewhere.encode().is_err(), "the writer refuses a row naming no old file of the reference");
}

/// A module whose content-hashed name changed (no old file at its path) is transformed against
/// the old module it replaced (`renamed_counterparts`), in the form the same pair at one path
/// gets: re-emitted code in the field-split layout, with the patch's row naming the old file
/// read split (`FLAG_SPLIT_REFERENCE`); applied exactly by both appliers, within a few bytes of
/// the same-path patch, and smaller than diffed as it is.
#[test]
fn a_renamed_module_is_transformed_against_the_one_it_replaced() {
    for (name, (v1, v2)) in [("renumbered", wasm_modules::versions(3000, 20)), ("re-emitted", wasm_modules::recompiled_versions(600))] {
        let page = b"<html>game</html>".to_vec();
        let assets = || edgepatch_core::BuildEntry { path: "assets".into(), content: edgepatch_core::EntryContent::Directory };
        let tree = |wasm: &str, module: &[u8]| Build::from_entries(vec![assets(), file(wasm, module.to_vec()), file("index.html", page.clone())]).unwrap();
        let (old, new) = (tree("assets/game-1a2b3c4d.wasm", &v1), tree("assets/game-9f8e7d6c.wasm", &v2));
        let (with, stats) = diff(&old, &new, true, 4 << 20);
        let (without, _) = diff(&old, &new, false, 4 << 20);
        let (same_path, _) = diff(&tree("assets/game.wasm", &v1), &tree("assets/game.wasm", &v2), true, 4 << 20);
        assert_eq!(stats.wasm_transformed, 1, "{name}");
        let (info, same_info) = (inspect_patch(&with[..]).unwrap(), inspect_patch(&same_path[..]).unwrap());
        let split = edgepatch_core::wasm_transform::side_info_has_code_layout(&info.tree.transforms[0].side_info);
        assert_eq!(split, edgepatch_core::wasm_transform::side_info_has_code_layout(&same_info.tree.transforms[0].side_info), "{name}: the same form");
        assert!(split || name != "re-emitted", "re-emitted code is split");
        // Old file 0 of the table is the module (index.html is kept as it is).
        assert_eq!(info.tree.transforms[0].split_reference, split.then_some(0), "{name}");
        assert_eq!(flags(&with) & FLAG_SPLIT_REFERENCE != 0, split, "{name}");
        assert_eq!(flags(&same_path) & FLAG_SPLIT_REFERENCE, 0, "{name}: a module at its own path names none");
        assert_eq!(appliers::apply_both(&with, &old), new, "{name}");
        println!("{name}: renamed module, {} bytes transformed, {} at one path, {} as it is", with.len(), same_path.len(), without.len());
        assert!(with.len() < without.len(), "{name}");
        assert!(with.len() <= same_path.len() + 64, "{name}: {} against {} at one path", with.len(), same_path.len());
    }
}
