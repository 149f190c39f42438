//! Patches that store a Brotli file as its content (docs/FORMAT.md §2.8.8, container 2): the
//! writer finds the reference encoder's settings that made the file, the patch is about the
//! content's patch, and both appliers encode the exact file again; a file no setting it tries
//! reproduces, or a reader without `brotli-transform`, gets the file diffed as it is.

mod appliers;
mod compressed_files;
mod fixture_builds;
mod reference_applier;
mod wasm_modules;

use std::io::Write;

use appliers::{apply_both, fast_apply_untrusted};
use brotlic::{BrotliEncoderOptions, CompressionMode, CompressorWriter, Quality, WindowSize};
use compressed_files::{diff, edited};
use edgepatch_core::error::ErrorKind;
use edgepatch_core::inspect::inspect_patch;
use edgepatch_core::{Build, Capabilities, Capability};
use edgepatch_testkit::text::words;
use fixture_builds::file;

/// `content` compressed as `brotli -q Q` does (window fitted to the content, its length as
/// the size hint), or with `mode` and no size hint.
fn brotli(content: &[u8], quality: u8, mode: CompressionMode, size_hint: bool) -> Vec<u8> {
    brotli_with(content, quality, mode, size_hint, false)
}

/// [`brotli`], with literal context modeling off where `no_context_modeling` (a setting no
/// command-line tool uses by default, and the search does not try).
fn brotli_with(content: &[u8], quality: u8, mode: CompressionMode, size_hint: bool, no_context_modeling: bool) -> Vec<u8> {
    let mut window = 10;
    while window < 24 && (1usize << window) - 16 < content.len() {
        window += 1;
    }
    let mut options = BrotliEncoderOptions::new();
    options.quality(Quality::new(quality).unwrap()).window_size(WindowSize::new(window).unwrap()).mode(mode);
    if size_hint {
        options.size_hint(content.len() as u32);
    }
    options.disable_context_modeling(no_context_modeling);
    let mut w = CompressorWriter::with_encoder(options.build().unwrap(), Vec::new());
    w.write_all(content).unwrap();
    w.into_inner().unwrap()
}

fn tree(data: Vec<u8>, name: &str) -> Build {
    let dir = edgepatch_core::BuildEntry { path: "Build".into(), content: edgepatch_core::EntryContent::Directory };
    Build::from_entries(vec![dir, file(&format!("Build/{name}"), data), file("index.html", b"<html>".to_vec())]).unwrap()
}

#[test]
fn a_brotli_file_patches_as_its_content_and_comes_back_byte_for_byte() {
    let c1 = words(21, 300_000);
    let c2 = edited(&c1, 22);
    let (raw, _) = diff(&Build::single_file(c1.clone()), &Build::single_file(c2.clone()), Capabilities::current());
    for (quality, size_hint) in [(11, true), (5, true), (1, false), (9, false)] {
        let what = format!("quality {quality}, size hint {size_hint}");
        let (b1, b2) = (brotli(&c1, quality, CompressionMode::Generic, size_hint), brotli(&c2, quality, CompressionMode::Generic, size_hint));
        for (old, new) in
            [(tree(b1.clone(), "game.data.br"), tree(b2.clone(), "game.data.br")), (Build::single_file(b1.clone()), Build::single_file(b2.clone()))]
        {
            let (patch, stats) = diff(&old, &new, Capabilities::current());
            let (plain, plain_stats) = diff(&old, &new, Capabilities::current().without(Capability::BrotliTransform));
            assert_eq!((stats.compressed_transformed, plain_stats.compressed_transformed), (1, 0), "{what}");
            assert!(
                patch.len() * 5 < plain.len() && patch.len() < raw.len() + 256,
                "{what}: {} bytes, plain {}, raw content's {}",
                patch.len(),
                plain.len(),
                raw.len()
            );
            assert_eq!(apply_both(&patch, &old), new, "{what}");
            assert_eq!(apply_both(&plain, &old), new, "{what} plain");
            let needs = inspect_patch(&patch[..]).unwrap().required_capabilities();
            assert!(needs.contains(Capability::BrotliTransform) && !needs.contains(Capability::DeflateTransform), "{what}: {needs}");
        }
    }
}

#[test]
fn a_brotli_file_no_tried_setting_reproduces_is_diffed_as_it_is() {
    let c1 = words(23, 100_000);
    let c2 = edited(&c1, 24);
    // Literal context modeling off: not a setting the search tries; a file that is no Brotli
    // stream at all.
    let off = |c: &[u8]| brotli_with(c, 11, CompressionMode::Generic, true, true);
    for (b1, b2) in [(off(&c1), off(&c2)), (c1.clone(), c2.clone())] {
        let (old, new) = (tree(b1, "game.data.br"), tree(b2, "game.data.br"));
        let (patch, stats) = diff(&old, &new, Capabilities::current());
        assert_eq!(stats.compressed_transformed, 0);
        assert_eq!(apply_both(&patch, &old), new);
    }
    // A file not named .br in a tree is not tried.
    let (b1, b2) = (brotli(&c1, 5, CompressionMode::Generic, true), brotli(&c2, 5, CompressionMode::Generic, true));
    let (patch, stats) = diff(&tree(b1.clone(), "game.data"), &tree(b2.clone(), "game.data"), Capabilities::current());
    assert_eq!(stats.compressed_transformed, 0);
    assert_eq!(apply_both(&patch, &tree(b1, "game.data")), tree(b2, "game.data"));
}

#[test]
fn a_brotli_wasm_module_patches_as_the_raw_module_does() {
    let (m1, m2) = wasm_modules::versions(3000, 20);
    let (b1, b2) = (brotli(&m1, 11, CompressionMode::Generic, true), brotli(&m2, 11, CompressionMode::Generic, true));
    let (old, new) = (tree(b1, "game.wasm.br"), tree(b2, "game.wasm.br"));
    let (patch, stats) = diff(&old, &new, Capabilities::current());
    assert_eq!(stats.compressed_transformed, 1);
    let (raw, _) = diff(&tree(m1, "game.wasm"), &tree(m2, "game.wasm"), Capabilities::current());
    assert!(patch.len() < raw.len() + 256, "{} bytes, the raw modules' {}", patch.len(), raw.len());
    assert_eq!(apply_both(&patch, &old), new);
}

#[test]
fn an_old_brotli_file_that_decodes_otherwise_is_the_wrong_old_build_and_an_unvouched_one_is_refused() {
    let c1 = words(25, 60_000);
    let c2 = edited(&c1, 26);
    let b = |c: &[u8]| brotli(c, 5, CompressionMode::Generic, true);
    let (old, new) = (tree(b(&c1), "a.br"), tree(b(&c2), "a.br"));
    let (patch, stats) = diff(&old, &new, Capabilities::current());
    assert_eq!(stats.compressed_transformed, 1);
    // Another old build whose a.br decodes to other content of another length.
    let other = tree(b(&words(27, 50_000)), "a.br");
    assert!(appliers::fast_apply(&patch, &other).is_err());
    // A patch from anywhere: refused before anything is written, as a deflate row is.
    let err = fast_apply_untrusted(&patch, &old).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unvouched, "{err}");
}
