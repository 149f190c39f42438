//! Tests of the binary manifest (docs/FORMAT.md §4).

use edgepatch_core::manifest::{
    decode, EntryKind, EntrySource, Manifest, ManifestEntry, ManifestError, ManifestKind, ManifestView, SegmentRef, HEADER_LEN, MAX_ENTRIES, MAX_PATH_LEN,
    MAX_RECORD_LEN, MIN_RECORD_LEN, TRAILER_LEN,
};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use edgepatch_testkit::Rng;

// ------------------------------------------------------------ allocation probe

/// Records the largest single allocation made by the current thread, so tests
/// can check that hostile counts never cause a big allocation.
struct Probe;

thread_local! {
    static LARGEST_ALLOC: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    let _ = LARGEST_ALLOC.try_with(|m| {
        if size > m.get() {
            m.set(size)
        }
    });
}

unsafe impl GlobalAlloc for Probe {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        note(l.size());
        System.alloc(l)
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        note(l.size());
        System.alloc_zeroed(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        System.realloc(p, l, new_size)
    }
}

#[global_allocator]
static GLOBAL: Probe = Probe;

/// Largest single allocation made by this thread while running `f`.
fn largest_alloc_during<R>(f: impl FnOnce() -> R) -> (R, usize) {
    LARGEST_ALLOC.with(|m| m.set(0));
    let r = f();
    (r, LARGEST_ALLOC.with(|m| m.get()))
}

// ------------------------------------------------------------ helpers

fn hash_of(s: &str) -> [u8; 32] {
    *blake3::hash(s.as_bytes()).as_bytes()
}

fn file(path: &str, size: u64, source: EntrySource) -> ManifestEntry {
    ManifestEntry { path: path.into(), kind: EntryKind::File, executable: false, decoded: false, size, blake3: hash_of(path), symlink_target: None, source }
}

/// A patch manifest with every kind of entry and source.
fn sample_patch() -> Manifest {
    let mut exe = file("bin/game.wasm", 1_234_567, EntrySource::Delta { new_offset: 4096 });
    exe.executable = true;
    Manifest {
        kind: ManifestKind::Patch,
        from_build: Some("build-41".into()),
        to_build: "build-42".into(),
        patch_size: 99_999,
        patch_blake3: hash_of("patch"),
        head_blake3: None,
        segments: vec![
            SegmentRef { patch_offset: 200, patch_len: 50_000, new_offset: 0, new_len: 1_000_000 },
            SegmentRef { patch_offset: 50_200, patch_len: 49_000, new_offset: 1_000_000, new_len: 300_000 },
        ],
        entries: vec![
            ManifestEntry {
                path: "assets".into(),
                kind: EntryKind::Directory,
                executable: false,
                decoded: false,
                size: 0,
                blake3: [0; 32],
                symlink_target: None,
                source: EntrySource::None,
            },
            file("assets/data.json", 812, EntrySource::Unchanged),
            file("assets/moved/hero.png", 40_000, EntrySource::CopyOf { old_path: "assets/hero.png".into() }),
            exe,
            file("assets/empty.txt", 0, EntrySource::Unchanged),
            ManifestEntry {
                path: "latest".into(),
                kind: EntryKind::Symlink,
                executable: false,
                decoded: false,
                size: 13,
                blake3: hash_of("bin/game.wasm"),
                symlink_target: Some("bin/game.wasm".into()),
                source: EntrySource::None,
            },
            file("données/日本語/🎮 level.bin", 77, EntrySource::Delta { new_offset: 0 }),
        ],
    }
}

fn build_manifest(n: usize) -> Manifest {
    Manifest {
        kind: ManifestKind::Build,
        from_build: None,
        to_build: format!("build-with-{n}-files"),
        patch_size: 0,
        patch_blake3: [0; 32],
        head_blake3: None,
        segments: Vec::new(),
        entries: (0..n)
            .map(|i| {
                let p = format!("assets/level-{:03}/textures/tile_{:05}.png", i / 1000, i % 1000);
                file(&p, i as u64 * 7, EntrySource::None)
            })
            .collect(),
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}
fn set_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}
/// Rewrites the trailer so the checksum matches again (to reach the structural checks).
fn reseal(b: &mut [u8]) {
    let t = b.len() - TRAILER_LEN;
    let h = blake3::hash(&b[..t]);
    b[t..].copy_from_slice(h.as_bytes());
}

