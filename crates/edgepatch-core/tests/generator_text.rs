//! The bounded generator on text trees (JS bundles and sources): text segments get the
//! optimal-parser window form, whose window holds only the old bytes the copies read. Its
//! patches apply byte-exact, split generation still makes the one-pass patch byte for byte,
//! and an old region that nothing copies from stays out of the window.

use edgepatch_core::generate::{generate_patch, ByteRange, PatchGenerator, GENERATOR_SEGMENT, GENERATOR_TEXT_REACH};
use edgepatch_core::inspect::inspect_patch;
use edgepatch_core::patch_format::{Segment, BASE_WINDOW_BACK};
use edgepatch_core::signature::Signature;
use edgepatch_core::Build;

mod appliers;
mod fixture_builds;
mod reference_applier;

use appliers::{apply_both, reader};
use edgepatch_testkit::Rng;
use fixture_builds::file;

/// About `len` bytes of JavaScript-like lines drawn from a small vocabulary.
fn js_lines(seed: u64, len: usize) -> Vec<String> {
    const WORDS: [&str; 24] = [
        "const", "let", "return", "function", "this", "value", "node", "texture", "uniform", "vec3", "matrix", "update", "=", "+", "(", ")", "{", "}", ";",
        "if", "else", "null", "true", "0.5",
    ];
    let mut rng = Rng::xorshift64_seeded(seed);
    let (mut lines, mut size) = (Vec::new(), 0);
    while size < len {
        let words = 3 + rng.below(9);
        // Each line names something of its own, as code does: no line repeats another.
        let mut line = format!("{}n{} =", "\t".repeat(rng.below(4)), rng.below(10_000_000));
        for _ in 0..words {
            line.push(' ');
            line.push_str(WORDS[rng.below(WORDS.len())]);
            if rng.one_in(5) {
                line.push_str(&format!("{}", rng.below(1000)));
            }
        }
        size += line.len() + 1;
        lines.push(line);
    }
    lines
}

/// The next version of `lines`: one line in `every` edited (a number appended), one in
/// `every` replaced by a copy of a line from the file's first eighth (code moved or
/// duplicated), and one in `every` new lines inserted from a pool of 1,500 that the old
/// version lacks (a change a bundle repeats in each of its files).
fn edited(lines: &[String], seed: u64, every: u64) -> Vec<String> {
    let mut pool_rng = Rng::xorshift64(99);
    let pool: Vec<String> = (0..1500)
        .map(|_| format!("\tconst v{} = mix( u{}, w{}.xyz ) * {};", pool_rng.below(100_000), pool_rng.below(100_000), pool_rng.below(1000), pool_rng.below(97)))
        .collect();
    let mut rng = Rng::xorshift64(seed | 1);
    let mut out = Vec::with_capacity(lines.len() + lines.len() / 8);
    for line in lines {
        match rng.below(every as usize) {
            0 => out.push(format!("{line} + {}", rng.below(100_000))),
            1 => out.push(lines[rng.below(lines.len() / 8)].clone()),
            _ => out.push(line.clone()),
        }
        if rng.one_in(every) {
            out.push(pool[rng.below(pool.len())].clone());
        }
    }
    out
}

fn joined(lines: &[String]) -> Vec<u8> {
    let mut s = lines.join("\n");
    s.push('\n');
    s.into_bytes()
}

/// The old region of `a.js` that the new version drops (whole lines from 3 MiB, 256 KiB):
/// (start, end) in `a.js`.
fn dropped(a: &[String]) -> (usize, usize, std::ops::Range<usize>) {
    let (mut at, mut k) = (0, 0);
    while at < 3 << 20 {
        at += a[k].len() + 1;
        k += 1;
    }
    let (start, first) = (at, k);
    while at < start + (256 << 10) {
        at += a[k].len() + 1;
        k += 1;
    }
    (start, at, first..k)
}

