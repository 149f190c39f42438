//! Diff: makes a patch that turns an old build into a new one.
//!
//! Files identical to an old file (same path, or renamed/moved) become copies and
//! cost a few bytes. All other new file contents are concatenated into one "new
//! stream" and diffed as a whole against one "reference stream" (all old files
//! concatenated), so a moved-and-changed file finds its old content wherever it
//! was, and small files keep the context of their neighbours. The new stream is
//! cut into independent segments, matched and compressed in parallel.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::build::{Build, EntryContent};
#[cfg(feature = "deflate-transform")]
use crate::compressed_assets::CompressedPairs;
use crate::error::{Error, Result};
use crate::matcher::{match_new_data, split_streams, MatchParams, OldIndex, Op};
use crate::patch_format::*;
use crate::trace::Trace;
pub use crate::tree_plan::DiffStats;
use crate::tree_plan::{encode_header_and_tree, plan_tree, PlannedKind};
use crate::window_plan::{is_text_segment, keep_densest, merge_weighted, split_old_paired, AlignedPart, Overflow, WasmChoice, WHOLE_FILES_BUDGET};
use crate::wire::put_varint;
use crate::zstd_frame::{compress, compress_frame, window_log, FrameSearch, LongDistance};
use edgepatch_format::{Capabilities, Capability};

/// How `diff_builds` makes a patch.
#[derive(Debug, Clone)]
pub struct DiffOptions {
    /// zstd level for the compressed streams (1..=22).
    pub level: i32,
    /// Worker threads for matching and compression (at least 1).
    pub threads: usize,
    /// New bytes per independent segment.
    pub segment_size: u64,
    /// Parameters of the bsdiff-like matcher (`matcher::match_new_data`).
    pub match_params: MatchParams,
    /// Store a changed wasm module as its normalized form where that makes
    /// the file's patch smaller (docs/FORMAT.md §2.8); off for measurement.
    pub wasm_transform: bool,
    /// How many delta-stream bytes before a window segment its window takes
    /// (at most `MAX_WINDOW_BACK`). Above `BASE_WINDOW_BACK`, a patch whose
    /// windows use more declares its reach (docs/FORMAT.md §2.6), which an
    /// applier then keeps.
    pub window_reach: u64,
    /// What the patch's reader understands: no feature outside it is used (a wasm module
    /// whose transform would need more is diffed as it is). Default: this build's own set.
    pub reader: Capabilities,
    /// Where the diff reports what its steps took (off by default: nothing measured).
    pub trace: Trace,
}

/// The diff's default window reach. 8 MiB: three-tree and typescript gain
/// nearly as much as with 16 MiB, and applying the 101 MiB pair in wasm stays
/// under 64 MB (16 MiB: 75 MB), as measured when the reach was chosen (BENCHMARKS.md's
/// history in git).
pub const DEFAULT_WINDOW_REACH: u64 = 8 << 20;

impl Default for DiffOptions {
    fn default() -> Self {
        DiffOptions {
            level: 19,
            threads: 2,
            segment_size: 4 << 20,
            match_params: MatchParams::default(),
            wasm_transform: true,
            window_reach: DEFAULT_WINDOW_REACH,
            reader: Capabilities::current(),
            trace: Trace::default(),
        }
    }
}

