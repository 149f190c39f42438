//! The push-driven applier: the patch arrives in chunks of any size, is processed
//! unit by unit, and can stop and resume at segment boundaries (`ResumePoint`).

use std::io;

use super::delta_stream::{scratch_err, DeltaStream, OldReads, ScratchSpace, SplitOld};
use super::patch_reader::*;
use super::{display_path, out_err, ApplyProgress, ApplySummary, BuildSink, OldBuild, ResumePoint, CHUNK};
use crate::error::{Error, Input, Result};
use crate::patch_format::*;
use edgepatch_format::transform::{NormalizedBytes, TransformStop};

fn hex(h: &[u8]) -> String {
    h.iter().map(|b| format!("{b:02x}")).collect()
}

/// BLAKE3 of the first `len` bytes already written to the new file at `path` (resuming).
fn hash_written<S: BuildSink>(sink: &mut S, path: &str, len: u64, buf: &mut [u8]) -> Result<blake3::Hasher> {
    let mut hasher = blake3::Hasher::new();
    let mut done = 0;
    while done < len {
        let chunk = &mut buf[..(len - done).min(CHUNK as u64) as usize];
        sink.read_written(path, done, chunk).map_err(|e| out_err(path, e))?;
        hasher.update(chunk);
        done += chunk.len() as u64;
    }
    Ok(hasher)
}

/// What the applier expects next in the patch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    HeaderAndTree,
    SegmentOrEnd,
    Checksum,
    Done,
}

/// The delta-stream files in entry order, and how far the current one is
/// (its delta-stream bytes left).
struct DeltaFiles {
    entries: Vec<usize>,
    next: usize,
    open: Option<(usize, u64, blake3::Hasher)>,
    /// The open file is a transformed wasm module (docs/FORMAT.md §2.8): its
    /// normalized form so far, inverted into the file once it is whole. Gathered
    /// here where the sink has no scratch space.
    normalized: Option<Vec<u8>>,
    /// Where the sink has scratch space, the open transformed file's normalized
    /// form goes there instead: its region's start (the bytes written so far are
    /// its delta length less those still to come).
    normalized_scratch: Option<u64>,
    /// Delta-stream ranges of the transformed files: no resume point may
    /// fall inside one or within a window's reach after one.
    transformed: Vec<(u64, u64)>,
}

/// Whether an apply interrupted after `produced` delta bytes can resume
/// there: not inside a transformed file (its normalized form is held in
/// memory, not written) and not where a window segment could reach back into
/// one (the bytes written are the file, not its normalized form, so the
/// history cannot be read back). Such an apply resumes from an earlier point.
fn can_resume_at(transformed: &[(u64, u64)], produced: u64, window_back: u64) -> bool {
    let reach = produced.saturating_sub(window_back);
    transformed.iter().all(|&(start, end)| start >= produced || end <= reach)
}

/// The delta-stream ranges of the tree's transformed files.
fn transformed_ranges(tree: &PatchTree) -> Vec<(u64, u64)> {
    let mut at = 0u64;
    let mut out = Vec::new();
    for i in 0..tree.entries.len() {
        let len = tree.delta_len(i);
        if tree.transform(i).is_some() {
            out.push((at, at + len));
        }
        at += len;
    }
    out
}

/// A push-driven applier: give it the patch in chunks of any size as they
/// arrive (`push`), then call `finish`. It processes the patch unit by unit
/// (header and tree, each segment, the end), so it holds at most one unit of
/// input. Directories, symlinks and files copied from the old build are written
/// as soon as the tree is read; delta files as their segments arrive.
pub struct PatchApplier {
    pending: Vec<u8>,
    hasher: blake3::Hasher,
    /// Patch bytes consumed (before `pending`).
    offset: u64,
    expect: Expect,
    tree: PatchTree,
    delta: Option<DeltaStream>,
    files: DeltaFiles,
    buf: Vec<u8>,
    /// BLAKE3 over the files' BLAKE3s as they complete (`PatchTree::digest_order`),
    /// until it is checked (then None).
    digest: Option<blake3::Hasher>,
    /// Once the sink took a copy (`BuildSink::copy_old_file`), whose BLAKE3
    /// arrives only at the end: every file's BLAKE3 in digest order, None for
    /// those the sink copies, until the digest is checked.
    held_hashes: Option<Vec<Option<[u8; 32]>>>,
    progress: ApplyProgress,
    summary: ApplySummary,
    /// Started by `resume`: the patch checksum cannot be checked.
    resumed: bool,
    resume_point: Option<ResumePoint>,
    /// Size of the unit being received, once its header has arrived (checked against the limits).
    unit_hint: u64,
}

