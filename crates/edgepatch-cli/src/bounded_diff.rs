//! `edgepatch diff --bounded`: a diff whose memory does not grow with the builds. Both
//! builds are signed by streaming their files (per-file BLAKE3 and 16 KiB block hashes),
//! then the core's `PatchGenerator` (the Worker's generator) makes the patch one 4 MiB
//! segment at a time, reading only the byte ranges it plans from disk: the planned old data
//! (at most `--old-budget`, 8 MiB by default as in the Worker), the segment, 4 MiB of recent
//! new data, one suffix array over the old spans and one zstd context. Two settings the
//! Worker does not use: a larger old budget (a cap: plans grow past 8 MiB only where the
//! block matches cover more) and deep text windows (the in-memory diff's search for text,
//! ~100 MB of zstd tables). The patch streams to a temporary file renamed into place.
//! With `--threads` over 1, runs of segments are made on that many threads by step
//! generators (`start_at`, as the Worker's fan-out steps) and written in order: the same
//! bytes as one pass, in about the threads' multiple of one thread's memory.
//! Used for builds too large for the in-memory diff (which holds both builds and a suffix
//! array over all old data: about 7x the old build's size, at most 2 GiB of old data).
//!
//! wasm modules are the exception to "ranges only": a changed module whose new and old
//! versions (same path) are at most `WASM_TRANSFORM_CAP` bytes each is read whole, one module
//! at a time, to make its normalized form (docs/FORMAT.md §2.8), which goes to an unnamed temporary
//! file the generator then reads by range. That phase holds the old and new module, the
//! normalized form and the transform's tables (about 4x the module: 14 MB modules measured in
//! BENCHMARKS.md, "Generator: the wasm transform"), freed before the segments start; so the
//! bound is the larger of the segment budget and that. `--no-wasm-transform` skips it.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex};

use edgepatch_core::diff::DiffStats;

use crate::cli_error::{CliError, IoResultExt, ResultExt};
use edgepatch_core::generate::{drive, BuildReaders, ByteRange, FileForm, PatchGenerator, WasmTransform};
use edgepatch_core::patch_format::MAX_WASM_TRANSFORM_BYTES;
use edgepatch_core::renamed_files::renamed_paths;
use edgepatch_core::signature::{Signature, SignedKind, DEFAULT_BLOCK_SIZE};
use edgepatch_core::trace::Trace;
use edgepatch_core::{Capabilities, Error, Input};

use crate::build_files::{sign_path, total_file_bytes};
use crate::platform;

/// Old data (file bytes) above which `diff` uses the bounded diff without being asked.
pub const AUTOMATIC_ABOVE_BYTES: u64 = 1 << 30;

/// Whether `diff` should be bounded for this old build (its files' total size).
pub fn wanted(old: &Path) -> io::Result<bool> {
    Ok(total_file_bytes(old)? > AUTOMATIC_ABOVE_BYTES)
}

/// Opens a build's files as the generator asks for their ranges, keeping a few open.
struct RangeReader {
    root: PathBuf,
    /// Input::OldBuild or Input::NewBuild: which build a read error is about.
    input: Input,
    open: HashMap<String, File>,
}

impl RangeReader {
    fn new(root: &Path, input: Input) -> Self {
        RangeReader { root: root.to_path_buf(), input, open: HashMap::new() }
    }

    fn error(&self, full: &Path, e: io::Error) -> Error {
        let path = full.display().to_string();
        match self.input {
            Input::OldBuild => Error::OldRead { path, source: e },
            input => Error::Io { input, source: io::Error::new(e.kind(), format!("{path}: {e}")) },
        }
    }

    fn read(&mut self, path: &str, offset: u64, buf: &mut [u8]) -> edgepatch_core::Result<()> {
        let full = if path.is_empty() { self.root.clone() } else { self.root.join(path) };
        if !self.open.contains_key(path) {
            if self.open.len() >= 64 {
                self.open.clear();
            }
            // No link followed at the file itself (the signature listed it as a regular file).
            let f = platform::open_no_follow(&full).map_err(|e| self.error(&full, e))?;
            self.open.insert(path.to_string(), f);
        }
        platform::read_exact_at(&self.open[path], buf, offset)
            .map_err(|e| self.error(&full, io::Error::new(e.kind(), format!("{e} (did the build change during the diff?)"))))
    }
}