/// Makes the patch from `old` to `new`. `progress(done, total)` reports new
/// stream bytes matched; it is called from worker threads.
pub fn diff_builds(old: &Build, new: &Build, opts: &DiffOptions, progress: &(dyn Fn(u64, u64) + Sync)) -> Result<(Vec<u8>, DiffStats)> {
    let single_file = match (old.is_single_file(), new.is_single_file()) {
        (true, true) => true,
        (false, false) => false,
        _ => return Err(Error::Invalid("old and new must both be single files or both be directories".into())),
    };
    if !(1..=22).contains(&opts.level) {
        return Err(Error::Invalid(format!("compression level {} is not in 1..=22", opts.level)));
    }
    if opts.segment_size == 0 || opts.segment_size > MAX_SEGMENT_NEW {
        return Err(Error::Invalid(format!("segment size must be 1..={MAX_SEGMENT_NEW}")));
    }
    if opts.window_reach > MAX_WINDOW_BACK {
        return Err(Error::Invalid(format!("window reach must be at most {MAX_WINDOW_BACK}")));
    }
    let threads = opts.threads.max(1);

    // Hash every old and new file (in parallel: this is a full read of both builds).
    let old_files: Vec<(&str, &[u8])> = old.files().collect();
    let new_files: Vec<(&str, &[u8])> = new.files().collect();
    let old_hashes = parallel_hash(&old_files, threads);
    let new_hashes = parallel_hash(&new_files, threads);

    let old_list: Vec<(&str, u64, [u8; 32])> = old_files.iter().zip(&old_hashes).map(|((p, d), h)| (*p, d.len() as u64, *h)).collect();
    let mut new_hash = new_hashes.iter();
    let new_list: Vec<(&str, PlannedKind)> = new
        .entries
        .iter()
        .map(|e| {
            let kind = match &e.content {
                EntryContent::Directory => PlannedKind::Directory,
                EntryContent::Symlink { target } => PlannedKind::Symlink(target),
                EntryContent::File { executable, data } => {
                    PlannedKind::File { executable: *executable, size: data.len() as u64, blake3: *new_hash.next().expect("one hash per file") }
                }
            };
            (e.path.as_str(), kind)
        })
        .collect();
    let (mut tree, mut stats) = plan_tree(single_file, build_listing(old), &old_list, &new_list);
    // A tree no applier would take (§2.7) is refused now, before the expensive part.
    tree.encode()?;
    // tree.entries[i] is new.entries[i] (plan_tree keeps the order).
    let delta_files: Vec<(usize, &[u8])> = new
        .entries
        .iter()
        .enumerate()
        .filter_map(|(i, e)| match (&e.content, &tree.entries[i].kind) {
            (EntryContent::File { data, .. }, TreeEntryKind::File { source: FileSource::Delta, .. }) => Some((i, data.as_slice())),
            _ => None,
        })
        .collect();
    let mut normalized: HashMap<usize, Vec<u8>> = HashMap::new();
    // Old files the reference holds in the field-split layout, by path.
    let mut old_split: HashMap<String, Vec<u8>> = HashMap::new();
    // The parts of each new file stored in the field-split layout (relative to it and to its
    // old file), by entry.
    let mut split_parts: HashMap<usize, Vec<AlignedPart>> = HashMap::new();
    // A single file's choice diffed it against the whole reference already:
    // those segments are the patch's (the same inputs give the same bytes).
    let mut single_file_segments = None;
    // New files renamed from an old one (content-hashed names), by new path: that old file.
    let renamed = crate::renamed_files::renamed_paths_by_content(&old.files().collect::<Vec<_>>(), &new.files().collect::<Vec<_>>());
    // A reader without the mode-blind digest (§2.1) gets none.
    tree.omit_mode_blind_digest = !opts.reader.contains(Capability::ModeBlindDigest);
    if opts.wasm_transform && opts.reader.contains(Capability::WasmTransform) {
        for &(i, data) in &delta_files {
            let path = tree.entries[i].path.as_str();
            // The old module: at the same path, or the one it was renamed from (whose index the
            // patch's row names, if it is read split: FLAG_SPLIT_REFERENCE).
            let (old_data, old_path) = match (wasm_reference_for(&old_files, path, single_file), renamed.get(path)) {
                (Some(d), _) => (d, if single_file { old_files[0].0 } else { path }),
                (None, Some(&o)) => match wasm_reference_for(&old_files, o, false) {
                    Some(d) => (d, o),
                    None => continue,
                },
                (None, None) => continue,
            };
            // A split module read against a renamed old file needs its row to name that file.
            let renamed_split = old_path != path && !single_file;
            let split_allowed = opts.reader.contains(Capability::WasmSplitLayout) && (!renamed_split || opts.reader.contains(Capability::WasmSplitReference));
            let Some(choice) = transform_if_smaller(old_data, data, opts, split_allowed, threads)? else { continue };
            if let Some((bytes, side_info)) = choice.transformed {
                let split_reference =
                    (choice.old_split.is_some() && old_path != path && !single_file).then(|| old_files.iter().position(|(p, _)| *p == old_path)).flatten();
                tree.transforms.push(WasmTransformed { entry: i, normalized_size: bytes.len() as u64, side_info, split_reference });
                normalized.insert(i, bytes);
            }
            if let Some((split, parts)) = choice.old_split {
                old_split.insert(old_path.to_string(), split);
                split_parts.insert(i, parts);
            }
            if single_file {
                single_file_segments = Some(choice.segments);
            }
        }
        stats.wasm_transformed = tree.transforms.len() as u64;
    }
    #[cfg(feature = "deflate-transform")]
    {
        let try_wasm = |old: &[u8], new: &[u8], split_allowed: bool| transform_if_smaller(old, new, opts, split_allowed, threads);
        let pairs = CompressedPairs {
            single_file,
            delta_files: &delta_files,
            old_files: &old_files,
            renamed: &renamed,
            reader: opts.reader,
            wasm_transform: opts.wasm_transform.then_some(&try_wasm),
        };
        let chosen = crate::compressed_assets::store_decoded(pairs, &mut tree, &mut normalized, &mut old_split, &mut split_parts)?;
        stats.compressed_transformed = chosen.files;
        if single_file && chosen.single_file_segments.is_some() {
            single_file_segments = chosen.single_file_segments;
        }
    }
    let new_stream_parts: Vec<&[u8]> = delta_files.iter().map(|&(i, data)| normalized.get(&i).map_or(data, |n| n.as_slice())).collect();

    // The reference stream is only needed if there is something to diff.
    let new_stream = concat_or_borrow(&new_stream_parts);
    let reference_parts: Vec<&[u8]> =
        old_files.iter().zip(&tree.old_files).filter(|(_, t)| t.in_reference).map(|((p, d), _)| old_split.get(*p).map_or(*d, |s| s.as_slice())).collect();
    let reference = concat_or_borrow(&reference_parts);
    stats.new_bytes = new.total_file_bytes();
    stats.delta_bytes = new_stream.len() as u64;
    stats.reference_bytes = reference.len() as u64;

    // Where each delta file's old version (same path) sits in the reference stream.
    let mut ref_start = Vec::with_capacity(old_files.len());
    let mut at = 0u64;
    // An old file read split takes its layout's length (a compressed asset's: decoded).
    let reference_len = |o: usize| old_split.get(old_files[o].0).map_or(old_files[o].1.len(), |s| s.len()) as u64;
    for (o, t) in tree.old_files.iter().enumerate() {
        ref_start.push(t.in_reference.then_some(at));
        at += if t.in_reference { reference_len(o) } else { 0 };
    }
    let old_by_path: HashMap<&str, usize> = old_files.iter().enumerate().map(|(i, (p, _))| (*p, i)).collect();
    let mut hints = Vec::with_capacity(delta_files.len());
    let mut aligned = Vec::new();
    let mut at = 0u64;
    for (&(i, _), part) in delta_files.iter().zip(&new_stream_parts) {
        let path = tree.entries[i].path.as_str();
        // The old version: at the same path, or the one it was renamed from.
        let same = if single_file { Some(0) } else { old_by_path.get(path).or_else(|| renamed.get(path).and_then(|o| old_by_path.get(o))).copied() };
        let old = same.and_then(|o| ref_start[o].map(|s| (s, s + reference_len(o)))).filter(|r| r.1 > r.0);
        // A module in the field-split layout: its parts, each against the old module's.
        if let (Some(parts), Some((old_start, _))) = (split_parts.get(&i), old) {
            aligned.extend(parts.iter().map(|p| AlignedPart { new: (p.new.0 + at, p.new.1 + at), old: (p.old.0 + old_start, p.old.1 + old_start) }));
        }
        hints.push(FileHint { new_start: at, new_end: at + part.len() as u64, old });
        at += part.len() as u64;
    }

    let segments = match single_file_segments {
        Some(segments) => {
            progress(new_stream.len() as u64, new_stream.len() as u64);
            segments
        }
        None => encode_segments(&reference, &new_stream, &hints, &aligned, opts, threads, progress)?,
    };
    let used = segments_use(&segments)?;
    // Only a patch whose windows reach further than the base declares it.
    tree.window_reach = Some(used.reach).filter(|&r| r > BASE_WINDOW_BACK);
    tree.run_coded_diff = used.run_coded;
    tree.lzma_segments = used.lzma;
    let mut out = encode_header_and_tree(&tree, opts.level)?;
    for seg in &segments {
        out.extend_from_slice(seg);
    }
    out.push(END_TAG);
    put_varint(&mut out, segments.len() as u64);
    put_varint(&mut out, new_stream.len() as u64);
    let checksum = blake3::hash(&out);
    out.extend_from_slice(checksum.as_bytes());
    stats.segments = segments.len() as u64;
    stats.patch_bytes = out.len() as u64;
    Ok((out, stats))
}