/// A claimed unit size is trusted for preallocation up to this (a 4 MiB
/// segment compresses to less); larger units grow as their bytes arrive, so a
/// hostile header cannot make the applier reserve memory it never fills.
const MAX_UNIT_HINT: u64 = 8 << 20;

impl Default for PatchApplier {
    fn default() -> Self {
        Self::new()
    }
}

impl PatchApplier {
    /// An applier waiting for the patch's first bytes.
    pub fn new() -> Self {
        PatchApplier {
            pending: Vec::new(),
            hasher: blake3::Hasher::new(),
            offset: 0,
            expect: Expect::HeaderAndTree,
            tree: PatchTree::default(),
            delta: None,
            files: DeltaFiles { entries: Vec::new(), next: 0, open: None, normalized: None, normalized_scratch: None, transformed: Vec::new() },
            buf: Vec::new(),
            digest: Some(blake3::Hasher::new()),
            held_hashes: None,
            progress: ApplyProgress::default(),
            summary: ApplySummary::default(),
            resumed: false,
            resume_point: None,
            unit_hint: 0,
        }
    }

    /// How far the apply is.
    pub fn progress(&self) -> ApplyProgress {
        self.progress
    }

    /// The tree, once the header and tree have been read.
    pub fn tree(&self) -> Option<&PatchTree> {
        (self.expect != Expect::HeaderAndTree).then_some(&self.tree)
    }

    /// Where an interrupted apply could continue, once the sink has made durable
    /// everything it was given so far: the end of the last segment completed
    /// (None before the first: start over). Still valid after `push` failed
    /// (an output error, a dropped connection): the failed segment is redone.
    /// The point names the patch byte to continue from; bytes already pushed
    /// beyond it are simply pushed again after `resume`.
    pub fn resume_point(&self) -> Option<ResumePoint> {
        self.resume_point
    }

