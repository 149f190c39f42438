//! Trees of text whose code moves across files, in several segments: the
//! patches round-trip through both appliers and stay small. (Which old spans
//! a window segment takes is tested in src/diff.rs.)

mod appliers;
mod fixture_builds;
mod reference_applier;

use appliers::apply_both;
use edgepatch_core::{diff_builds, Build, DiffOptions};
use edgepatch_testkit::noise;
use fixture_builds::file;

/// `count` lines of JavaScript-like text, each from `seed` and its line number.
fn lines(seed: u64, count: usize) -> Vec<String> {
    const WORDS: [&str; 16] = [
        "node", "value", "renderer", "texture", "uniform", "buffer", "shader", "mesh", "scene", "camera", "light", "matrix", "vector", "color", "material",
        "geometry",
    ];
    let r = noise(seed, count * 4);
    (0..count)
        .map(|i| {
            let w = |k: usize| WORDS[usize::from(r[i * 4 + k]) % WORDS.len()];
            format!("\tconst {}{} = {}.{}( {}, {} );\n", w(0), i % 97, w(1), w(2), w(3), r[i * 4 + 3])
        })
        .collect()
}

/// Every 3rd line with a short comment of `seed`'s, as a refactoring leaves many small edits.
fn edited(old: &[String], seed: u64) -> Vec<String> {
    let r = noise(seed, old.len());
    old.iter().enumerate().map(|(i, o)| if i % 3 == 1 { format!("{} // {}\n", o.trim_end(), r[i] % 64) } else { o.clone() }).collect()
}

#[test]
fn code_moved_across_files_round_trips_in_several_segments() {
    let (a, b, c) = (lines(1, 20000), lines(2, 20000), lines(3, 20000));
    let old =
        Build::from_entries(vec![file("a.js", a.concat().into_bytes()), file("b.js", b.concat().into_bytes()), file("c.js", c.concat().into_bytes())]).unwrap();
    // New a.js: edited, and lines 1500..2500 of the old one gone (no copy
    // reads them). New b.js: edited, with a block moved in from c.js.
    let a2 = edited(&a, 11);
    let new_a: Vec<String> = a2[..1500].iter().chain(&a2[2500..]).cloned().collect();
    let mut new_b = edited(&b, 12);
    new_b.splice(2000..2000, c[1000..2000].iter().cloned());
    let new_c: Vec<String> = edited(&c, 13).into_iter().enumerate().filter(|(i, _)| !(1000..2000).contains(i)).map(|(_, l)| l).collect();
    let new = Build::from_entries(vec![
        file("a.js", new_a.concat().into_bytes()),
        file("b.js", new_b.concat().into_bytes()),
        file("c.js", new_c.concat().into_bytes()),
    ])
    .unwrap();

    let opts = DiffOptions { level: 3, segment_size: 512 << 10, ..Default::default() };
    let (patch, _) = diff_builds(&old, &new, &opts, &|_, _| {}).expect("diff");
    assert_eq!(apply_both(&patch, &old), new);
    let new_total = new.total_file_bytes() as usize;
    assert!(patch.len() < new_total / 8, "patch {} for {new_total} new bytes", patch.len());
}