/// The old module a new wasm file's transform is made against: the old file
/// at the same path (the one file of a single-file patch), if it is wasm.
/// Which old module is used is the writer's choice: the side info holds all
/// the inverse needs, whatever it was made from.
fn wasm_reference_for<'a>(old_files: &[(&str, &'a [u8])], path: &str, single_file: bool) -> Option<&'a [u8]> {
    let is_wasm = |d: &[u8]| d.starts_with(b"\0asm");
    let found = if single_file { old_files.first() } else { old_files.iter().find(|(p, _)| *p == path) };
    found.map(|(_, d)| *d).filter(|d| is_wasm(d))
}

/// The smallest of three forms of `new`, each diffed against `old` alone (side
/// infos compressed at the same level): as it is; its normalized form (if
/// something was renumbered); and its normalized form in the field-split
/// layout against the old module in that layout (§2.8.7), when both split.
/// None: the transform does not apply (not wasm modules it reads). The
/// applier reads the old file as it is or split, so the old module must be
/// its own normalized form (true for canonical LEB128s: every toolchain
/// measured).
/// Only forms the reader can apply are tried (`opts.reader`, and the split one only where
/// `split_allowed`).
fn transform_if_smaller(old: &[u8], new: &[u8], opts: &DiffOptions, split_allowed: bool, threads: usize) -> Result<Option<WasmChoice>> {
    // The safety checks are the generator's too (one place: crate::generate).
    let Some(n) = crate::generate::normalize_even_unchanged(old, new) else { return Ok(None) };
    // Nothing renumbered: only the split layout can make the normalized form pay.
    let readable = |side_info: &[u8]| crate::transforms::required_by_side_info(side_info).is_subset(opts.reader);
    let renumbered = n.bytes != new && readable(&n.side_info);
    let quiet = |_: u64, _: u64| {};
    let size = |segments: &[Vec<u8>], side_info: &[u8]| -> Result<usize> {
        let side = if side_info.is_empty() { 0 } else { compress(side_info, opts.level)?.len() };
        Ok(segments.iter().map(|s| s.len()).sum::<usize>() + side)
    };
    // The new module's old version is the whole reference: a window segment may take it whole.
    let whole = |len: usize| [FileHint { new_start: 0, new_end: len as u64, old: Some((0, old.len() as u64)) }];
    let plain = encode_segments(old, new, &whole(new.len()), &[], opts, threads, &quiet)?;
    let mut best = (size(&plain, &[])?, WasmChoice { transformed: None, old_split: None, segments: plain });
    // The field-split layout of both modules (docs/FORMAT.md §2.8.7): smaller on
    // re-emitted code (a toolchain change), larger on some small changes.
    let split =
        split_allowed.then(|| crate::wasm_transform::with_code_layout_against(&n, old).ok()).flatten().filter(|s| readable(&s.side_info)).and_then(|s| {
            // Each part of the split module is diffed against the old module's same part.
            let (old_split, parts) = split_old_paired(Cow::Borrowed(old), &s.bytes, &s.side_info).ok()?;
            Some((old_split, s, parts))
        });
    if renumbered {
        let segments = encode_segments(old, &n.bytes, &whole(n.bytes.len()), &[], opts, threads, &quiet)?;
        let t_size = size(&segments, &n.side_info)?;
        if t_size < best.0 {
            best = (t_size, WasmChoice { transformed: Some((n.bytes, n.side_info)), old_split: None, segments });
        }
    }
    if let Some((old_split, n, parts)) = split {
        let segments = encode_segments(&old_split, &n.bytes, &whole(n.bytes.len()), &parts, opts, threads, &quiet)?;
        let s_size = size(&segments, &n.side_info)?;
        if s_size < best.0 {
            best = (s_size, WasmChoice { transformed: Some((n.bytes, n.side_info)), old_split: Some((old_split, parts)), segments });
        }
    }
    Ok(Some(best.1))
}

