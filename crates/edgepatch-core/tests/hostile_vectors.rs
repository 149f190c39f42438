//! Hostile vectors: attack patches and manifests committed under
//! fixtures/hostile/ with the error kind each must be refused with
//! (fixtures/hostile/vectors.json), read by the Rust, wasm, Worker and browser
//! tests alike. This file also makes them: the vectors are built here, byte
//! for byte, and the test fails if the committed files differ (regenerate
//! with `EDGEPATCH_UPDATE_HOSTILE=1 cargo test -p edgepatch-core --test
//! hostile_vectors`, see fixtures/README.md).
//!
//! Every vector is applied with a counting allocator in place: the peak of
//! what the applier allocates for it must stay under the budget of
//! docs/FORMAT.md §2.7 (a fixed budget plus a small multiple of the input).

use std::path::PathBuf;

use edgepatch_core::error::ErrorKind;
use edgepatch_core::manifest;
use edgepatch_core::memory::{MemoryOldBuild, MemorySink};
use edgepatch_core::patch_format::listing_digest;
use edgepatch_core::{apply_patch, diff_builds, Build, BuildEntry, DiffOptions, EntryContent};

mod counting_allocator;
use counting_allocator::Counting;

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// What an applier may allocate for a hostile input (§2.7): the fixed segment
/// budget (about 100 MiB at most) plus 64 times the input's size.
fn budget(input_len: usize) -> usize {
    (100 << 20) + 64 * input_len
}

fn hostile_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/hostile")
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn zstd(data: &[u8]) -> Vec<u8> {
    zstd::bulk::compress(data, 19).unwrap()
}

/// A tree patch against the empty old build: `tree` is the tree section after
/// the listing digest, `body` the segments; the header, end marker and
/// checksum are made here (`tree_sizes` overrides the declared sizes).
struct PatchBytes {
    tree: Vec<u8>,
    tree_frame: Option<Vec<u8>>,
    tree_sizes: Option<(u64, u64)>,
    body: Vec<u8>,
    segments: u64,
    delta: u64,
    flags: u16,
}

impl PatchBytes {
    fn new(tree_after_digest: &[u8]) -> Self {
        let mut tree = listing_digest(&[]).to_vec();
        tree.extend_from_slice(tree_after_digest);
        PatchBytes { tree, tree_frame: None, tree_sizes: None, body: Vec::new(), segments: 0, delta: 0, flags: 0 }
    }

    fn encode(&self) -> Vec<u8> {
        let mut p = b"EDGEPTCH".to_vec();
        p.extend_from_slice(&2u16.to_le_bytes());
        p.extend_from_slice(&self.flags.to_le_bytes());
        let frame = self.tree_frame.clone().unwrap_or_else(|| zstd(&self.tree));
        let (raw, comp) = self.tree_sizes.unwrap_or((self.tree.len() as u64, frame.len() as u64));
        put_varint(&mut p, raw);
        put_varint(&mut p, comp);
        p.extend_from_slice(&frame);
        p.extend_from_slice(&self.body);
        p.push(b'E');
        put_varint(&mut p, self.segments);
        put_varint(&mut p, self.delta);
        let sum = blake3::hash(&p);
        p.extend_from_slice(sum.as_bytes());
        p
    }
}

/// The tree section (after the digest) naming `files` delta files of the given sizes at the root.
fn delta_files_tree(sizes: &[u64]) -> Vec<u8> {
    let mut t = vec![0]; // no runs
    put_varint(&mut t, sizes.len() as u64);
    for i in 0..sizes.len() {
        put_varint(&mut t, 0);
        let name = format!("f{i:03}");
        put_varint(&mut t, name.len() as u64);
        t.extend_from_slice(name.as_bytes());
    }
    t.extend(std::iter::repeat_n(2u8, sizes.len()));
    for &s in sizes {
        put_varint(&mut t, s);
    }
    t.push(0); // no old files
    t.extend_from_slice(&[0u8; 32]); // files digest (never reached)
    t
}

/// An ops segment with the given header fields and raw streams (compressed here).
fn ops_segment(new_len: u64, ctrl: &[u8], diff: &[u8], extra: &[u8]) -> Vec<u8> {
    let frame = |d: &[u8]| if d.is_empty() { Vec::new() } else { zstd(d) };
    let (c, d, e) = (frame(ctrl), frame(diff), frame(extra));
    let mut s = vec![b'S'];
    for v in [new_len, ctrl.len() as u64, c.len() as u64, diff.len() as u64, d.len() as u64, extra.len() as u64, e.len() as u64] {
        put_varint(&mut s, v);
    }
    s.extend_from_slice(&c);
    s.extend_from_slice(&d);
    s.extend_from_slice(&e);
    s
}

/// A run-coded ops segment (tag `R`): `diff_raw` diff bytes coded as `coded`, no extra bytes.
fn run_coded_segment(new_len: u64, ctrl: &[u8], diff_raw: u64, coded: &[u8]) -> Vec<u8> {
    let (c, d) = (zstd(ctrl), zstd(coded));
    let mut s = vec![b'R'];
    for v in [new_len, ctrl.len() as u64, c.len() as u64, diff_raw, coded.len() as u64, d.len() as u64, 0, 0] {
        put_varint(&mut s, v);
    }
    s.extend_from_slice(&c);
    s.extend_from_slice(&d);
    s
}

fn control(ops: &[(u64, u64, u64)]) -> Vec<u8> {
    let mut c = Vec::new();
    put_varint(&mut c, ops.len() as u64);
    for op in ops {
        put_varint(&mut c, op.0);
    }
    for op in ops {
        put_varint(&mut c, op.1);
    }
    for op in ops {
        put_varint(&mut c, op.2);
    }
    c
}

/// Named entries (sorted) as a tree section after the digest: directories and symlinks only.
fn links_tree(entries: &[(&str, Option<&str>)]) -> Vec<u8> {
    let mut t = vec![0];
    put_varint(&mut t, entries.len() as u64);
    for (path, _) in entries {
        put_varint(&mut t, 0);
        put_varint(&mut t, path.len() as u64);
        t.extend_from_slice(path.as_bytes());
    }
    for (_, target) in entries {
        t.push(if target.is_some() { 1 } else { 0 });
    }
    for target in entries.iter().filter_map(|e| e.1) {
        put_varint(&mut t, target.len() as u64);
        t.extend_from_slice(target.as_bytes());
    }
    t.push(0);
    t.extend_from_slice(blake3::Hasher::new().finalize().as_bytes()); // no files
    t
}

