//! The bounded-memory generator (patches from signatures and range reads):
//! its patches apply byte-exact with the ordinary applier (and the reference
//! applier), on the fixture trees, single files, installs from nothing and a
//! multi-segment pair; they resume like any patch; misuse is an error.

use edgepatch_core::generate::{generate_patch, PatchGenerator};
use edgepatch_core::inspect::inspect_patch;
use edgepatch_core::manifest::ManifestView;
use edgepatch_core::memory::{MemoryOldBuild, MemorySink};
use edgepatch_core::patch_format::Segment;
use edgepatch_core::signature::Signature;
use edgepatch_core::{Build, PatchApplier};

mod appliers;
mod fixture_builds;
mod reference_applier;

use appliers::{apply_both as apply, reader};
use edgepatch_testkit::noise;
use fixture_builds::file;

fn generate(old: Option<&Build>, new: &Build, level: i32) -> (Vec<u8>, PatchGenerator) {
    let empty = Build::default();
    let old_sig = old.map(|b| Signature::of_build(b, 16 << 10));
    let new_sig = Signature::of_build(new, 16 << 10);
    let mut patch = Vec::new();
    let g = generate_patch(old_sig.as_ref(), &new_sig, level, &mut reader(old.unwrap_or(&empty)), &mut reader(new), &mut |b| {
        patch.extend_from_slice(b);
        Ok(())
    })
    .expect("generate");
    (patch, g)
}

#[test]
fn fixture_trees_and_installs_round_trip() {
    let (v1, v2) = (fixture_builds::load_tar("game-v1.tar"), fixture_builds::load_tar("game-v2.tar"));
    let (patch, g) = generate(Some(&v1), &v2, 19);
    assert_eq!(apply(&patch, &v1), v2);
    assert!(g.stats().renamed >= 1 && g.stats().unchanged >= 1, "{:?}", g.stats());
    // The same summary as the in-memory diff's (the removed entries were not counted here before).
    let (_, diffed) = edgepatch_core::diff_builds(&v1, &v2, &edgepatch_core::DiffOptions::default(), &|_, _| {}).unwrap();
    let summary = |s: &edgepatch_core::diff::DiffStats| (s.new_files, s.unchanged, s.renamed, s.delta_files, s.removed);
    assert_eq!(summary(g.stats()), summary(&diffed));
    assert!(diffed.removed >= 1, "the fixture removes files: {diffed:?}");
    // Its manifest matches the patch.
    let manifest = g.manifest("v1", "v2").unwrap();
    let view = ManifestView::open(&manifest).unwrap();
    view.verify_checksum().unwrap();
    assert_eq!(view.patch_size(), patch.len() as u64);
    assert_eq!(view.patch_blake3(), *blake3::hash(&patch).as_bytes());
    let info = inspect_patch(patch.as_slice()).unwrap();
    let segments = view.segments().unwrap();
    assert_eq!(segments.len(), info.layout.segment_spans.len());
    for (s, (offset, len)) in segments.iter().zip(&info.layout.segment_spans) {
        assert_eq!((s.patch_offset, s.patch_len), (*offset, *len));
    }
    // Install from nothing.
    let (install, _) = generate(None, &v2, 19);
    assert_eq!(apply(&install, &Build::default()), v2);
    println!("fixture v1->v2: generator {} bytes, install {} bytes", patch.len(), install.len());
}

#[test]
fn single_files_round_trip_and_find_moved_blocks() {
    let old = noise(1, 3 << 20);
    // Blocks moved around, a few bytes changed, some new data.
    let mut new = [&old[2 << 20..], &noise(2, 300_000), &old[..2 << 20]].concat();
    for i in (0..new.len()).step_by(100_003) {
        new[i] ^= 1;
    }
    let (old, new) = (Build::single_file(old), Build::single_file(new));
    let (patch, _) = generate(Some(&old), &new, 3);
    assert_eq!(apply(&patch, &old), new);
    assert!(patch.len() < 400_000, "moved blocks found: {} bytes", patch.len());
}