/// The listing of a build in memory (docs/FORMAT.md §2.1).
pub fn build_listing(build: &Build) -> Vec<ListedEntry> {
    if build.is_single_file() {
        return single_file_listing(build.total_file_bytes());
    }
    build
        .entries
        .iter()
        .map(|e| ListedEntry {
            path: e.path.clone(),
            kind: match &e.content {
                EntryContent::Directory => ListedKind::Directory,
                EntryContent::Symlink { target } => ListedKind::Symlink { target: target.clone() },
                EntryContent::File { executable, data } => ListedKind::File { executable: *executable, size: data.len() as u64 },
            },
        })
        .collect()
}

/// What the header's flags must allow for `segments`, read from their headers.
struct SegmentsUse {
    /// The furthest any window segment reaches back into the delta stream.
    reach: u64,
    /// Some ops segment's diff stream is run-coded (`R`, or `M` in form 1; flags bit 3).
    run_coded: bool,
    /// Some segment is `L` or `M` (flags bit 6).
    lzma: bool,
}

fn segments_use(segments: &[Vec<u8>]) -> Result<SegmentsUse> {
    let mut used = SegmentsUse { reach: 0, run_coded: false, lzma: false };
    for seg in segments {
        let mut input = crate::apply::PatchInput::new(seg.as_slice());
        match crate::apply::read_segment_header(&mut input, 0, u64::MAX, u64::MAX, MAX_WINDOW_BACK)? {
            Some(Segment::Window(w)) => {
                used.reach = used.reach.max(w.back_len);
                used.lzma |= w.codec != WindowCodec::Zstd;
            }
            Some(Segment::Ops(h)) => {
                used.run_coded |= h.diff_coded > 0;
                used.lzma |= h.lzma.iter().any(Option::is_some);
            }
            None => {}
        }
    }
    Ok(used)
}

/// One part is borrowed as is (the single-file case), saving a copy of it.
fn concat_or_borrow<'a>(parts: &[&'a [u8]]) -> Cow<'a, [u8]> {
    match parts {
        [one] => Cow::Borrowed(one),
        _ => Cow::Owned(parts.concat()),
    }
}

fn parallel_hash(files: &[(&str, &[u8])], threads: usize) -> Vec<[u8; 32]> {
    let results = parallel_map(files.len(), threads, |i| *blake3::hash(files[i].1).as_bytes());
    results
}

/// Runs `f(0..n)` on `threads` scoped threads, results in index order.
fn parallel_map<T: Send>(n: usize, threads: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    if threads <= 1 || n <= 1 {
        return (0..n).map(f).collect();
    }
    let next = AtomicUsize::new(0);
    let slots: Mutex<Vec<Option<T>>> = Mutex::new((0..n).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..threads.min(n) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                let r = f(i);
                slots.lock().unwrap()[i] = Some(r);
            });
        }
    });
    slots.into_inner().unwrap().into_iter().map(|r| r.expect("every slot filled")).collect()
}

