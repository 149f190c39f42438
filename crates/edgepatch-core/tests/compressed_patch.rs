//! Patches that store a gzip or zlib file as its content, diffed against the old file's
//! content (docs/FORMAT.md §2.8.8): far smaller than the compressed bytes' patch, the exact
//! file back from both appliers, a changed old file refused as the wrong old build, a reader
//! without the capability given a plain patch, and hostile side infos refused without panic.

mod appliers;
mod compressed_files;
mod fixture_builds;
mod reference_applier;
mod wasm_modules;

use std::io::Write;

use appliers::{apply_both, fast_apply, fast_apply_untrusted, with_tree};
use compressed_files::{diff, edited};
use edgepatch_core::error::ErrorKind;
use edgepatch_core::inspect::inspect_patch;
use edgepatch_core::{diff_builds, Build, Capabilities, Capability, DiffOptions};
use edgepatch_testkit::text::words as content;
use fixture_builds::file;

fn dir(path: &str) -> edgepatch_core::BuildEntry {
    edgepatch_core::BuildEntry { path: path.into(), content: edgepatch_core::EntryContent::Directory }
}

/// GNU gzip's file (`gzip -n -LEVEL`), as a build pipeline writes it.
fn gzip(content: &[u8], level: u32) -> Vec<u8> {
    use std::process::{Command, Stdio};
    let mut child = Command::new("gzip").arg("-c").arg("-n").arg(format!("-{level}")).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("gzip");
    let mut stdin = child.stdin.take().unwrap();
    let input = content.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&input).unwrap());
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert!(out.status.success());
    out.stdout
}

/// miniz's zlib stream (flate2's default back end: another encoder than zlib's).
fn zlib(content: &[u8], level: u32) -> Vec<u8> {
    let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(level));
    e.write_all(content).unwrap();
    e.finish().unwrap()
}

fn without_transform() -> Capabilities {
    Capabilities::current().without(Capability::DeflateTransform)
}

#[test]
fn a_compressed_file_patches_as_its_content_and_comes_back_byte_for_byte() {
    let c1 = content(1, 400_000);
    let c2 = edited(&c1, 2);
    let (raw_patch, _) = diff(&Build::single_file(c1.clone()), &Build::single_file(c2.clone()), Capabilities::current());
    for (name, compress) in [("gzip", gzip as fn(&[u8], u32) -> Vec<u8>), ("zlib", zlib)] {
        for level in [1, 6, 9] {
            let (old, new) = (Build::single_file(compress(&c1, level)), Build::single_file(compress(&c2, level)));
            let (patch, stats) = diff(&old, &new, Capabilities::current());
            let (plain, plain_stats) = diff(&old, &new, without_transform());
            assert_eq!((stats.compressed_transformed, plain_stats.compressed_transformed), (1, 0), "{name} {level}");
            assert!(
                patch.len() * 5 < plain.len() && patch.len() < raw_patch.len() + new.total_file_bytes() as usize / 10,
                "{name} {level}: {} bytes, compressed bytes' patch {}, raw content's {}",
                patch.len(),
                plain.len(),
                raw_patch.len()
            );
            assert_eq!(apply_both(&patch, &old), new, "{name} {level}");
            assert_eq!(apply_both(&plain, &old), new, "{name} {level} plain");
        }
    }
}

/// A `.wasm.gz`: its content goes through the wasm transform too (the inner side info), so the
/// patch is the raw modules' patch and the side infos, in both wasm layouts.
#[test]
fn a_compressed_wasm_module_patches_as_the_raw_module_does() {
    for (name, (v1, v2)) in [("renumbered", wasm_modules::versions(3000, 20)), ("recompiled", wasm_modules::recompiled_versions(600))] {
        let (raw, _) = diff(&Build::single_file(v1.clone()), &Build::single_file(v2.clone()), Capabilities::current());
        let (old, new) = (Build::single_file(gzip(&v1, 9)), Build::single_file(gzip(&v2, 9)));
        let (patch, stats) = diff(&old, &new, Capabilities::current());
        let opts = DiffOptions { level: 9, threads: 2, wasm_transform: false, ..DiffOptions::default() };
        let (content_only, _) = diff_builds(&old, &new, &opts, &|_, _| {}).unwrap();
        assert_eq!(stats.compressed_transformed, 1, "{name}");
        let info = inspect_patch(&patch[..]).unwrap();
        let side = &info.resolve(edgepatch_core::patch_format::single_file_listing(old.total_file_bytes())).unwrap().transforms[0].side_info;
        assert!(edgepatch_core::patch_format::reads_old_split(side), "{name}");
        // The raw modules' patch and preflate's corrections (compressed with the tree).
        assert!(
            patch.len() < raw.len() + side.len() + 512 && patch.len() < content_only.len(),
            "{name}: {} bytes, the raw modules' {}, the content's without the wasm transform {}; side info {} bytes",
            patch.len(),
            raw.len(),
            content_only.len(),
            side.len()
        );
        assert_eq!(apply_both(&patch, &old), new, "{name}");
        assert!(info.required_capabilities().contains(Capability::WasmTransform), "{name}");
    }
}

