//! The bytes of hostile patches: a patch around a hand-made tree section and
//! body, the tree sections and segments the vectors start from, and a small
//! valid patch to damage.

use edgepatch_core::patch_format::listing_digest;
use edgepatch_core::{diff_builds, Build, BuildEntry, DiffOptions, EntryContent};
use edgepatch_testkit::leb128;

pub fn zstd(data: &[u8]) -> Vec<u8> {
    zstd::bulk::compress(data, 19).unwrap()
}

/// A tree patch against the empty old build: `tree` is the tree section after
/// the listing digest, `body` the segments; the header, end marker and
/// checksum are made here (`tree_sizes` overrides the declared sizes).
pub struct PatchBytes {
    pub tree: Vec<u8>,
    pub tree_frame: Option<Vec<u8>>,
    pub tree_sizes: Option<(u64, u64)>,
    pub body: Vec<u8>,
    pub segments: u64,
    pub delta: u64,
    pub flags: u16,
}

impl PatchBytes {
    pub fn new(tree_after_digest: &[u8]) -> Self {
        let mut tree = listing_digest(&[]).to_vec();
        tree.extend_from_slice(tree_after_digest);
        PatchBytes { tree, tree_frame: None, tree_sizes: None, body: Vec::new(), segments: 0, delta: 0, flags: 0 }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut p = b"EDGEPTCH".to_vec();
        p.extend_from_slice(&2u16.to_le_bytes());
        p.extend_from_slice(&self.flags.to_le_bytes());
        let frame = self.tree_frame.clone().unwrap_or_else(|| zstd(&self.tree));
        let (raw, comp) = self.tree_sizes.unwrap_or((self.tree.len() as u64, frame.len() as u64));
        leb128::write_u64(&mut p, raw);
        leb128::write_u64(&mut p, comp);
        p.extend_from_slice(&frame);
        p.extend_from_slice(&self.body);
        p.push(b'E');
        leb128::write_u64(&mut p, self.segments);
        leb128::write_u64(&mut p, self.delta);
        let sum = blake3::hash(&p);
        p.extend_from_slice(sum.as_bytes());
        p
    }
}

/// The tree section (after the digest) naming `files` delta files of the given sizes at the root.
pub fn delta_files_tree(sizes: &[u64]) -> Vec<u8> {
    let mut t = vec![0]; // no runs
    leb128::write_u64(&mut t, sizes.len() as u64);
    for i in 0..sizes.len() {
        leb128::write_u64(&mut t, 0);
        let name = format!("f{i:03}");
        leb128::write_u64(&mut t, name.len() as u64);
        t.extend_from_slice(name.as_bytes());
    }
    t.extend(std::iter::repeat_n(2u8, sizes.len()));
    for &s in sizes {
        leb128::write_u64(&mut t, s);
    }
    t.push(0); // no old files
    t.extend_from_slice(&[0u8; 32]); // files digest (never reached)
    t
}

/// An ops segment with the given header fields and raw streams (compressed here).
pub fn ops_segment(new_len: u64, ctrl: &[u8], diff: &[u8], extra: &[u8]) -> Vec<u8> {
    let frame = |d: &[u8]| if d.is_empty() { Vec::new() } else { zstd(d) };
    let (c, d, e) = (frame(ctrl), frame(diff), frame(extra));
    let mut s = vec![b'S'];
    for v in [new_len, ctrl.len() as u64, c.len() as u64, diff.len() as u64, d.len() as u64, extra.len() as u64, e.len() as u64] {
        leb128::write_u64(&mut s, v);
    }
    s.extend_from_slice(&c);
    s.extend_from_slice(&d);
    s.extend_from_slice(&e);
    s
}

/// A run-coded ops segment (tag `R`): `diff_raw` diff bytes coded as `coded`, no extra bytes.
pub fn run_coded_segment(new_len: u64, ctrl: &[u8], diff_raw: u64, coded: &[u8]) -> Vec<u8> {
    let (c, d) = (zstd(ctrl), zstd(coded));
    let mut s = vec![b'R'];
    for v in [new_len, ctrl.len() as u64, c.len() as u64, diff_raw, coded.len() as u64, d.len() as u64, 0, 0] {
        leb128::write_u64(&mut s, v);
    }
    s.extend_from_slice(&c);
    s.extend_from_slice(&d);
    s
}

pub fn control(ops: &[(u64, u64, u64)]) -> Vec<u8> {
    let mut c = Vec::new();
    leb128::write_u64(&mut c, ops.len() as u64);
    for op in ops {
        leb128::write_u64(&mut c, op.0);
    }
    for op in ops {
        leb128::write_u64(&mut c, op.1);
    }
    for op in ops {
        leb128::write_u64(&mut c, op.2);
    }
    c
}

/// Named entries (sorted) as a tree section after the digest: directories and symlinks only.
pub fn links_tree(entries: &[(&str, Option<&str>)]) -> Vec<u8> {
    let mut t = vec![0];
    leb128::write_u64(&mut t, entries.len() as u64);
    for (path, _) in entries {
        leb128::write_u64(&mut t, 0);
        leb128::write_u64(&mut t, path.len() as u64);
        t.extend_from_slice(path.as_bytes());
    }
    for (_, target) in entries {
        t.push(if target.is_some() { 1 } else { 0 });
    }
    for target in entries.iter().filter_map(|e| e.1) {
        leb128::write_u64(&mut t, target.len() as u64);
        t.extend_from_slice(target.as_bytes());
    }
    t.push(0);
    t.extend_from_slice(blake3::Hasher::new().finalize().as_bytes()); // no files
    t
}

/// A small valid patch (empty build -> two files and a directory).
pub fn small_valid_patch() -> Vec<u8> {
    let new = Build::from_entries(vec![
        BuildEntry { path: "data".into(), content: EntryContent::Directory },
        BuildEntry { path: "data/level.json".into(), content: EntryContent::File { executable: false, data: b"{\"level\": 1, \"stars\": 3}\n".repeat(40) } },
        BuildEntry { path: "index.html".into(), content: EntryContent::File { executable: false, data: b"<!doctype html><title>game</title>\n".to_vec() } },
    ])
    .unwrap();
    let opts = DiffOptions { level: 19, threads: 1, ..DiffOptions::default() };
    diff_builds(&Build::from_entries(Vec::new()).unwrap(), &new, &opts, &|_, _| {}).unwrap().0
}
