//! What the CLI's integration tests share: running the binary and comparing
//! trees on disk (links by their target, files by content and executable bit).

#![allow(dead_code)] // each test file uses its own part

use std::fs;
use std::path::Path;
use std::process::{Command, Output};

pub fn edgepatch(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_edgepatch")).args(args.iter().map(|a| a.as_ref())).output().unwrap()
}

pub fn ok(out: Output) -> String {
    assert!(out.status.success(), "failed: {}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// (path, kind, mode bits, content or link target) of every entry, sorted.
/// Links are read, never followed.
pub fn snapshot(root: &Path) -> Vec<(String, String, u32, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            let m = fs::symlink_metadata(&p).unwrap();
            if m.file_type().is_symlink() {
                out.push((rel, "link".into(), 0, fs::read_link(&p).unwrap().to_string_lossy().as_bytes().to_vec()));
            } else if m.is_dir() {
                out.push((rel, "dir".into(), 0, vec![]));
                stack.push(p);
            } else {
                out.push((rel, "file".into(), exec_bits(&m), fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// Names in `dir` that an apply leaves behind when it fails (staging areas, temporaries).
pub fn leftovers(dir: &Path) -> Vec<String> {
    fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).filter(|n| n.contains("edgepatch")).collect()
}

/// The executable bits of a file (Unix); none elsewhere.
fn exec_bits(m: &fs::Metadata) -> u32 {
    #[cfg(unix)]
    return std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o111;
    #[cfg(not(unix))]
    return {
        let _ = m;
        0
    };
}