/// The largest wasm module (old or new version) `diff --bounded` reads whole to store it
/// normalized: the format's cap (64 MiB), so the transform phase peaks at about 4x that.
pub const WASM_TRANSFORM_CAP: u64 = MAX_WASM_TRANSFORM_BYTES;

/// A changed wasm module stored normalized: its transform and the temporary file holding
/// its normalized form (unnamed, beside the patch: the system removes it when it is closed,
/// also when the diff is killed).
struct NormalizedModule {
    transform: WasmTransform,
    file: File,
    /// The old module split, where the transform stores the module in the field-split layout.
    old_split: Option<File>,
}

/// The transforms of the changed wasm modules of `new` (each against the old file at its
/// path, both at most `WASM_TRANSFORM_CAP` bytes), their normalized forms written to files
/// in unnamed temporary files in `tmp_dir`. Modules are read whole, one at a time.
fn normalize_modules(
    old: &Path,
    new: &Path,
    old_sig: &Signature,
    new_sig: &Signature,
    tmp_dir: &Path,
    made: &mut Vec<NormalizedModule>,
) -> Result<(), CliError> {
    let files = |s: &Signature| -> HashMap<String, (u64, [u8; 32])> {
        s.entries
            .iter()
            .filter_map(|e| match &e.kind {
                SignedKind::File { size, blake3, .. } => Some((e.path.clone(), (*size, *blake3))),
                _ => None,
            })
            .collect()
    };
    let old_files = files(old_sig);
    let full = |root: &Path, path: &str| if path.is_empty() { root.to_path_buf() } else { root.join(path) };
    let starts_wasm = |p: &Path| -> io::Result<bool> {
        let mut magic = [0u8; 4];
        let f = platform::open_no_follow(p)?;
        Ok(platform::read_exact_at(&f, &mut magic, 0).is_ok() && &magic == b"\0asm")
    };
    // A module with no old file at its path may have replaced one under another name
    // (content-hashed names): the same rule as the in-memory diff's and the Worker's.
    let renamed = renamed_paths(&old_sig.file_paths(), &new_sig.file_paths());
    for e in &new_sig.entries {
        let SignedKind::File { size, blake3, .. } = &e.kind else { continue };
        let old_at = if old_files.contains_key(&e.path) { Some(e.path.as_str()) } else { renamed.get(e.path.as_str()).copied() };
        let Some(old_at) = old_at else { continue };
        let Some((old_size, old_blake3)) = old_files.get(old_at) else { continue };
        if old_blake3 == blake3 || *size > WASM_TRANSFORM_CAP || *old_size > WASM_TRANSFORM_CAP || *size < 8 {
            continue;
        }
        let (new_path, old_path) = (full(new, &e.path), full(old, old_at));
        if !starts_wasm(&new_path).at_path(&new_path)? || !starts_wasm(&old_path).at_path(&old_path)? {
            continue;
        }
        let read_checked = |path: &Path, signed: &[u8; 32]| -> Result<Vec<u8>, CliError> {
            let bytes = std::fs::read(path).at_path(path)?;
            if blake3::hash(&bytes).as_bytes() != signed {
                return Err(CliError::other(format!("{}: changed during the diff (its BLAKE3 is not the signed one)", e.path)).at(path));
            }
            Ok(bytes)
        };
        // Owned: each module is freed as soon as the transform is done with it, and the old
        // one is read again to choose the layout (the peak is the forward transform's, without it).
        let (new_bytes, old_bytes) = (read_checked(&new_path, blake3)?, read_checked(&old_path, old_blake3)?);
        let Some(normalized) = WasmTransform::normalize_owned(&e.path, old_bytes, new_bytes) else { continue };
        let Some(prepared) = normalized.renamed(old_at).finish(read_checked(&old_path, old_blake3)?) else { continue };
        let temporary = |bytes: &[u8], what: &str| -> Result<File, CliError> {
            let mut file = tempfile::tempfile_in(tmp_dir).context(format_args!("a temporary file in {}", tmp_dir.display()))?;
            file.write_all(bytes).context(format_args!("{what} of {}", e.path))?;
            Ok(file)
        };
        let file = temporary(&prepared.normalized, "normalized form")?;
        let old_split = prepared.old_split.as_deref().map(|b| temporary(b, "split old module")).transpose()?;
        made.push(NormalizedModule { transform: prepared.transform, file, old_split });
    }
    Ok(())
}

