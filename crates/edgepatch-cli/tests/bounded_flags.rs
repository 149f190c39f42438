//! `diff --bounded --old-budget`: a larger budget reaches old data the Worker's 8 MiB plan
//! leaves out; out-of-range budgets are refused; threads make the one-pass patch; every patch
//! applies back byte-exact; LZMA window segments come at the default level, and in the
//! Worker's form at any level, as LZMA ops streams do.

use std::fs;

use edgepatch_testkit::noise;

mod common;
use common::{edgepatch, ok};

#[test]
fn old_budget_reaches_further_and_is_checked() {
    let tmp = tempfile::tempdir().unwrap();
    // 64 KiB pieces of a 16 MiB old file taken 192 KiB apart: their old data spans 12 MiB.
    let old = noise(5, 16 << 20);
    let new: Vec<u8> = (0..64).flat_map(|k| old[k * (192 << 10)..k * (192 << 10) + (64 << 10)].to_vec()).collect();
    let (old_path, new_path) = (tmp.path().join("old"), tmp.path().join("new"));
    fs::write(&old_path, &old).unwrap();
    fs::write(&new_path, &new).unwrap();
    let mut sizes = Vec::new();
    for budget in ["8", "16"] {
        let (patch, out) = (tmp.path().join(format!("{budget}.patch")), tmp.path().join(format!("{budget}.out")));
        ok(edgepatch(&[&"diff", &"--bounded", &"--old-budget", &budget, &old_path, &new_path, &patch]));
        ok(edgepatch(&[&"apply", &old_path, &patch, &out]));
        assert!(fs::read(&out).unwrap() == new, "budget {budget}: applied back");
        sizes.push(fs::metadata(&patch).unwrap().len());
    }
    assert!(sizes[0] > 1_000_000 && sizes[1] < 50_000, "8 MiB: {} bytes, 16 MiB: {} bytes", sizes[0], sizes[1]);
    for bad in ["7", "257"] {
        let out = edgepatch(&[&"diff", &"--bounded", &"--old-budget", &bad, &old_path, &new_path, &tmp.path().join("bad.patch")]);
        assert!(!out.status.success(), "--old-budget {bad} accepted");
    }
}

#[test]
fn threads_make_the_one_pass_patch_byte_for_byte() {
    let tmp = tempfile::tempdir().unwrap();
    let (old_dir, new_dir) = (tmp.path().join("old"), tmp.path().join("new"));
    fs::create_dir_all(&old_dir).unwrap();
    fs::create_dir_all(&new_dir).unwrap();
    // 12 segments of 4 MiB: three runs of four. Every file changes a little
    // and a text file repeats another's changes, so segments copy, window and reach back.
    for k in 0..5u64 {
        let old = noise(10 + k, 8 << 20);
        let mut new = old.clone();
        for at in (1000..new.len()).step_by(300_007) {
            new[at] ^= 0x5a;
        }
        new.extend_from_slice(&noise(20 + k, 100_000));
        fs::write(old_dir.join(format!("data{k}.bin")), &old).unwrap();
        fs::write(new_dir.join(format!("data{k}.bin")), &new).unwrap();
    }
    // Over 4 MiB of `.js`: the patch declares the 8 MiB text reach, so runs carry two segments of history.
    let text = |v: u32| (0..110_000).map(|i| format!("export function f{i}() {{ return {} + {v}; }}\n", i * 7)).collect::<String>();
    fs::write(old_dir.join("bundle.js"), text(1)).unwrap();
    fs::write(new_dir.join("bundle.js"), text(2)).unwrap();
    let mut patches = Vec::new();
    for threads in ["1", "3"] {
        let (patch, out) = (tmp.path().join(format!("{threads}.patch")), tmp.path().join(format!("{threads}.out")));
        ok(edgepatch(&[&"diff", &"--bounded", &"--threads", &threads, &old_dir, &new_dir, &patch]));
        ok(edgepatch(&[&"apply", &old_dir, &patch, &out]));
        for entry in fs::read_dir(&new_dir).unwrap() {
            let name = entry.unwrap().file_name();
            assert!(fs::read(new_dir.join(&name)).unwrap() == fs::read(out.join(&name)).unwrap(), "{threads} threads: {name:?} applied back");
        }
        let info: serde_json::Value = serde_json::from_str(&ok(edgepatch(&[&"--json", &"inspect", &patch]))).unwrap();
        assert_eq!(info["window_reach_declared"], true, "{info}");
        patches.push(fs::read(&patch).unwrap());
    }
    assert!(patches[0].len() < 2_000_000, "patch of {} bytes", patches[0].len());
    assert!(patches[0] == patches[1], "1 thread: {} bytes, 3 threads: {} bytes", patches[0].len(), patches[1].len());
}