/// A delta file's place in the new stream and its old version's in the reference stream.
#[derive(Debug, Clone, Copy)]
struct FileHint {
    new_start: u64,
    new_end: u64,
    old: Option<(u64, u64)>,
}

/// `aligned`: ascending, disjoint parts of `new_stream` cut apart from the rest.
fn encode_segments(
    reference: &[u8],
    new_stream: &[u8],
    hints: &[FileHint],
    aligned: &[AlignedPart],
    opts: &DiffOptions,
    threads: usize,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Result<Vec<Vec<u8>>> {
    if new_stream.is_empty() {
        return Ok(Vec::new());
    }
    if reference.len() >= i32::MAX as usize {
        return Err(Error::Invalid(format!("old data of {} bytes: the suffix array this diff uses holds at most 2 GiB of old data", reference.len())));
    }
    let trace = &opts.trace;
    let started = trace.start();
    let index = OldIndex::new(reference);
    if let Some(started) = started {
        trace.line(&format!("suffix array of {} bytes: {:.2}s", reference.len(), started.elapsed().as_secs_f64()));
    }
    let cuts: Vec<u64> = aligned.iter().flat_map(|p| [p.new.0, p.new.1]).collect();
    let bounds = segment_bounds_cut(new_stream.len(), opts.segment_size as usize, &cuts);
    let count = bounds.len();
    let done = AtomicU64::new(0);
    let total = new_stream.len() as u64;
    let report = |n: u64| progress(done.fetch_add(n, Ordering::Relaxed) + n, total);
    let results = parallel_map(count, threads, |i| {
        let (lo, hi) = bounds[i];
        let part = &new_stream[lo..hi];
        let t = trace.start();
        let ops = match_new_data(&index, part, opts.match_params, &report);
        if let Some(t) = t {
            trace.line(&format!("segment {i}: matched in {:.2}s", t.elapsed().as_secs_f64()));
        }
        let t = trace.start();
        // Only text reaches past the base: that is where files of a build repeat each other's
        // changes megabytes apart (bundles and their sources), and a binary segment's extra
        // window trial doubled the diff's CPU on freedoom2-wad and concat-101mib for nothing
        // kept (BENCHMARKS.md, "Trees: window segments reaching further back").
        let far = is_text_segment(part) && opts.reader.contains(Capability::WindowReach);
        let reach = if far { opts.window_reach } else { opts.window_reach.min(BASE_WINDOW_BACK) };
        // Segments never straddle a part (cut at both its ends), so the one part that may hold
        // this segment is the last starting at or before it.
        let within = aligned[..aligned.partition_point(|p| p.new.0 <= lo as u64)].last().filter(|p| hi as u64 <= p.new.1);
        let before = &new_stream[lo.saturating_sub(reach as usize).max(within.map_or(0, |p| p.new.0 as usize))..lo];
        let (lo, hi) = (lo as u64, hi as u64);
        // The old versions of the files this segment holds (any part of), or its part's.
        let whole: Vec<(u64, u64)> = match within {
            Some(p) => vec![p.old],
            None => hints.iter().filter(|h| h.new_start < hi && h.new_end > lo).filter_map(|h| h.old).collect(),
        };
        let r = encode_segment(reference, part, before, &ops, &whole, within.is_some(), opts);
        if let Some(t) = t {
            let old = within.map_or(String::new(), |p| format!(" against old {}..{}", p.old.0, p.old.1));
            trace.line(&format!("segment {i} (new {lo}..{hi}{old}): encoded in {:.2}s ({:?} bytes)", t.elapsed().as_secs_f64(), r.as_ref().map(Vec::len).ok()));
        }
        r
    });
    results.into_iter().collect()
}

/// The delta stream's segments as (start, end): `seg` bytes each, except that a
/// last one under a quarter of `seg` joins the one before (within
/// `MAX_SEGMENT_NEW`): a short segment starts its three zstd frames with
/// nothing learned (react-dom 18.2.0 -> 18.3.1's 290 KB tail cost 134 bytes).
fn segment_bounds(len: usize, seg: usize) -> Vec<(usize, usize)> {
    let mut bounds: Vec<(usize, usize)> = (0..len.div_ceil(seg)).map(|i| (i * seg, ((i + 1) * seg).min(len))).collect();
    if let [.., prev, last] = bounds.as_slice() {
        if (last.1 - last.0) < seg / 4 && (last.1 - prev.0) as u64 <= MAX_SEGMENT_NEW {
            let end = last.1;
            bounds.pop();
            bounds.last_mut().expect("two segments").1 = end;
        }
    }
    bounds
}

/// [`segment_bounds`] of each stretch between `cuts` (ascending places in 0..=len).
fn segment_bounds_cut(len: usize, seg: usize, cuts: &[u64]) -> Vec<(usize, usize)> {
    let mut bounds = Vec::new();
    let mut start = 0;
    for end in cuts.iter().map(|&c| c as usize).chain([len]) {
        if end > start && end <= len {
            bounds.extend(segment_bounds(end - start, seg).into_iter().map(|(a, b)| (a + start, b + start)));
            start = end;
        }
    }
    bounds
}

/// The forms a segment may take: its zstd level, and whether the reader takes LZMA segments
/// and run-coded diff streams.
#[derive(Clone, Copy)]
struct SegmentForms {
    level: i32,
    lzma: bool,
    run_coded: bool,
}

impl SegmentForms {
    fn of(opts: &DiffOptions) -> SegmentForms {
        SegmentForms {
            level: opts.level,
            lzma: opts.level >= LZMA_MIN_LEVEL && opts.reader.contains(Capability::LzmaSegments),
            run_coded: opts.reader.contains(Capability::RunCodedOps),
        }
    }
}

/// `before`: the new-stream bytes just before `part` that a window may reach back to.
fn encode_segment(reference: &[u8], part: &[u8], before: &[u8], ops: &[Op], whole: &[(u64, u64)], aligned: bool, opts: &DiffOptions) -> Result<Vec<u8>> {
    let forms = SegmentForms::of(opts);
    let level = forms.level;
    let ctrl = encode_control(ops);
    if ctrl.len() as u64 > MAX_SEGMENT_CTRL {
        return Err(Error::Invalid("control stream of a segment over its limit; use a smaller segment size".into()));
    }
    let (diff, extra) = split_streams(reference, part, ops);
    let encoded = encode_ops_streams(part.len() as u64, &ctrl, &diff, &extra, OpsForms { lzma: forms.lzma, run_coded: forms.run_coded }, |data, _| {
        compress(data, level)
    })?;
    // The rule reads the zstd streams' sizes, on which it was measured (`OpsEncoding`).
    let (out, h) = (encoded.bytes, encoded.zstd_header);
    // Where the control stream is a large share (text: many short matches), a
    // zstd frame over the old spans the ops found often does better. Keep the smaller.
    // (Tiny results are not worth the window's slow compression.)
    if aligned || (h.ctrl_comp * 5 > h.diff_comp + h.extra_comp && encoded.zstd_len > WINDOW_TRIAL_MIN as u64) {
        let t = opts.trace.start();
        let mut window = encode_window_segment(reference, part, before, ops, whole, aligned, forms)?;
        // Reaching past the base (§2.6) moves the match finder's choices: on
        // freedoom2-wad it cost 66 bytes. The base reach is tried too, and the
        // longer one kept only where it saves a tenth: a patch that declares a
        // reach costs its applier that reach (the 101 MiB pair saved 1,931
        // bytes for 21 MB more wasm memory; three-tree's last segment, 80%).
        let base = before.len().saturating_sub(BASE_WINDOW_BACK as usize);
        if base > 0 {
            let near = encode_window_segment(reference, part, &before[base..], ops, whole, aligned, forms)?;
            if window.len() * 10 > near.len() * 9 {
                window = near;
            }
        }
        if let Some(t) = t {
            opts.trace.line(&format!("  window trial {:.2}s: {} vs ops {}", t.elapsed().as_secs_f64(), window.len(), out.len()));
        }
        if window.len() < out.len() {
            return Ok(window);
        }
    }
    Ok(out)
}

/// The lowest diff level that tries LZMA window segments (the CLI's default, 19): below it
/// a diff is asked to be fast, and LZMA's search costs more than zstd's.
const LZMA_MIN_LEVEL: i32 = 19;

/// Old bytes around each copied span are taken into the window too: zstd finds
/// short matches there that the ops did not use.
const WINDOW_SPAN_PADDING: u64 = 4 << 10;
const WINDOW_TRIAL_MIN: usize = 16 << 10;

/// The reference spans a window segment's frame gets (sorted, disjoint, at most
/// `MAX_WINDOW_BYTES` in total): first the whole old versions of the segment's
/// files (`whole`), densest in copied bytes first, up to `WHOLE_FILES_BUDGET`;
/// then the old spans the ops copy from, padded, densest first.
/// The flag: at least one whole file was kept.
fn window_spans(reference_len: u64, ops: &[Op], whole: &[(u64, u64)]) -> (Vec<(u64, u64)>, bool) {
    // Old spans the ops copy from, padded, merged, and weighted by bytes copied.
    let mut spans: Vec<(u64, u64, u64)> = Vec::new(); // (start, end, copied)
    let mut at = 0i64;
    for op in ops {
        if op.copy_len > 0 {
            let start = (at + op.diagonal) as u64;
            spans.push((start.saturating_sub(WINDOW_SPAN_PADDING), (start + op.copy_len + WINDOW_SPAN_PADDING).min(reference_len), op.copy_len));
        }
        at += (op.copy_len + op.extra_len) as i64;
    }
    let merged = merge_weighted(spans);
    // Whole files, each weighted by the copied bytes of the spans over it (pro rata).
    let mut files: Vec<(u64, u64, u64)> = whole.iter().filter(|w| w.1 > w.0).map(|&(s, e)| (s, e, 0)).collect();
    files.sort_unstable();
    files.dedup();
    for f in &mut files {
        // Merged spans are disjoint and sorted, so their ends ascend too.
        let first = merged.partition_point(|m| m.1 <= f.0);
        let share = |m: &(u64, u64, u64)| m.2 * (m.1.min(f.1) - m.0.max(f.0)) / (m.1 - m.0);
        f.2 = merged[first..].iter().take_while(|m| m.0 < f.1).map(share).sum();
    }
    let mut kept = 0u64;
    let mut chosen = keep_densest(files, WHOLE_FILES_BUDGET, &mut kept, Overflow::Skip);
    chosen.sort_unstable();
    let holds_whole_files = !chosen.is_empty();
    // The copied spans, less what the chosen files cover.
    let mut rest: Vec<(u64, u64, u64)> = Vec::new();
    for m in merged {
        let mut start = m.0;
        let mut i = chosen.partition_point(|c| c.1 <= start);
        while start < m.1 {
            match chosen.get(i) {
                Some(c) if c.0 < m.1 => {
                    if c.0 > start {
                        rest.push((start, c.0, m.2));
                    }
                    start = start.max(c.1);
                    i += 1;
                }
                _ => {
                    rest.push((start, m.1, m.2));
                    break;
                }
            }
        }
    }
    chosen.extend(keep_densest(rest, MAX_WINDOW_BYTES, &mut kept, Overflow::Skip));
    chosen.sort_unstable();
    // Adjacent spans join (fewer span records).
    let mut out: Vec<(u64, u64)> = Vec::new();
    for c in chosen {
        match out.last_mut() {
            Some(o) if c.0 <= o.1 => o.1 = o.1.max(c.1),
            _ => out.push(c),
        }
    }
    out.truncate(MAX_WINDOW_SPANS as usize);
    (out, holds_whole_files)
}

fn encode_window_segment(
    reference: &[u8],
    part: &[u8],
    before: &[u8],
    ops: &[Op],
    whole: &[(u64, u64)],
    aligned: bool,
    forms: SegmentForms,
) -> Result<Vec<u8>> {
    let level = forms.level;
    let (merged, holds_whole_files) = if aligned && whole.iter().map(|w| w.1 - w.0).sum::<u64>() <= WHOLE_FILES_BUDGET {
        (whole.to_vec(), true)
    } else {
        window_spans(reference.len() as u64, ops, whole)
    };
    // The new data just before the segment goes last, nearest: other files of
    // the same build share most with it (bundles, their minified twins). New
    // data further back than the base reach goes first, furthest, so that it
    // does not push the old spans out of the match finder's reach (§2.6).
    let (far, near) = before.split_at(before.len().saturating_sub(BASE_WINDOW_BACK as usize));
    let mut window: Vec<u8> = Vec::with_capacity(before.len() + merged.iter().map(|m| (m.1 - m.0) as usize).sum::<usize>());
    window.extend_from_slice(far);
    for m in &merged {
        window.extend_from_slice(&reference[m.0 as usize..m.1 as usize]);
    }
    window.extend_from_slice(near);
    let window_log = window_log(window.len() + part.len());
    let search = FrameSearch {
        // Long-distance matching finds the long matches anywhere in a large window
        // (what `zstd --long --patch-from` does); the decoder does not see it.
        long_distance: Some(LongDistance::default()),
        // Old files taken whole fill the window with data worth reaching: the
        // binary tree of zstd's optimal parsers reaches 2^(chainLog - 1) bytes
        // back (2^23 at level 19), so let it reach 2^24 (128 MiB of tables).
        chain_log: (holds_whole_files && window_log >= 24 && level >= 16).then_some(25),
        ..FrameSearch::level(level)
    };
    let mut frame = compress_frame(part, &window, search)?;
    let mut codec = WindowCodec::Zstd;
    // A field stream of a split module is one kind of number, mostly new code: LZMA's model
    // (literals after the byte before, repeated distances, a range coder) takes 5-9% fewer
    // bytes there than zstd's (BENCHMARKS.md, "LZMA segments"). Tried where the diff is at
    // its default level or above, on the parts it was measured on.
    if aligned && forms.lzma {
        (frame, codec) = crate::lzma::smallest_window_form(part, &window, frame, crate::patch_format::MAX_LZMA_DICTIONARY);
    }
    let header = WindowSegmentHeader {
        new_len: part.len() as u64,
        spans: merged.iter().map(|m| (m.0, m.1 - m.0)).collect(),
        back_len: before.len() as u64,
        comp_len: frame.len() as u64,
        codec,
    };
    let mut out = Vec::with_capacity(frame.len() + 16 + header.spans.len() * 6);
    header.encode(&mut out);
    out.extend_from_slice(&frame);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn covers(spans: &[(u64, u64)], range: (u64, u64)) -> bool {
        spans.iter().any(|&(s, e)| s <= range.0 && e >= range.1)
    }

    #[test]
    fn window_spans_take_the_whole_old_file_then_the_copied_spans() {
        // One copy of 1000 bytes at 500_000 into a 1 MiB old file (0..1 MiB),
        // one at 5 MiB outside it.
        let ops = [Op { diagonal: 500_000, copy_len: 1000, extra_len: 10 }, Op { diagonal: (5 << 20) - 1010, copy_len: 1000, extra_len: 0 }];
        let (spans, whole) = window_spans(16 << 20, &ops, &[(0, 1 << 20)]);
        assert!(whole);
        assert!(covers(&spans, (0, 1 << 20)), "{spans:?}");
        let far = (5u64 << 20) - WINDOW_SPAN_PADDING;
        assert!(covers(&spans, (far, (5 << 20) + 1000 + WINDOW_SPAN_PADDING)), "{spans:?}");
        // Without the file: only the padded copies.
        let (spans, whole) = window_spans(16 << 20, &ops, &[]);
        assert!(!whole);
        assert_eq!(spans.iter().map(|s| s.1 - s.0).sum::<u64>(), 2 * (1000 + 2 * WINDOW_SPAN_PADDING));
    }

    #[test]
    fn keep_densest_cuts_or_skips_what_does_not_fit() {
        // Densities: 10 per byte (a), 5 (b), 1 (c).
        let spans = vec![(0, 100, 500), (100, 200, 1000), (500, 520, 20)];
        let mut used = 0;
        // Cut: a whole (100), then b's first 50, then stop.
        assert_eq!(keep_densest(spans.clone(), 150, &mut used, Overflow::Cut), vec![(100, 200), (0, 50)]);
        assert_eq!(used, 150);
        // Skip: a, not b (100 > 50 left), then c (20).
        let mut used = 0;
        assert_eq!(keep_densest(spans.clone(), 150, &mut used, Overflow::Skip), vec![(100, 200), (500, 520)]);
        assert_eq!(used, 120);
        // What is already used counts.
        let mut used = 140;
        assert_eq!(keep_densest(spans, 150, &mut used, Overflow::Cut), vec![(100, 110)]);
    }

    #[test]
    fn merge_weighted_joins_touching_spans_and_sums_weights() {
        let merged = merge_weighted(vec![(50, 60, 1), (0, 10, 2), (10, 20, 3), (5, 8, 4)]);
        assert_eq!(merged, vec![(0, 20, 9), (50, 60, 1)]);
    }

    #[test]
    fn window_spans_keep_to_the_budget() {
        // Files over three quarters of the budget: the densest in copies first.
        let files = [(0, 3 << 20), (3 << 20, 10 << 20), (10 << 20, 12 << 20)];
        let ops = [Op { diagonal: (10 << 20) + 100, copy_len: 100_000, extra_len: 0 }];
        let (spans, whole) = window_spans(64 << 20, &ops, &files);
        assert!(whole);
        let total: u64 = spans.iter().map(|s| s.1 - s.0).sum();
        assert!(total <= MAX_WINDOW_BYTES, "{total}");
        assert!(covers(&spans, (10 << 20, 12 << 20)), "the file copied from is kept: {spans:?}");
        assert!(covers(&spans, (0, 3 << 20)), "then the next that fits: {spans:?}");
        assert!(!covers(&spans, (3 << 20, 10 << 20)), "{spans:?}");
        assert!(spans.windows(2).all(|w| w[0].1 < w[1].0), "sorted, disjoint, not adjacent: {spans:?}");
    }

    #[test]
    fn segments_end_at_every_cut() {
        assert_eq!(segment_bounds_cut(20, 8, &[]), segment_bounds(20, 8));
        // Each stretch is cut as segment_bounds cuts it (3..12: a 1-byte tail joins).
        assert_eq!(segment_bounds_cut(20, 8, &[3, 3, 12]), vec![(0, 3), (3, 12), (12, 20)]);
        assert_eq!(segment_bounds_cut(30, 8, &[3]), vec![(0, 3), (3, 11), (11, 19), (19, 27), (27, 30)]);
        // A cut at either end, or past it, cuts nothing.
        assert_eq!(segment_bounds_cut(10, 8, &[0, 10, 15]), vec![(0, 8), (8, 10)]);
    }

    #[test]
    fn a_short_last_segment_joins_the_one_before() {
        assert_eq!(segment_bounds(10, 4), vec![(0, 4), (4, 8), (8, 10)]);
        assert_eq!(segment_bounds(17, 8), vec![(0, 8), (8, 17)]);
        assert_eq!(segment_bounds(18, 8), vec![(0, 8), (8, 16), (16, 18)]);
        assert_eq!(segment_bounds(3, 4), vec![(0, 3)]);
        assert_eq!(segment_bounds(0, 4), vec![]);
    }
}