/// Exercises every read path of a possibly hostile manifest; must never panic.
fn poke(bytes: &[u8], paths: &[String]) {
    if let Ok(v) = ManifestView::open(bytes) {
        for p in paths {
            let _ = v.lookup(p);
        }
        let _ = v.lookup("no/such/path");
        for i in 0..v.len().min(64) {
            let _ = v.entry_at(i);
        }
        let _ = v.entry_at(v.len());
        let _ = v.segments();
        let _ = v.verify_checksum();
        let _ = (v.to_build(), v.from_build(), v.kind(), v.patch_size(), v.patch_blake3(), v.index_range());
    }
    let _ = decode(bytes);
}

// ------------------------------------------------------------ tests

#[test]
fn round_trip_patch_and_build() {
    for m in [sample_patch(), build_manifest(1), build_manifest(2), build_manifest(3), build_manifest(1000)] {
        let bytes = m.encode().unwrap();
        assert_eq!(decode(&bytes).unwrap(), m);
        let v = ManifestView::open(&bytes).unwrap();
        assert_eq!(v.len(), m.entries.len());
        assert_eq!(v.kind(), m.kind);
        assert_eq!(v.to_build(), m.to_build);
        assert_eq!(v.from_build(), m.from_build.as_deref());
        assert_eq!(v.patch_size(), m.patch_size);
        assert_eq!(v.patch_blake3(), m.patch_blake3);
        assert_eq!(v.segments().unwrap(), m.segments);
        let it: Vec<ManifestEntry> = v.entries().map(Result::unwrap).collect();
        assert_eq!(it, m.entries);
        v.verify_checksum().unwrap();
    }
}

#[test]
fn encoding_is_deterministic_and_stable() {
    let a = sample_patch().encode().unwrap();
    let b = sample_patch().encode().unwrap();
    assert_eq!(a, b);
    // Golden hash of the format-version-1 encoding of `sample_patch()`. If this
    // changes, the format changed: bump FORMAT_VERSION and docs/FORMAT.md §4.
    assert_eq!(blake3::hash(&a).to_hex().as_str(), GOLDEN_SAMPLE_PATCH, "manifest format changed; {} bytes", a.len());
}
const GOLDEN_SAMPLE_PATCH: &str = "ad7389415f223500120f643960311254581d44d3dfc51783cff9bb38ef809533";

/// The head BLAKE3 (header flags bit 1) is a field older decoders refuse by its flag: a
/// manifest without it encodes as before (the golden above), one with it as pinned here.
#[test]
fn a_head_blake3_is_the_flagged_field_after_the_build_ids() {
    let plain = sample_patch().encode().unwrap();
    let m = Manifest { head_blake3: Some(hash_of("head")), ..sample_patch() };
    let a = m.encode().unwrap();
    assert_eq!(a.len(), plain.len() + 32);
    assert_eq!(a[11], plain[11] | 2, "flags bit 1");
    let ids_end = 96 + 2 + "build-42".len() + 2 + "build-41".len();
    assert_eq!(&a[ids_end..ids_end + 32], &hash_of("head"));
    assert_eq!(decode(&a).unwrap(), m);
    assert_eq!(ManifestView::open(&a).unwrap().head_blake3(), Some(hash_of("head")));
    assert_eq!(ManifestView::open(&plain).unwrap().head_blake3(), None);
    assert_eq!(blake3::hash(&a).to_hex().as_str(), GOLDEN_SAMPLE_PATCH_WITH_HEAD, "manifest format changed; {} bytes", a.len());

    // Only patch manifests carry it: a build manifest with the flag is refused, and not written.
    let mut build = build_manifest(3).encode().unwrap();
    build[11] |= 2;
    assert!(ManifestView::open(&build).is_err());
    assert!(Manifest { head_blake3: Some([0; 32]), ..build_manifest(3) }.encode().is_err());
    // The flag set on a manifest written without the field: the sections are not where the
    // counts put them, refused on open.
    let mut flagged = plain.clone();
    flagged[11] |= 2;
    let err = ManifestView::open(&flagged).unwrap_err().to_string();
    assert!(err.contains("offset"), "{err}");
}
const GOLDEN_SAMPLE_PATCH_WITH_HEAD: &str = "be09f9bbc574e43f51a0b42a60efb6f64a1e7eb4986eaae381bef1c63d035baa";

