//! The `edgepatch` binary on the fixture game builds, unpacked to real
//! directories: diff, apply, sign, verify, inspect, and failures that must
//! leave nothing behind.

use std::fs;
use std::path::{Path, PathBuf};
#[cfg(unix)]
use std::process::Command;

use edgepatch_testkit::Rng;

mod common;
use common::{edgepatch, leftovers, ok, snapshot, unpack, FIXTURE_LINKS};

/// The fixture builds unpacked into a temporary directory and the tree patch
/// between them: (directory, v1, v2, patch).
fn diffed_fixtures() -> (tempfile::TempDir, PathBuf, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let (v1, v2) = (unpack("game-v1.tar", tmp.path()), unpack("game-v2.tar", tmp.path()));
    let patch = tmp.path().join("p.patch");
    ok(edgepatch(&[&"diff", &v1, &v2, &patch]));
    (tmp, v1, v2, patch)
}

#[test]
fn tree_diff_apply_verify_round_trip() {
    let tmp = tempfile::tempdir().unwrap();
    let (v1, v2) = (unpack("game-v1.tar", tmp.path()), unpack("game-v2.tar", tmp.path()));
    let before = snapshot(&v1);
    let patch = tmp.path().join("p.patch");
    let summary = ok(edgepatch(&[&"--json", &"diff", &v1, &v2, &patch]));
    let json: serde_json::Value = serde_json::from_str(&summary).unwrap();
    assert_eq!(json["renamed"], 1, "{json}");
    let out = tmp.path().join("out");
    ok(edgepatch(&[&"apply", &v1, &patch, &out]));
    assert_eq!(snapshot(&out), snapshot(&v2), "applied tree differs from v2");
    assert_eq!(snapshot(&v1), before, "OLD was modified");
    assert!(out.join("cache").is_dir() && fs::read_dir(out.join("cache")).unwrap().next().is_none(), "empty dir lost");

    let sig = tmp.path().join("v2.sig");
    ok(edgepatch(&[&"sign", &v2, &sig]));
    assert!(ok(edgepatch(&[&"verify", &out, &sig])).contains("match"));
    let info: serde_json::Value = serde_json::from_str(&ok(edgepatch(&[&"--json", &"inspect", &patch]))).unwrap();
    assert_eq!(info["format_version"], edgepatch_core::patch_format::PATCH_VERSION);
    // A small build's windows stay within the base reach, which the patch does not declare.
    assert_eq!(info["window_reach"], edgepatch_core::patch_format::BASE_WINDOW_BACK, "{info}");
    assert_eq!(info["window_reach_declared"], false, "{info}");
    let manifest = tmp.path().join("p.manifest");
    let m: serde_json::Value =
        serde_json::from_str(&ok(edgepatch(&[&"--json", &"manifest", &patch, &manifest, &"--old", &v1, &"--new", &v2, &"--from", &"v1", &"--to", &"v2"])))
            .unwrap();
    assert_eq!(m["entries"], 26 + FIXTURE_LINKS);
    let view_bytes = fs::read(&manifest).unwrap();
    let view = edgepatch_core::manifest::ManifestView::open(&view_bytes).unwrap();
    let wasm_entry = view.lookup("game.wasm").unwrap().unwrap();
    assert_eq!(wasm_entry.size, fs::metadata(v2.join("game.wasm")).unwrap().len());
    assert_eq!(wasm_entry.blake3, *edgepatch_core::blake3::hash(&fs::read(v2.join("game.wasm")).unwrap()).as_bytes());
    // The manifest's hashes come from --new, which must be the build the patch produces.
    let not_new = unpack("game-v2.tar", &tmp.path().join("not-new"));
    let mut bytes = fs::read(not_new.join("game.wasm")).unwrap();
    bytes[7] ^= 1;
    fs::write(not_new.join("game.wasm"), bytes).unwrap();
    let wrong = edgepatch(&[&"manifest", &patch, &tmp.path().join("q.manifest"), &"--old", &v1, &"--new", &not_new]);
    assert!(!wrong.status.success() && String::from_utf8_lossy(&wrong.stderr).contains("not the build this patch produces"), "{wrong:?}");

    // Damage one file: verify names it and fails.
    let wasm = out.join("game.wasm");
    let mut bytes = fs::read(&wasm).unwrap();
    bytes[100_000] ^= 1;
    fs::write(&wasm, bytes).unwrap();
    let res = edgepatch(&[&"verify", &out, &sig]);
    assert!(!res.status.success());
    let text = String::from_utf8_lossy(&res.stdout);
    assert!(text.contains("game.wasm: content damaged in 1 block(s)"), "{text}");
}

