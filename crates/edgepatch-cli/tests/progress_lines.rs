//! Progress on stderr when it is not a terminal (a CI log): plain lines that rise and end at
//! the total, for `diff` and `apply`; none with `--quiet` or `--json`.

use std::fs;
use std::path::Path;

mod common;
use common::{edgepatch, ok};
// Incompressible data: the patch is as large as the build.
use edgepatch_testkit::noise;

/// A build of `files` files of 1 MiB each.
fn write_build(dir: &Path, seed: u64, files: u64) {
    fs::create_dir_all(dir).unwrap();
    for i in 0..files {
        fs::write(dir.join(format!("part{i:02}.bin")), noise(seed * 1000 + i, 1 << 20)).unwrap();
    }
}

/// (done, total) in MiB of each progress line of `phase`, in order.
fn progress_lines(stderr: &str, phase: &str) -> Vec<(f64, f64)> {
    let prefix = format!("edgepatch: {phase}: ");
    stderr
        .lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .map(|rest| {
            let (done, rest) = rest.split_once(" MiB of ").unwrap_or_else(|| panic!("no total in {rest:?}"));
            let total = rest.split_once(" MiB").unwrap().0;
            (done.parse().unwrap(), total.parse().unwrap())
        })
        .collect()
}

fn assert_rising_to_the_total(lines: &[(f64, f64)], what: &str) {
    assert!(lines.len() >= 3, "{what}: {lines:?}");
    assert!(lines.windows(2).all(|w| w[0].0 < w[1].0), "{what}: not rising: {lines:?}");
    let (done, total) = *lines.last().unwrap();
    assert!(done == total && total >= 10.0, "{what}: ends at {done} of {total}");
}

#[test]
fn piped_stderr_gets_progress_lines_that_rise_to_the_total() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let (old, new, patch, out) = (t.join("old"), t.join("new"), t.join("p.patch"), t.join("out"));
    write_build(&old, 1, 4);
    write_build(&new, 2, 24);
    let diff = edgepatch(&[&"diff", &"--level", &"1", &old, &new, &patch]);
    assert!(diff.status.success());
    let stderr = String::from_utf8(diff.stderr).unwrap();
    assert_rising_to_the_total(&progress_lines(&stderr, "diff"), &stderr);

    let apply = edgepatch(&[&"apply", &old, &patch, &out]);
    assert!(apply.status.success());
    let stderr = String::from_utf8(apply.stderr).unwrap();
    assert_rising_to_the_total(&progress_lines(&stderr, "apply"), &stderr);

    for flag in ["--quiet", "--json"] {
        let again = edgepatch(&[&flag, &"apply", &old, &patch, &t.join(flag)]);
        assert!(again.status.success());
        assert_eq!(String::from_utf8(again.stderr).unwrap(), "", "{flag}");
    }
    ok(edgepatch(&[&"--quiet", &"verify", &out, &{
        let sig = t.join("new.sig");
        ok(edgepatch(&[&"--quiet", &"sign", &new, &sig]));
        sig
    }]));
}