/// A text tree of three segments: `a.js` (5 MiB, edited, a 256 KiB block dropped), `b.js`
/// (2 MiB, edited) and `c.js`, a new file repeating `b.js`'s new lines (the history reaches
/// it). Returns the dropped block's (start, end) in the old `a.js` too.
fn text_pair() -> (Build, Build, (usize, usize)) {
    let a = js_lines(1, 5 << 20);
    let b = js_lines(2, 2 << 20);
    let (start, end, lines) = dropped(&a);
    let mut kept = a.clone();
    kept.drain(lines);
    let new_a = joined(&edited(&kept, 3, 40));
    let new_b = joined(&edited(&b, 4, 30));
    let mut new_c = new_b.clone();
    new_c.extend_from_slice(b"export default {};\n");
    let old = Build::from_entries(vec![file("a.js", joined(&a)), file("b.js", joined(&b))]).unwrap();
    let new = Build::from_entries(vec![file("a.js", new_a), file("b.js", new_b), file("c.js", new_c)]).unwrap();
    (old, new, (start, end))
}

fn read(build: &Build, ranges: &[ByteRange]) -> Vec<u8> {
    let mut out = Vec::new();
    for r in ranges {
        let mut buf = vec![0; r.len as usize];
        reader(build)(&r.path, r.offset, &mut buf).unwrap();
        out.extend_from_slice(&buf);
    }
    out
}

const LEVEL: i32 = 17;

fn one_pass(old: &Build, new: &Build) -> Vec<u8> {
    let (os, ns) = (Signature::of_build(old, 16 << 10), Signature::of_build(new, 16 << 10));
    let mut patch = Vec::new();
    generate_patch(Some(&os), &ns, LEVEL, &mut reader(old), &mut reader(new), &mut |b| {
        patch.extend_from_slice(b);
        Ok(())
    })
    .unwrap();
    patch
}

#[test]
fn text_windows_round_trip_and_hold_only_copied_old_bytes() {
    let (old, new, (start, end)) = text_pair();
    let patch = one_pass(&old, &new);
    assert_eq!(apply_both(&patch, &old), new);

    let layout = inspect_patch(&patch[..]).unwrap().layout;
    assert_eq!(layout.segments.len(), 3);
    let windows: Vec<_> = layout.segments.iter().filter_map(|s| if let Segment::Window(w) = s { Some(w) } else { None }).collect();
    assert!(!windows.is_empty(), "text segments are window segments: {:?}", layout.segments);
    // The planned spans of a.js's first segment reach 2 MiB around its aligned position, so
    // they hold the dropped block; a text window holds only what the copies read (and 4 KiB
    // around it), so the middle of the block is in no window.
    let middle = ((start + end) / 2) as u64;
    for w in &windows {
        assert!(w.spans.iter().all(|&(s, l)| middle < s || middle >= s + l), "dropped old bytes in a window: {:?}", w.spans);
    }
    // A tight window is many pieces, not the planned spans' few.
    assert!(windows[0].spans.len() > 1, "{:?}", windows[0].spans);
}

#[test]
fn text_segments_split_into_steps_are_the_one_pass_segments() {
    let (old, new, _) = text_pair();
    let patch = one_pass(&old, &new);
    let (os, ns) = (Signature::of_build(&old, 16 << 10), Signature::of_build(&new, 16 << 10));
    let count = PatchGenerator::new(Some(&os), &ns, LEVEL).unwrap().segment_count();
    // Each segment made by its own step generator (history: the two segments before, as the
    // patch declares the 8 MiB reach).
    assert_eq!(in_steps(&old, &new, &(0..=count).collect::<Vec<_>>()), patch);
}

