//! Shared by the integration tests: applying a patch to an in-memory build with the
//! streaming applier alone, or with it and the reference applier together (which must
//! agree), and reading an in-memory build the way the generator's callbacks do.
//! A test crate that includes this module also includes `reference_applier`.
// Each test crate includes this module and uses part of it.
#![allow(dead_code)]

use edgepatch_core::memory::{MemoryOldBuild, MemorySink};
use edgepatch_core::{apply_patch, Build, Error};

use super::reference_applier;

/// The streaming applier's result of `patch` on `old`.
/// The tests' own patches are trusted ([`MemorySink::trusting_side_infos`]); `fast_apply_untrusted`
/// applies as for a patch from anywhere.
pub fn fast_apply(patch: &[u8], old: &Build) -> Result<Build, Error> {
    let mut sink = MemorySink::default().trusting_side_infos();
    apply_patch(patch, &mut MemoryOldBuild::new(old), &mut sink, &mut |_| {})?;
    Ok(sink.into_build())
}

/// The streaming applier's result of `patch` on `old`, into a sink with scratch space (where it
/// keeps transformed modules' normalized forms and split old modules instead of in memory).
pub fn fast_apply_with_scratch(patch: &[u8], old: &Build) -> Result<Build, Error> {
    let mut sink = MemorySink::with_scratch().trusting_side_infos();
    apply_patch(patch, &mut MemoryOldBuild::new(old), &mut sink, &mut |_| {})?;
    Ok(sink.into_build())
}

/// The streaming applier's result of `patch` on `old` into a sink that trusts nothing but what
/// a signed manifest vouches for (the default).
pub fn fast_apply_untrusted(patch: &[u8], old: &Build) -> Result<Build, Error> {
    let mut sink = MemorySink::default();
    apply_patch(patch, &mut MemoryOldBuild::new(old), &mut sink, &mut |_| {})?;
    Ok(sink.into_build())
}

/// Applies with both appliers, the streaming one with and without scratch space, which must
/// accept the patch and give the same build.
pub fn apply_both(patch: &[u8], old: &Build) -> Build {
    let fast = fast_apply(patch, old).expect("fast apply");
    let reference = reference_applier::apply(patch, old).expect("reference apply");
    assert_eq!(fast, reference, "fast and reference appliers disagree");
    assert_eq!(fast_apply_with_scratch(patch, old).expect("fast apply with scratch space"), fast, "the applier with scratch space gives another build");
    fast
}

/// A generator read callback (path, offset, buffer to fill) over an in-memory build.
pub fn reader(build: &Build) -> impl FnMut(&str, u64, &mut [u8]) -> edgepatch_core::Result<()> + '_ {
    move |path, offset, buf| {
        let (_, data) = build.files().find(|(p, _)| *p == path).ok_or_else(|| Error::Invalid(format!("no file {path}")))?;
        buf.copy_from_slice(&data[offset as usize..offset as usize + buf.len()]);
        Ok(())
    }
}

/// `patch` with its tree section replaced by `tree` encoded: header (magic, version, the tree's
/// flags), the tree, the segments and trailer as they were, the checksum anew.
pub fn with_tree(patch: &[u8], tree: &edgepatch_core::patch_format::PatchTree) -> Vec<u8> {
    let raw = tree.encode().unwrap();
    let frame = zstd::bulk::compress(&raw, 3).unwrap();
    let mut out = patch[..10].to_vec();
    out.extend_from_slice(&tree.flags().to_le_bytes());
    for v in [raw.len() as u64, frame.len() as u64] {
        edgepatch_testkit::leb128::write_u64(&mut out, v);
    }
    out.extend_from_slice(&frame);
    let segments_at = edgepatch_core::inspect::inspect_patch(patch).unwrap().layout.segment_spans[0].0 as usize;
    out.extend_from_slice(&patch[segments_at..patch.len() - 32]);
    let sum = blake3::hash(&out);
    out.extend_from_slice(sum.as_bytes());
    out
}
