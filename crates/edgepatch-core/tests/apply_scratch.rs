//! The applier's scratch space (`BuildSink::write_scratch`): the old module of a wasm file in
//! the field-split layout (docs/FORMAT.md §2.8.7), split as it is read, and the normalized form
//! of each transformed file go to the sink's scratch space instead of being held in memory; the
//! inverse reads the normalized form back holding only the sections it rewrites.
//! Measured with a counting allocator (this binary's own), so the memory test runs alone in it;
//! a scratch space that fails or gives back other bytes fails the apply, and nothing it gives
//! back makes a wrong file final.

mod counting_allocator;
mod fixture_builds;
mod wasm_modules;

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::PathBuf;

use counting_allocator::{peak, reset_peak, Counting};
use edgepatch_core::error::ErrorKind;
use edgepatch_core::inspect::inspect_patch;
use edgepatch_core::memory::MemoryOldBuild;
use edgepatch_core::{apply_patch, diff_builds, Build, BuildSink, DiffOptions, PatchApplier};
use fixture_builds::file;

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Scratch space in a file of its own (not counted: only the applier's memory is), removed when dropped.
struct ScratchFile {
    path: PathBuf,
    file: File,
}

impl ScratchFile {
    fn new() -> Self {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("edgepatch-apply-scratch-test-{}-{n}", std::process::id()));
        let file = File::options().read(true).write(true).create_new(true).open(&path).unwrap();
        ScratchFile { path, file }
    }
}

impl Drop for ScratchFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// A sink that keeps only each file's BLAKE3 (the output costs no memory), with scratch space
/// in a file or none.
#[derive(Default)]
struct HashingSink {
    files: Vec<(String, blake3::Hash)>,
    current: Option<(String, blake3::Hasher)>,
    /// None: no scratch space (`write_scratch` says so).
    scratch: Option<ScratchFile>,
    /// Times each scratch byte range was written, in bytes.
    scratch_written: u64,
    /// Flips the first byte read back from the scratch space (a damaged scratch file).
    damage_reads: bool,
    /// Fails every write to the scratch space (a full disk).
    fail_writes: bool,
}

impl HashingSink {
    fn with_scratch() -> Self {
        HashingSink { scratch: Some(ScratchFile::new()), ..Self::default() }
    }
}

impl BuildSink for HashingSink {
    fn create_directory(&mut self, _: &str) -> io::Result<()> {
        Ok(())
    }
    fn create_symlink(&mut self, _: &str, _: &str) -> io::Result<()> {
        Ok(())
    }
    fn begin_file(&mut self, path: &str, _: bool, _: u64) -> io::Result<()> {
        self.current = Some((path.to_string(), blake3::Hasher::new()));
        Ok(())
    }
    fn write_file(&mut self, data: &[u8]) -> io::Result<()> {
        self.current.as_mut().expect("a file is open").1.update(data);
        Ok(())
    }
    fn finish_file(&mut self) -> io::Result<()> {
        let (path, hasher) = self.current.take().expect("a file is open");
        self.files.push((path, hasher.finalize()));
        Ok(())
    }
    fn write_scratch(&mut self, offset: u64, data: &[u8]) -> io::Result<bool> {
        if self.fail_writes {
            return Err(io::Error::other("no space left on the scratch device"));
        }
        let Some(scratch) = &mut self.scratch else { return Ok(false) };
        scratch.file.seek(SeekFrom::Start(offset))?;
        scratch.file.write_all(data)?;
        self.scratch_written += data.len() as u64;
        Ok(true)
    }
    fn read_scratch(&mut self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let scratch = self.scratch.as_mut().expect("read only after a write");
        scratch.file.seek(SeekFrom::Start(offset))?;
        scratch.file.read_exact(buf)?;
        if self.damage_reads {
            buf[0] ^= 0x55;
        }
        Ok(())
    }
}

fn diff(old: &Build, new: &Build, segment_size: u64) -> Vec<u8> {
    let opts = DiffOptions { level: 9, threads: 2, segment_size, wasm_transform: true, ..DiffOptions::default() };
    diff_builds(old, new, &opts, &|_, _| {}).unwrap().0
}

fn hashes(build: &Build) -> Vec<(String, blake3::Hash)> {
    build.files().map(|(p, d)| (p.to_string(), blake3::hash(d))).collect()
}

/// Applies `patch` to `old` into `sink`; the most the applier held at once, in bytes.
fn apply_measured(patch: &[u8], old: &Build, sink: &mut HashingSink) -> edgepatch_core::Result<usize> {
    let mut old = MemoryOldBuild::new(old);
    let before = reset_peak();
    apply_patch(patch, &mut old, &mut *sink, &mut |_| {})?;
    Ok(peak() - before)
}