#[test]
fn lookup_every_key_and_absent_keys() {
    let m = sample_patch();
    let bytes = m.encode().unwrap();
    let v = ManifestView::open(&bytes).unwrap();
    for e in &m.entries {
        assert_eq!(v.lookup(&e.path).unwrap().as_ref(), Some(e), "{}", e.path);
    }
    for absent in ["", "assets/", "/assets", "assets/data.jso", "assets/data.json ", "ASSETS", "latest/x", "assets/hero.png"] {
        assert_eq!(v.lookup(absent).unwrap(), None, "{absent:?}");
    }
}

#[test]
fn hundred_thousand_keys() {
    let m = build_manifest(100_000);
    let t = std::time::Instant::now();
    let bytes = m.encode().unwrap();
    let enc = t.elapsed();
    eprintln!("encoded 100,000 entries in {enc:?} ({} bytes)", bytes.len());
    assert!(enc.as_secs_f64() < 10.0, "encode took {enc:?}");
    let v = ManifestView::open(&bytes).unwrap();
    assert_eq!(v.len(), 100_000);
    for (i, e) in m.entries.iter().enumerate() {
        assert_eq!(v.lookup(&e.path).unwrap().as_ref(), Some(e));
        if i % 997 == 0 {
            assert_eq!(&v.entry_at(i).unwrap(), e);
        }
    }
    let mut rng = Rng::xorshift64_star(7);
    for _ in 0..10_000 {
        let p = format!("assets/level-{:03}/textures/tile_{:05}.png", rng.below(2000), 1000 + rng.below(1000));
        assert_eq!(v.lookup(&p).unwrap(), None);
    }
    assert_eq!(decode(&bytes).unwrap(), m);
    // Same input, same bytes.
    assert_eq!(m.encode().unwrap(), bytes);
}

#[test]
fn empty_manifest() {
    let m = build_manifest(0);
    let bytes = m.encode().unwrap();
    assert_eq!(bytes.len(), HEADER_LEN + 2 + m.to_build.len() + TRAILER_LEN);
    let v = ManifestView::open(&bytes).unwrap();
    assert!(v.is_empty());
    assert_eq!(v.lookup("anything").unwrap(), None);
    assert_eq!(v.lookup("").unwrap(), None);
    assert!(matches!(v.entry_at(0), Err(ManifestError::IndexOutOfRange { index: 0, len: 0 })));
    assert_eq!(decode(&bytes).unwrap(), m);

    let mut m2 = m.clone();
    m2.to_build = String::new();
    assert_eq!(decode(&m2.encode().unwrap()).unwrap(), m2);
}

#[test]
fn unicode_paths() {
    let names = [
        "données/été.txt",
        "日本語/テクスチャ/画像.png",
        "🎮/🕹️ save.dat",
        "Ελληνικά/файл.bin",
        "e\u{301}.txt", // NFD "é"
        "\u{e9}.txt",   // NFC "é": a different path (byte-exact matching)
        "tab\there",
    ];
    let m = Manifest { entries: names.iter().map(|p| file(p, 1, EntrySource::None)).collect(), ..build_manifest(0) };
    let bytes = m.encode().unwrap();
    let v = ManifestView::open(&bytes).unwrap();
    for e in &m.entries {
        assert_eq!(v.lookup(&e.path).unwrap().as_ref(), Some(e));
    }
    assert_eq!(v.lookup("données/e\u{301}te\u{301}.txt").unwrap(), None);
    assert_eq!(decode(&bytes).unwrap(), m);
}

#[test]
fn long_paths_up_to_the_limit() {
    let long = format!("{}/{}", "d".repeat(2000), "f".repeat(MAX_PATH_LEN - 2001));
    assert_eq!(long.len(), MAX_PATH_LEN);
    let mut e = file(&long, 5, EntrySource::CopyOf { old_path: long.clone() });
    e.path = long.clone();
    let m = Manifest { entries: vec![e.clone()], ..build_manifest(0) };
    let bytes = m.encode().unwrap();
    assert_eq!(ManifestView::open(&bytes).unwrap().lookup(&long).unwrap(), Some(e.clone()));

    // The largest record: path, symlink target and CopyOf source all at the limit.
    let biggest = ManifestEntry { kind: EntryKind::Symlink, symlink_target: Some("t".repeat(MAX_PATH_LEN)), ..e.clone() };
    let smallest = file("x", 0, EntrySource::None);
    for (entry, want) in [(biggest, MAX_RECORD_LEN), (smallest, MIN_RECORD_LEN)] {
        let m = Manifest { entries: vec![entry.clone()], ..build_manifest(0) };
        let bytes = m.encode().unwrap();
        let records = u32_at(&bytes, 44) as u64;
        assert_eq!(bytes.len() as u64 - TRAILER_LEN as u64 - records, want);
        assert_eq!(decode(&bytes).unwrap(), m);
    }
    assert_eq!(MAX_RECORD_LEN, 12_337);

    let mut too_long = e;
    too_long.path.push('x');
    let m = Manifest { entries: vec![too_long], ..build_manifest(0) };
    assert!(matches!(m.encode(), Err(ManifestError::Encode(_))));
}

