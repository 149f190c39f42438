//! The generator's old budget (`PatchGenerator::set_old_budget`): more old data planned per
//! segment finds sources the Worker's 8 MiB plan leaves out; the default plan is unchanged.

use edgepatch_core::generate::{drive, BuildReaders, PatchGenerator, MAX_OLD_BUDGET};
use edgepatch_core::memory::{MemoryOldBuild, MemorySink};
use edgepatch_core::patch_format::MAX_WINDOW_BYTES;
use edgepatch_core::signature::Signature;
use edgepatch_core::{apply_patch, Build, Error};

use edgepatch_testkit::{noise, Rng};

fn reader(build: &Build) -> impl FnMut(&str, u64, &mut [u8]) -> edgepatch_core::Result<()> + '_ {
    move |path, offset, buf| {
        let (_, data) = build.files().find(|(p, _)| *p == path).ok_or_else(|| Error::Invalid(format!("no file {path}")))?;
        buf.copy_from_slice(&data[offset as usize..offset as usize + buf.len()]);
        Ok(())
    }
}

fn generate(old: &Build, new: &Build, budget: Option<u64>) -> Vec<u8> {
    let (old_sig, new_sig) = (Signature::of_build(old, 16 << 10), Signature::of_build(new, 16 << 10));
    let mut g = PatchGenerator::new(Some(&old_sig), &new_sig, 3).unwrap();
    if let Some(b) = budget {
        g.set_old_budget(b).unwrap();
    }
    let mut patch = Vec::new();
    drive(g, BuildReaders::builds(&mut reader(old), &mut reader(new)), &mut |b| {
        patch.extend_from_slice(b);
        Ok(())
    })
    .unwrap();
    patch
}

fn apply(patch: &[u8], old: &Build) -> Build {
    let mut sink = MemorySink::default();
    apply_patch(patch, &mut MemoryOldBuild::new(old), &mut sink, &mut |_| {}).expect("apply");
    sink.into_build()
}

#[test]
fn a_larger_old_budget_reaches_sources_the_default_plan_cuts() {
    // One 4 MiB segment made of 64 KiB pieces of a 16 MiB old file, taken 192 KiB apart: the
    // pieces' old data spans 12 MiB, more than the default plan's 8 MiB.
    let old = noise(11, 16 << 20);
    let new: Vec<u8> = (0..64).flat_map(|k| old[k * (192 << 10)..k * (192 << 10) + (64 << 10)].to_vec()).collect();
    let (old, new) = (Build::single_file(old), Build::single_file(new));
    let default = generate(&old, &new, None);
    assert_eq!(default, generate(&old, &new, Some(MAX_WINDOW_BYTES)), "the default budget is MAX_WINDOW_BYTES");
    let larger = generate(&old, &new, Some(16 << 20));
    assert_eq!(apply(&default, &old), new);
    assert_eq!(apply(&larger, &old), new);
    // The default plan misses the pieces of the last 4 MiB (a third of the segment: random bytes).
    assert!(default.len() > 1_000_000, "default plan: {} bytes", default.len());
    assert!(larger.len() < 50_000, "16 MiB plan: {} bytes", larger.len());
}

#[test]
fn old_budgets_out_of_range_or_late_are_errors() {
    let old = Build::single_file(noise(12, 100_000));
    let new = Build::single_file(noise(13, 100_000));
    let (old_sig, new_sig) = (Signature::of_build(&old, 16 << 10), Signature::of_build(&new, 16 << 10));
    let mut g = PatchGenerator::new(Some(&old_sig), &new_sig, 3).unwrap();
    assert!(g.set_old_budget(MAX_WINDOW_BYTES - 1).is_err());
    assert!(g.set_old_budget(MAX_OLD_BUDGET + 1).is_err());
    g.set_old_budget(MAX_OLD_BUDGET).unwrap();
    g.header().unwrap();
    let data = new.files().next().unwrap().1.to_vec();
    g.plan_segment(0, &data).unwrap();
    assert!(g.set_old_budget(MAX_WINDOW_BYTES).is_err(), "refused once a segment is planned");
}

/// About `len` bytes of code-like text lines, each naming something of its own.
fn text_lines(seed: u64, len: usize) -> Vec<String> {
    const WORDS: [&str; 12] = ["const", "return", "function", "this", "value", "texture", "uniform", "=", "(", ")", "{", "};"];
    let mut rng = Rng::xorshift64_seeded(seed);
    let (mut lines, mut size) = (Vec::new(), 0);
    while size < len {
        let mut line = format!("n{} =", rng.below(10_000_000));
        for _ in 0..3 + rng.below(8) {
            line.push(' ');
            line.push_str(WORDS[rng.below(WORDS.len())]);
        }
        size += line.len() + 1;
        lines.push(line);
    }
    lines
}

#[test]
fn deep_text_windows_round_trip_and_change_the_text_windows() {
    // 3 MiB of text, one line in 16 edited, one in 16 copied from the first eighth, and one
    // new line in 16 from a pool the old text lacks: short copies and new text that repeats,
    // so the text window form is tried and wins.
    let lines = text_lines(21, 3 << 20);
    let pool = text_lines(22, 100_000);
    let mut edited = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        match i % 16 {
            0 => edited.push(format!("{l} + {}", i % 1000)),
            1 => edited.push(lines[(i * 7919) % (lines.len() / 8)].clone()),
            _ => edited.push(l.clone()),
        }
        if i % 16 == 8 {
            edited.push(pool[(i * 104_729) % pool.len()].clone());
        }
    }
    let (old, new) = (Build::single_file(lines.join("\n").into_bytes()), Build::single_file(edited.join("\n").into_bytes()));
    let generate = |deep: bool| {
        let (old_sig, new_sig) = (Signature::of_build(&old, 16 << 10), Signature::of_build(&new, 16 << 10));
        let mut g = PatchGenerator::new(Some(&old_sig), &new_sig, 17).unwrap();
        g.set_deep_text_windows(deep);
        let mut patch = Vec::new();
        let g = drive(g, BuildReaders::builds(&mut reader(&old), &mut reader(&new)), &mut |b| {
            patch.extend_from_slice(b);
            Ok(())
        })
        .unwrap();
        (patch, g.ops_segments())
    };
    let (worker, worker_ops) = generate(false);
    let (deep, deep_ops) = generate(true);
    assert_eq!(apply(&worker, &old), new);
    assert_eq!(apply(&deep, &old), new);
    assert_eq!((worker_ops, deep_ops), (0, 0), "window segments");
    assert_ne!(worker, deep, "the deep search makes other windows");
    assert!(deep.len() <= worker.len(), "deep {} bytes, the Worker's search {}", deep.len(), worker.len());
}