#[test]
fn single_file_round_trip() {
    let tmp = tempfile::tempdir().unwrap();
    let (v1, v2) = (unpack("game-v1.tar", tmp.path()), unpack("game-v2.tar", tmp.path()));
    let patch = tmp.path().join("wasm.patch");
    ok(edgepatch(&[&"diff", &v1.join("game.wasm"), &v2.join("game.wasm"), &patch]));
    let out = tmp.path().join("game.wasm");
    ok(edgepatch(&[&"apply", &v1.join("game.wasm"), &patch, &out]));
    assert_eq!(fs::read(&out).unwrap(), fs::read(v2.join("game.wasm")).unwrap());
}

#[test]
fn corrupt_patch_fails_and_leaves_nothing() {
    let (tmp, v1, _v2, patch) = diffed_fixtures();
    let before = snapshot(&v1);
    let good = fs::read(&patch).unwrap();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("truncated", good[..good.len() * 2 / 3].to_vec()),
        ("flipped", {
            let mut b = good.clone();
            let n = b.len();
            b[n / 2] ^= 0x20;
            b
        }),
        ("garbage", b"not a patch at all".to_vec()),
        ("empty", vec![]),
    ];
    for (name, bytes) in cases {
        let bad = tmp.path().join(format!("{name}.patch"));
        fs::write(&bad, bytes).unwrap();
        let out = tmp.path().join(format!("out-{name}"));
        let res = edgepatch(&[&"apply", &v1, &bad, &out]);
        assert!(!res.status.success(), "{name}: accepted");
        // Progress lines (stderr is not a terminal here) may come before the error line.
        let stderr = String::from_utf8_lossy(&res.stderr);
        let err: Vec<&str> = stderr.lines().filter(|l| !l.starts_with("edgepatch: apply: ")).collect();
        assert!(err.len() == 1 && err[0].starts_with("edgepatch: error: "), "{name}: unclear error {stderr:?}");
        assert!(!out.exists(), "{name}: OUT left behind");
        assert!(leftovers(tmp.path()).is_empty(), "{name}: staging left behind: {:?}", leftovers(tmp.path()));
    }
    assert_eq!(snapshot(&v1), before, "OLD was modified");
}