    /// Continues an interrupted apply at `at` (from [`resume_point`]):
    /// `header_and_tree` is the patch's bytes before its first segment (its
    /// manifest's first `patch_offset`); push the patch from `at.patch_offset`
    /// on. Directories, symlinks, copied files and the delta files before
    /// `at.new_offset` are taken as already written and verified (the sink kept
    /// them); the file being written at the interruption is re-hashed and
    /// reopened through the sink's `read_written`/`resume_file`, and the last
    /// 4 MiB of delta output (window segments reach back into it) is read back
    /// the same way: nothing is downloaded or written twice. Every later file
    /// is verified as usual; the whole-patch checksum is not (see `finish_checked`).
    ///
    /// [`resume_point`]: PatchApplier::resume_point
    pub fn resume<O: OldBuild, S: BuildSink>(header_and_tree: &[u8], at: ResumePoint, old: &mut O, sink: &mut S) -> Result<PatchApplier> {
        let mut input = PatchInput::new(header_and_tree);
        let tree = read_tree_for(&mut input, old, |len, hash| sink.check_head(len, &hash).map_err(|e| out_err("", e)))?;
        sink.check_tree(&tree).map_err(|e| out_err("", e))?;
        check_side_infos(&tree, sink)?;
        let tree_end = input.offset();
        let bad = |what: String| Error::CannotResume { what };
        if tree_end != header_and_tree.len() as u64 {
            return Err(bad(format!("{} bytes given for a header and tree of {tree_end}", header_and_tree.len())));
        }
        let mut a = PatchApplier { tree, expect: Expect::SegmentOrEnd, resumed: true, ..PatchApplier::new() };
        a.check_old_build(old)?;
        let mut delta = DeltaStream::new(&a.tree);
        let delta_total = delta.total;
        if at.segments_done == 0 || at.new_offset == 0 || at.new_offset > delta_total || at.patch_offset < tree_end || at.new_offset < at.segments_done {
            return Err(bad(format!("resume point {at:?} does not fit this patch ({delta_total} delta bytes, tree ends at byte {tree_end})")));
        }
        a.files.transformed = transformed_ranges(&a.tree);
        if !can_resume_at(&a.files.transformed, at.new_offset, a.tree.window_back()) {
            return Err(bad(format!(
                "resume point {at:?} is inside a transformed wasm file or within a window's reach after one (never offered; docs/FORMAT.md §2.8)"
            )));
        }
        // Everything that is not a delta file, and every delta file that ends before the point, is done.
        // The files digest needs the BLAKE3 of each of those files: they are
        // read back from the output (written and durable, not downloaded again).
        let (mut copies, mut done_before) = (Vec::new(), Vec::new());
        let mut start = 0u64;
        // The history a later window segment may reach: the patch's reach (§2.6).
        let back_from = at.new_offset.saturating_sub(a.tree.window_back());
        let mut history = vec![0u8; (at.new_offset - back_from) as usize];
        for (i, entry) in a.tree.entries.iter().enumerate() {
            let TreeEntryKind::File { executable, size, source, .. } = &entry.kind else {
                a.progress.entries_done += 1;
                continue;
            };
            let path = entry.path.as_str();
            if let FileSource::Copy { .. } = source {
                copies.push(i);
                count_file_done(&mut a.summary, &mut a.progress, *size);
                a.progress.new_bytes_written += size;
                continue;
            }
            // In the delta stream (a transformed file's normalized form, which
            // `can_resume_at` keeps out of the history and the open file).
            let end = start + a.tree.delta_len(i);
            // The part of this file inside the history window.
            let (h0, h1) = (start.max(back_from), end.min(at.new_offset));
            if h0 < h1 {
                let dst = &mut history[(h0 - back_from) as usize..(h1 - back_from) as usize];
                sink.read_written(path, h0 - start, dst).map_err(|e| out_err(path, e))?;
            }
            if end <= at.new_offset {
                done_before.push(i);
                count_file_done(&mut a.summary, &mut a.progress, *size);
                a.progress.new_bytes_written += size;
                a.files.next += 1;
            } else if start < at.new_offset {
                let written = at.new_offset - start;
                let hasher = hash_written(sink, path, written, &mut a.buf)?;
                sink.resume_file(path, *executable, *size, written).map_err(|e| out_err(path, e))?;
                a.progress.new_bytes_written += written;
                a.files.open = Some((i, size - written, hasher));
                a.files.next += 1;
            }
            a.files.entries.push(i);
            start = end;
        }
        for i in copies.into_iter().chain(done_before) {
            let TreeEntryKind::File { size, .. } = a.tree.entries[i].kind else { unreachable!("files only") };
            let path = a.tree.entries[i].path.as_str();
            let hasher = hash_written(sink, path, size, &mut a.buf)?;
            a.file_hashed(hasher);
        }
        delta.produced = back_from;
        delta.remember(&history);
        debug_assert_eq!(delta.produced, at.new_offset);
        delta.segments = at.segments_done;
        a.delta = Some(delta);
        a.offset = at.patch_offset;
        a.progress.patch_bytes_read = at.patch_offset;
        Ok(a)
    }

    /// Feeds the next bytes of the patch; processes every unit they complete.
    pub fn push<O: OldBuild, S: BuildSink>(&mut self, data: &[u8], old: &mut O, sink: &mut S) -> Result<()> {
        if self.expect == Expect::Done && !data.is_empty() {
            return Err(Error::Corrupt { input: Input::Patch, offset: self.offset, what: "bytes after the patch checksum".into() });
        }
        // Grows to the unit being received (its size is known from its header),
        // not to the next power of two: steady, bounded memory in wasm.
        let want = self.pending.len() + data.len();
        if want > self.pending.capacity() {
            let hint = self.unit_hint.min(MAX_UNIT_HINT) as usize;
            self.pending.reserve_exact(want.max(hint) - self.pending.len());
        }
        self.pending.extend_from_slice(data);
        self.progress.patch_bytes_read += data.len() as u64;
        while let Some(len) = self.next_unit_len()? {
            // The buffer is kept (not reallocated per unit): steady memory in wasm.
            let mut unit = std::mem::take(&mut self.pending);
            self.process_unit(&unit[..len], old, sink)?;
            unit.drain(..len);
            self.pending = unit;
        }
        if self.expect == Expect::Done && !self.pending.is_empty() {
            return Err(Error::Corrupt { input: Input::Patch, offset: self.offset, what: "bytes after the patch checksum".into() });
        }
        Ok(())
    }