/// `PatchTree::scratch_bytes` as an applier knows it from the patch's bytes before its first
/// segment (the sink is never written to).
fn scratch_bytes_before_segments(patch: &[u8], old: &Build) -> u64 {
    let header_end = inspect_patch(patch).unwrap().layout.segment_spans[0].0 as usize;
    let (mut old, mut sink) = (MemoryOldBuild::new(old), HashingSink::with_scratch());
    let mut applier = PatchApplier::new();
    applier.push(&patch[..header_end], &mut old, &mut sink).unwrap();
    assert_eq!(sink.scratch_written, 0);
    applier.tree().expect("the tree is read").scratch_bytes()
}

/// One test, so that nothing else allocates while it measures.
#[test]
fn split_old_modules_go_to_the_scratch_space_and_are_checked_like_any_bytes() {
    // Re-emitted code: stored in the field-split layout. About 5 MB per module: larger than
    // what the segments' buffers hold whatever the file (4 MiB of history, a window).
    let (v1, v2) = wasm_modules::recompiled_versions(24_000);
    let (old, new) = (Build::single_file(v1.clone()), Build::single_file(v2.clone()));
    let patch = diff(&old, &new, 4 << 20);
    let info = inspect_patch(&patch[..]).unwrap();
    assert!(edgepatch_core::wasm_transform::side_info_has_code_layout(&info.tree.transforms[0].side_info), "the split layout");

    let mut in_memory = HashingSink::default();
    let held_in_memory = apply_measured(&patch, &old, &mut in_memory).unwrap();
    let mut scratch = HashingSink::with_scratch();
    let held_with_scratch = apply_measured(&patch, &old, &mut scratch).unwrap();
    println!("module {} bytes: applier held {held_in_memory} bytes without scratch space, {held_with_scratch} with it", v1.len());
    assert_eq!(in_memory.files, hashes(&new));
    assert_eq!(scratch.files, hashes(&new));
    // The old module split and the normalized form went to the scratch space whole, once each.
    assert_eq!(scratch.scratch_written, v1.len() as u64 + info.tree.delta_bytes());
    // And the applier says so once the header and tree are pushed, before the first segment
    // (what a caller checks room for).
    assert_eq!(scratch_bytes_before_segments(&patch, &old), scratch.scratch_written);
    // Neither is held: the scratch space saves the applier both (twice the module; what it
    // holds besides is the segments' buffers, the same either way).
    assert!(held_with_scratch + 2 * v1.len() * 95 / 100 <= held_in_memory, "{held_with_scratch} with scratch space, {held_in_memory} without");

    // Three split modules in a tree, segments small enough to alternate between them: each old
    // module is split and written once, however often its segments read it.
    let (a1, a2) = wasm_modules::recompiled_versions(500);
    let (b1, b2) = wasm_modules::recompiled_versions(300);
    let (c1, c2) = wasm_modules::recompiled_versions(400);
    let old_tree = Build::from_entries(vec![file("a.wasm", a1.clone()), file("b.wasm", b1.clone()), file("c.wasm", c1.clone())]).unwrap();
    let new_tree = Build::from_entries(vec![file("a.wasm", a2), file("b.wasm", b2), file("c.wasm", c2)]).unwrap();
    let tree_patch = diff(&old_tree, &new_tree, 16 << 10);
    let mut sink = HashingSink::with_scratch();
    apply_measured(&tree_patch, &old_tree, &mut sink).unwrap();
    let mut got = sink.files.clone();
    got.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(got, hashes(&new_tree));
    let tree_info = inspect_patch(&tree_patch[..]).unwrap();
    assert_eq!(tree_info.tree.transforms.len(), 3);
    assert_eq!(
        sink.scratch_written,
        (a1.len() + b1.len() + c1.len()) as u64 + tree_info.tree.delta_bytes(),
        "each old module and normalized form written once"
    );
    assert_eq!(scratch_bytes_before_segments(&tree_patch, &old_tree), sink.scratch_written);

    // A scratch space that fails: the apply fails as an output error, naming the scratch space.
    let mut failing = HashingSink { fail_writes: true, ..HashingSink::with_scratch() };
    let err = apply_measured(&patch, &old, &mut failing).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Output, "{err}");
    assert!(err.to_string().contains("scratch space"), "{err}");
    assert!(failing.files.is_empty(), "no file finished");

    // A scratch space that gives back other bytes (a damaged file): the module comes out wrong
    // and is refused by its BLAKE3 before it is finished; never a wrong file made final.
    let mut damaged = HashingSink { damage_reads: true, ..HashingSink::with_scratch() };
    let err = apply_measured(&patch, &old, &mut damaged).unwrap_err();
    assert!(damaged.files.is_empty(), "no file finished: {err}");
}
