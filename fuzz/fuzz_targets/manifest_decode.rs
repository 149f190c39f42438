//! Input: a manifest. `ManifestView::open`, `lookup`, `entry_at`, `segment`
//! and `manifest::decode` must never panic (Err is fine). When `decode`
//! succeeds, the view must agree with it entry by entry, and every path must
//! be found by `lookup`. Run on the input as is and with its BLAKE3 trailer
//! repaired (only `decode` and `verify_checksum` read the trailer).
#![no_main]

use edgepatch_core::manifest::{self, ManifestView};
use edgepatch_fuzz::with_fixed_trailer;
use libfuzzer_sys::fuzz_target;

const PATHS: &[&str] = &["assets", "assets/a.txt", "bin/run", "latest", "readme.md", "x", "a/b/c", ""];
/// Caps per-input work on manifests that declare millions of entries.
const MAX_WALK: usize = 4096;

fn check(data: &[u8]) {
    if let Ok(view) = ManifestView::open(data) {
        let _ = (view.kind(), view.to_build(), view.from_build(), view.index_range(), view.patch_size());
        for p in PATHS {
            let _ = view.lookup(p);
        }
        for i in 0..view.len().min(MAX_WALK) {
            if let Ok(e) = view.entry_at(i) {
                let _ = view.lookup(&e.path);
            }
        }
        let _ = view.entry_at(view.len());
        for i in 0..view.segment_count().min(MAX_WALK) {
            let _ = view.segment(i);
        }
        let _ = view.verify_checksum();
    }
    if let Ok(m) = manifest::decode(data) {
        let view = ManifestView::open(data).expect("decode Ok but open Err");
        assert_eq!(view.len(), m.entries.len());
        for (i, e) in m.entries.iter().enumerate() {
            assert_eq!(view.entry_at(i).as_ref(), Ok(e), "entry_at({i}) disagrees with decode");
            assert_eq!(view.lookup(&e.path), Ok(Some(e.clone())), "lookup({:?}) disagrees with decode", e.path);
        }
        assert_eq!(view.segments().as_ref(), Ok(&m.segments));
        // Re-encoding need not give the same bytes (the index seed may differ),
        // but it must decode to the same manifest.
        if let Ok(bytes) = m.encode() {
            assert_eq!(manifest::decode(&bytes).as_ref(), Ok(&m), "re-encoded manifest decodes differently");
        }
    }
}

fuzz_target!(|data: &[u8]| {
    check(data);
    if let Some(fixed) = with_fixed_trailer(data) {
        check(&fixed);
    }
});