#[test]
fn encode_rejects_bad_input() {
    let bad_paths = ["", "/abs", "a//b", "a/../b", "a/", "./a", "..", "a/.", "nul\0byte"];
    for p in bad_paths {
        let m = Manifest { entries: vec![file(p, 1, EntrySource::None)], ..build_manifest(0) };
        let err = m.encode().unwrap_err();
        assert!(matches!(err, ManifestError::Encode(_)), "{p:?}: {err}");
    }
    let mut dup = build_manifest(3);
    dup.entries.push(dup.entries[1].clone());
    assert!(dup.encode().unwrap_err().to_string().contains("duplicate path"));

    let mut m = build_manifest(1);
    m.entries[0].kind = EntryKind::Symlink;
    assert!(m.encode().unwrap_err().to_string().contains("symlink without a target"));
    m.entries[0].kind = EntryKind::File;
    m.entries[0].symlink_target = Some("x".into());
    assert!(m.encode().is_err());

    let mut m = build_manifest(1);
    m.entries[0].source = EntrySource::CopyOf { old_path: "../etc/passwd".into() };
    assert!(m.encode().is_err());
    m.entries[0].size = 1;
    m.entries[0].source = EntrySource::Delta { new_offset: u64::MAX };
    assert!(m.encode().is_err());

    let mut m = build_manifest(1);
    m.to_build = "x".repeat(1025);
    assert!(m.encode().is_err());
    let mut m = build_manifest(1);
    m.segments.push(SegmentRef { patch_offset: u64::MAX, patch_len: 1, new_offset: 0, new_len: 0 });
    assert!(m.encode().is_err());
}

#[test]
fn error_messages_say_what_and_where() {
    let bytes = sample_patch().encode().unwrap();
    let mut b = bytes.clone();
    b[0] = b'X';
    assert_eq!(ManifestView::open(&b).unwrap_err(), ManifestError::BadMagic);
    assert!(decode(&b).unwrap_err().to_string().contains("bad magic"));

    let mut b = bytes.clone();
    b[8..10].copy_from_slice(&3u16.to_le_bytes());
    assert_eq!(decode(&b).unwrap_err().to_string(), "unsupported manifest version 3 (this build reads version 1)");

    let e = decode(&bytes[..bytes.len() - 1]).unwrap_err().to_string();
    assert!(e.starts_with("manifest length mismatch: header says"), "{e}");
    let e = decode(&bytes[..20]).unwrap_err().to_string();
    assert!(e.starts_with("manifest truncated: header"), "{e}");

    // A record cut short (header length and checksum fixed up): names the record and byte.
    let mut b = bytes[..bytes.len() - 10].to_vec();
    let len = b.len() as u32;
    set_u32(&mut b, 12, len);
    reseal(&mut b);
    let e = decode(&b).unwrap_err().to_string();
    assert!(e.starts_with("manifest truncated: record 6 field"), "{e}");
    assert!(e.contains(" at byte ") && e.contains(" runs past end "), "{e}");

    let mut b = bytes.clone();
    let n = b.len();
    b[n - 40] ^= 1;
    assert!(decode(&b).unwrap_err().to_string().starts_with("manifest checksum mismatch"));
}

#[test]
fn lookup_reads_only_its_own_record() {
    let m = build_manifest(500);
    let mut bytes = m.encode().unwrap();
    let records = u32_at(&bytes, 44) as usize;
    let order = u32_at(&bytes, 36) as usize;
    let end = bytes.len() - TRAILER_LEN;
    let k = 321;
    let start = records + u32_at(&bytes, order + 4 * k) as usize;
    let stop = records + u32_at(&bytes, order + 4 * (k + 1)) as usize;
    // Destroy every other record and the checksum.
    for (i, byte) in bytes.iter_mut().enumerate() {
        if (records..start).contains(&i) || (stop..end).contains(&i) || i >= end {
            *byte = 0xFF;
        }
    }
    let v = ManifestView::open(&bytes).unwrap();
    assert_eq!(v.lookup(&m.entries[k].path).unwrap().as_ref(), Some(&m.entries[k]));
    assert!(v.lookup(&m.entries[k + 1].path).is_err());
    assert!(decode(&bytes).is_err());
}