#[test]
fn compressed_files_in_a_tree_renamed_by_content_hash_read_their_old_file_decoded() {
    let (a1, b1) = (content(3, 200_000), content(4, 150_000));
    let (a2, b2) = (edited(&a1, 5), edited(&b1, 6));
    let old = Build::from_entries(vec![
        dir("Build"),
        file("Build/game.data.gz", gzip(&a1, 9)),
        file("Build/core.3f9a1c.js.gz", gzip(&b1, 6)),
        file("index.html", b"<html>".to_vec()),
    ])
    .unwrap();
    let new = Build::from_entries(vec![
        dir("Build"),
        file("Build/game.data.gz", gzip(&a2, 9)),
        file("Build/core.8b20de.js.gz", gzip(&b2, 6)),
        file("index.html", b"<html>".to_vec()),
    ])
    .unwrap();
    let (patch, stats) = diff(&old, &new, Capabilities::current());
    let (plain, _) = diff(&old, &new, without_transform());
    assert_eq!(stats.compressed_transformed, 2);
    assert!(patch.len() * 5 < plain.len(), "{} bytes, plain {}", patch.len(), plain.len());
    assert_eq!(apply_both(&patch, &old), new);
    let info = inspect_patch(&patch[..]).unwrap();
    let needs = info.required_capabilities();
    assert!(needs.contains(Capability::DeflateTransform) && needs.contains(Capability::WasmSplitReference), "{needs}");
    // A reader that cannot name the renamed file's old file gets that file diffed plain.
    let (patch, stats) = diff(&old, &new, Capabilities::current().without(Capability::WasmSplitReference));
    assert_eq!(stats.compressed_transformed, 1);
    assert_eq!(apply_both(&patch, &old), new);
}

#[test]
fn an_old_file_that_decodes_otherwise_is_the_wrong_old_build() {
    let c1 = content(7, 100_000);
    let c2 = edited(&c1, 8);
    let old = Build::from_entries(vec![file("a.gz", gzip(&c1, 9))]).unwrap();
    let new = Build::from_entries(vec![file("a.gz", gzip(&c2, 9))]).unwrap();
    let (patch, _) = diff(&old, &new, Capabilities::current());
    // Same size, other content: the listing cannot tell; decoding it can.
    let mut other = c1.clone();
    other.truncate(c1.len() - 1000);
    let mut wrong = gzip(&other, 9);
    wrong.resize(old.files().next().unwrap().1.len(), 0);
    let err = fast_apply(&patch, &Build::from_entries(vec![file("a.gz", wrong)]).unwrap()).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::OldBuild), "{err}");
}

#[test]
fn files_the_transform_cannot_read_are_diffed_as_they_are() {
    let c1 = content(9, 50_000);
    let mut two_members = gzip(&c1, 6);
    two_members.extend_from_slice(&gzip(b"second", 6));
    let cases: [(&str, Vec<u8>, Vec<u8>); 3] = [
        ("two members", gzip(&c1, 6), two_members),
        ("not gzip", c1.clone(), gzip(&c1, 6)),
        ("truncated", gzip(&c1, 6), gzip(&edited(&c1, 10), 6)[..5_000].to_vec()),
    ];
    for (name, a, b) in cases {
        let (old, new) = (Build::single_file(a), Build::single_file(b));
        let (patch, stats) = diff(&old, &new, Capabilities::current());
        assert_eq!(stats.compressed_transformed, 0, "{name}");
        assert_eq!(apply_both(&patch, &old), new, "{name}");
    }
}

/// A patch from anywhere (no signed manifest vouches for its head, the caller does not trust
/// it) never gets its compressed asset's side info to preflate, which a hostile one keeps
/// running and allocating without end (measured: a flipped bit in the corrections of a 30 KB
/// file took 5.6 GB in a minute): it is refused before anything is written. A changed old
/// content length is the wrong old build before preflate runs, trusted or not.
#[test]
fn an_unvouched_compressed_asset_is_refused_before_preflate_runs() {
    let c1 = content(11, 30_000);
    let c2 = edited(&c1, 12);
    let (old, new) = (Build::single_file(gzip(&c1, 9)), Build::single_file(gzip(&c2, 9)));
    let (patch, _) = diff(&old, &new, Capabilities::current());
    let err = fast_apply_untrusted(&patch, &old).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unvouched, "{err}");
    assert!(err.to_string().contains("--trust-patch"), "{err}");
    assert_eq!(fast_apply(&patch, &old).unwrap(), new, "trusted, it applies");
    // The tree with the side info's corrections changed: refused all the same, before preflate.
    let listing = edgepatch_core::patch_format::single_file_listing(old.total_file_bytes());
    let tree = inspect_patch(&patch[..]).unwrap().resolve(listing).unwrap();
    let mut hostile_tree = tree.clone();
    let last = hostile_tree.transforms[0].side_info.len() - 1;
    hostile_tree.transforms[0].side_info[last] ^= 0x5a;
    let err = fast_apply_untrusted(&with_tree(&patch, &hostile_tree), &old).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unvouched, "{err}");
    // An old content length the old file does not decode to: the wrong old build.
    let mut claims = tree.clone();
    claims.transforms[0].side_info[6] ^= 1;
    let err = fast_apply(&with_tree(&patch, &claims), &old).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::OldBuild, "{err}");
}
