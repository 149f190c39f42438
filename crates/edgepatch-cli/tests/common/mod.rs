//! What the CLI's integration tests share: running the binary and comparing
//! trees on disk (links by their target, files by content and executable bit).

#![allow(dead_code)] // each test file uses its own part

pub mod site_server;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository's `fixtures/` directory.
pub fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

/// Unpacks `fixtures/<tar_name>` into `into/<tar_name without .tar>` and returns that directory.
/// Modification times are not restored: no test looks at them, and Wine 8 (where the Windows
/// build's tests run, scripts/test-other-systems.sh) fails the tar crate's setting of them on
/// links. On Windows the fixtures' symlinks are left out (creating one needs Developer Mode or
/// an administrator; Wine 8 reports success and creates nothing): the tests count them with
/// `FIXTURE_LINKS`.
pub fn unpack(tar_name: &str, into: &Path) -> PathBuf {
    let dir = into.join(tar_name.trim_end_matches(".tar"));
    fs::create_dir_all(&dir).unwrap();
    let mut archive = tar::Archive::new(fs::File::open(fixtures().join(tar_name)).unwrap());
    archive.set_preserve_permissions(true);
    archive.set_preserve_mtime(false);
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        if cfg!(windows) && entry.header().entry_type().is_symlink() {
            continue;
        }
        assert!(entry.unpack_in(&dir).unwrap(), "a fixture entry outside its directory");
    }
    dir
}

/// The symlinks of each fixture game build (game-v1.tar, game-v2.tar) as `unpack` leaves them.
pub const FIXTURE_LINKS: usize = if cfg!(windows) { 0 } else { 2 };

/// Copies the tree `from` to `to` (which must not exist): directories, files, symlinks as links.
pub fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let (src, dst) = (e.path(), to.join(e.file_name()));
        let kind = e.file_type().unwrap();
        if kind.is_symlink() {
            #[cfg(unix)]
            std::os::unix::fs::symlink(fs::read_link(&src).unwrap(), &dst).unwrap();
            #[cfg(not(unix))]
            panic!("{}: a symlink to copy", src.display());
        } else if kind.is_dir() {
            copy_tree(&src, &dst);
        } else {
            fs::copy(&src, &dst).unwrap();
        }
    }
}

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

/// Every regular file under `root` (links followed as `is_dir` does): its path relative to
/// `root` with `/` separators, and its full path; sorted by the relative path.
pub fn files_under(root: &Path) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push((p.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/"), p));
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