#[test]
fn multi_segment_patches_reach_back_and_resume() {
    let base = noise(3, 6 << 20);
    let mut changed = base.clone();
    for i in (0..changed.len()).step_by(7001) {
        changed[i] = changed[i].wrapping_add(3);
    }
    let repeat = noise(4, 1 << 20);
    let old = Build::from_entries(vec![file("a.bin", base), file("z.txt", b"gone".to_vec())]).unwrap();
    // New stream: a.bin [0, 6M), b.bin [6M, 7M), m.bin [7M, 9M), c.bin [9M, 10M): c.bin repeats
    // b.bin 3 MiB back, from the third segment.
    let new =
        Build::from_entries(vec![file("a.bin", changed), file("b.bin", repeat.clone()), file("c.bin", repeat), file("m.bin", noise(5, 2 << 20))]).unwrap();
    let (patch, _) = generate(Some(&old), &new, 3);
    assert_eq!(apply(&patch, &old), new);
    let info = inspect_patch(patch.as_slice()).unwrap();
    assert_eq!(info.layout.segments.len(), 3);
    // a.bin (scattered byte changes) is cheaper as copy operations; c.bin (b.bin again) only
    // a window reaching back into the new data finds.
    assert!(matches!(info.layout.segments[0], Segment::Ops(_)), "{:?}", info.layout.segments);
    assert!(matches!(&info.layout.segments[2], Segment::Window(w) if w.back_len > 0), "{:?}", info.layout.segments);
    assert!(patch.len() < 3_500_000, "c.bin repeats b.bin through the history: {} bytes", patch.len());

    // Resume after each segment: the history is rebuilt from what was written.
    let head = &patch[..info.layout.segment_spans[0].0 as usize];
    for k in 1..info.layout.segments.len() {
        let (mut oldb, mut sink) = (MemoryOldBuild::new(&old), MemorySink::default());
        let mut a = PatchApplier::new();
        let mut at = 0;
        while a.resume_point().is_none_or(|p| p.segments_done < k as u64) {
            a.push(&patch[at..at + 4096], &mut oldb, &mut sink).unwrap();
            at += 4096;
        }
        let point = a.resume_point().unwrap();
        let mut b = PatchApplier::resume(head, point, &mut oldb, &mut sink).unwrap();
        b.push(&patch[point.patch_offset as usize..], &mut oldb, &mut sink).unwrap();
        b.finish().unwrap();
        assert_eq!(sink.into_build(), new, "resumed after segment {k}");
    }
}

#[test]
fn out_of_order_calls_and_wrong_sizes_are_errors() {
    let old = Build::single_file(noise(5, 100_000));
    let new = Build::single_file(noise(6, 100_000));
    let (os, ns) = (Signature::of_build(&old, 16384), Signature::of_build(&new, 16384));
    let mut g = PatchGenerator::new(Some(&os), &ns, 3).unwrap();
    let data = noise(6, 100_000);
    assert!(g.plan_segment(0, &data).is_err(), "header first");
    g.header().unwrap();
    assert!(g.plan_segment(0, &data[1..]).is_err(), "wrong new size");
    let ranges = g.plan_segment(0, &data).unwrap();
    let want: u64 = ranges.iter().map(|r| r.len).sum();
    assert!(g.encode_segment(0, &data, vec![0; want as usize + 1]).is_err(), "wrong old size");
    assert!(g.encode_segment(0, &data, vec![0; want as usize]).is_err(), "the plan is used up by a failed call too");
    assert!(g.finish().is_err(), "segments missing");
    assert!(PatchGenerator::new(None, &ns, 3).is_err(), "single file from nothing");
    assert!(PatchGenerator::new(Some(&os), &ns, 0).is_err(), "level 0");
}

/// Segment bytes of `first..end`, made by a step generator (`start_at`) that reads only its
/// own segments and the one before (the history).
fn step_segments(old: &Build, new: &Build, level: i32, first: u64, end: u64) -> Vec<Vec<u8>> {
    let (os, ns) = (Signature::of_build(old, 16 << 10), Signature::of_build(new, 16 << 10));
    let mut g = PatchGenerator::new(Some(&os), &ns, level).unwrap();
    let read = |build: &Build, ranges: &[edgepatch_core::generate::ByteRange]| {
        let mut out = Vec::new();
        for r in ranges {
            let mut buf = vec![0; r.len as usize];
            reader(build)(&r.path, r.offset, &mut buf).unwrap();
            out.extend_from_slice(&buf);
        }
        out
    };
    let history = read(new, &g.history_ranges(first).unwrap());
    g.start_at(first, &history).unwrap();
    let mut out = Vec::new();
    for i in first..end {
        let fresh = read(new, &g.new_ranges(i).unwrap());
        let old_bytes = read(old, &g.plan_segment(i, &fresh).unwrap());
        out.push(g.encode_segment(i, &fresh, old_bytes).unwrap());
    }
    assert!(g.finish().is_err(), "a step generator does not finish the patch");
    out
}