// A FIFO holds the apply mid-build: Unix only (Windows has no mkfifo).
#[cfg(unix)]
#[test]
fn killed_apply_leaves_old_and_out_alone_and_the_next_apply_clears_its_staging() {
    let (tmp, v1, v2, patch) = diffed_fixtures();
    let before = snapshot(&v1);
    // A patch that never ends: the apply blocks reading it, mid-build, until killed.
    let fifo = tmp.path().join("slow.patch");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let out = tmp.path().join("out");
    let mut child = Command::new(env!("CARGO_BIN_EXE_edgepatch"))
        .args([&"apply" as &dyn AsRef<std::ffi::OsStr>, &v1, &fifo, &out].iter().map(|a| a.as_ref()))
        .spawn()
        .unwrap();
    let mut writer = fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    let good = fs::read(&patch).unwrap();
    std::io::Write::write_all(&mut writer, &good[..good.len() / 2]).unwrap();
    let staging = tmp.path().join(format!(".out.edgepatch-staging-{}", child.id()));
    for _ in 0..200 {
        if staging.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(staging.exists(), "the apply never started writing");
    child.kill().unwrap(); // SIGKILL: no destructor runs
    child.wait().unwrap();
    drop(writer);
    assert!(staging.exists() && !out.exists());
    assert_eq!(snapshot(&v1), before, "OLD was modified");
    ok(edgepatch(&[&"apply", &v1, &patch, &out]));
    assert_eq!(snapshot(&out), snapshot(&v2));
    assert!(leftovers(tmp.path()).is_empty(), "staging left behind: {:?}", leftovers(tmp.path()));
}

#[test]
fn refuses_existing_output_and_bad_arguments() {
    let (tmp, v1, v2, patch) = diffed_fixtures();
    let res = edgepatch(&[&"apply", &v1, &patch, &v2]);
    assert!(!res.status.success() && String::from_utf8_lossy(&res.stderr).contains("already exists"));
    let res = edgepatch(&[&"diff", &v1.join("game.wasm"), &v2, &tmp.path().join("x")]);
    assert!(!res.status.success() && String::from_utf8_lossy(&res.stderr).contains("both"));
    let res = edgepatch(&[&"diff", &v1, &v2, &tmp.path().join("y"), &"--level", &"40"]);
    assert!(!res.status.success());
    let res = edgepatch(&[&"apply", &tmp.path().join("missing"), &patch, &tmp.path().join("z")]);
    assert!(!res.status.success() && !tmp.path().join("z").exists());
}

/// A tree of `n` small files in a few directories, the content of each a function of `seed`.
fn many_files(root: &Path, n: usize, edited: &[usize]) {
    for i in 0..n {
        let dir = root.join(format!("d{}", i % 7));
        fs::create_dir_all(&dir).unwrap();
        let mut text = format!("file {i}\n").repeat(20 + i % 50);
        if edited.contains(&i) {
            text.insert_str(text.len() / 2, "edited\n");
        }
        fs::write(dir.join(format!("f{i:04}.txt")), text).unwrap();
        #[cfg(unix)]
        if i % 97 == 0 {
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(dir.join(format!("f{i:04}.txt")), fs::Permissions::from_mode(0o755)).unwrap();
        }
    }
}

#[test]
fn unchanged_files_are_copied_on_a_second_thread_and_checked() {
    // 600 files, 3 edited: the unchanged ones go to the copying thread in several batches.
    let tmp = tempfile::tempdir().unwrap();
    let (v1, v2) = (tmp.path().join("v1"), tmp.path().join("v2"));
    many_files(&v1, 600, &[]);
    many_files(&v2, 600, &[5, 300, 599]);
    let patch = tmp.path().join("p.patch");
    let summary: serde_json::Value = serde_json::from_str(&ok(edgepatch(&[&"--json", &"diff", &v1, &v2, &patch]))).unwrap();
    assert_eq!((summary["unchanged"].as_u64(), summary["delta_files"].as_u64()), (Some(597), Some(3)), "{summary}");
    let out = tmp.path().join("out");
    ok(edgepatch(&[&"apply", &v1, &patch, &out]));
    assert_eq!(snapshot(&out), snapshot(&v2));

    // An unchanged file damaged in place (same size, so the listing still
    // matches) late in the copies: the files digest refuses the build, and
    // nothing is left behind.
    let damaged = v1.join("d3").join("f0451.txt");
    let mut bytes = fs::read(&damaged).unwrap();
    bytes[3] ^= 1;
    fs::write(&damaged, bytes).unwrap();
    let before = snapshot(&v1);
    let out = tmp.path().join("out-damaged");
    let res = edgepatch(&[&"apply", &v1, &patch, &out]);
    let err = String::from_utf8_lossy(&res.stderr);
    assert!(!res.status.success() && err.contains("files digest") && err.lines().count() == 1, "{err}");
    assert!(!out.exists() && leftovers(tmp.path()).is_empty(), "left behind: {:?}", leftovers(tmp.path()));
    assert_eq!(snapshot(&v1), before, "OLD was modified");

    // An unchanged file removed after the listing was taken cannot be
    // simulated from outside; one missing from the start is refused as
    // another build before anything is written.
    fs::remove_file(&damaged).unwrap();
    let res = edgepatch(&[&"apply", &v1, &patch, &out]);
    assert!(!res.status.success() && !out.exists() && leftovers(tmp.path()).is_empty());
}

#[test]
fn large_file_round_trip_through_the_writing_thread() {
    // 3 MiB: written from the second thread in 256 KiB buffers, several times over.
    let tmp = tempfile::tempdir().unwrap();
    let old = Rng::new(7).bytes(3 << 20);
    let mut new = old.clone();
    for i in (0..new.len()).step_by(100_003) {
        new[i] ^= 0x55;
    }
    new.extend_from_slice(b"appended");
    let (o, n, p, out) = (tmp.path().join("old.bin"), tmp.path().join("new.bin"), tmp.path().join("p"), tmp.path().join("out.bin"));
    fs::write(&o, &old).unwrap();
    fs::write(&n, &new).unwrap();
    ok(edgepatch(&[&"diff", &o, &n, &p]));
    ok(edgepatch(&[&"apply", &o, &p, &out]));
    assert!(fs::read(&out).unwrap() == new, "applied file differs");
}

// The special file is a FIFO: Unix only.
#[cfg(unix)]
#[test]
fn a_special_file_in_old_is_refused_before_anything_is_written() {
    let (tmp, v1, _v2, patch) = diffed_fixtures();
    assert!(Command::new("mkfifo").arg(v1.join("pipe")).status().unwrap().success());
    let out = tmp.path().join("out");
    let res = edgepatch(&[&"apply", &v1, &patch, &out]);
    let err = String::from_utf8_lossy(&res.stderr);
    assert!(!res.status.success() && err.contains("not a regular file, directory or symlink") && err.lines().count() == 1, "{err}");
    assert!(!out.exists() && leftovers(tmp.path()).is_empty());
}

// The tree it diffs exists only on a file system that keeps letter case and Unicode forms apart
// and allows Windows' device names: Linux's. Elsewhere `portable_names`' unit tests run.
#[cfg(target_os = "linux")]
#[test]
fn diff_reports_paths_that_are_not_portable_and_refuses_them_when_strict() {
    let tmp = tempfile::tempdir().unwrap();
    let (old, new) = (tmp.path().join("old"), tmp.path().join("new"));
    fs::create_dir_all(old.join("img")).unwrap();
    fs::create_dir_all(new.join("img")).unwrap();
    fs::write(old.join("img/a.png"), b"old").unwrap();
    // One file on NTFS/APFS (case), one on APFS (NFC vs NFD), a Windows device name.
    for name in ["img/a.png", "img/A.png", "caf\u{e9}.txt", "cafe\u{301}.txt", "aux.json"] {
        fs::write(new.join(name), name.as_bytes()).unwrap();
    }
    let patch = tmp.path().join("p.patch");
    let res = edgepatch(&[&"diff", &old, &new, &patch]);
    assert!(res.status.success(), "{}", String::from_utf8_lossy(&res.stderr));
    let err = String::from_utf8_lossy(&res.stderr);
    assert!(
        err.contains("warning: new: img/A.png, img/a.png differ only in letter case")
            || err.contains("warning: new: img/a.png, img/A.png differ only in letter case"),
        "{err}"
    );
    assert!(err.contains("differ only in Unicode normalization"), "{err}");
    assert!(err.contains("aux.json: \"aux.json\" is a device name on Windows"), "{err}");
    let strict = tmp.path().join("strict.patch");
    let res = edgepatch(&[&"diff", &"--strict-portable", &old, &new, &strict]);
    assert!(!res.status.success());
    assert!(String::from_utf8_lossy(&res.stderr).contains("3 path(s) are not portable"), "{}", String::from_utf8_lossy(&res.stderr));
    assert!(!strict.exists(), "no patch when refused");
}

#[path = "../../edgepatch-core/tests/wasm_modules/mod.rs"]
mod wasm_modules;

#[test]
fn bounded_diff_stores_changed_wasm_modules_normalized() {
    let tmp = tempfile::tempdir().unwrap();
    let (v1, v2) = wasm_modules::versions(3000, 20);
    let (old, new) = (tmp.path().join("old.wasm"), tmp.path().join("new.wasm"));
    fs::write(&old, &v1).unwrap();
    fs::write(&new, &v2).unwrap();
    let mut sizes = Vec::new();
    for (name, plain) in [("t.patch", false), ("p.patch", true)] {
        let (patch, out) = (tmp.path().join(name), tmp.path().join(format!("{name}.out")));
        let summary = if plain {
            ok(edgepatch(&[&"--json", &"diff", &"--bounded", &"--no-wasm-transform", &old, &new, &patch]))
        } else {
            ok(edgepatch(&[&"--json", &"diff", &"--bounded", &old, &new, &patch]))
        };
        let summary: serde_json::Value = serde_json::from_str(&summary).unwrap();
        assert_eq!(summary["wasm_transformed"].as_u64(), Some(if plain { 0 } else { 1 }), "{summary}");
        ok(edgepatch(&[&"apply", &old, &patch, &out]));
        assert_eq!(fs::read(&out).unwrap(), v2);
        sizes.push(fs::metadata(&patch).unwrap().len());
    }
    assert!(sizes[0] < sizes[1], "transformed {} bytes, plain {}", sizes[0], sizes[1]);
    // The normalized form's temporary file is gone.
    assert_eq!(leftovers(tmp.path()), Vec::<String>::new());
}

/// A module stored in the field-split layout: the apply keeps its old module split in a scratch
/// file beside OUT (not in memory), which is gone when the apply ends, applied or refused.
#[test]
fn a_split_layout_module_applies_through_the_scratch_file_and_leaves_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let (v1, v2) = wasm_modules::recompiled_versions(600);
    let (old, new, patch) = (tmp.path().join("old.wasm"), tmp.path().join("new.wasm"), tmp.path().join("w.patch"));
    fs::write(&old, &v1).unwrap();
    fs::write(&new, &v2).unwrap();
    ok(edgepatch(&[&"diff", &old, &new, &patch]));
    let inspected = ok(edgepatch(&[&"inspect", &patch]));
    assert!(inspected.contains("1 of them in the field-split layout"), "{inspected}");
    let out_dir = tmp.path().join("out");
    fs::create_dir(&out_dir).unwrap();
    ok(edgepatch(&[&"apply", &old, &patch, &out_dir.join("applied.wasm")]));
    assert_eq!(fs::read(out_dir.join("applied.wasm")).unwrap(), v2);
    assert_eq!(leftovers(&out_dir), Vec::<String>::new());
    // The wrong old module (its first body's local type damaged, so it no longer splits): refused, nothing left.
    let mut damaged = v1;
    let at = damaged.iter().position(|&b| b == 0x7f).unwrap() + 1;
    damaged[at] = 0xff;
    fs::write(&old, &damaged).unwrap();
    let refused = edgepatch(&[&"apply", &old, &patch, &out_dir.join("refused.wasm")]);
    assert!(!refused.status.success());
    assert_eq!(fs::read_dir(&out_dir).unwrap().count(), 1, "only the applied file");
}