#[test]
fn truncation_at_every_byte_is_an_error() {
    let m = sample_patch();
    let bytes = m.encode().unwrap();
    let paths: Vec<String> = m.entries.iter().map(|e| e.path.clone()).collect();
    for cut in 0..bytes.len() {
        let t = &bytes[..cut];
        assert!(ManifestView::open(t).is_err(), "open accepted a cut at {cut}");
        assert!(decode(t).is_err(), "decode accepted a cut at {cut}");
        poke(t, &paths);
        // Same cut, but with the header length and checksum made to agree, so
        // that the structural checks have to find it.
        if cut >= HEADER_LEN + TRAILER_LEN {
            let mut f = t.to_vec();
            set_u32(&mut f, 12, cut as u32);
            reseal(&mut f);
            assert!(decode(&f).is_err(), "decode accepted a resealed cut at {cut}");
            poke(&f, &paths);
        }
    }
}

#[test]
fn random_bit_flips_never_panic() {
    let m = sample_patch();
    let bytes = m.encode().unwrap();
    let paths: Vec<String> = m.entries.iter().map(|e| e.path.clone()).collect();
    let mut rng = Rng::xorshift64_star(0x5EED_1234_ABCD_0001);
    let mut decoded_after_reseal = 0;
    for round in 0..20_000 {
        let mut b = bytes.clone();
        let flips = 1 + rng.below(3);
        for _ in 0..flips {
            let i = rng.below(b.len());
            b[i] ^= 1 << rng.below(8);
        }
        if b == bytes {
            continue;
        }
        poke(&b, &paths);
        assert!(decode(&b).is_err(), "round {round}: decode accepted flipped bytes");
        // Reseal so the flips get past the checksum and hit the parser.
        if b.len() >= TRAILER_LEN {
            reseal(&mut b);
            poke(&b, &paths);
            if decode(&b).is_ok() {
                decoded_after_reseal += 1;
            }
        }
    }
    // Flips inside sizes, hashes and offsets still give well-formed manifests.
    eprintln!("{decoded_after_reseal} of 20000 resealed flips still decode");
}

#[test]
fn garbage_never_panics() {
    let m = sample_patch();
    let good = m.encode().unwrap();
    let paths: Vec<String> = m.entries.iter().map(|e| e.path.clone()).collect();
    let mut rng = Rng::xorshift64_star(42);
    for round in 0..5_000 {
        let len = rng.below(2 * good.len());
        let mut b = rng.bytes_from_bit(len, 0);
        // Half the time keep a plausible header prefix so the garbage gets further.
        if round % 2 == 0 {
            let keep = rng.below(HEADER_LEN + 40).min(b.len());
            b[..keep].copy_from_slice(&good[..keep]);
            if b.len() >= 16 {
                let l = b.len() as u32;
                set_u32(&mut b, 12, l);
            }
            if b.len() >= HEADER_LEN + TRAILER_LEN {
                reseal(&mut b);
            }
        }
        poke(&b, &paths);
    }
    for b in [&b""[..], b"EPMANIF\0", b"EPMANIF\0\x01", b"EPMANIF\0\x01\x00"] {
        assert!(decode(b).is_err());
    }
}

