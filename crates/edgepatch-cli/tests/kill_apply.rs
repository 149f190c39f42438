//! `edgepatch apply` killed (SIGKILL; TerminateProcess on Windows) at 200 random points (40
//! on Windows, where the tests run under Wine and each start is slower): each time OUT
//! is absent or complete (byte-exact to NEW, links by target), OLD is as it
//! was, and the next apply to the same OUT succeeds and clears what the
//! killed one left. The tree has many small files and a few large ones (the
//! large ones go through the writing thread, the unchanged ones through the
//! copying thread), so the kills land in every phase: before the staging
//! area exists, among the copies and writes, in the sync, around the rename.
//!
//! The kill points are drawn from a seed printed on failure; set
//! EDGEPATCH_KILL_SEED to replay one.

use std::fs;
#[cfg(unix)]
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use edgepatch_testkit::Rng;

mod common;
use common::{edgepatch, leftovers, ok, snapshot};

const KILLS: usize = if cfg!(windows) { 40 } else { 200 };

/// 480 small files in 12 directories (a third of them edited in version 2),
/// three large ones (1, 2 and 3 MiB; version 2 changes a few spans of each
/// and appends to one), an empty directory and, on Unix, executable bits and a few links.
fn build(root: &Path, version: u32) {
    let mut rng = Rng::xorshift64_star(0x9e37_79b9_7f4a_7c15);
    fs::create_dir_all(root.join("empty")).unwrap();
    for i in 0..480usize {
        let dir = root.join(format!("d{:02}", i % 12));
        fs::create_dir_all(&dir).unwrap();
        let mut data = rng.bytes(200 + i * 37 % 3000);
        if version == 2 && i % 3 == 0 {
            data.splice(data.len() / 2..data.len() / 2, format!("edit {i}").into_bytes());
        }
        let path = dir.join(format!("f{i:03}.bin"));
        fs::write(&path, data).unwrap();
        #[cfg(unix)]
        if i % 50 == 0 {
            fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
        }
    }
    for (i, mib) in [1usize, 2, 3].into_iter().enumerate() {
        let mut data = rng.bytes(mib << 20);
        if version == 2 {
            for at in (0..data.len()).step_by(300_007) {
                let end = (at + 64).min(data.len());
                data[at..end].fill(i as u8);
            }
            if i == 1 {
                data.extend_from_slice(&[7u8; 100_000]);
            }
        }
        fs::write(root.join(format!("big{i}.dat")), data).unwrap();
    }
    #[cfg(unix)]
    {
        symlink(if version == 1 { "d00/f000.bin" } else { "d01/f001.bin" }, root.join("current")).unwrap();
        symlink("../../outside", root.join("d03/leaves")).unwrap();
        symlink("d04", root.join("to_dir")).unwrap();
    }
}

/// Runs one apply to completion; how long it took.
fn timed_apply(old: &Path, patch: &Path, out: &Path) -> Duration {
    let started = Instant::now();
    ok(edgepatch(&[&"apply", &old, &patch, &out]));
    started.elapsed()
}

#[test]
fn sigkill_at_200_random_points_leaves_out_absent_or_complete() {
    // In memory where there is a tmpfs: a SIGKILL loses no page cache, so the
    // medium changes nothing this test checks, and on a shared disk each
    // apply's sync would wait for other programs' writes (226 s instead of 8 s
    // for the whole test on the 2-core machine, 2026-11-23).
    let shm = Path::new("/dev/shm");
    let tmp = if shm.is_dir() { tempfile::tempdir_in(shm) } else { tempfile::tempdir() }.unwrap();
    let (v1, v2) = (tmp.path().join("v1"), tmp.path().join("v2"));
    build(&v1, 1);
    build(&v2, 2);
    let patch = tmp.path().join("p.patch");
    ok(edgepatch(&[&"diff", &"--level", &"3", &v1, &v2, &patch]));
    let (old_before, expected) = (snapshot(&v1), snapshot(&v2));
    let out = tmp.path().join("out");

    // The kill points fall within one apply's duration here (the median of three).
    let mut runs: Vec<Duration> = (0..3)
        .map(|_| {
            let d = timed_apply(&v1, &patch, &out);
            assert_eq!(snapshot(&out), expected);
            fs::remove_dir_all(&out).unwrap();
            d
        })
        .collect();
    runs.sort();
    let apply = runs[1];

    let seed = std::env::var("EDGEPATCH_KILL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 | 1);
    let mut rng = Rng::xorshift64_star(seed);
    let context = format!("seed {seed} (EDGEPATCH_KILL_SEED), apply takes {apply:?}");
    let (mut absent, mut complete, mut mid_write) = (0, 0, 0);
    for kill in 0..KILLS {
        let delay = apply.mul_f64((rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64);
        let mut child = Command::new(env!("CARGO_BIN_EXE_edgepatch"))
            .args([&"apply" as &dyn AsRef<std::ffi::OsStr>, &v1, &patch, &out].iter().map(|a| a.as_ref()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(delay);
        child.kill().unwrap(); // SIGKILL or TerminateProcess: no destructor, no cleanup runs
        child.wait().unwrap();
        let at = format!("kill {kill} after {delay:?}; {context}");
        if tmp.path().join(format!(".out.edgepatch-staging-{}", child.id())).exists() {
            mid_write += 1;
        }
        if out.exists() {
            complete += 1;
            assert_eq!(snapshot(&out), expected, "OUT exists but is not NEW: {at}");
        } else {
            absent += 1;
            ok(edgepatch(&[&"apply", &v1, &patch, &out]));
            assert_eq!(snapshot(&out), expected, "the apply after the kill: {at}");
            assert!(leftovers(tmp.path()).is_empty(), "left behind after the next apply: {:?}; {at}", leftovers(tmp.path()));
        }
        fs::remove_dir_all(&out).unwrap();
    }
    assert_eq!(snapshot(&v1), old_before, "OLD was modified; {context}");
    assert!(leftovers(tmp.path()).is_empty(), "{:?}", leftovers(tmp.path()));
    // Kills early in the apply always leave OUT absent, and most kill points
    // fall while the staging area is being written: a run without either
    // tested nothing.
    assert!(absent > 0 && mid_write > 0, "absent {absent}, complete {complete}, killed while writing {mid_write}; {context}");
    eprintln!("{KILLS} kills: OUT absent {absent} times (killed while writing {mid_write}), complete {complete}; {context}");
}