#[test]
fn bounded_diff_round_trips_the_fixture_game() {
    let tmp = tempfile::tempdir().unwrap();
    let (v1, v2) = (unpack("game-v1.tar", tmp.path()), unpack("game-v2.tar", tmp.path()));
    let (patch, out) = (tmp.path().join("b.patch"), tmp.path().join("out"));
    let summary: serde_json::Value = serde_json::from_str(&ok(edgepatch(&[&"--json", &"diff", &"--bounded", &v1, &v2, &patch]))).unwrap();
    assert_eq!(summary["patch_bytes"].as_u64().unwrap(), fs::metadata(&patch).unwrap().len());
    ok(edgepatch(&[&"apply", &v1, &patch, &out]));
    assert_eq!(snapshot(&out), snapshot(&v2));
    // Within 25% of the in-memory diff on this small, text-heavy build.
    let full = tmp.path().join("full.patch");
    ok(edgepatch(&[&"diff", &v1, &v2, &full]));
    let (b, f) = (fs::metadata(&patch).unwrap().len(), fs::metadata(&full).unwrap().len());
    assert!(b * 4 <= f * 5, "bounded {b} vs in-memory {f}");
}

/// A tree patch made where the old build has an executable file (as a studio's Linux CI makes
/// it: here through the core, in memory, so every system can run this). Where files have
/// executable bits it applies to the old build with the bit, and not without it; where they
/// have none (Windows) it applies through the patch's mode-blind digest (FORMAT.md §2.1).
#[test]
fn a_patch_of_a_build_with_executable_files_applies_on_systems_with_and_without_executable_bits() {
    use edgepatch_core::{diff_builds, Build, BuildEntry, DiffOptions, EntryContent};
    let build = |text: &str| {
        let file =
            |path: &str, executable: bool, data: &[u8]| BuildEntry { path: path.into(), content: EntryContent::File { executable, data: data.to_vec() } };
        Build::from_entries(vec![
            BuildEntry { path: "bin".into(), content: EntryContent::Directory },
            file("bin/run.sh", true, b"#!/bin/sh\nexec ./game\n"),
            file("readme.txt", false, text.as_bytes()),
        ])
        .unwrap()
    };
    let (old, new) = (build("version one\n"), build("version two\n"));
    let (patch, _) = diff_builds(&old, &new, &DiffOptions::default(), &|_, _| {}).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    // The new build's signature as the studio's machine makes it (with the executable bit).
    let signature = tmp.path().join("new.sig");
    fs::write(&signature, edgepatch_core::signature::Signature::of_build(&new, edgepatch_core::signature::DEFAULT_BLOCK_SIZE).encode()).unwrap();
    let dir = tmp.path().join("old");
    fs::create_dir_all(dir.join("bin")).unwrap();
    fs::write(dir.join("bin/run.sh"), b"#!/bin/sh\nexec ./game\n").unwrap();
    fs::write(dir.join("readme.txt"), b"version one\n").unwrap();
    let patch_file = tmp.path().join("p.patch");
    fs::write(&patch_file, patch).unwrap();
    let out = tmp.path().join("out");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        // Without its executable bit the old build is not the one the patch was made from.
        let res = edgepatch(&[&"apply", &dir, &patch_file, &out]);
        let err = String::from_utf8_lossy(&res.stderr);
        assert!(!res.status.success() && err.contains("not the build this patch was made from") && !err.contains("has none"), "{err}");
        fs::set_permissions(dir.join("bin/run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
        ok(edgepatch(&[&"apply", &dir, &patch_file, &out]));
        assert_eq!(fs::read(out.join("readme.txt")).unwrap(), b"version two\n");
        assert_eq!(fs::metadata(out.join("bin/run.sh")).unwrap().permissions().mode() & 0o111, 0o111, "the executable bit kept");
        assert!(ok(edgepatch(&[&"verify", &out, &signature])).contains("match"));
        // Here a missing executable bit is damage.
        fs::set_permissions(out.join("bin/run.sh"), fs::Permissions::from_mode(0o644)).unwrap();
        let res = edgepatch(&[&"verify", &out, &signature]);
        assert!(!res.status.success(), "{}", String::from_utf8_lossy(&res.stdout));
    }
    #[cfg(not(unix))]
    {
        ok(edgepatch(&[&"apply", &dir, &patch_file, &out]));
        assert_eq!(fs::read(out.join("readme.txt")).unwrap(), b"version two\n");
        assert_eq!(fs::read(out.join("bin/run.sh")).unwrap(), b"#!/bin/sh\nexec ./game\n");
        // A signature made where the bit exists matches: there is no mode to compare here.
        assert!(ok(edgepatch(&[&"verify", &out, &signature])).contains("match"));
        // Another build still does not match: the mode-blind digest binds paths and sizes.
        let other = tmp.path().join("other");
        fs::create_dir_all(other.join("bin")).unwrap();
        fs::write(other.join("bin/run.sh"), b"#!/bin/sh\nexec ./game2\n").unwrap();
        fs::write(other.join("readme.txt"), b"version one\n").unwrap();
        let res = edgepatch(&[&"apply", &other, &patch_file, &tmp.path().join("out2")]);
        let err = String::from_utf8_lossy(&res.stderr);
        assert!(!res.status.success() && err.contains("not the build this patch was made from") && err.lines().count() == 1, "{err}");
    }
}

/// A gzip file patched as its content (FORMAT.md §2.8.8): `apply` of a patch from anywhere
/// refuses it before writing anything (preflate would trust its side info), with exit code 4
/// and the code `unvouched`; `--trust-patch` (a patch you made) rebuilds it byte for byte.
/// A Brotli file, as `brotli -q 11` writes it: patched as its content (the encoder's settings
/// found by the diff), rebuilt byte for byte by the reference encoder, from a trusted patch.
#[test]
fn a_brotli_file_is_rebuilt_byte_for_byte_from_a_trusted_patch() {
    use brotlic::{BrotliEncoderOptions, CompressorWriter, Quality, WindowSize};
    use std::io::Write;
    let tmp = tempfile::tempdir().unwrap();
    let v1 = unpack("game-v1.tar", tmp.path());
    let v2 = unpack("game-v2.tar", tmp.path());
    let br = |src: &Path, to: &str| {
        let content = fs::read(src.join("game.wasm")).unwrap();
        let mut options = BrotliEncoderOptions::new();
        options.quality(Quality::new(11).unwrap()).window_size(WindowSize::new(22).unwrap()).size_hint(content.len() as u32);
        let mut w = CompressorWriter::with_encoder(options.build().unwrap(), Vec::new());
        w.write_all(&content).unwrap();
        let path = tmp.path().join(to);
        fs::write(&path, w.into_inner().unwrap()).unwrap();
        path
    };
    let (old, new) = (br(&v1, "old.wasm.br"), br(&v2, "new.wasm.br"));
    let patch = tmp.path().join("br.patch");
    ok(edgepatch(&[&"diff", &old, &new, &patch]));
    let inspect = ok(edgepatch(&[&"--json", &"inspect", &patch]));
    assert!(inspect.contains("brotli-transform"), "{inspect}");
    assert!(fs::metadata(&patch).unwrap().len() * 4 < fs::metadata(&new).unwrap().len(), "far smaller than the file");
    let out = tmp.path().join("out.wasm.br");
    let refused = edgepatch(&[&"--json", &"apply", &old, &patch, &out]);
    assert_eq!(refused.status.code(), Some(4), "{}", String::from_utf8_lossy(&refused.stderr));
    assert!(!out.exists(), "nothing written");
    ok(edgepatch(&[&"apply", &"--trust-patch", &old, &patch, &out]));
    assert_eq!(fs::read(&out).unwrap(), fs::read(&new).unwrap(), "byte for byte");
}

#[test]
fn a_compressed_asset_is_rebuilt_byte_for_byte_only_from_a_trusted_patch() {
    use std::io::Write;
    let tmp = tempfile::tempdir().unwrap();
    let v1 = unpack("game-v1.tar", tmp.path());
    let v2 = unpack("game-v2.tar", tmp.path());
    let gz = |src: &Path, to: &str| {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(9));
        e.write_all(&fs::read(src.join("game.wasm")).unwrap()).unwrap();
        let path = tmp.path().join(to);
        fs::write(&path, e.finish().unwrap()).unwrap();
        path
    };
    let (old, new) = (gz(&v1, "old.wasm.gz"), gz(&v2, "new.wasm.gz"));
    let patch = tmp.path().join("gz.patch");
    ok(edgepatch(&[&"diff", &old, &new, &patch]));
    let inspect = ok(edgepatch(&[&"--json", &"inspect", &patch]));
    assert!(inspect.contains("deflate-transform"), "{inspect}");
    let out = tmp.path().join("out.wasm.gz");
    let refused = edgepatch(&[&"--json", &"apply", &old, &patch, &out]);
    assert_eq!(refused.status.code(), Some(4), "{}", String::from_utf8_lossy(&refused.stderr));
    let text = String::from_utf8_lossy(&refused.stdout).to_string() + &String::from_utf8_lossy(&refused.stderr);
    assert!(text.contains("unvouched") && text.contains("--trust-patch"), "{text}");
    assert!(!out.exists(), "nothing written");
    // A copy damaged since it was made (one byte of its tree section, where the side info
    // lives): --trust-patch checks the whole patch first, so none of it reaches preflate.
    let mut damaged = fs::read(&patch).unwrap();
    damaged[20] ^= 0x01;
    let damaged_patch = tmp.path().join("damaged.patch");
    fs::write(&damaged_patch, &damaged).unwrap();
    let refused = edgepatch(&[&"--json", &"apply", &"--trust-patch", &old, &damaged_patch, &out]);
    let text = String::from_utf8_lossy(&refused.stdout).to_string() + &String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(3), "{text}");
    assert!(text.contains("\"corrupt\"") && text.contains("checked before applying"), "{text}");
    assert!(!out.exists(), "nothing written");
    ok(edgepatch(&[&"apply", &"--trust-patch", &old, &patch, &out]));
    assert_eq!(fs::read(&out).unwrap(), fs::read(&new).unwrap(), "byte for byte");
}
