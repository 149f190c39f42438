//! The documented exit codes (docs/CLI.md, "Exit codes and JSON errors"), one real failing
//! invocation each: the process's exit code, and under `--json` the error line's `code`,
//! `exitCode` and `path`.

use std::fs;
use std::path::Path;
use std::process::Output;

use serde_json::Value;

mod common;
use common::{copy_tree, edgepatch, ok, unpack};

/// The exit code of a failed run, and its `--json` error line (the last line on stdout).
fn failed(out: &Output) -> (i32, Value) {
    assert!(!out.status.success(), "succeeded but must not: {}", String::from_utf8_lossy(&out.stdout));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().last().unwrap_or_else(|| panic!("no JSON line; stderr: {}", String::from_utf8_lossy(&out.stderr)));
    let json: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
    (out.status.code().expect("an exit code"), json)
}

/// The same invocation without `--json` exits with the same code and one error line on stderr.
fn plain_exit(args: &[&dyn AsRef<std::ffi::OsStr>]) -> i32 {
    let out = edgepatch(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("edgepatch: error: ") || err.starts_with("error: "), "{err:?}");
    out.status.code().expect("an exit code")
}

fn assert_error(json: &Value, exit: i32, code: &str, expected_exit: i32) {
    assert_eq!(exit, expected_exit, "{json}");
    assert_eq!(json["ok"], false, "{json}");
    assert_eq!(json["code"], code, "{json}");
    assert_eq!(json["exitCode"], expected_exit, "{json}");
    assert!(json["error"].as_str().is_some_and(|e| !e.is_empty()), "{json}");
}

/// The fixture builds and the patch between them: (directory, v1, v2, patch).
fn fixtures() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let (v1, v2) = (unpack("game-v1.tar", tmp.path()), unpack("game-v2.tar", tmp.path()));
    let patch = tmp.path().join("p.patch");
    ok(edgepatch(&[&"diff", &"--level", &"3", &v1, &v2, &patch]));
    (tmp, v1, v2, patch)
}

#[test]
fn a_corrupt_patch_exits_3_corrupt_naming_the_patch() {
    let (tmp, v1, _v2, patch) = fixtures();
    let mut bytes = fs::read(&patch).unwrap();
    let n = bytes.len();
    bytes[n - 2] ^= 0x55; // inside the final checksum
    let bad = tmp.path().join("bad.patch");
    fs::write(&bad, bytes).unwrap();
    let out = tmp.path().join("out");
    let (exit, json) = failed(&edgepatch(&[&"--json", &"apply", &v1, &bad, &out]));
    assert_error(&json, exit, "corrupt", 3);
    assert_eq!(json["path"], bad.display().to_string(), "{json}");
    assert!(!out.exists());
    assert_eq!(plain_exit(&[&"apply", &v1, &bad, &out]), 3);

    // Not a patch at all: another code, the same exit.
    fs::write(&bad, b"not a patch at all").unwrap();
    let (exit, json) = failed(&edgepatch(&[&"--json", &"inspect", &bad]));
    assert_error(&json, exit, "magic", 3);
}

#[test]
fn a_wrong_old_build_exits_5_naming_the_file() {
    let (tmp, v1, _v2, patch) = fixtures();
    let old = tmp.path().join("old");
    copy_tree(&v1, &old);
    let wasm = old.join("game.wasm");
    let mut bytes = fs::read(&wasm).unwrap();
    bytes.truncate(bytes.len() - 1);
    fs::write(&wasm, bytes).unwrap();
    let out = tmp.path().join("out");
    let (exit, json) = failed(&edgepatch(&[&"--json", &"apply", &old, &patch, &out]));
    assert_error(&json, exit, "old_build", 5);
    assert_eq!(json["path"], old.display().to_string(), "{json}");
    let error = json["error"].as_str().unwrap();
    assert!(error.starts_with(&format!("old build {}: not the build this patch was made from", old.display())), "{error}");
    assert!(!out.exists());
    assert_eq!(plain_exit(&[&"apply", &old, &patch, &out]), 5);
}

#[test]
fn a_damaged_file_under_verify_exits_4() {
    let tmp = tempfile::tempdir().unwrap();
    let v2 = unpack("game-v2.tar", tmp.path());
    let sig = tmp.path().join("v2.sig");
    ok(edgepatch(&[&"sign", &v2, &sig]));
    let wasm = v2.join("game.wasm");
    let mut bytes = fs::read(&wasm).unwrap();
    bytes[1000] ^= 1;
    fs::write(&wasm, bytes).unwrap();
    let out = edgepatch(&[&"--json", &"verify", &v2, &sig]);
    // The report first, then the error line.
    let report: Value = serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().next().unwrap()).unwrap();
    assert_eq!(report["problems"][0]["path"], "game.wasm", "{report}");
    let (exit, json) = failed(&out);
    assert_error(&json, exit, "damaged", 4);
    assert_eq!(plain_exit(&[&"verify", &v2, &sig]), 4);
}

#[test]
fn a_missing_input_exits_6_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let v1 = unpack("game-v1.tar", tmp.path());
    let missing = tmp.path().join("no-such.patch");
    let (exit, json) = failed(&edgepatch(&[&"--json", &"apply", &v1, &missing, &tmp.path().join("out")]));
    assert_error(&json, exit, "io", 6);
    assert_eq!(json["path"], missing.display().to_string(), "{json}");
    let (exit, json) = failed(&edgepatch(&[&"--json", &"inspect", &missing]));
    assert_error(&json, exit, "io", 6);
    assert_eq!(plain_exit(&[&"inspect", &missing]), 6);
}

#[test]
fn an_unreachable_server_exits_7() {
    let tmp = tempfile::tempdir().unwrap();
    let key = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="; // 32 bytes: parsed, never used
    let (old, out) = (tmp.path().join("old"), tmp.path().join("out"));
    fs::create_dir(&old).unwrap();
    let args: [&dyn AsRef<std::ffi::OsStr>; 14] =
        [&"update", &"--server", &"http://127.0.0.1:1/", &"--game", &"g", &"--from", &"_", &"--to", &"b", &"--public-key", &key, &old, &out, &"--quiet"];
    let mut json_args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"--json"];
    json_args.extend(args);
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_edgepatch"))
        .args(json_args.iter().map(|a| a.as_ref()))
        .env("EDGEPATCH_CONFIG_DIR", tmp.path().join("config"))
        .output()
        .unwrap();
    let (exit, json) = failed(&run);
    assert_error(&json, exit, "network", 7);
    assert!(!out.exists() && !Path::new(&tmp.path().join("config/known_keys")).exists());
}

#[test]
fn a_usage_error_exits_2() {
    let (exit, json) = failed(&edgepatch(&[&"--json", &"apply", &"only-one-argument"]));
    assert_error(&json, exit, "usage", 2);
    assert_eq!(edgepatch(&[&"no-such-command"]).status.code(), Some(2));
    // Options that cannot go together, found after parsing: the same exit code.
    let (exit, json) = failed(&edgepatch(&[&"--json", &"sign", &".", &"sig", &"--block-size", &"7"]));
    assert_error(&json, exit, "usage", 2);
}

#[test]
fn help_lists_the_exit_codes() {
    let help = ok(edgepatch(&[&"--help"]));
    for line in ["0  success", "2  usage", "3  bad input", "4  verification failed", "5  wrong old build", "6  I/O", "7  network"] {
        assert!(help.contains(line), "--help lacks {line:?}:\n{help}");
    }
}
