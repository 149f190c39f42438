//! The generator's old budget (`PatchGenerator::set_old_budget`): more old data planned per
//! segment finds sources the Worker's 8 MiB plan leaves out; the default plan is unchanged.

use edgepatch_core::generate::{drive, PatchGenerator, MAX_OLD_BUDGET};
use edgepatch_core::memory::{MemoryOldBuild, MemorySink};
use edgepatch_core::patch_format::MAX_WINDOW_BYTES;
use edgepatch_core::signature::Signature;
use edgepatch_core::{apply_patch, Build, Error};

mod fixture_builds;

use fixture_builds::noise;

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
    drive(g, &mut reader(old), &mut reader(new), &mut |_, _, _| Err(Error::Invalid("none".into())), &mut |b| {
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
