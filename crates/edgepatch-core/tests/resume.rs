//! Resuming an interrupted apply (`PatchApplier::resume`) at every segment
//! boundary, and after an output failure in the middle of a segment, gives the
//! same build as an uninterrupted apply, without pushing the patch bytes before
//! the resume point again.

use std::io;

mod fixture_builds;

use edgepatch_testkit::noise;
use fixture_builds::file;

use edgepatch_core::inspect::inspect_patch;
use edgepatch_core::memory::{MemoryOldBuild, MemorySink};
use edgepatch_core::{diff_builds, Build, BuildSink, DiffOptions, PatchApplier, ResumePoint};

/// Text-like bytes: words from a small vocabulary (compresses like source code or JSON).
fn words(seed: u64, len: usize) -> Vec<u8> {
    const VOCAB: [&str; 16] = [
        "player ",
        "score ",
        "level ",
        "{\"id\": ",
        "sprite ",
        "0x1f, ",
        "return ",
        "shader\n",
        "texture ",
        "};\n",
        "audio ",
        "frame ",
        "mesh ",
        "if (x) ",
        "tile ",
        "const ",
    ];
    let mut out = Vec::with_capacity(len + 16);
    for r in noise(seed, len) {
        if out.len() >= len {
            break;
        }
        out.extend_from_slice(VOCAB[(r & 15) as usize].as_bytes());
    }
    out.truncate(len);
    out
}

/// `data` with a short insertion at irregular places (every 100-500 bytes):
/// many short matches with an incompressible control stream, so the diff
/// picks window segments.
fn edited(data: &[u8], seed: u64) -> Vec<u8> {
    let r = noise(seed, data.len() / 50);
    let (mut out, mut at, mut k) = (Vec::with_capacity(data.len() * 11 / 10), 0, 0);
    while at < data.len() {
        let gap = (100 + (usize::from(r[k]) << 8 | usize::from(r[k + 1])) % 400).min(data.len() - at);
        out.extend_from_slice(&data[at..at + gap]);
        out.extend_from_slice(&words(u64::from(r[k + 2]) + 7, 3 + usize::from(r[k + 3] % 9)));
        (at, k) = (at + gap, k + 4);
    }
    out
}

/// Several segments, files that span segment boundaries, an empty file at a
/// boundary, window segments that reach back into earlier output (repeated
/// new content), and a copied file.
fn pair() -> (Build, Build) {
    let a = noise(1, 5 << 20);
    let mut a2 = a.clone();
    for i in (0..a2.len()).step_by(4099) {
        a2[i] ^= 0x5a;
    }
    let b = noise(2, 3 << 20);
    let repeated = [&b[..1 << 20], &b[..1 << 20]].concat();
    let text = words(5, 6 << 20);
    let old = Build::from_entries(vec![file("a.bin", a), file("b.bin", b.clone()), file("same.txt", b"same".to_vec()), file("t.txt", text.clone())]).unwrap();
    let new = Build::from_entries(vec![
        file("a.bin", a2),
        file("b.bin", [b.as_slice(), &noise(3, 1 << 20)].concat()),
        file("c-empty", vec![]),
        file("d.bin", repeated),
        file("e.bin", noise(4, 2 << 20)),
        file("renamed.txt", b"same".to_vec()),
        file("t.txt", edited(&text, 6)),
    ])
    .unwrap();
    (old, new)
}

fn header_and_tree(patch: &[u8]) -> &[u8] {
    let info = inspect_patch(patch).unwrap();
    &patch[..info.layout.segment_spans[0].0 as usize]
}

/// Pushes `patch` in 256-byte chunks (smaller than a segment: a run-coded segment of a
/// sparse diff can be under 1 KB) until `stop` says so or a push fails; returns the resume point then.
fn push_until(
    a: &mut PatchApplier,
    patch: &[u8],
    from: usize,
    old: &mut MemoryOldBuild,
    sink: &mut impl BuildSink,
    stop: impl Fn(Option<ResumePoint>) -> bool,
) -> Option<ResumePoint> {
    for chunk in patch[from..].chunks(256) {
        if a.push(chunk, old, sink).is_err() || stop(a.resume_point()) {
            break;
        }
    }
    a.resume_point()
}

#[test]
fn resume_at_every_segment_boundary_gives_the_same_build() {
    let (old, new) = pair();
    let (patch, _) = diff_builds(&old, &new, &DiffOptions { level: 3, threads: 2, ..DiffOptions::default() }, &|_, _| {}).unwrap();
    let info = inspect_patch(patch.as_slice()).unwrap();
    let segments = info.layout.segments.len() as u64;
    assert!(segments >= 4, "{segments} segments");
    for k in 1..=segments {
        let mut sink = MemorySink::default();
        let mut oldb = MemoryOldBuild::new(&old);
        let mut a = PatchApplier::new();
        let point = push_until(&mut a, &patch, 0, &mut oldb, &mut sink, |p| p.is_some_and(|p| p.segments_done == k)).unwrap();
        assert_eq!(point.segments_done, k);
        assert_eq!(point.patch_offset, info.layout.segment_spans[k as usize - 1].0 + info.layout.segment_spans[k as usize - 1].1);
        drop(a);
        let mut b = PatchApplier::resume(header_and_tree(&patch), point, &mut oldb, &mut sink).unwrap();
        assert_eq!(b.progress().new_bytes_written, point.new_offset + 4, "delta bytes plus the copied file");
        b.push(&patch[point.patch_offset as usize..], &mut oldb, &mut sink).unwrap();
        b.finish().unwrap();
        assert_eq!(sink.into_build(), new, "resumed after segment {k}");
    }
}