#[test]
fn huge_counts_are_rejected_without_huge_allocation() {
    let m = sample_patch();
    let bytes = m.encode().unwrap();
    let to_len = m.to_build.len() + m.from_build.as_ref().unwrap().len() + 4;
    let ids_end = (HEADER_LEN + to_len) as u64;

    let mut cases: Vec<(&str, Vec<u8>)> = Vec::new();
    for (name, at, v) in [
        ("entry count u32::MAX", 16, u32::MAX),
        ("entry count MAX_ENTRIES", 16, MAX_ENTRIES),
        ("bucket count u32::MAX", 20, u32::MAX),
        ("segment count u32::MAX", 24, u32::MAX),
        ("segment count 1<<24", 24, 1 << 24),
        ("total length u32::MAX", 12, u32::MAX),
    ] {
        let mut b = bytes.clone();
        set_u32(&mut b, at, v);
        cases.push((name, b));
    }
    // Huge counts with every header offset made consistent with them, so only
    // the comparison against the bytes present can reject them.
    for (n, nb, s) in [(MAX_ENTRIES, MAX_ENTRIES, 0u32), (1_000_000, 1, 0), (100, 50, 0), (7, 4, 1 << 20), (40, 20, 2)] {
        let mut b = bytes.clone();
        set_u32(&mut b, 16, n);
        set_u32(&mut b, 20, nb);
        set_u32(&mut b, 24, s);
        let pil = ids_end;
        let slots = pil + 4 * nb as u64;
        let order = slots + 4 * n as u64;
        let segs = order + 4 * n as u64;
        let recs = segs + 32 * s as u64;
        for (at, off) in [(28, pil), (32, slots), (36, order), (40, segs), (44, recs)] {
            set_u32(&mut b, at, off.min(u32::MAX as u64) as u32);
        }
        reseal(&mut b);
        cases.push(("consistent huge counts", b));
    }
    for (name, b) in &cases {
        let (r, largest) = largest_alloc_during(|| {
            let r = decode(b).map(|_| ());
            poke(b, &[]);
            r
        });
        assert!(r.is_err(), "{name}: accepted");
        assert!(largest < 64 * 1024, "{name}: allocated {largest} bytes at once for a {}-byte manifest", b.len());
        eprintln!("{name}: {}", r.unwrap_err());
    }
}

#[test]
fn decode_checks_the_index() {
    // Two slot-table entries swapped: every record still parses, but paths no
    // longer lead to their records.
    let m = build_manifest(50);
    let mut b = m.encode().unwrap();
    let slots = u32_at(&b, 32) as usize;
    let (x, y) = (u32_at(&b, slots), u32_at(&b, slots + 4));
    set_u32(&mut b, slots, y);
    set_u32(&mut b, slots + 4, x);
    reseal(&mut b);
    let e = decode(&b).unwrap_err().to_string();
    assert!(e.contains("index slot"), "{e}");
    // Lookup of a key whose slot now points at another record: not found (paths compared), no false hit.
    let v = ManifestView::open(&b).unwrap();
    let mut misses = 0;
    for e in &m.entries {
        match v.lookup(&e.path).unwrap() {
            Some(found) => assert_eq!(&found, e),
            None => misses += 1,
        }
    }
    assert_eq!(misses, 2);
}

/// A file stored decoded (record flags bit 1) keeps its name, `.gz` or `.br`, which names the
/// coding it shipped in; the flag on any other entry is refused by the encoder and the decoder.
#[test]
fn a_file_stored_decoded_is_named_by_its_coding() {
    use edgepatch_core::manifest::{coding_of_path, Coding};
    assert_eq!(coding_of_path("Build/game.data.gz"), Some(Coding::Gzip));
    assert_eq!(coding_of_path("Build/game.wasm.br"), Some(Coding::Brotli));
    assert_eq!(coding_of_path("Build/game.wasm"), None);
    let entry = |path: &str| ManifestEntry { decoded: true, ..file(path, 1000, EntrySource::Delta { new_offset: 0 }) };
    let m = Manifest { entries: vec![entry("Build/game.data.gz"), entry("Build/game.wasm.br")], ..build_manifest(0) };
    let bytes = m.encode().unwrap();
    let back = decode(&bytes).unwrap();
    assert!(back.entries.iter().all(|e| e.decoded));
    assert_eq!(back, m);

    let plain = Manifest { entries: vec![entry("Build/game.wasm")], ..build_manifest(0) };
    assert!(plain.encode().is_err());
    // The same record written without the flag, the flag then set (and the trailer recomputed).
    let mut bytes = Manifest { entries: vec![file("Build/game.wasm", 1000, EntrySource::Delta { new_offset: 0 })], ..build_manifest(0) }.encode().unwrap();
    let v = ManifestView::open(&bytes).unwrap();
    let flags_at = v.index_range().end + 4 + 2 + "Build/game.wasm".len() + 1;
    assert_eq!(bytes[flags_at], 0);
    bytes[flags_at] = 2;
    let n = bytes.len() - 32;
    let sum = blake3::hash(&bytes[..n]);
    bytes[n..].copy_from_slice(sum.as_bytes());
    let err = decode(&bytes).unwrap_err().to_string();
    assert!(err.contains("stored decoded"), "{err}");
}