fn multi_segment_pair() -> (Build, Build) {
    let base = noise(3, 6 << 20);
    let mut changed = base.clone();
    for i in (0..changed.len()).step_by(7001) {
        changed[i] = changed[i].wrapping_add(3);
    }
    let repeat = noise(4, 1 << 20);
    let old = Build::from_entries(vec![file("a.bin", base), file("z.txt", b"gone".to_vec())]).unwrap();
    let new =
        Build::from_entries(vec![file("a.bin", changed), file("b.bin", repeat.clone()), file("c.bin", repeat), file("m.bin", noise(5, 2 << 20))]).unwrap();
    (old, new)
}

#[test]
fn split_generation_assembles_the_one_pass_patch_byte_for_byte() {
    let (old, new) = multi_segment_pair();
    let (one_pass, g1) = generate(Some(&old), &new, 3);
    let manifest1 = g1.manifest("v1", "v2").unwrap();
    let (os, ns) = (Signature::of_build(&old, 16 << 10), Signature::of_build(&new, 16 << 10));
    // Every way to cut the 3 segments into steps (the last segment, a window reaching back
    // into the new data, depends on the history the step is started with).
    for cuts in [vec![0, 3], vec![0, 1, 3], vec![0, 2, 3], vec![0, 1, 2, 3]] {
        let mut segments = Vec::new();
        for w in cuts.windows(2) {
            segments.extend(step_segments(&old, &new, 3, w[0], w[1]));
        }
        let mut a = PatchGenerator::new(Some(&os), &ns, 3).unwrap();
        let mut patch = a.header().unwrap();
        for (i, s) in segments.iter().enumerate() {
            a.absorb_segment(i as u64, s).unwrap();
            patch.extend_from_slice(s);
        }
        patch.extend_from_slice(&a.finish().unwrap());
        assert_eq!(patch, one_pass, "steps {cuts:?}");
        assert_eq!(a.manifest("v1", "v2").unwrap(), manifest1, "steps {cuts:?}");
    }
    assert_eq!(apply(&one_pass, &old), new);
}

#[test]
fn split_generation_misuse_is_an_error() {
    let (old, new) = multi_segment_pair();
    let (os, ns) = (Signature::of_build(&old, 16 << 10), Signature::of_build(&new, 16 << 10));
    let segments = step_segments(&old, &new, 3, 0, 3);
    let fresh = || PatchGenerator::new(Some(&os), &ns, 3).unwrap();

    let mut g = fresh();
    assert!(g.start_at(1, &[0; 100]).is_err(), "history must be the whole segment before");
    assert!(g.start_at(4, &[]).is_err(), "past the last segment");
    let mut g = fresh();
    g.header().unwrap();
    assert!(g.start_at(0, &[]).is_err(), "after the header");

    let mut a = fresh();
    assert!(a.absorb_segment(0, &segments[0]).is_err(), "header first");
    a.header().unwrap();
    assert!(a.absorb_segment(1, &segments[1]).is_err(), "out of order");
    assert!(a.absorb_segment(0, &segments[0][..segments[0].len() - 1]).is_err(), "truncated");
    assert!(a.absorb_segment(0, &[segments[0].clone(), vec![0]].concat()).is_err(), "trailing bytes");
    assert!(a.absorb_segment(0, &segments[2]).is_err(), "segment 2 makes 2 MiB, segment 0 4 MiB");
    assert!(a.absorb_segment(0, b"E\x00\x00").is_err(), "an end marker");
    a.absorb_segment(0, &segments[0]).unwrap();
    assert!(a.finish().is_err(), "segments missing");
    let mut s = fresh();
    s.start_at(0, &[]).unwrap();
    assert!(s.absorb_segment(0, &segments[0]).is_err(), "a step generator does not assemble");
}