/// The patch made in steps, as the Worker's fan-out makes it: a step generator per range
/// `cuts[k]..cuts[k + 1]` of segments (started at its first segment with the history it names),
/// the segments absorbed in order by an assembling generator, which writes the header and end.
fn in_steps(old: &Build, new: &Build, cuts: &[u64]) -> Vec<u8> {
    let (os, ns) = (Signature::of_build(old, 16 << 10), Signature::of_build(new, 16 << 10));
    let mut a = PatchGenerator::new(Some(&os), &ns, LEVEL).unwrap();
    let mut assembled = a.header().unwrap();
    for w in cuts.windows(2) {
        let mut g = PatchGenerator::new(Some(&os), &ns, LEVEL).unwrap();
        g.start_at(w[0], &read(new, &g.history_ranges(w[0]).unwrap())).unwrap();
        for i in w[0]..w[1] {
            let fresh = read(new, &g.new_ranges(i).unwrap());
            let old_bytes = read(old, &g.plan_segment(i, &fresh).unwrap());
            let segment = g.encode_segment(i, &fresh, old_bytes).unwrap();
            a.absorb_segment(i, &segment).unwrap();
            assembled.extend_from_slice(&segment);
        }
    }
    assembled.extend_from_slice(&a.finish().unwrap());
    assembled
}

/// A text tree whose last file repeats new text 5-8 MiB before it in the delta stream: `a.js`
/// (5 MiB, new, unlike the old build's), `b.js` (1 MiB, new) and `c.js`, `a.js`'s first 3 MiB
/// edited. Segment 2 (from 8 MiB) holds the end of `c.js`, whose source is in no old file and
/// over 4 MiB back. `ext` names the files.
fn far_pair(ext: &str) -> (Build, Build) {
    let a = js_lines(5, 5 << 20);
    let mut head = Vec::new();
    let mut size = 0;
    for line in &a {
        if size >= 3 << 20 {
            break;
        }
        size += line.len() + 1;
        head.push(line.clone());
    }
    let old = Build::from_entries(vec![file(&format!("a.{ext}"), joined(&js_lines(1, 1 << 20)))]).unwrap();
    let new = Build::from_entries(vec![
        file(&format!("a.{ext}"), joined(&a)),
        file(&format!("b.{ext}"), joined(&js_lines(6, 1 << 20))),
        file(&format!("c.{ext}"), joined(&edited(&head, 7, 40))),
    ])
    .unwrap();
    (old, new)
}

#[test]
fn text_windows_reach_8_mib_back_where_the_names_say_text_and_steps_agree() {
    let (old, new) = far_pair("js");
    let patch = one_pass(&old, &new);
    assert_eq!(apply_both(&patch, &old), new);
    let info = inspect_patch(&patch[..]).unwrap();
    assert_eq!(info.tree.window_reach, Some(GENERATOR_TEXT_REACH), "a text tree of 3 segments declares the reach");
    let far = info.layout.segments.iter().filter_map(|s| if let Segment::Window(w) = s { Some(w.back_len) } else { None }).max().unwrap_or(0);
    assert!(far > BASE_WINDOW_BACK, "segment 2 reaches {far} bytes back");

    // The same bytes under names that do not say text: no reach declared, 4 MiB windows, and
    // a patch larger by more than a tenth.
    let (old_bin, new_bin) = far_pair("bin");
    let near = one_pass(&old_bin, &new_bin);
    assert_eq!(apply_both(&near, &old_bin), new_bin);
    assert_eq!(inspect_patch(&near[..]).unwrap().tree.window_reach, None);
    assert!(patch.len() * 10 < near.len() * 9, "far {} bytes, near {}", patch.len(), near.len());

    // Steps cut anywhere make the one-pass patch: a step at segment 2 reads segments 0 and 1.
    let (os, ns) = (Signature::of_build(&old, 16 << 10), Signature::of_build(&new, 16 << 10));
    let mut g = PatchGenerator::new(Some(&os), &ns, LEVEL).unwrap();
    assert_eq!(g.segment_count(), 3);
    let ranges = g.history_ranges(2).unwrap();
    assert_eq!(ranges.iter().map(|r| r.len).sum::<u64>(), 2 * GENERATOR_SEGMENT);
    assert!(g.start_at(2, &read(&new, &g.new_ranges(1).unwrap())).is_err(), "one segment of history is not enough");
    for cuts in [vec![0, 3], vec![0, 2, 3], vec![0, 1, 3], vec![0, 1, 2, 3]] {
        assert_eq!(in_steps(&old, &new, &cuts), patch, "steps {cuts:?}");
    }
}