/// A small valid patch (empty build -> two files and a directory).
fn small_valid_patch() -> Vec<u8> {
    let new = Build::from_entries(vec![
        BuildEntry { path: "data".into(), content: EntryContent::Directory },
        BuildEntry { path: "data/level.json".into(), content: EntryContent::File { executable: false, data: b"{\"level\": 1, \"stars\": 3}\n".repeat(40) } },
        BuildEntry { path: "index.html".into(), content: EntryContent::File { executable: false, data: b"<!doctype html><title>game</title>\n".to_vec() } },
    ])
    .unwrap();
    let opts = DiffOptions { level: 19, threads: 1, ..DiffOptions::default() };
    diff_builds(&Build::from_entries(Vec::new()).unwrap(), &new, &opts, &|_, _| {}).unwrap().0
}

struct Vector {
    name: &'static str,
    input: &'static str,
    attacks: &'static str,
    kind: ErrorKind,
    bytes: Vec<u8>,
}

fn patch_vector(name: &'static str, attacks: &'static str, kind: ErrorKind, bytes: Vec<u8>) -> Vector {
    Vector { name, input: "patch", attacks, kind, bytes }
}

fn with_manifest_field(base: &[u8], at: usize, value: &[u8]) -> Vec<u8> {
    let mut m = base.to_vec();
    m[at..at + value.len()].copy_from_slice(value);
    let n = m.len() - 32;
    let sum = blake3::hash(&m[..n]);
    m[n..].copy_from_slice(sum.as_bytes());
    m
}