/// How `diff_bounded` makes a patch.
#[derive(Debug, Clone)]
pub struct BoundedOptions {
    /// zstd level, 1..=22.
    pub level: i32,
    /// Store changed wasm modules normalized (read whole: module docs).
    pub wasm_transform: bool,
    /// Old bytes planned per segment at most (`PatchGenerator::set_old_budget`).
    pub old_budget: u64,
    /// Search text windows as the in-memory diff does (`PatchGenerator::set_deep_text_windows`).
    pub deep_text_windows: bool,
    /// Try split modules' parts as LZMA window segments where window and part take at most
    /// this many bytes (`PatchGenerator::set_lzma_windows_up_to`; 0: never).
    pub lzma_windows: u64,
    /// Try ops segments' streams as LZMA (`PatchGenerator::set_lzma_ops_streams`).
    pub lzma_streams: bool,
    /// Segments encoded at once (each thread holds one segment's memory).
    pub threads: usize,
    /// Where every generator of the patch reports its segments' timing (`PatchGenerator::set_trace`).
    pub trace: Trace,
    /// What the patch's reader understands (`PatchGenerator::set_reader`): modules whose
    /// transform it cannot read are stored as they are.
    pub reader: Capabilities,
}

/// Segments a thread takes at a time: one step generator started per run (`start_at`, which
/// reads the 4 or 8 MiB before as history), so longer runs read less twice.
const SEGMENTS_PER_RUN: u64 = 4;

