//! Hostile patches: garbage, tree bombs, zstd frames, ops and run-coded diffs,
//! LZMA segments, window reach, links and the old build.

use edgepatch_core::error::ErrorKind;
use edgepatch_testkit::{leb128, Rng};

use super::encoding::*;
use super::{apply_kind, patch_vector, Vector};

/// Appends the patch vectors.
pub fn push(v: &mut Vec<Vector>) {
    let valid = small_valid_patch();

    v.push(patch_vector("garbage", "random bytes, not a patch", ErrorKind::Magic, Rng::xorshift64(0x9E37_79B9_7F4A_7C15).bytes_from_bit(600, 0)));
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
        leb128::write_u64(&mut t, n + 1);
        leb128::write_u64(&mut t, 0);
        leb128::write_u64(&mut t, 4096);
        t.extend(std::iter::repeat_n(b'a', 4096));
        for _ in 0..n {
            leb128::write_u64(&mut t, 4095);
            leb128::write_u64(&mut t, 1);
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
        leb128::write_u64(&mut t, 1 << 20);
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
        leb128::write_u64(&mut ctrl, 1 << 24);
        ctrl.extend_from_slice(&[2, 0, 1]);
        p.body = ops_segment(1, &ctrl, &[], &[7]);
        (p.segments, p.delta) = (1, 1);
        v.push(patch_vector("ops-count-bomb", "a control stream of 7 bytes claiming 2^24 ops", ErrorKind::Limit, p.encode()));
    }
    {
        let mut p = PatchBytes::new(&delta_files_tree(&[16 << 20]));
        let mut s = vec![b'S'];
        for f in [(16 << 20) + 1u64, 3, 12, 0, 0, (16 << 20) + 1, 100] {
            leb128::write_u64(&mut s, f);
        }
        p.body = s;
        (p.segments, p.delta) = (1, 16 << 20);
        v.push(patch_vector("segment-over-cap", "a segment declaring 16 MiB + 1 of output (the cap is 16 MiB)", ErrorKind::Limit, p.encode()));
    }
    {
        let mut p = PatchBytes::new(&delta_files_tree(&[4]));
        let mut s = vec![b'S'];
        for f in [4u64, (32 << 20) + 1, 100, 0, 0, 4, 20] {
            leb128::write_u64(&mut s, f);
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
        leb128::write_u64(&mut s, 4);
        leb128::write_u64(&mut s, 1);
        leb128::write_u64(&mut s, u64::MAX - 1);
        leb128::write_u64(&mut s, 4);
        leb128::write_u64(&mut s, 0);
        let frame = zstd(b"abcd");
        leb128::write_u64(&mut s, frame.len() as u64);
        s.extend_from_slice(&frame);
        p.body = s;
        (p.segments, p.delta) = (1, 4);
        v.push(patch_vector("window-span-overflow", "a window span at offset u64::MAX - 1: start + length wraps", ErrorKind::Corrupt, p.encode()));
    }

    // LZMA window segments (§2.6, flags bit 6): 4 new bytes, no spans, no back bytes.
    let lzma_segment = |props: u8, data: &[u8]| {
        let mut s = vec![b'L'];
        leb128::write_u64(&mut s, 4);
        leb128::write_u64(&mut s, 0);
        leb128::write_u64(&mut s, 0);
        s.push(props);
        leb128::write_u64(&mut s, data.len() as u64);
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
            leb128::write_u64(&mut s, v);
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
            leb128::write_u64(&mut s, v);
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
        leb128::write_u64(&mut s, 4);
        leb128::write_u64(&mut s, 0);
        leb128::write_u64(&mut s, back);
        let frame = zstd(b"abcd");
        leb128::write_u64(&mut s, frame.len() as u64);
        s.extend_from_slice(&frame);
        s
    };
    // A tree of one 4-byte delta file, its reach declared (None: the field left out).
    let declaring = |reach: Option<u64>, body: Vec<u8>| {
        let mut tree = delta_files_tree(&[4]);
        if let Some(r) = reach {
            leb128::write_u64(&mut tree, r);
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
    push_rules(v, &valid);
}

/// One vector each for reject rules of docs/FORMAT.md §2.7 the vectors above leave out:
/// the header, the tree's rules, the ops' use of their streams and the patch's end.
fn push_rules(v: &mut Vec<Vector>, valid: &[u8]) {
    let dir = || PatchBytes::new(&links_tree(&[("d", None)]));

    // The header.
    let mut p = dir();
    p.flags = 128;
    v.push(patch_vector("unknown-flag", "header flag bit 7, which no version-2 patch has", ErrorKind::Corrupt, p.encode()));
    let mut bytes = dir().encode();
    bytes[8] = 3;
    let n = bytes.len() - 32;
    let sum = blake3::hash(&bytes[..n]);
    bytes[n..].copy_from_slice(sum.as_bytes());
    v.push(patch_vector("unknown-version", "a patch of version 3 (only 2 exists)", ErrorKind::Version, bytes));
    let mut p = dir();
    let raw = p.tree.len() as u64;
    p.tree_sizes = Some((raw, raw + raw / 64 + 1025));
    v.push(patch_vector("tree-compressed-size-over", "a tree compressed size of tree size + tree size/64 + 1025", ErrorKind::Corrupt, p.encode()));
    let mut p = dir();
    let frame = zstd(&p.tree);
    p.tree_sizes = Some((raw + 1, frame.len() as u64));
    p.tree_frame = Some(frame);
    v.push(patch_vector(
        "tree-frame-size-mismatch",
        "a tree section frame that decompresses to one byte fewer than the header says",
        ErrorKind::Corrupt,
        p.encode(),
    ));

    // The tree's rules (§1, §2.1).
    let path_vector =
        |name, attacks, entries: &[(&str, Option<&str>)]| patch_vector(name, attacks, ErrorKind::Path, PatchBytes::new(&links_tree(entries)).encode());
    v.push(path_vector("tree-path-dot-dot", "a named entry whose path is `..`", &[("..", None)]));
    v.push(path_vector("tree-order", "named entries out of order (`b` before `a`)", &[("b", None), ("a", None)]));
    v.push(path_vector("tree-parent-not-listed", "an entry `a/b` whose parent `a` is not listed", &[("a/b", None)]));
    // A tree section after the digest: `head`, then no old files and a files digest of zeros.
    let tree = |head: &[u8]| PatchBytes::new(&[head, &[0u8; 33][..]].concat()).encode();
    // Path `é`, then a path sharing its first byte: half the character.
    let split_char = [0, 2, 0, 2, 0xC3, 0xA9, 1, 1, b'x', 0, 0];
    v.push(patch_vector(
        "tree-front-coding-split-char",
        "a front-coded path sharing half of the previous path's 2-byte character",
        ErrorKind::Corrupt,
        tree(&split_char),
    ));
    v.push(patch_vector("tree-entry-code", "a named entry of code 6 (codes are 0 to 5)", ErrorKind::Corrupt, tree(&[0, 1, 0, 1, b'f', 6])));
    v.push(patch_vector(
        "tree-copy-index",
        "a file copied from old file 0 in a patch whose old table is empty",
        ErrorKind::Corrupt,
        tree(&[0, 1, 0, 1, b'f', 4, 0]),
    ));
    v.push(patch_vector("tree-run-beyond-listing", "a run keeping one entry of the empty old listing", ErrorKind::Corrupt, tree(&[1, 1, 0, 0])));
    let mut head = Vec::new();
    leb128::write_u64(&mut head, 1000);
    head.push(0);
    v.push(patch_vector("run-count-bomb", "a run count of 1000 in a tree with 34 bytes left", ErrorKind::Limit, tree(&head)));
    let mut head = vec![1];
    leb128::write_u64(&mut head, (1 << 22) + 1);
    head.extend_from_slice(&[0, 0]);
    v.push(patch_vector("run-length-over-cap", "a run keeping 2^22 + 1 entries", ErrorKind::Limit, tree(&head)));

    // Ops that leave bytes of their segment unused.
    let mut p = PatchBytes::new(&delta_files_tree(&[2]));
    p.body = ops_segment(2, &control(&[(2, 0, 1)]), &[], &[7, 8]);
    (p.segments, p.delta) = (1, 2);
    v.push(patch_vector("ops-extra-unused", "a segment of 2 extra bytes whose one op adds 1", ErrorKind::Corrupt, p.encode()));
    let mut p = PatchBytes::new(&delta_files_tree(&[1]));
    p.body = ops_segment(1, &[control(&[(2, 0, 1)]), vec![0]].concat(), &[], &[7]);
    (p.segments, p.delta) = (1, 1);
    v.push(patch_vector("ops-control-trailing", "a control stream with a byte after its last op", ErrorKind::Corrupt, p.encode()));

    // Compressed sizes out of range, refused from the segment header.
    let mut p = PatchBytes::new(&delta_files_tree(&[1]));
    p.body = vec![b'S', 1, 3, 0, 0, 0, 1, 1];
    (p.segments, p.delta) = (1, 1);
    v.push(patch_vector(
        "ops-stream-compressed-size-zero",
        "an ops segment whose 3-byte control stream claims 0 compressed bytes",
        ErrorKind::Corrupt,
        p.encode(),
    ));
    let mut p = PatchBytes::new(&delta_files_tree(&[4]));
    p.body = vec![b'W', 4, 0, 0, 0];
    (p.segments, p.delta) = (1, 4);
    v.push(patch_vector("window-compressed-size-zero", "a window segment of 4 bytes whose frame claims 0 compressed bytes", ErrorKind::Corrupt, p.encode()));

    // The end of the patch.
    let mut p = dir();
    p.segments = 1;
    v.push(patch_vector("end-marker-count", "an end marker counting one segment where none was read", ErrorKind::Corrupt, p.encode()));
    let mut bytes = valid.to_vec();
    *bytes.last_mut().unwrap() ^= 1;
    v.push(patch_vector("checksum-mismatch", "a valid patch with one bit of its checksum flipped", ErrorKind::Corrupt, bytes));
    let mut p = PatchBytes::new(&delta_files_tree(&[1]));
    p.body = ops_segment(1, &control(&[(2, 0, 1)]), &[], &[7]);
    (p.segments, p.delta) = (1, 1);
    v.push(patch_vector("files-digest-mismatch", "a one-byte file produced whole, under a files digest of zeros", ErrorKind::Digest, p.encode()));
}
