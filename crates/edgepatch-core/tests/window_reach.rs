//! Window segments that reach more than 4 MiB back into the delta stream
//! (docs/FORMAT.md §2.6, `FLAG_WINDOW_REACH`): a patch declares its reach only
//! when a window uses it, both appliers agree on it, it pays where a file
//! repeats one produced long before, and an apply resumes within it.

mod appliers;
mod fixture_builds;
mod reference_applier;

use appliers::apply_both;
use edgepatch_core::inspect::inspect_patch;
use edgepatch_core::memory::{MemoryOldBuild, MemorySink};
use edgepatch_core::patch_format::{Segment, BASE_WINDOW_BACK, FLAG_WINDOW_REACH, MAX_WINDOW_BACK};
use edgepatch_core::{diff_builds, Build, DiffOptions, PatchApplier};
use edgepatch_testkit::noise;
use fixture_builds::file;

/// Text-like bytes: `len` bytes of lines made of words picked by `seed`.
fn text(seed: u64, len: usize) -> Vec<u8> {
    const WORDS: [&str; 12] = ["node ", "value ", "shader ", "mesh ", "scene\n", "camera ", "light ", "matrix ", "color ", "};\n", "return ", "const "];
    let mut out = Vec::with_capacity(len + 8);
    for r in noise(seed, len) {
        if out.len() >= len {
            break;
        }
        out.extend_from_slice(WORDS[usize::from(r) % WORDS.len()].as_bytes());
    }
    out.truncate(len);
    out
}

/// `data` with a few words inserted every 100-400 bytes (from `seed`): many
/// short matches, so the diff tries a window segment.
fn edited(data: &[u8], seed: u64) -> Vec<u8> {
    let r = noise(seed, data.len() / 25);
    let (mut out, mut at, mut k) = (Vec::with_capacity(data.len() * 11 / 10), 0, 0);
    while at < data.len() {
        let gap = (100 + usize::from(r[k]) + usize::from(r[k + 1])).min(data.len() - at);
        out.extend_from_slice(&data[at..at + gap]);
        out.extend_from_slice(&text(u64::from(r[k + 2]) + 100, 4 + usize::from(r[k + 3] % 8)));
        (at, k) = (at + gap, k + 4);
    }
    out
}

/// New `a.js` and `z.js` are the same new text, 5 MiB of changed binary data
/// apart in the delta stream; the old `z.js` is a differently edited version of
/// it. With 1 MiB segments, `z.js`'s segments find `a.js` only beyond 4 MiB back.
fn pair() -> (Build, Build) {
    let base = text(1, 1 << 20);
    let shared = edited(&base, 2);
    let mut z = shared.clone();
    z[1000] ^= 1;
    let bin = noise(3, 5 << 20);
    let mut bin2 = bin.clone();
    for i in (0..bin2.len()).step_by(4099) {
        bin2[i] ^= 0x5a;
    }
    let old = Build::from_entries(vec![file("a.js", text(4, 64 << 10)), file("m.bin", bin), file("z.js", edited(&base, 5))]).unwrap();
    let new = Build::from_entries(vec![file("a.js", shared), file("m.bin", bin2), file("z.js", z)]).unwrap();
    (old, new)
}

fn diff(old: &Build, new: &Build, window_reach: u64) -> Vec<u8> {
    let opts = DiffOptions { level: 3, threads: 2, segment_size: 1 << 20, window_reach, ..DiffOptions::default() };
    diff_builds(old, new, &opts, &|_, _| {}).expect("diff").0
}

fn flags(patch: &[u8]) -> u16 {
    u16::from_le_bytes([patch[10], patch[11]])
}

#[test]
fn a_window_reaching_past_4_mib_is_declared_applied_by_both_and_pays() {
    let (old, new) = pair();
    let far = diff(&old, &new, MAX_WINDOW_BACK);
    let near = diff(&old, &new, BASE_WINDOW_BACK);
    assert_eq!(apply_both(&far, &old), new);
    assert_eq!(apply_both(&near, &old), new);

    let info = inspect_patch(far.as_slice()).unwrap();
    let reach = info.layout.segments.iter().filter_map(|s| if let Segment::Window(w) = s { Some(w.back_len) } else { None }).max().unwrap_or(0);
    assert!(reach > BASE_WINDOW_BACK, "a window reaches {reach} bytes back");
    assert_eq!(info.tree.window_reach, Some(reach), "the patch declares exactly the furthest reach");
    assert_eq!(flags(&far) & FLAG_WINDOW_REACH, FLAG_WINDOW_REACH);
    // The near patch is what a writer without the reach makes: no flag, no field.
    assert_eq!(flags(&near) & FLAG_WINDOW_REACH, 0);
    assert_eq!(inspect_patch(near.as_slice()).unwrap().tree.window_reach, None);
    // z.js (about 1.1 MB) costs little once its segments see a.js.
    assert!(far.len() * 10 < near.len() * 9, "far {} near {}", far.len(), near.len());
}

#[test]
fn a_reach_above_the_format_limit_is_refused_by_the_diff() {
    let (old, new) = pair();
    let opts = DiffOptions { level: 3, window_reach: MAX_WINDOW_BACK + 1, ..DiffOptions::default() };
    assert!(diff_builds(&old, &new, &opts, &|_, _| {}).is_err());
}

#[test]
fn an_apply_resumes_at_every_segment_boundary_within_the_far_reach() {
    let (old, new) = pair();
    let patch = diff(&old, &new, MAX_WINDOW_BACK);
    let info = inspect_patch(patch.as_slice()).unwrap();
    assert!(info.tree.window_reach.is_some());
    let head = &patch[..info.layout.segment_spans[0].0 as usize];
    let segments = info.layout.segments.len() as u64;
    for k in 1..segments {
        let (mut sink, mut oldb) = (MemorySink::default(), MemoryOldBuild::new(&old));
        let mut a = PatchApplier::new();
        for chunk in patch.chunks(16 << 10) {
            a.push(chunk, &mut oldb, &mut sink).unwrap();
            if a.resume_point().is_some_and(|p| p.segments_done == k) {
                break;
            }
        }
        let point = a.resume_point().unwrap();
        drop(a);
        // Resumed from what was written, not from the history held in memory.
        let mut b = PatchApplier::resume(head, point, &mut oldb, &mut sink).unwrap();
        b.push(&patch[point.patch_offset as usize..], &mut oldb, &mut sink).unwrap();
        b.finish().unwrap();
        assert_eq!(sink.into_build(), new, "resumed after segment {k}");
    }
}

#[test]
fn a_far_reaching_patch_cut_anywhere_is_refused_by_both_appliers() {
    let (old, new) = pair();
    let patch = diff(&old, &new, MAX_WINDOW_BACK);
    let info = inspect_patch(patch.as_slice()).unwrap();
    // Inside the header and tree, at each segment's first byte and in its middle.
    let mut cuts = vec![12, info.layout.segment_spans[0].0 as usize - 1];
    for &(start, len) in &info.layout.segment_spans {
        cuts.extend([start as usize, (start + len / 2) as usize]);
    }
    for cut in cuts {
        let err = appliers::fast_apply(&patch[..cut], &old).expect_err("a cut patch");
        assert_eq!(err.kind(), edgepatch_core::error::ErrorKind::Truncated, "cut at {cut}: {err}");
        assert!(reference_applier::apply(&patch[..cut], &old).is_err(), "reference applier took a patch cut at {cut}");
    }
}
