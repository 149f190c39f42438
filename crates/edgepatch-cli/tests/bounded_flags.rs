//! `diff --bounded --old-budget`: a larger budget reaches old data the Worker's 8 MiB plan
//! leaves out; out-of-range budgets are refused; every patch applies back byte-exact.

use std::fs;

mod common;
use common::{edgepatch, ok};

fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

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
