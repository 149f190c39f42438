//! How deep a corpus gets: for each input of fuzz/corpus/<target>/ (as is and
//! with its BLAKE3 trailer repaired, as the targets do), counts how many reach
//! Ok. Shows whether the differential check in `patch_apply` was exercised on
//! inputs other than the seeds.
//!
//!     cd fuzz && cargo run --release --example corpus_stats

use std::fs;
use std::path::Path;

use edgepatch_core::manifest::{self, ManifestView};
use edgepatch_core::signature::Signature;
use edgepatch_core::{apply_patch, inspect::inspect_patch};
use edgepatch_fuzz::reference_apply;
use edgepatch_fuzz::*;

fn inputs(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus").join(target);
    let mut out = Vec::new();
    for e in fs::read_dir(&dir).into_iter().flatten().flatten() {
        let bytes = fs::read(e.path()).unwrap();
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some(fixed) = with_fixed_trailer(&bytes) {
            out.push((format!("{name} (trailer repaired)"), fixed));
        }
        out.push((name, bytes));
    }
    out
}

fn main() {
    let olds = [old_single(), old_tree()];
    let (mut n, mut inspect_ok, mut apply_ok, mut ref_ok, mut seeds) = (0, 0, 0, 0, 0);
    for (name, data) in inputs("patch_apply") {
        n += 1;
        inspect_ok += inspect_patch(data.as_slice()).is_ok() as usize;
        for old in &olds {
            let mut sink = MemSink::new(256 << 20);
            let fast = apply_patch(data.as_slice(), &mut MemOld(old), &mut sink, &mut |_| {});
            if fast.is_ok() {
                apply_ok += 1;
                seeds += name.ends_with(".patch") as usize;
            }
            let reference = reference_apply(&data, old);
            ref_ok += reference.is_ok() as usize;
            // Not a checked property (the reference applier does not check old
            // file sizes, for one), but worth seeing.
            if let (Err(e), Ok(_)) = (&fast, &reference) {
                println!("  reference Ok, apply_patch Err: {name}: {e}");
            }
        }
    }
    println!("patch_apply: {n} inputs; inspect Ok {inspect_ok}; apply_patch Ok {apply_ok} (of which seeds {seeds}); reference_apply Ok {ref_ok}");

    let (mut n, mut ok) = (0, 0);
    for (_, data) in inputs("signature_decode") {
        n += 1;
        ok += Signature::decode(&data).is_ok() as usize;
    }
    println!("signature_decode: {n} inputs; decode Ok {ok}");

    let (mut n, mut open_ok, mut ok) = (0, 0, 0);
    for (_, data) in inputs("manifest_decode") {
        n += 1;
        open_ok += ManifestView::open(&data).is_ok() as usize;
        ok += manifest::decode(&data).is_ok() as usize;
    }
    println!("manifest_decode: {n} inputs; open Ok {open_ok}; decode Ok {ok}");
}