    /// Ends the patch: everything must have arrived and checked out.
    pub fn finish(self) -> Result<ApplySummary> {
        if self.expect != Expect::Done {
            let what = match self.expect {
                Expect::HeaderAndTree => "header or tree",
                Expect::SegmentOrEnd => "delta stream ended before all files were produced",
                _ => "patch checksum",
            };
            return Err(Error::Truncated { input: Input::Patch, offset: self.offset + self.pending.len() as u64, what: what.into() });
        }
        Ok(self.summary)
    }

    /// Size of the next unit if `pending` holds all of it; its header is parsed
    /// (and checked against the limits) by the same code that processes it.
    fn next_unit_len(&mut self) -> Result<Option<usize>> {
        let need_more = |e: &Error, end: u64| matches!(e, Error::Truncated { offset, .. } if *offset >= end);
        let end = self.offset + self.pending.len() as u64;
        let mut peek = PatchInput::resume(self.pending.as_slice(), blake3::Hasher::new(), self.offset);
        let body = match self.expect {
            Expect::Done => return Ok(None),
            Expect::Checksum => return Ok((self.pending.len() >= 32).then_some(32)),
            Expect::HeaderAndTree => FixedHeader::read(&mut peek).map(|h| h.tree_comp_len),
            Expect::SegmentOrEnd => {
                let delta = self.delta.as_ref().expect("delta stream after the tree");
                read_segment_header(&mut peek, delta.segments, delta.produced, delta.reference_len, delta.reach).map(|s| s.map_or(0, |s| s.compressed_len()))
            }
        };
        match body {
            Ok(body) => {
                let len = (peek.offset() - self.offset).saturating_add(body);
                self.unit_hint = len;
                Ok((len <= self.pending.len() as u64).then_some(len as usize))
            }
            Err(e) if need_more(&e, end) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn process_unit<O: OldBuild, S: BuildSink>(&mut self, unit: &[u8], old: &mut O, sink: &mut S) -> Result<()> {
        let hasher = std::mem::replace(&mut self.hasher, blake3::Hasher::new());
        let mut input = PatchInput::resume(unit, hasher, self.offset);
        match self.expect {
            Expect::HeaderAndTree => {
                self.tree = read_tree_for(&mut input, old, |len, hash| sink.check_head(len, &hash).map_err(|e| out_err("", e)))?;
                sink.check_tree(&self.tree).map_err(|e| out_err("", e))?;
                check_side_infos(&self.tree, sink)?;
                (self.hasher, self.offset) = input.into_state();
                self.start(old, sink)?;
                self.expect = Expect::SegmentOrEnd;
            }
            Expect::SegmentOrEnd => {
                let mut delta = self.delta.take().expect("delta stream after the tree");
                let at = input.offset();
                let is_segment = matches!(
                    unit.first(),
                    Some(&SEGMENT_TAG)
                        | Some(&RUN_CODED_SEGMENT_TAG)
                        | Some(&WINDOW_SEGMENT_TAG)
                        | Some(&LZMA_WINDOW_SEGMENT_TAG)
                        | Some(&LZMA_OPS_SEGMENT_TAG)
                );
                if is_segment {
                    delta.load_segment(&mut input, &mut OldReads { old: &mut *old, sink: &mut *sink }, &self.tree)?;
                    (self.hasher, self.offset) = input.into_state();
                    self.drain_segment(&mut delta, old, sink)?;
                    delta.check_segment_used_up()?;
                    if can_resume_at(&self.files.transformed, delta.produced, delta.reach) {
                        self.resume_point = Some(ResumePoint { segments_done: delta.segments, patch_offset: self.offset, new_offset: delta.produced });
                    }
                } else {
                    read_segment_header(&mut input, delta.segments, delta.produced, delta.reference_len, delta.reach)?;
                    (self.hasher, self.offset) = input.into_state();
                    if self.files.open.is_some() || self.files.next < self.files.entries.len() {
                        return Err(Error::Corrupt { input: Input::Patch, offset: at, what: "delta stream ended before all files were produced".into() });
                    }
                    if self.digest.is_some() {
                        self.check_digest(sink)?;
                    }
                    self.expect = Expect::Checksum;
                }
                self.delta = Some(delta);
            }
            Expect::Checksum => {
                let patch_bytes = input.finish_checked(!self.resumed)?;
                self.offset = patch_bytes;
                self.summary.patch_bytes = patch_bytes;
                self.summary.entries = self.tree.entries.len() as u64;
                self.progress.entries_done = self.progress.entries_total;
                self.expect = Expect::Done;
            }
            Expect::Done => unreachable!("no unit after the checksum"),
        }
        Ok(())
    }

    /// Fails fast, before anything is written, if the old build is not the
    /// expected one; sets the totals.
    fn check_old_build<O: OldBuild>(&mut self, old: &mut O) -> Result<()> {
        let tree = &self.tree;
        for f in &tree.old_files {
            let size = old.file_size(&f.path).map_err(|e| Error::OldRead { path: display_path(&f.path), source: e })?;
            if size != f.size {
                return Err(Error::WrongOldBuild { what: format!("{} is {size} bytes, the patch expects {}", display_path(&f.path), f.size) });
            }
        }
        self.progress.entries_total = tree.entries.len() as u64;
        self.progress.new_bytes_total = tree.entries.iter().map(|e| if let TreeEntryKind::File { size, .. } = e.kind { size } else { 0 }).sum();
        self.buf.resize(CHUNK, 0);
        Ok(())
    }

    /// After the tree: checks the old build, writes everything that needs no
    /// delta data, and lines up the delta files.
    fn start<O: OldBuild, S: BuildSink>(&mut self, old: &mut O, sink: &mut S) -> Result<()> {
        self.check_old_build(old)?;
        let tree = &self.tree;
        for (i, entry) in tree.entries.iter().enumerate() {
            let path = entry.path.as_str();
            match &entry.kind {
                TreeEntryKind::Directory => sink.create_directory(path).map_err(|e| out_err(path, e))?,
                TreeEntryKind::Symlink { target } => sink.create_symlink(path, target).map_err(|e| out_err(path, e))?,
                TreeEntryKind::File { source: FileSource::Delta, .. } => {
                    self.files.entries.push(i);
                    continue;
                }
                TreeEntryKind::File { executable, size, source: FileSource::Copy { old_index } } => {
                    let from = &tree.old_files[*old_index].path;
                    if sink.copy_old_file(from, path, *executable, *size).map_err(Error::Copy)? {
                        self.held_hashes.get_or_insert_with(Vec::new).push(None);
                        self.summary.files += 1;
                        self.summary.bytes_written += size;
                        self.progress.new_bytes_written += size;
                        self.progress.entries_done += 1;
                        continue;
                    }
                    sink.begin_file(path, *executable, *size).map_err(|e| out_err(path, e))?;
                    let mut hasher = blake3::Hasher::new();
                    let mut done = 0;
                    while done < *size {
                        let chunk = &mut self.buf[..(size - done).min(CHUNK as u64) as usize];
                        old.read_at(from, done, chunk).map_err(|e| Error::OldRead { path: display_path(from), source: e })?;
                        hasher.update(chunk);
                        sink.write_file(chunk).map_err(|e| out_err(path, e))?;
                        done += chunk.len() as u64;
                    }
                    record_hash(&mut self.digest, &mut self.held_hashes, hasher);
                    sink.finish_file().map_err(|e| out_err(path, e))?;
                    self.summary.files += 1;
                    self.summary.bytes_written += size;
                    self.progress.new_bytes_written += size;
                }
            }
            self.progress.entries_done += 1;
        }
        self.delta = Some(DeltaStream::new(tree));
        self.files.transformed = transformed_ranges(tree);
        if self.files.entries.is_empty() {
            self.check_digest(sink)?;
        }
        // Empty delta files need no segment.
        self.distribute(&[], sink, &mut Vec::new(), &mut ScratchSpace::default())
    }

    fn file_hashed(&mut self, hasher: blake3::Hasher) {
        record_hash(&mut self.digest, &mut self.held_hashes, hasher);
    }

    /// Once every file is hashed: the files digest must match. Waits for the
    /// copies the sink took, if any.
    fn check_digest<S: BuildSink>(&mut self, sink: &mut S) -> Result<()> {
        let mut digest = self.digest.take().expect("files digest checked once");
        if let Some(held) = self.held_hashes.take() {
            let copied = sink.finish_copies().map_err(Error::Copy)?;
            let taken = held.iter().filter(|h| h.is_none()).count();
            if copied.len() != taken {
                return Err(Error::Copy(io::Error::other(format!("the output copied {} files, {taken} were handed to it", copied.len()))));
            }
            let mut copied = copied.iter();
            for hash in &held {
                digest.update(hash.as_ref().or_else(|| copied.next()).expect("counted above"));
            }
        }
        let actual = digest.finalize();
        if actual.as_bytes() != &self.tree.files_digest {
            return Err(Error::FilesDigestMismatch { expected: hex(&self.tree.files_digest), actual: actual.to_hex().to_string() });
        }
        Ok(())
    }

    fn drain_segment<O: OldBuild, S: BuildSink>(&mut self, delta: &mut DeltaStream, old: &mut O, sink: &mut S) -> Result<()> {
        let mut buf = std::mem::take(&mut self.buf);
        let result = self.drain_into(delta, old, sink, &mut buf);
        self.buf = buf;
        result
    }

    fn drain_into<O: OldBuild, S: BuildSink>(&mut self, delta: &mut DeltaStream, old: &mut O, sink: &mut S, buf: &mut [u8]) -> Result<()> {
        let as_corrupt = |delta: &DeltaStream, e| match e {
            Error::Invalid(what) => delta.corrupt(what),
            e => e,
        };
        while delta.segment_left > 0 {
            // Extra bytes (all of a window segment's output) go out from where
            // they were decompressed, without a copy through `buf`.
            if let Some(range) = delta.extra_run(CHUNK)? {
                let extra = std::mem::take(&mut delta.extra);
                let written = self.distribute(&extra[range], sink, &mut delta.split_old, &mut delta.scratch);
                delta.extra = extra;
                written.map_err(|e| as_corrupt(delta, e))?;
                continue;
            }
            let n = delta.segment_left.min(CHUNK as u64) as usize;
            delta.fill(&mut buf[..n], &mut OldReads { old: &mut *old, sink: &mut *sink }, &self.tree)?;
            self.distribute(&buf[..n], sink, &mut delta.split_old, &mut delta.scratch).map_err(|e| as_corrupt(delta, e))?;
        }
        Ok(())
    }

    /// Writes delta bytes into the delta files in order, verifying and finishing
    /// each as it completes (and any empty ones that follow). A transformed
    /// file's bytes are gathered and inverted into the file once complete;
    /// `split_old`, the delta stream's split old modules, are dropped from memory
    /// first (a later read of an old module splits it again); those in the sink's
    /// scratch space stay there, where the normalized form goes too.
    fn distribute<S: BuildSink>(&mut self, mut data: &[u8], sink: &mut S, split_old: &mut Vec<(usize, SplitOld)>, scratch: &mut ScratchSpace) -> Result<()> {
        loop {
            if self.files.open.is_none() {
                let Some(&i) = self.files.entries.get(self.files.next) else { break };
                let TreeEntryKind::File { executable, size, .. } = &self.tree.entries[i].kind else { unreachable!("delta entries are files") };
                let len = self.tree.delta_len(i);
                if len > 0 && data.is_empty() {
                    break;
                }
                let path = self.tree.entries[i].path.as_str();
                if self.tree.transform(i).is_some() {
                    // Gathered in the sink's scratch space, or here (`gather`).
                    let mut buf = self.files.normalized.take().unwrap_or_default();
                    buf.clear();
                    self.files.normalized = Some(buf);
                    self.files.normalized_scratch = None;
                } else {
                    sink.begin_file(path, *executable, *size).map_err(|e| out_err(path, e))?;
                }
                self.files.next += 1;
                self.files.open = Some((i, len, blake3::Hasher::new()));
            }
            let (i, left, hasher) = self.files.open.as_mut().expect("a file is open");
            let path = self.tree.entries[*i].path.as_str();
            let n = (*left).min(data.len() as u64) as usize;
            match self.files.normalized.as_mut().filter(|_| self.tree.transform(*i).is_some()) {
                Some(buf) => match self.files.normalized_scratch {
                    Some(at) => ScratchSpace::write(sink, at + (self.tree.delta_len(*i) - *left), &data[..n])?,
                    // The file's first bytes: to the scratch space, if the sink has one.
                    None if buf.is_empty() => match scratch.take(sink, self.tree.delta_len(*i))? {
                        Some(at) => {
                            ScratchSpace::write(sink, at, &data[..n])?;
                            self.files.normalized_scratch = Some(at);
                        }
                        None => gather(buf, *left, &data[..n]),
                    },
                    None => gather(buf, *left, &data[..n]),
                },
                None => {
                    hasher.update(&data[..n]);
                    sink.write_file(&data[..n]).map_err(|e| out_err(path, e))?;
                    self.progress.new_bytes_written += n as u64;
                }
            }
            *left -= n as u64;
            data = &data[n..];
            if *left == 0 {
                let (i, _, mut hasher) = self.files.open.take().expect("a file is open");
                if self.tree.transform(i).is_some() {
                    split_old.retain(|s| s.1.memory_len() == 0);
                    hasher = self.invert(i, sink)?;
                }
                self.file_hashed(hasher);
                // The last file is finished only after the digest of all of them matched.
                if self.files.next == self.files.entries.len() {
                    self.check_digest(sink)?;
                }
                let TreeEntryKind::File { size, .. } = &self.tree.entries[i].kind else { unreachable!() };
                let path = self.tree.entries[i].path.as_str();
                sink.finish_file().map_err(|e| out_err(path, e))?;
                count_file_done(&mut self.summary, &mut self.progress, *size);
            } else if data.is_empty() {
                break;
            }
        }
        if !data.is_empty() {
            return Err(Error::Invalid("delta stream is longer than its files".into()));
        }
        Ok(())
    }

    /// Writes transformed entry `i` from its complete normalized form: the
    /// inverse of its transform (docs/FORMAT.md §2.8), streamed to the
    /// sink in pieces; returns the file's BLAKE3. The file must come out at
    /// exactly its size; its hash goes into the files digest like any other.
    fn invert<S: BuildSink>(&mut self, i: usize, sink: &mut S) -> Result<blake3::Hasher> {
        let TreeEntryKind::File { executable, size, .. } = self.tree.entries[i].kind else { unreachable!("delta entries are files") };
        let path = self.tree.entries[i].path.as_str();
        let side = &self.tree.transform(i).expect("a transformed file").side_info;
        let mut normalized = self.files.normalized.take().expect("gathered for a transformed file");
        sink.begin_file(path, executable, size).map_err(|e| out_err(path, e))?;
        let mut hasher = blake3::Hasher::new();
        let mut written = 0u64;
        // Errors name the end of the segment that completed the file.
        let at = self.offset;
        let progress = &mut self.progress;
        let too_long = || Error::Corrupt {
            input: Input::Patch,
            offset: at,
            what: format!("{}: the inverted wasm module is longer than its {size} bytes", display_path(path)),
        };
        // Read from the scratch space and written to the file through the one sink (never
        // at once: the inverse reads, then emits).
        let sink = std::cell::RefCell::new(sink);
        let mut emit = |piece: &[u8]| {
            if written + piece.len() as u64 > size {
                return Err(TransformStop::Caller(too_long()));
            }
            for chunk in piece.chunks(CHUNK) {
                hasher.update(chunk);
                sink.borrow_mut().write_file(chunk).map_err(|e| TransformStop::Caller(out_err(path, e)))?;
            }
            written += piece.len() as u64;
            progress.new_bytes_written += piece.len() as u64;
            Ok(())
        };
        let transform = crate::transforms::transform_for(side);
        let result = match self.files.normalized_scratch.take() {
            Some(from) => {
                let mut read = |offset, buf: &mut [u8]| sink.borrow_mut().read_scratch(from + offset, buf).map_err(|e| TransformStop::Caller(scratch_err(e)));
                transform.inverse(NormalizedBytes::Read { len: self.tree.delta_len(i), read: &mut read }, side, &mut emit)
            }
            None => transform.inverse(NormalizedBytes::InPlace(&mut normalized), side, &mut emit),
        };
        // The buffer is kept for the next transformed file (steady memory in wasm).
        normalized.clear();
        super::shrink(&mut normalized, 0);
        self.files.normalized = Some(normalized);
        match result {
            Ok(()) if written == size => Ok(hasher),
            Ok(()) => Err(Error::Corrupt {
                input: Input::Patch,
                offset: at,
                what: format!("{}: the inverted wasm module has {written} bytes, the tree says {size}", display_path(path)),
            }),
            Err(TransformStop::Caller(e)) => Err(e),
            Err(TransformStop::NotInput(e) | TransformStop::Corrupt(e)) => {
                Err(Error::Corrupt { input: Input::Patch, offset: at, what: format!("{}: {e}", display_path(path)) })
            }
        }
    }
}

/// Appends `data` to a normalized form gathered in memory, of which `left` bytes (`data`
/// among them) are still to come: reserved whole with its first bytes, since growing by
/// doubling would hold the old and the new buffer at once (1.5x the module in a wasm linear
/// memory that never shrinks). The size is capped (MAX_WASM_TRANSFORM_BYTES).
fn gather(buf: &mut Vec<u8>, left: u64, data: &[u8]) {
    let claimed = (buf.len() as u64 + left) as usize;
    if claimed > buf.capacity() {
        buf.reserve_exact(claimed - buf.len());
    }
    buf.extend_from_slice(data);
}

/// A file's BLAKE3 goes into the files digest, or is held in digest order
/// while copies the sink took are outstanding (`PatchApplier::held_hashes`).
/// (Free of `PatchApplier` so `start` can call it while it borrows the tree.)
fn record_hash(digest: &mut Option<blake3::Hasher>, held: &mut Option<Vec<Option<[u8; 32]>>>, hasher: blake3::Hasher) {
    let hash = hasher.finalize();
    match held {
        Some(held) => held.push(Some(*hash.as_bytes())),
        None => {
            digest.as_mut().expect("files digest not yet checked").update(hash.as_bytes());
        }
    }
}

/// A file is complete and verified (its bytes are counted as they are written).
fn count_file_done(summary: &mut ApplySummary, progress: &mut ApplyProgress, size: u64) {
    summary.files += 1;
    summary.bytes_written += size;
    progress.entries_done += 1;
}

/// Refuses a patch whose side infos need a decoder that trusts them (a compressed asset's
/// preflate corrections, docs/FORMAT.md §2.8.8) unless the sink trusts them
/// ([`BuildSink::trusts_side_infos`]): before anything is written.
/// A row this build cannot apply at all (a Brotli file where the build has no encoder) is
/// refused first, naming the capability.
fn check_side_infos<S: BuildSink>(tree: &PatchTree, sink: &S) -> Result<()> {
    let reads = crate::transforms::reader_capabilities();
    for w in &tree.transforms {
        let missing = crate::transforms::required_by_side_info(&w.side_info).difference(reads);
        if missing != edgepatch_format::Capabilities::BASELINE {
            return Err(Error::Invalid(format!(
                "{}: the patch needs reader capabilities {missing}, which this build does not read",
                super::display_path(&tree.entries[w.entry].path)
            )));
        }
    }
    let Some(w) = tree.transforms.iter().find(|w| edgepatch_format::compressed_side_info::is_compressed(&w.side_info)) else { return Ok(()) };
    if sink.trusts_side_infos() {
        return Ok(());
    }
    Err(Error::UnvouchedSideInfo {
        what: format!(
            "{}: the patch rebuilds this compressed file from preflate's corrections, which only a signed manifest's head BLAKE3 or the patch's own maker may vouch for (apply a patch you made with --trust-patch)",
            super::display_path(&tree.entries[w.entry].path)
        ),
    })
}