fn make_vectors() -> Vec<Vector> {
    let mut v = Vec::new();
    let valid = small_valid_patch();

    v.push(patch_vector("garbage", "random bytes, not a patch", ErrorKind::Magic, {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        (0..600)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }));
    v.push(patch_vector("empty", "an empty download", ErrorKind::Truncated, Vec::new()));
    v.push(patch_vector("truncated", "a valid patch cut in the middle of its segment", ErrorKind::Truncated, valid[..valid.len() * 2 / 3].to_vec()));
    v.push(patch_vector("trailing-bytes", "a valid patch with a byte after its checksum", ErrorKind::Corrupt, [valid.as_slice(), b"!"].concat()));

    // Tree bombs.
    {
        // 64 MiB of zeros compress to a few KB: decoded (the 64 MiB are within
        // the fixed budget), they are an empty tree followed by junk.
        let zeros = vec![0u8; 64 << 20];
        let mut p = PatchBytes::new(&[]);
        p.tree_frame = Some(zstd(&zeros));
        p.tree_sizes = Some((zeros.len() as u64, p.tree_frame.as_ref().unwrap().len() as u64));
        v.push(patch_vector("tree-zero-bomb", "a few KB of zstd decoding to a 64 MiB tree section of zeros", ErrorKind::Corrupt, p.encode()));
        // One byte more is refused before anything is allocated.
        let zeros = vec![0u8; (64 << 20) + 1];
        p.tree_frame = Some(zstd(&zeros));
        p.tree_sizes = Some((zeros.len() as u64, p.tree_frame.as_ref().unwrap().len() as u64));
        v.push(patch_vector("tree-over-cap", "a tree section declaring 64 MiB + 1 decoded (the cap is 64 MiB)", ErrorKind::Limit, p.encode()));
    }
    {
        // One 4096-byte path, then 100,000 entries that share 4095 bytes of it
        // and add one: 4 bytes of tree each, 400 MB of paths if decoded.
        let mut t = vec![0];
        let n = 100_000u64;
        put_varint(&mut t, n + 1);
        put_varint(&mut t, 0);
        put_varint(&mut t, 4096);
        t.extend(std::iter::repeat_n(b'a', 4096));
        for _ in 0..n {
            put_varint(&mut t, 4095);
            put_varint(&mut t, 1);
            t.push(b'b');
        }
        t.extend(std::iter::repeat_n(0u8, n as usize + 1)); // directories
        t.push(0);
        t.extend_from_slice(&[0u8; 32]);
        v.push(patch_vector(
            "tree-path-bomb",
            "front-coded paths: 400 KB of tree (a few hundred bytes compressed) naming 400 MB of paths",
            ErrorKind::Limit,
            PatchBytes::new(&t).encode(),
        ));
    }
    {
        let mut t = vec![0];
        put_varint(&mut t, 1 << 20);
        t.extend_from_slice(&[0u8; 64]);
        v.push(patch_vector("entry-count-bomb", "an entry count of 2^20 in a 100-byte tree", ErrorKind::Limit, PatchBytes::new(&t).encode()));
    }
    {
        let bytes = PatchBytes::new(&delta_files_tree(&[u64::MAX, 1])).encode();
        v.push(patch_vector("delta-size-overflow", "two delta files of u64::MAX and 1 bytes: their total wraps", ErrorKind::Corrupt, bytes));
    }

    // zstd frames.
    {
        let mut p = PatchBytes::new(&links_tree(&[("d", None)]));
        let half = p.tree.len() / 2;
        let frame = [zstd(&p.tree[..half]), zstd(&p.tree[half..])].concat();
        p.tree_sizes = Some((p.tree.len() as u64, frame.len() as u64));
        p.tree_frame = Some(frame);
        v.push(patch_vector("tree-two-frames", "a tree section split over two zstd frames (libzstd would join them)", ErrorKind::Corrupt, p.encode()));
    }
    {
        let mut p = PatchBytes::new(&links_tree(&[("d", None)]));
        let mut frame = vec![0x50, 0x2A, 0x4D, 0x18, 4, 0, 0, 0, b'h', b'i', b'd', b'e'];
        frame.extend_from_slice(&zstd(&p.tree));
        p.tree_sizes = Some((p.tree.len() as u64, frame.len() as u64));
        p.tree_frame = Some(frame);
        v.push(patch_vector("tree-skippable-frame", "a skippable zstd frame before the tree section's frame", ErrorKind::Corrupt, p.encode()));
    }

    // Ops.
    {
        let mut p = PatchBytes::new(&delta_files_tree(&[1]));
        p.body = ops_segment(1, &control(&[(2, u64::MAX, 1)]), &[], &[7]);
        (p.segments, p.delta) = (1, 1);
        v.push(patch_vector("ops-length-overflow", "copy_len u64::MAX + extra_len 1 wraps to 0", ErrorKind::Corrupt, p.encode()));
    }
    {
        let mut p = PatchBytes::new(&delta_files_tree(&[1]));
        p.body = ops_segment(1, &control(&[(u64::MAX, 0, 1)]), &[], &[7]);
        (p.segments, p.delta) = (1, 1);
        v.push(patch_vector("ops-diagonal-far", "a diagonal code of u64::MAX (an old position near i64::MIN)", ErrorKind::Corrupt, p.encode()));
    }
    {
        let mut p = PatchBytes::new(&delta_files_tree(&[1]));
        let mut ctrl = Vec::new();
        put_varint(&mut ctrl, 1 << 24);
        ctrl.extend_from_slice(&[2, 0, 1]);
        p.body = ops_segment(1, &ctrl, &[], &[7]);
        (p.segments, p.delta) = (1, 1);
        v.push(patch_vector("ops-count-bomb", "a control stream of 7 bytes claiming 2^24 ops", ErrorKind::Limit, p.encode()));
    }
    {
        let mut p = PatchBytes::new(&delta_files_tree(&[16 << 20]));
        let mut s = vec![b'S'];
        for f in [(16 << 20) + 1u64, 3, 12, 0, 0, (16 << 20) + 1, 100] {
            put_varint(&mut s, f);
        }
        p.body = s;
        (p.segments, p.delta) = (1, 16 << 20);
        v.push(patch_vector("segment-over-cap", "a segment declaring 16 MiB + 1 of output (the cap is 16 MiB)", ErrorKind::Limit, p.encode()));
    }
    {
        let mut p = PatchBytes::new(&delta_files_tree(&[4]));
        let mut s = vec![b'S'];
        for f in [4u64, (32 << 20) + 1, 100, 0, 0, 4, 20] {
            put_varint(&mut s, f);
        }
        p.body = s;
        (p.segments, p.delta) = (1, 4);
        v.push(patch_vector("control-over-cap", "a control stream declaring 32 MiB + 1 raw bytes", ErrorKind::Limit, p.encode()));
    }
    {
        let mut p = PatchBytes::new(&delta_files_tree(&[1]));
        p.body = ops_segment(5, &control(&[(2, 0, 5)]), &[], b"hello");
        (p.segments, p.delta) = (1, 5);
        v.push(patch_vector("segment-beyond-files", "a segment producing more bytes than the files need", ErrorKind::Corrupt, p.encode()));
    }
    // Run-coded diff streams (§2.3): a 4-byte file of one copy... against an empty
    // old build no copy can run, but the run-coded diff is checked before the ops.
    {
        let mut p = PatchBytes::new(&delta_files_tree(&[4]));
        p.body = run_coded_segment(4, &control(&[(2, 4, 0)]), 4, &[1, 0, 1, 9]);
        (p.segments, p.delta) = (1, 4);
        v.push(patch_vector(
            "run-coded-without-flag",
            "a run-coded ops segment in a patch whose flags do not allow one (bit 3 clear)",
            ErrorKind::Corrupt,
            p.encode(),
        ));
    }
    {
        let mut p = PatchBytes::new(&delta_files_tree(&[4]));
        p.flags = 8;
        // One run of 4 zeros then 1 literal byte: 5 diff bytes for a segment of 4.
        p.body = run_coded_segment(4, &control(&[(2, 4, 0)]), 4, &[1, 4, 1, 9]);
        (p.segments, p.delta) = (1, 4);
        v.push(patch_vector("run-coded-runs-past-diff", "a run-coded diff whose runs expand past the segment's diff bytes", ErrorKind::Corrupt, p.encode()));
    }
    {
        let mut p = PatchBytes::new(&delta_files_tree(&[8]));
        p.flags = 8;
        // A run count of 2^20 in a 5-byte coded stream (of 8 diff bytes).
        p.body = run_coded_segment(8, &control(&[(2, 8, 0)]), 8, &[0x80, 0x80, 0x40, 1, 9]);
        (p.segments, p.delta) = (1, 8);
        v.push(patch_vector("run-coded-count-bomb", "a run-coded diff claiming 2^20 runs in 5 bytes", ErrorKind::Corrupt, p.encode()));
    }
    {
        let mut p = PatchBytes::new(&delta_files_tree(&[4]));
        let mut s = vec![b'W'];
        put_varint(&mut s, 4);
        put_varint(&mut s, 1);
        put_varint(&mut s, u64::MAX - 1);
        put_varint(&mut s, 4);
        put_varint(&mut s, 0);
        let frame = zstd(b"abcd");
        put_varint(&mut s, frame.len() as u64);
        s.extend_from_slice(&frame);
        p.body = s;
        (p.segments, p.delta) = (1, 4);
        v.push(patch_vector("window-span-overflow", "a window span at offset u64::MAX - 1: start + length wraps", ErrorKind::Corrupt, p.encode()));
    }

    // LZMA window segments (§2.6, flags bit 6): 4 new bytes, no spans, no back bytes.
    let lzma_segment = |props: u8, data: &[u8]| {
        let mut s = vec![b'L'];
        put_varint(&mut s, 4);
        put_varint(&mut s, 0);
        put_varint(&mut s, 0);
        s.push(props);
        put_varint(&mut s, data.len() as u64);
        s.extend_from_slice(data);
        s
    };
    // Raw LZMA (lc 0, lp 0, pb 0) of "abcd" with an end marker (Python's lzma): none of the
    // vectors below gets as far as decoding it whole.
    let lzma_of_abcd: &[u8] = &[0x00, 0x30, 0x99, 0xab, 0xc3, 0x26, 0xc1, 0x81, 0x6b, 0xff, 0xf6, 0x73, 0x00, 0x00];
    for (name, attacks, flags, props, data) in [
        ("lzma-window-without-flag", "an LZMA window segment in a patch whose flags do not allow one (bit 6 clear)", 0u16, 0u8, lzma_of_abcd),
        ("lzma-window-bad-props", "an LZMA window segment whose properties byte is out of range (lc + lp above 4)", 64, 4 + 9, lzma_of_abcd),
        (
            "lzma-window-corrupt",
            "an LZMA window segment whose data is not LZMA (its range coder's first byte is not 0)",
            64,
            0,
            &[0xff, 0x12, 0x34, 0x56, 0x78, 0x9a][..],
        ),
        ("lzma-window-truncated", "an LZMA window segment whose data ends before its 4 bytes are decoded", 64, 0, &lzma_of_abcd[..3]),
    ] {
        let mut p = PatchBytes::new(&delta_files_tree(&[4]));
        p.flags = flags;
        p.body = lzma_segment(props, data);
        (p.segments, p.delta) = (1, 4);
        v.push(patch_vector(name, attacks, ErrorKind::Corrupt, p.encode()));
    }

    // LZMA ops segments (§2.3, flags bit 6): a 5-byte file of extra bytes, its control a zstd
    // frame, its extra stream `extra` marked LZMA (mask 4) unless `mask` says otherwise.
    let lzma_ops = |form: u8, mask: u8, extra: &[u8]| {
        let ctrl = control(&[(2, 0, 5)]);
        let c = zstd(&ctrl);
        let mut s = vec![b'M', form];
        for v in [5, ctrl.len() as u64, c.len() as u64, 0, 0, 5, extra.len() as u64] {
            put_varint(&mut s, v);
        }
        s.push(mask);
        s.extend(std::iter::repeat_n(0u8, mask.count_ones() as usize));
        s.extend_from_slice(&c);
        s.extend_from_slice(extra);
        s
    };
    for (name, attacks, flags, form, mask, extra) in [
        ("lzma-ops-without-flag", "an LZMA ops segment in a patch whose flags do not allow one (bit 6 clear)", 0u16, 0u8, 4u8, lzma_of_abcd),
        ("lzma-ops-bad-form", "an LZMA ops segment whose form byte is neither plain (0) nor run-coded (1)", 64, 2, 4, lzma_of_abcd),
        ("lzma-ops-empty-stream-marked", "an LZMA ops segment that marks its empty diff stream as LZMA", 64, 0, 6, lzma_of_abcd),
        ("lzma-ops-corrupt", "an LZMA ops segment whose extra stream is not LZMA", 64, 0, 4, &[0xff, 0x12, 0x34, 0x56, 0x78, 0x9a][..]),
    ] {
        let mut p = PatchBytes::new(&delta_files_tree(&[5]));
        p.flags = flags;
        p.body = lzma_ops(form, mask, extra);
        (p.segments, p.delta) = (1, 5);
        v.push(patch_vector(name, attacks, ErrorKind::Corrupt, p.encode()));
    }

    // An `M` stream's dictionary is its size capped at 1 MiB (§2.3): an extra stream of 64 bytes
    // of noise, 1 MiB of zeros and the noise again, coded with a 2 MiB dictionary, copies the
    // noise from 1 MiB + 64 bytes back. The same stream coded within the cap decodes: it gets as
    // far as the files digest, which these trees leave zero.
    let far: Vec<u8> = {
        let noise: Vec<u8> = (0..64u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        [noise.as_slice(), &vec![0; 1 << 20], noise.as_slice()].concat()
    };
    let far_stream = |dictionary: u64| {
        let extra = edgepatch_core::lzma_stream_with_dictionary(&far, 0, dictionary).unwrap();
        let ctrl = control(&[(2, 0, far.len() as u64)]);
        let c = zstd(&ctrl);
        let mut s = vec![b'M', 0];
        for v in [far.len() as u64, ctrl.len() as u64, c.len() as u64, 0, 0, far.len() as u64, extra.len() as u64] {
            put_varint(&mut s, v);
        }
        s.extend_from_slice(&[4, 0]);
        s.extend_from_slice(&c);
        s.extend_from_slice(&extra);
        let mut p = PatchBytes::new(&delta_files_tree(&[far.len() as u64]));
        p.flags = 64;
        p.body = s;
        (p.segments, p.delta) = (1, far.len() as u64);
        p.encode()
    };
    let within = far_stream(1 << 20);
    assert_eq!(apply_kind(&within), Some(ErrorKind::Digest), "the stream coded within its dictionary decodes");
    v.push(patch_vector(
        "lzma-ops-reach-past-dictionary",
        "an LZMA ops stream of 1 MiB + 128 bytes whose match reaches 1 MiB + 64 bytes back, past its 1 MiB dictionary",
        ErrorKind::Corrupt,
        far_stream(2 << 20),
    ));

    // Window reach (§2.6): flags bit 2 and the varint that ends the tree.
    // A window segment of 4 new bytes, no spans, reaching `back` bytes back.
    let reaching = |back: u64| {
        let mut s = vec![b'W'];
        put_varint(&mut s, 4);
        put_varint(&mut s, 0);
        put_varint(&mut s, back);
        let frame = zstd(b"abcd");
        put_varint(&mut s, frame.len() as u64);
        s.extend_from_slice(&frame);
        s
    };
    // A tree of one 4-byte delta file, its reach declared (None: the field left out).
    let declaring = |reach: Option<u64>, body: Vec<u8>| {
        let mut tree = delta_files_tree(&[4]);
        if let Some(r) = reach {
            put_varint(&mut tree, r);
        }
        let mut p = PatchBytes::new(&tree);
        p.flags = 4;
        p.body = body;
        (p.segments, p.delta) = (1, 4);
        p.encode()
    };
    v.push(patch_vector(
        "window-reach-over-cap",
        "a patch declaring a window reach of 16 MiB + 1 (the cap an applier keeps is 16 MiB)",
        ErrorKind::Limit,
        declaring(Some((16 << 20) + 1), reaching(0)),
    ));
    v.push(patch_vector(
        "window-reach-at-base",
        "a patch declaring a window reach of 4 MiB (flags bit 2 is for reaches above the base)",
        ErrorKind::Corrupt,
        declaring(Some(4 << 20), reaching(0)),
    ));
    v.push(patch_vector(
        "window-reach-missing",
        "flags bit 2 set and the tree section ending before the window reach",
        ErrorKind::Truncated,
        declaring(None, reaching(0)),
    ));
    v.push(patch_vector(
        "window-back-over-reach",
        "a window reaching 8 MiB + 1 back in a patch that declares 8 MiB",
        ErrorKind::Limit,
        declaring(Some(8 << 20), reaching((8 << 20) + 1)),
    ));
    {
        let mut p = PatchBytes::new(&delta_files_tree(&[4]));
        p.body = reaching((4 << 20) + 1);
        (p.segments, p.delta) = (1, 4);
        v.push(patch_vector("window-back-over-base", "a window reaching 4 MiB + 1 back in a patch that declares no reach", ErrorKind::Limit, p.encode()));
    }
    v.push(patch_vector(
        "window-back-over-produced",
        "a first segment whose window reaches 5 bytes back (nothing produced yet), within the declared reach",
        ErrorKind::Corrupt,
        declaring(Some(8 << 20), reaching(5)),
    ));

    // Links.
    // Links: any target is data (appliers never follow one), but it must be storable.
    v.push(patch_vector(
        "link-target-nul",
        "a symlink target with a NUL byte (no file system can store it; a C API would cut it short)",
        ErrorKind::Link,
        PatchBytes::new(&links_tree(&[("s", Some("a\0/../../etc"))])).encode(),
    ));
    v.push(patch_vector(
        "link-target-long",
        "a symlink target of 4097 bytes (refused as the string is read)",
        ErrorKind::Limit,
        PatchBytes::new(&links_tree(&[("s", Some(&"a/".repeat(2049)[..4097]))])).encode(),
    ));

    // The old build.
    {
        let mut p = PatchBytes::new(&links_tree(&[("d", None)]));
        p.tree[0] ^= 1;
        v.push(patch_vector("wrong-old-build", "a patch made for another old build (listing digest differs)", ErrorKind::OldBuild, p.encode()));
    }

    // Manifests (built from the golden manifest; the trailer is recomputed so only the named field is hostile).
    let golden = std::fs::read(hostile_dir().parent().unwrap().join("golden/game-v1-to-v2.manifest")).unwrap();
    // The wasm transform table and side info (docs/FORMAT.md §2.8): one delta
    // file of 8 bytes (a bare wasm header, produced by one extra-bytes op).
    {
        // One delta file holding `module` (made by one extra-bytes op when `with_body`).
        let with_module = |module: &[u8], table: &[u8], with_body: bool| {
            let len = module.len() as u64;
            let mut tree = delta_files_tree(&[len]);
            tree.extend_from_slice(table);
            let mut p = PatchBytes::new(&tree);
            p.flags = 2;
            if with_body {
                p.body = ops_segment(len, &control(&[(2, 0, len)]), &[], module);
                (p.segments, p.delta) = (1, len);
            }
            p.encode()
        };
        let transformed = |table: &[u8], with_body: bool| with_module(b"\0asm\x01\0\0\0", table, with_body);
        let row = |size: u64, side_len: u64, side: &[u8]| {
            let mut t = vec![1, 0];
            put_varint(&mut t, size);
            put_varint(&mut t, side_len);
            t.extend_from_slice(side);
            t
        };
        // The smallest side info (no renumbering): magic, version 1, then zero for every field.
        let identity_side = b"EPWT\x01\0\0\0\0\0\0\0\0\0";
        v.push(patch_vector(
            "wasm-transform-empty-table",
            "the wasm transform flag with an empty transform table",
            ErrorKind::Corrupt,
            transformed(&[0], true),
        ));
        v.push(patch_vector(
            "wasm-side-info-over-cap",
            "a side info claiming 4 MiB + 1 bytes (above the cap)",
            ErrorKind::Limit,
            transformed(&row(8, (4 << 20) + 1, b"EPWT"), true),
        ));
        v.push(patch_vector(
            "wasm-size-over-cap",
            "a transformed file of 64 MiB + 1 bytes (above the cap the applier holds)",
            ErrorKind::Limit,
            transformed(&row((64 << 20) + 1, identity_side.len() as u64, identity_side), true),
        ));
        v.push(patch_vector("wasm-side-info-garbage", "a side info that is not one (bad magic)", ErrorKind::Corrupt, transformed(&row(8, 4, b"XXXX"), true)));
        v.push(patch_vector(
            "wasm-inverted-size-mismatch",
            "a valid side info whose module inverts to 8 bytes where the tree says 9",
            ErrorKind::Corrupt,
            transformed(&row(9, identity_side.len() as u64, identity_side), true),
        ));
        // Normalized forms that cost the module a byte or three per record the applier keeps:
        // 12 MiB of them (a few KiB of patch) made it allocate hundreds of MB before the caps
        // of docs/FORMAT.md §2.8.2.
        let bomb = |head: &[u8], section_id: u8, count: usize, record: &[u8], tail: &[u8]| {
            let mut contents = Vec::new();
            if section_id != 0 {
                put_varint(&mut contents, count as u64);
            }
            for _ in 0..count {
                contents.extend_from_slice(record);
            }
            let mut module = b"\0asm\x01\0\0\0".to_vec();
            module.extend_from_slice(head);
            if section_id == 0 {
                module.extend_from_slice(&contents);
            } else {
                module.push(section_id);
                put_varint(&mut module, contents.len() as u64);
                module.extend_from_slice(&contents);
            }
            module.extend_from_slice(tail);
            with_module(&module, &row(module.len() as u64, identity_side.len() as u64, identity_side), true)
        };
        v.push(patch_vector(
            "wasm-normalized-many-sections",
            "a 12 MiB normalized form of four million empty custom sections (3 bytes each)",
            ErrorKind::Corrupt,
            bomb(&[], 0, 4 << 20, &[0, 1, 0], &[]),
        ));
        v.push(patch_vector(
            "wasm-normalized-many-imports",
            "a 12 MiB normalized form importing two million functions (6 bytes each)",
            ErrorKind::Corrupt,
            bomb(&[1, 4, 1, 0x60, 0, 0], 2, 2 << 20, &[1, b'a', 1, b'b', 0, 0], &[]),
        ));
        v.push(patch_vector(
            "wasm-normalized-many-bodies",
            "a 12 MiB normalized form whose code section holds twelve million empty bodies (1 byte each)",
            ErrorKind::Corrupt,
            bomb(&[], 10, 12 << 20, &[0], &[]),
        ));
        // Versions 1 to 6 are the only ones (2: memarg offsets are immediates; 3: the split
        // layout; 4: element entries are immediates; 5: exports, start and names too; 6: line
        // and range addresses too).
        let version_7 = b"EPWT\x07\0\0\0\0\0\0\0\0\0";
        v.push(patch_vector(
            "wasm-side-info-version-7",
            "a side info of version 7 (only 1 to 6 exist)",
            ErrorKind::Corrupt,
            transformed(&row(8, version_7.len() as u64, version_7), true),
        ));
        // Version 6: offsets 0, layout 0, zero for every field, the sections byte, then the code
        // address map and the line exceptions (`line`).
        let line_side = |sections: u8, line: &[u8]| [&b"EPWT\x06\0\0"[..], &[0u8; 9], &[sections], line].concat();
        // A `.debug_line` section whose one unit claims 16 bytes where 2 follow; a
        // `.debug_ranges` of 7 bytes; a `.debug_loc` whose one location's expression claims 5
        // bytes where 1 follows.
        let past_unit = [&b"\0asm\x01\0\0\0\x00\x12\x0b.debug_line"[..], &[16, 0, 0, 0, 4, 0]].concat();
        let past_ranges = [&b"\0asm\x01\0\0\0\x00\x15\x0d.debug_ranges"[..], &[1, 0, 0, 0, 2, 0, 0]].concat();
        let past_loc = [&b"\0asm\x01\0\0\0\x00\x16\x0a.debug_loc"[..], &[1, 0, 0, 0, 2, 0, 0, 0, 5, 0, 0x50]].concat();
        let line_vectors: [(&str, &str, &[u8], Vec<u8>); 5] = [
            (
                "wasm-dwarf-sections-byte-no-kind",
                "a version-6 side info whose sections byte names neither kind of DWARF address",
                b"\0asm\x01\0\0\0",
                line_side(2, &[0, 0, 0]),
            ),
            (
                "wasm-line-exception-beyond",
                "a version-6 side info keeping line address 0 in a module without line programs",
                b"\0asm\x01\0\0\0",
                line_side(0x10, &[0, 0, 1, 0]),
            ),
            (
                "wasm-line-unit-past-section",
                "a version-6 side info on a module whose .debug_line unit runs past its section",
                &past_unit,
                line_side(0x10, &[0, 0, 0]),
            ),
            (
                "wasm-ranges-entry-past-section",
                "a version-6 side info on a module whose .debug_ranges ends inside an entry",
                &past_ranges,
                line_side(0x20, &[0, 0, 0]),
            ),
            (
                "wasm-loc-expression-past-section",
                "a version-6 side info on a module whose .debug_loc location expression runs past its section",
                &past_loc,
                line_side(0x20, &[0, 0, 0]),
            ),
        ];
        for (name, what, module, side) in line_vectors {
            v.push(patch_vector(name, what, ErrorKind::Corrupt, with_module(module, &row(module.len() as u64, side.len() as u64, &side), true)));
        }
        // Version 5: offsets 0, layout 0, zero for every field, the sections byte.
        let names_side = |sections: u8| [&b"EPWT\x05\0\0"[..], &[0u8; 9], &[sections]].concat();
        for (name, what, sections) in [
            ("wasm-sections-byte-elements-only", "a version-5 side info whose sections byte names no section besides the elements", 1u8),
            ("wasm-sections-byte-unknown-bit", "a version-5 side info whose sections byte has a bit no section has", 0x12),
        ] {
            let side = [names_side(sections), if sections & 1 != 0 { vec![0] } else { vec![] }].concat();
            v.push(patch_vector(name, what, ErrorKind::Corrupt, transformed(&row(8, side.len() as u64, &side), true)));
        }
        // Exports said renumbered (bit 1), in a module whose export section claims one export
        // and ends inside its name; and a name section (bit 3) whose function names subsection
        // runs past the section.
        let not_in_form: [(&str, &str, &[u8], u8); 2] = [
            (
                "wasm-exports-not-in-form",
                "a version-5 side info renumbering exports in a module whose export section ends inside an export",
                b"\0asm\x01\0\0\0\x07\x02\x01\x05",
                2,
            ),
            (
                "wasm-names-subsection-past-section",
                "a version-5 side info renumbering names in a module whose function names run past the name section",
                b"\0asm\x01\0\0\0\x00\x08\x04name\x01\x09\x01",
                8,
            ),
        ];
        for (name, what, module, sections) in not_in_form {
            let side = names_side(sections);
            v.push(patch_vector(name, what, ErrorKind::Corrupt, with_module(module, &row(module.len() as u64, side.len() as u64, &side), true)));
        }
        // Version 4 (element entries): offsets 0, a layout byte, zero for every field, the
        // element exceptions.
        let elements_side = |layout: u8, element_exceptions: &[u8]| [&b"EPWT\x04\0"[..], &[layout], &[0u8; 9], element_exceptions].concat();
        let bad_layout = elements_side(9, &[0]);
        v.push(patch_vector(
            "wasm-elements-layout-byte",
            "a version-4 side info whose layout byte is 9 (only 0 to 8 exist)",
            ErrorKind::Corrupt,
            transformed(&row(8, bad_layout.len() as u64, &bad_layout), true),
        ));
        let beyond = elements_side(0, &[1, 0]);
        v.push(patch_vector(
            "wasm-elements-exception-beyond",
            "a version-4 side info naming element entry 0 in a module with no element section",
            ErrorKind::Corrupt,
            transformed(&row(8, beyond.len() as u64, &beyond), true),
        ));
        // An element section of expressions (flags 5: `ref.func 0`), not function indices.
        let expressions = b"\0asm\x01\0\0\0\x09\x07\x01\x05\x70\x01\xd2\x00\x0b";
        let plain = elements_side(0, &[0]);
        v.push(patch_vector(
            "wasm-elements-not-indices",
            "a version-4 side info on a module whose element section lists expressions, not function indices",
            ErrorKind::Corrupt,
            with_module(expressions, &row(expressions.len() as u64, plain.len() as u64, &plain), true),
        ));
        // The split layout (§2.8.7): a module whose code section holds `contents`,
        // with a version-3 side info giving the 12 field streams' lengths.
        let split = |contents: &[u8], lens: [u8; 12]| {
            let mut module = b"\0asm\x01\0\0\0\x0a".to_vec();
            module.push(contents.len() as u8);
            module.extend_from_slice(contents);
            // Version 3, offsets 0, locals as they are (0), code size width 1, then zero for every
            // field, then the lengths.
            let mut side = b"EPWT\x03\0\0\x01\0\0\0\0\0\0\0\0".to_vec();
            side.extend_from_slice(&lens);
            with_module(&module, &row(module.len() as u64, side.len() as u64, &side), true)
        };
        let locals_8 = b"EPWT\x03\0\x08\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0";
        v.push(patch_vector(
            "wasm-split-locals-coding",
            "a split-layout side info whose coding byte is 8 (only 0 to 7 exist: bit 0 locals as ranks, bit 1 alignments coded, bit 2 data gaps)",
            ErrorKind::Corrupt,
            transformed(&row(8, locals_8.len() as u64, locals_8), true),
        ));
        let mut other = [0u8; 12];
        other[11] = 2;
        v.push(patch_vector(
            "wasm-split-streams-past-section",
            "a split-layout side info whose field streams are longer than the code section",
            ErrorKind::Corrupt,
            split(&[0x00], other),
        ));
        let mut left_over = [0u8; 12];
        (left_over[0], left_over[11]) = (1, 1);
        v.push(patch_vector(
            "wasm-split-stream-left-over",
            "a split code section with an opcode byte no body uses",
            ErrorKind::Corrupt,
            split(&[0x0b, 0x00], left_over),
        ));
        let mut truncated_body = [0u8; 12];
        (truncated_body[0], truncated_body[11]) = (1, 3);
        v.push(patch_vector(
            "wasm-split-body-past-streams",
            "a split code section whose one body claims more instructions than its streams hold",
            ErrorKind::Corrupt,
            split(&[0x0b, 0x01, 0x05, 0x00], truncated_body),
        ));
        // Data gaps (§2.8.7, coding bit 2): an empty split code section, and a data section
        // whose second segment's gap, 0, restores address 1 (where the first segment ends):
        // one byte, in a field of three.
        let mut gap_module = b"\0asm\x01\0\0\0\x0a\x01\x00".to_vec();
        let segments = b"\x02\x00\x41\x00\x0b\x01a\x00\x41\x80\x80\x00\x0b\x01b";
        gap_module.extend_from_slice(&[0x0b, segments.len() as u8]);
        gap_module.extend_from_slice(segments);
        let mut gap_side = b"EPWT\x03\0\x04\x01\0\0\0\0\0\0\0\0".to_vec();
        gap_side.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        v.push(patch_vector(
            "wasm-data-gap-narrower-address",
            "a split module with data gaps whose segment's gap restores an address narrower than its field",
            ErrorKind::Corrupt,
            with_module(&gap_module, &row(gap_module.len() as u64, gap_side.len() as u64, &gap_side), true),
        ));
        // Version 2 listing immediate 0 as an exception in a module with no code.
        let exception_beyond = b"EPWT\x02\0\0\0\0\0\x01\0\0\0\0";
        v.push(patch_vector(
            "wasm-v2-exception-beyond-module",
            "a version-2 side info naming an immediate the module does not have",
            ErrorKind::Corrupt,
            transformed(&row(8, exception_beyond.len() as u64, exception_beyond), true),
        ));
        // Split references (flags bit 5, §2.8.1): a row naming the old file a renamed module
        // reads split. The old table is checked before the listing, so the empty old build
        // serves: `old_file` is None for no old files, else whether the one is in the reference.
        let naming = |flags: u16, old_file: Option<bool>, side: &[u8], named: u64| {
            let mut tree = delta_files_tree(&[8]);
            if let Some(in_reference) = old_file {
                tree.truncate(tree.len() - 33);
                tree.extend_from_slice(&[1, 0, in_reference as u8]);
                tree.extend_from_slice(&[0u8; 32]);
            }
            if flags & 2 != 0 {
                tree.extend(row(8, side.len() as u64, side));
                put_varint(&mut tree, named);
            }
            let mut p = PatchBytes::new(&tree);
            p.flags = flags;
            p.encode()
        };
        let split_side = b"EPWT\x03\0\0\x01\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0";
        v.push(patch_vector(
            "wasm-split-reference-without-table",
            "flags bit 5 (split references) in a patch without a wasm transform table",
            ErrorKind::Corrupt,
            naming(32, Some(true), split_side, 1),
        ));
        v.push(patch_vector(
            "wasm-split-reference-beyond-old-table",
            "a row naming old file 0 as read split in a patch whose old table is empty",
            ErrorKind::Corrupt,
            naming(2 | 32, None, split_side, 1),
        ));
        v.push(patch_vector(
            "wasm-split-reference-not-in-reference",
            "a row naming as read split an old file the reference stream does not hold",
            ErrorKind::Corrupt,
            naming(2 | 32, Some(false), split_side, 1),
        ));
        v.push(patch_vector(
            "wasm-split-reference-unsplit-file",
            "a row naming an old file read split for a file not in the field-split layout",
            ErrorKind::Corrupt,
            naming(2 | 32, Some(true), identity_side, 1),
        ));
        v.push(patch_vector(
            "wasm-split-reference-none-named",
            "flags bit 5 set, but no row names an old file",
            ErrorKind::Corrupt,
            naming(2 | 32, Some(true), split_side, 0),
        ));
    }

    let manifest_vector = |name, attacks, kind, bytes| Vector { name, input: "manifest", attacks, kind, bytes };
    v.push(manifest_vector(
        "manifest-oversized",
        "a manifest header claiming 4 GiB (total_len u32::MAX)",
        ErrorKind::Truncated,
        with_manifest_field(&golden, 12, &u32::MAX.to_le_bytes()),
    ));
    v.push(manifest_vector(
        "manifest-entry-count",
        "an entry count of 2^24 + 1",
        ErrorKind::Corrupt,
        with_manifest_field(&golden, 16, &((1u32 << 24) + 1).to_le_bytes()),
    ));
    v.push(manifest_vector(
        "manifest-count-vs-bytes",
        "2^24 entries claimed in a 2 KB manifest",
        ErrorKind::Corrupt,
        with_manifest_field(&golden, 16, &(1u32 << 24).to_le_bytes()),
    ));
    v.push(manifest_vector(
        "manifest-records-offset",
        "a records offset past the end",
        ErrorKind::Corrupt,
        with_manifest_field(&golden, 44, &u32::MAX.to_le_bytes()),
    ));
    v.push(manifest_vector("manifest-garbage", "random bytes, not a manifest", ErrorKind::Magic, v[0].bytes.clone()));
    v
}

fn index_json(vectors: &[Vector]) -> serde_json::Value {
    let list: Vec<serde_json::Value> = vectors
        .iter()
        .map(|v| {
            serde_json::json!({
                "name": v.name,
                "input": v.input,
                "file": format!("{}.{}", v.name, v.input),
                "old": if v.input == "patch" { "empty-tree" } else { "" },
                "attacks": v.attacks,
                "kind": v.kind.as_str(),
                "size": v.bytes.len(),
                "blake3": blake3::hash(&v.bytes).to_hex().to_string(),
            })
        })
        .collect();
    serde_json::json!({
        "comment": "Made by crates/edgepatch-core/tests/hostile_vectors.rs (EDGEPATCH_UPDATE_HOSTILE=1 regenerates). Every input must be refused with the error kind named here (docs/FORMAT.md §2.7). old: the old build a patch is applied to; empty-tree = a directory build with no entries.",
        "vectors": list,
    })
}

/// Applies a patch to the empty old tree, returning the error kind (None if it applied).
fn apply_kind(patch: &[u8]) -> Option<ErrorKind> {
    let old = Build::from_entries(Vec::new()).unwrap();
    let mut sink = MemorySink::default();
    apply_patch(patch, &mut MemoryOldBuild::new(&old), &mut sink, &mut |_| {}).err().map(|e| e.kind())
}

/// [`apply_kind`] into a sink with scratch space (`BuildSink::write_scratch`), where the applier
/// keeps normalized forms and split old modules and inverts from there: the same outcome.
fn apply_kind_with_scratch(patch: &[u8]) -> Option<ErrorKind> {
    let old = Build::from_entries(Vec::new()).unwrap();
    let mut sink = MemorySink::with_scratch();
    apply_patch(patch, &mut MemoryOldBuild::new(&old), &mut sink, &mut |_| {}).err().map(|e| e.kind())
}

#[test]
fn hostile_vectors_are_current_and_each_is_refused_with_its_kind_within_budget() {
    let vectors = make_vectors();
    let dir = hostile_dir();
    let index = index_json(&vectors);
    if std::env::var("EDGEPATCH_UPDATE_HOSTILE").is_ok() {
        std::fs::create_dir_all(&dir).unwrap();
        for v in &vectors {
            std::fs::write(dir.join(format!("{}.{}", v.name, v.input)), &v.bytes).unwrap();
        }
        std::fs::write(dir.join("vectors.json"), serde_json::to_string_pretty(&index).unwrap() + "\n").unwrap();
    }
    let committed: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("vectors.json")).unwrap()).unwrap();
    assert_eq!(committed, index, "fixtures/hostile/ differs from what this test makes: regenerate with EDGEPATCH_UPDATE_HOSTILE=1 (fixtures/README.md)");
    drop(vectors);

    // From the committed files, as every other implementation reads them.
    let mut seen = std::collections::HashSet::new();
    for v in committed["vectors"].as_array().unwrap() {
        let name = v["name"].as_str().unwrap();
        let bytes = std::fs::read(dir.join(v["file"].as_str().unwrap())).unwrap();
        assert_eq!(blake3::hash(&bytes).to_hex().as_str(), v["blake3"].as_str().unwrap(), "{name}: file differs from the index");
        let expected = ErrorKind::from_name(v["kind"].as_str().unwrap()).unwrap();
        seen.insert(expected);
        let base = counting_allocator::reset_peak();
        let kind = match v["input"].as_str().unwrap() {
            "patch" => apply_kind(&bytes),
            "manifest" => manifest::decode(&bytes).err().map(|e| e.kind()),
            other => panic!("{name}: unknown input {other}"),
        };
        let peak = counting_allocator::peak() - base;
        println!("{name}: {} bytes, refused as {kind:?}, peak allocation {} KiB", bytes.len(), peak >> 10);
        assert_eq!(kind, Some(expected), "{name} ({}): wrong outcome", v["attacks"]);
        assert!(peak <= budget(bytes.len()), "{name}: allocated {peak} bytes, budget {}", budget(bytes.len()));
        if v["input"] == "patch" {
            assert_eq!(apply_kind_with_scratch(&bytes), Some(expected), "{name}: another outcome with scratch space");
        }
    }
    for kind in [ErrorKind::Magic, ErrorKind::Truncated, ErrorKind::Corrupt, ErrorKind::Limit, ErrorKind::Link, ErrorKind::OldBuild] {
        assert!(seen.contains(&kind), "no vector of kind {kind}");
    }
    // In this same test: the counters are global, and tests run in parallel.
    let peak = worst_case_tree_entries_peak();
    assert!(peak <= 120 << 20, "the most entries a patch may name cost {} MiB (FORMAT.md §2.7 says about 115)", peak >> 20);
}

