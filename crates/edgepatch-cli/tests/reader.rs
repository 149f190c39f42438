//! `--reader` (docs/FORMAT.md §5): `edgepatch diff` and `diff --bounded` write only what the
//! named reader understands, `edgepatch inspect` says what a patch needs, and a list that
//! names no capability is refused before any work.

use serde_json::Value;

mod common;
use common::{edgepatch, ok, snapshot, unpack};

fn needs(patch: &std::path::Path) -> (String, u64) {
    let out = ok(edgepatch(&[&"--json", &"inspect", &patch]));
    let json: Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    let names = json["reader_needs"].as_str().unwrap().to_string();
    (names, u64::from_str_radix(json["reader_needs_hex"].as_str().unwrap(), 16).unwrap())
}

#[test]
fn the_diff_writes_for_the_reader_named_and_the_patch_applies() {
    let tmp = tempfile::tempdir().unwrap();
    let (v1, v2) = (unpack("game-v1.tar", tmp.path()), unpack("game-v2.tar", tmp.path()));
    let full = tmp.path().join("full.patch");
    ok(edgepatch(&[&"diff", &v1, &v2, &full]));
    let (names, bits) = needs(&full);
    assert_ne!(bits, 0, "the fixture pair uses an optional feature at this build's own set ({names}), so the baseline patch differs");
    for (reader, bounded) in [("baseline", false), ("baseline", true), ("current,-run-coded-ops,-lzma-segments", false)] {
        let patch = tmp.path().join(format!("{reader}-{bounded}.patch"));
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"diff", &"--reader", &reader];
        if bounded {
            args.push(&"--bounded");
        }
        args.extend([&v1 as &dyn AsRef<std::ffi::OsStr>, &v2, &patch]);
        ok(edgepatch(&args));
        let (names, _) = needs(&patch);
        let allowed = match reader {
            "baseline" => vec![],
            _ => vec![
                "wasm-transform",
                "window-reach",
                "mode-blind-digest",
                "wasm-split-layout",
                "wasm-split-reference",
                "wasm-elements",
                "wasm-function-keys",
                "wasm-dwarf-addresses",
            ],
        };
        for name in names.split(',').filter(|n| *n != "baseline") {
            assert!(allowed.contains(&name), "--reader {reader} (bounded {bounded}): the patch needs {name}");
        }
        let out = tmp.path().join(format!("out-{reader}-{bounded}"));
        ok(edgepatch(&[&"apply", &v1, &patch, &out]));
        assert_eq!(snapshot(&out), snapshot(&v2), "--reader {reader}");
    }
}

#[test]
fn an_unknown_capability_is_refused_naming_the_known_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let (v1, v2) = (unpack("game-v1.tar", tmp.path()), unpack("game-v2.tar", tmp.path()));
    let out = edgepatch(&[&"diff", &"--reader", &"lzma", &v1, &v2, &tmp.path().join("p")]);
    assert_eq!(out.status.code(), Some(2), "a usage error");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("lzma-segments") && err.contains("v0.1"), "{err}");
    assert!(!tmp.path().join("p").exists());
}