/// Diffs `old` to `new` with `args`, applies the patch back and checks it is byte for byte
/// `new`; returns `inspect --json`'s report and the patch's header flags (bytes 10..12).
fn diff_apply_inspect(dir: &std::path::Path, old: &std::path::Path, new: &std::path::Path, args: &[&str]) -> (serde_json::Value, u16) {
    let (patch, out) = (dir.join("p.patch"), dir.join("p.out"));
    let mut all: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"diff"];
    for a in args {
        all.push(a);
    }
    all.extend([&old as &dyn AsRef<std::ffi::OsStr>, &new, &patch]);
    ok(edgepatch(&all));
    let _ = fs::remove_file(&out);
    ok(edgepatch(&[&"apply", &old, &patch, &out]));
    assert!(fs::read(&out).unwrap() == fs::read(new).unwrap(), "{args:?}: applied output differs");
    let info: serde_json::Value = serde_json::from_str(&ok(edgepatch(&[&"--json", &"inspect", &patch]))).unwrap();
    let flags = u16::from_le_bytes(fs::read(&patch).unwrap()[10..12].try_into().unwrap());
    (info, flags)
}

/// The arcade's re-emitted module (fixtures/arcade) is stored split; at the default level the
/// in-memory diff and `diff --bounded` write LZMA window segments for its parts (docs/FORMAT.md
/// §2.6), which apply byte for byte, and so does `--worker-text-windows` (the Worker's patch,
/// whose parts here are far under its 4 MiB); a lower level writes zstd only and leaves the
/// flag clear.
#[test]
fn split_modules_get_lzma_window_segments_at_the_default_level_and_in_the_workers_form() {
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/arcade");
    let (old, new) = (fixtures.join("v1/logic.wasm"), fixtures.join("v2/logic.wasm"));
    let tmp = tempfile::tempdir().unwrap();
    let lzma_segments = |args: &[&str]| -> usize {
        let (info, flags) = diff_apply_inspect(tmp.path(), &old, &new, args);
        let count = info["segments"].as_array().unwrap().iter().filter(|s| s["codec"] == "lzma").count();
        if count > 0 {
            assert!(flags & edgepatch_core::patch_format::FLAG_LZMA_SEGMENTS != 0, "{args:?}: flags {flags:#x}, {count} LZMA segments");
        }
        count
    };
    assert!(lzma_segments(&[]) > 0);
    assert!(lzma_segments(&["--bounded"]) > 0);
    assert_eq!(lzma_segments(&["--level", "18"]), 0);
    assert!(lzma_segments(&["--bounded", "--level", "17", "--worker-text-windows"]) > 0);
}

#[test]
fn ops_segments_get_lzma_streams_at_the_default_level_only() {
    // 16-byte records, of which about 3 in 8 have their 32-bit field at offset 4 moved by
    // one of two amounts (as pointers move between builds): copies whose diff stream carries
    // the moves (an ops segment), which LZMA codes smaller than zstd (repeated distances).
    let tmp = tempfile::tempdir().unwrap();
    let old = noise(9, 2 << 20);
    let mut new = old.clone();
    let pick = noise(10, new.len() / 16);
    for (record, p) in new.chunks_exact_mut(16).zip(pick) {
        if p < 96 {
            let field = u32::from_le_bytes(record[4..8].try_into().unwrap());
            let moved = field.wrapping_add(if p & 1 == 1 { 0x40 } else { 0x1000 });
            record[4..8].copy_from_slice(&moved.to_le_bytes());
        }
    }
    let (old_path, new_path) = (tmp.path().join("old"), tmp.path().join("new"));
    fs::write(&old_path, &old).unwrap();
    fs::write(&new_path, &new).unwrap();
    let lzma_ops_segments = |args: &[&str]| -> usize {
        let (info, flags) = diff_apply_inspect(tmp.path(), &old_path, &new_path, args);
        let count = info["segments"].as_array().unwrap().iter().filter(|s| s["kind"] == "ops" && s["lzma"].as_array().is_some_and(|l| !l.is_empty())).count();
        if count > 0 {
            assert!(flags & edgepatch_core::patch_format::FLAG_LZMA_SEGMENTS != 0, "{args:?}: flags {flags:#x}");
        }
        count
    };
    assert!(lzma_ops_segments(&[]) > 0);
    assert!(lzma_ops_segments(&["--bounded"]) > 0);
    assert!(lzma_ops_segments(&["--bounded", "--threads", "2"]) > 0);
    assert_eq!(lzma_ops_segments(&["--bounded", "--level", "18"]), 0);
    // The Worker's form tries ops streams as LZMA (at any level; here zstd 17 beats LZMA).
    assert!(lzma_ops_segments(&["--bounded", "--worker-text-windows"]) > 0);
}