#[test]
fn error_kind_names_are_stable_and_round_trip() {
    let names: Vec<&str> = ErrorKind::ALL.iter().map(|k| k.as_str()).collect();
    assert_eq!(names, ["magic", "version", "truncated", "corrupt", "limit", "path", "link", "digest", "unvouched", "old_build", "output", "io", "invalid"]);
    for k in ErrorKind::ALL {
        assert_eq!(ErrorKind::from_name(k.as_str()), Some(k));
    }
    assert_eq!(ErrorKind::from_name("nope"), None);
}

/// The tree's fixed budget at its worst: 2^20 named one-byte paths (a 4 MiB
/// tree section, a 411-byte patch), the most a patch may name. Not a
/// committed vector (nothing new to refuse); measured here because it sets
/// the tree's budget in FORMAT.md §2.7. Returns the peak allocation.
fn worst_case_tree_entries_peak() -> usize {
    let n = 1u64 << 20;
    let mut t = vec![0];
    put_varint(&mut t, n);
    for _ in 0..n {
        t.extend_from_slice(&[0, 1, b'a']);
    }
    t.extend(std::iter::repeat_n(0u8, n as usize));
    t.push(0);
    t.extend_from_slice(&[0u8; 32]);
    let patch = PatchBytes::new(&t).encode();
    drop(t);
    let base = counting_allocator::reset_peak();
    let kind = apply_kind(&patch);
    let peak = counting_allocator::peak() - base;
    println!("{n} named entries: patch {} bytes, refused as {kind:?}, peak allocation {} MiB", patch.len(), peak >> 20);
    assert_eq!(kind, Some(ErrorKind::Path), "the paths repeat");
    peak
}