/// A sink that fails once after `fail_after` writes (a crash or a full disk).
struct FailingSink {
    inner: MemorySink,
    writes: usize,
    fail_after: usize,
}

impl BuildSink for FailingSink {
    fn create_directory(&mut self, p: &str) -> io::Result<()> {
        self.inner.create_directory(p)
    }
    fn create_symlink(&mut self, p: &str, t: &str) -> io::Result<()> {
        self.inner.create_symlink(p, t)
    }
    fn begin_file(&mut self, p: &str, x: bool, s: u64) -> io::Result<()> {
        self.inner.begin_file(p, x, s)
    }
    fn write_file(&mut self, d: &[u8]) -> io::Result<()> {
        self.writes += 1;
        if self.writes == self.fail_after {
            // Half of this chunk reaches the file: more than the resume point knows about.
            self.inner.write_file(&d[..d.len() / 2])?;
            return Err(io::Error::other("disk full"));
        }
        self.inner.write_file(d)
    }
    fn finish_file(&mut self) -> io::Result<()> {
        self.inner.finish_file()
    }
    fn resume_file(&mut self, p: &str, x: bool, s: u64, w: u64) -> io::Result<()> {
        self.inner.resume_file(p, x, s, w)
    }
    fn read_written(&mut self, p: &str, o: u64, b: &mut [u8]) -> io::Result<()> {
        self.inner.read_written(p, o, b)
    }
}

#[test]
fn resume_after_a_failure_inside_a_segment() {
    let (old, new) = pair();
    let (patch, _) = diff_builds(&old, &new, &DiffOptions { level: 3, threads: 2, ..DiffOptions::default() }, &|_, _| {}).unwrap();
    for fail_after in [20, 37, 55] {
        let mut sink = FailingSink { inner: MemorySink::default(), writes: 0, fail_after };
        let mut oldb = MemoryOldBuild::new(&old);
        let mut a = PatchApplier::new();
        let point = push_until(&mut a, &patch, 0, &mut oldb, &mut sink, |_| false).expect("a segment completed before the failure");
        let mut b = PatchApplier::resume(header_and_tree(&patch), point, &mut oldb, &mut sink).unwrap();
        b.push(&patch[point.patch_offset as usize..], &mut oldb, &mut sink).unwrap();
        b.finish().unwrap();
        assert_eq!(sink.inner.into_build(), new, "failed at write {fail_after}, resumed at {point:?}");
    }
}

#[test]
fn resume_refuses_points_and_headers_that_do_not_fit() {
    let (old, new) = pair();
    let (patch, _) = diff_builds(&old, &new, &DiffOptions { level: 3, threads: 2, ..DiffOptions::default() }, &|_, _| {}).unwrap();
    let head = header_and_tree(&patch);
    let mut oldb = MemoryOldBuild::new(&old);
    let mut sink = MemorySink::default();
    let total = patch.len() as u64;
    for point in [
        ResumePoint { segments_done: 0, patch_offset: head.len() as u64, new_offset: 1 },
        ResumePoint { segments_done: 1, patch_offset: head.len() as u64, new_offset: 0 },
        ResumePoint { segments_done: 1, patch_offset: 1, new_offset: 4 << 20 },
        ResumePoint { segments_done: 1, patch_offset: total, new_offset: 1 << 40 },
    ] {
        let err = PatchApplier::resume(head, point, &mut oldb, &mut sink).err().expect("refused");
        assert!(err.to_string().contains("cannot resume"), "{err}");
    }
    let err = PatchApplier::resume(&head[..head.len() - 1], ResumePoint { segments_done: 1, patch_offset: total, new_offset: 1 }, &mut oldb, &mut sink)
        .err()
        .unwrap();
    assert!(err.to_string().contains("truncated"), "{err}");
    // A resume point that lies (wrong new_offset for the patch offset) is caught by the file hashes or the segment checks.
    let mut good = MemorySink::default();
    let mut a = PatchApplier::new();
    let point = push_until(&mut a, &patch, 0, &mut oldb, &mut good, |p| p.is_some_and(|p| p.segments_done == 2)).unwrap();
    let lie = ResumePoint { new_offset: point.new_offset - 1000, ..point };
    let mut b = PatchApplier::resume(head, lie, &mut oldb, &mut good).unwrap();
    let result = b.push(&patch[point.patch_offset as usize..], &mut oldb, &mut good).and_then(|_| b.finish().map(|_| ()));
    assert!(result.is_err(), "a lying resume point must not produce a build");
}