/// Makes PATCH from OLD to NEW in bounded memory; returns what the patch does.
pub fn diff_bounded(old: &Path, new: &Path, patch: &Path, opts: &BoundedOptions, progress: &dyn Fn(u64)) -> Result<DiffStats, CliError> {
    let BoundedOptions { level, wasm_transform, old_budget, deep_text_windows, lzma_windows, lzma_streams, threads, ref trace, reader } = *opts;
    let old_sig = sign_path(old, DEFAULT_BLOCK_SIZE).context("old")?;
    let new_sig = sign_path(new, DEFAULT_BLOCK_SIZE).context("new")?;
    let name = patch.file_name().ok_or_else(|| CliError::usage("patch path has no file name"))?;
    let tmp = patch.with_file_name(format!(".{}.edgepatch-tmp-{}", name.to_string_lossy(), std::process::id()));
    let result = (|| {
        let mut modules = Vec::new();
        if wasm_transform {
            let dir = patch.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
            normalize_modules(old, new, &old_sig, &new_sig, dir, &mut modules)?;
        }
        let mut out = io::BufWriter::with_capacity(1 << 20, File::create(&tmp).at_path(&tmp)?);
        let mut old_split_files = HashMap::new();
        let (modules, normalized_files): (Vec<WasmTransform>, HashMap<String, File>) = modules
            .into_iter()
            .filter(|m| m.transform.required_capabilities().is_subset(reader))
            .map(|m| {
                let path = m.transform.path().to_string();
                // Read by the old file's path (a renamed module's is not its own).
                if let (Some(f), Some(old_path)) = (m.old_split, m.transform.split_old_path()) {
                    old_split_files.insert(old_path.to_string(), f);
                }
                (m.transform, (path, m.file))
            })
            .unzip();
        // Every generator of the patch (the one pass, or the assembler and each run's step)
        // is set up alike.
        let make = || -> edgepatch_core::Result<PatchGenerator> {
            let mut g = PatchGenerator::new(Some(&old_sig), &new_sig, level)?;
            g.set_reader(reader)?;
            for t in &modules {
                g.add_wasm_transform(t.clone())?;
            }
            g.set_old_budget(old_budget)?;
            g.set_deep_text_windows(deep_text_windows);
            g.set_lzma_windows_up_to(lzma_windows)?;
            g.set_lzma_ops_streams(lzma_streams)?;
            g.set_trace(trace.clone());
            Ok(g)
        };
        let builds = Builds { old, new, normalized: &normalized_files, old_split: &old_split_files };
        let mut written = 0u64;
        let mut write = |bytes: &[u8]| -> edgepatch_core::Result<()> {
            written += bytes.len() as u64;
            progress(written);
            out.write_all(bytes).map_err(|e| Error::Output { path: tmp.display().to_string(), source: e })
        };
        let g = make()?;
        let g = if threads <= 1 || g.segment_count() <= 1 {
            let (mut old_files, mut new_files) = builds.readers();
            let readers = BuildReaders {
                old: &mut |p, o, b| old_files.read(p, o, b),
                new: &mut |p, o, b| new_files.read(p, o, b),
                normalized: Some(&mut |p, o, b| builds.read_form(FileForm::Normalized, p, o, b)),
                old_split: Some(&mut |p, o, b| builds.read_form(FileForm::OldSplit, p, o, b)),
            };
            drive(g, readers, &mut write)
        } else {
            drive_parallel(g, &make, &builds, threads, &mut write)
        }?;
        let file = out.into_inner().map_err(|e| CliError::io(&tmp, e.into_error()))?;
        file.sync_all().at_path(&tmp)?;
        std::fs::rename(&tmp, patch).at_path(patch)?;
        Ok(g.stats().clone())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Where the generator's ranges are read from: the two builds, the new modules' normalized
/// forms and the split old modules (by path).
struct Builds<'a> {
    old: &'a Path,
    new: &'a Path,
    normalized: &'a HashMap<String, File>,
    old_split: &'a HashMap<String, File>,
}

impl Builds<'_> {
    /// One thread's open files of the old and the new build.
    fn readers(&self) -> (RangeReader, RangeReader) {
        (RangeReader::new(self.old, Input::OldBuild), RangeReader::new(self.new, Input::NewBuild))
    }

    /// Bytes of a wasm transform's form of the module at `path` (never of the file).
    fn read_form(&self, form: FileForm, path: &str, offset: u64, buf: &mut [u8]) -> edgepatch_core::Result<()> {
        let (files, input, what) = match form {
            FileForm::Normalized => (self.normalized, Input::NewBuild, "normalized form"),
            FileForm::OldSplit => (self.old_split, Input::OldBuild, "split old module"),
            FileForm::AsIs => return Err(Error::Invalid(format!("{path:?} as it is is no wasm transform's form"))),
        };
        let f = files.get(path).ok_or_else(|| Error::Invalid(format!("no {what} of {path:?}")))?;
        platform::read_exact_at(f, buf, offset).map_err(|e| Error::Io { input, source: io::Error::new(e.kind(), format!("{what} of {path:?}: {e}")) })
    }

    /// The bytes of `ranges`, concatenated (new ranges may be of a normalized form).
    fn read_all(&self, ranges: &[ByteRange], files: &mut RangeReader) -> edgepatch_core::Result<Vec<u8>> {
        let mut buf = vec![0u8; ranges.iter().map(|r| r.len as usize).sum()];
        let mut at = 0;
        for r in ranges {
            let piece = &mut buf[at..at + r.len as usize];
            match r.form {
                FileForm::AsIs => files.read(&r.path, r.offset, piece)?,
                form => self.read_form(form, &r.path, r.offset, piece)?,
            }
            at += r.len as usize;
        }
        Ok(buf)
    }
}

/// What the threads of `drive_parallel` share: segments made and not yet written, and how far
/// the writing got.
#[derive(Default)]
struct Progress {
    made: BTreeMap<u64, Vec<u8>>,
    /// The next run a thread takes, and the next segment written.
    next_run: u64,
    written: u64,
    /// A thread's error (the first), and whether the threads are to stop.
    failure: Option<Error>,
    stop: bool,
}

/// `drive` on `threads` threads: each takes the next run of `SEGMENTS_PER_RUN` segments and
/// makes them with a step generator (`start_at`: byte for byte what one pass makes); this
/// thread writes them in order through `assembler` (`absorb_segment`), which makes the end.
/// Threads run at most `threads + 1` runs ahead of the writing, so memory stays bounded:
/// each thread one segment's, plus the finished segments waiting their turn.
fn drive_parallel(
    mut assembler: PatchGenerator,
    make: &(dyn Fn() -> edgepatch_core::Result<PatchGenerator> + Sync),
    builds: &Builds,
    threads: usize,
    write: &mut dyn FnMut(&[u8]) -> edgepatch_core::Result<()>,
) -> edgepatch_core::Result<PatchGenerator> {
    write(&assembler.header()?)?;
    let count = assembler.segment_count();
    let runs = count.div_ceil(SEGMENTS_PER_RUN);
    let ahead = threads as u64 + 1;
    let shared = Mutex::new(Progress::default());
    let changed = Condvar::new();
    let lock = || shared.lock().unwrap_or_else(|p| p.into_inner());
    let stop = |failure: Option<Error>| {
        let mut p = lock();
        p.stop = true;
        if p.failure.is_none() {
            p.failure = failure;
        }
        changed.notify_all();
    };
    let make_run = |run: u64, files: &mut (RangeReader, RangeReader)| -> edgepatch_core::Result<()> {
        let (first, end) = (run * SEGMENTS_PER_RUN, ((run + 1) * SEGMENTS_PER_RUN).min(count));
        let mut g = make()?;
        let history = builds.read_all(&g.history_ranges(first)?, &mut files.1)?;
        g.start_at(first, &history)?;
        drop(history);
        for i in first..end {
            let new_bytes = builds.read_all(&g.new_ranges(i)?, &mut files.1)?;
            let old_ranges = g.plan_segment(i, &new_bytes)?;
            let old_bytes = builds.read_all(&old_ranges, &mut files.0)?;
            let bytes = g.encode_segment(i, &new_bytes, old_bytes)?;
            let mut p = lock();
            if p.stop {
                return Ok(());
            }
            p.made.insert(i, bytes);
            changed.notify_all();
        }
        Ok(())
    };
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                let mut files = builds.readers();
                loop {
                    let run = {
                        let mut p = lock();
                        while !p.stop && p.next_run < runs && p.next_run * SEGMENTS_PER_RUN >= p.written + ahead * SEGMENTS_PER_RUN {
                            p = changed.wait(p).unwrap_or_else(|p| p.into_inner());
                        }
                        if p.stop || p.next_run >= runs {
                            return;
                        }
                        p.next_run += 1;
                        p.next_run - 1
                    };
                    if let Err(e) = make_run(run, &mut files) {
                        return stop(Some(e));
                    }
                }
            });
        }
        let result = (|| {
            for i in 0..count {
                let bytes = {
                    let mut p = lock();
                    loop {
                        if let Some(e) = p.failure.take() {
                            return Err(e);
                        }
                        if let Some(bytes) = p.made.remove(&i) {
                            break bytes;
                        }
                        p = changed.wait(p).unwrap_or_else(|p| p.into_inner());
                    }
                };
                assembler.absorb_segment(i, &bytes)?;
                write(&bytes)?;
                let mut p = lock();
                p.written = i + 1;
                changed.notify_all();
            }
            Ok(())
        })();
        // Whatever happened, the threads end before the scope does.
        stop(None);
        result
    })?;
    write(&assembler.finish()?)?;
    Ok(assembler)
}
