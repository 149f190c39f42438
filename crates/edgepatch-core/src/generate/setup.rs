//! Setting a generator up: the patch's tree and the reference stream from the two
//! signatures, the delta stream's layout (files, transformed modules' parts, segments), the
//! wasm transforms and the settings, which all come before the first segment.

use std::collections::HashMap;

use super::{invalid, PatchGenerator, WasmTransform, GENERATOR_SEGMENT, GENERATOR_TEXT_REACH, MAX_OLD_BUDGET, TEXT_FILE_EXTENSIONS};
use crate::error::Result;
use crate::patch_format::{FileSource, TreeEntryKind, WasmTransformed, MAX_LZMA_DICTIONARY, MAX_WINDOW_BYTES};
use crate::signature::{Signature, SignedKind};
use crate::trace::Trace;
use crate::tree_plan::{plan_tree, DiffStats, PlannedKind};
use crate::window_plan::AlignedPart;
use edgepatch_format::{Capabilities, Capability};

impl PatchGenerator {
    /// `old` None is the empty build (the patch installs `new`).
    pub fn new(old: Option<&Signature>, new: &Signature, level: i32) -> Result<PatchGenerator> {
        if !(1..=22).contains(&level) {
            return Err(invalid(format!("compression level {level} is not in 1..=22")));
        }
        let single_file = new.is_single_file();
        if let Some(old) = old {
            if old.is_single_file() != single_file {
                return Err(invalid("old and new must both be single files or both be directories"));
            }
        } else if single_file {
            return Err(invalid("a single-file patch needs an old file"));
        }
        let old_entries = old.map(|o| o.entries.as_slice()).unwrap_or(&[]);
        let old_list: Vec<(&str, u64, [u8; 32])> = old_entries
            .iter()
            .filter_map(|e| match &e.kind {
                SignedKind::File { size, blake3, .. } => Some((e.path.as_str(), *size, *blake3)),
                _ => None,
            })
            .collect();
        let new_list: Vec<(&str, PlannedKind)> = new
            .entries
            .iter()
            .map(|e| {
                let kind = match &e.kind {
                    SignedKind::Directory => PlannedKind::Directory,
                    SignedKind::Symlink { target } => PlannedKind::Symlink(target),
                    SignedKind::File { executable, size, blake3, .. } => PlannedKind::File { executable: *executable, size: *size, blake3: *blake3 },
                };
                (e.path.as_str(), kind)
            })
            .collect();
        let listing = old.map(Signature::listing).unwrap_or_default();
        let (tree, mut stats) = plan_tree(single_file, listing, &old_list, &new_list);
        // A tree no applier would take (§2.7) is refused now, before any segment is made.
        tree.encode()?;

        let (mut reference, mut at) = (Vec::new(), 0u64);
        let mut by_path = HashMap::new();
        let mut blocks: HashMap<u32, Vec<(u64, u64)>> = HashMap::new();
        let block_size = old.map_or(crate::signature::DEFAULT_BLOCK_SIZE, |o| o.block_size) as usize;
        let old_blocks = old_entries.iter().filter_map(|e| match &e.kind {
            SignedKind::File { blocks, .. } => Some(blocks),
            _ => None,
        });
        for (f, file_blocks) in tree.old_files.iter().zip(old_blocks) {
            if !f.in_reference {
                continue;
            }
            for (j, b) in file_blocks.iter().enumerate() {
                // A short last block cannot match a whole-block window.
                if ((j + 1) * block_size) as u64 <= f.size {
                    blocks.entry(b.weak).or_default().push((b.strong, at + (j * block_size) as u64));
                }
            }
            by_path.insert(f.path.as_str(), (at, f.size));
            reference.push((f.path.clone(), at, f.size));
            at += f.size;
        }
        let reference_len = at;
        // A file renamed (content-hashed names) is aligned with the old file it replaced.
        let old_paths = old.map(Signature::file_paths).unwrap_or_default();
        for (new_path, old_path) in crate::renamed_files::renamed_paths(&old_paths, &new.file_paths()) {
            if let Some(&r) = by_path.get(old_path) {
                by_path.insert(new_path, r);
            }
        }
        let reference_by_path = by_path.into_iter().map(|(p, r)| (p.to_string(), r)).collect();
        stats.new_bytes = new.entries.iter().map(|e| if let SignedKind::File { size, .. } = e.kind { size } else { 0 }).sum();
        stats.reference_bytes = reference_len;
        let mut g = PatchGenerator {
            tree,
            level,
            delta: Vec::new(),
            counterpart: Vec::new(),
            delta_transform: Vec::new(),
            wasm: Vec::new(),
            reference_by_path,
            new_total: 0,
            starts: Vec::new(),
            aligned: Vec::new(),
            reference_split: vec![false; reference.len()],
            reference,
            reference_len,
            block_size,
            blocks,
            history: Vec::new(),
            next: 0,
            planned: None,
            old_budget: MAX_WINDOW_BYTES,
            deep_text_windows: false,
            lzma_windows: 0,
            lzma_streams: false,
            reader: Capabilities::current(),
            trace: Trace::default(),
            hasher: blake3::Hasher::new(),
            out_len: 0,
            segments: Vec::new(),
            spans: Vec::new(),
            header_done: false,
            head_blake3: [0; 32],
            patch_blake3: None,
            new_hashes: new.entries.iter().map(|e| if let SignedKind::File { blake3, .. } = e.kind { blake3 } else { [0; 32] }).collect(),
            stats,
            ops_segments: 0,
            step: false,
        };
        g.lay_out_delta_stream();
        Ok(g)
    }

    /// The delta files' places in the new stream, each its size or, if transformed, its
    /// normalized size (docs/FORMAT.md §2.8.1).
    fn lay_out_delta_stream(&mut self) {
        let (mut delta, mut counterpart, mut delta_transform, mut new_total) = (Vec::new(), Vec::new(), Vec::new(), 0u64);
        for (i, e) in self.tree.entries.iter().enumerate() {
            let len = self.tree.delta_len(i);
            if len > 0 {
                delta.push((e.path.clone(), new_total, len));
                counterpart.push(self.reference_by_path.get(&e.path).copied());
                delta_transform.push(self.wasm.iter().position(|t| t.path == e.path));
                new_total += len;
            }
        }
        (self.delta, self.counterpart, self.delta_transform, self.new_total) = (delta, counterpart, delta_transform, new_total);
        self.aligned = self.split_module_parts();
        self.starts = segment_starts(new_total, &self.aligned);
        let text_bytes: u64 = self.delta.iter().zip(&self.delta_transform).filter(|(d, t)| t.is_none() && has_text_name(&d.0)).map(|(d, _)| d.2).sum();
        let declares = self.segment_count() >= 3 && text_bytes >= GENERATOR_SEGMENT && self.reader.contains(Capability::WindowReach);
        self.tree.window_reach = declares.then_some(GENERATOR_TEXT_REACH);
        // Any ops segment may store its diff run-coded; the header comes first, so every patch
        // with a delta stream declares it (an applier before the flag refuses these patches).
        self.tree.run_coded_diff = new_total > 0 && self.reader.contains(Capability::RunCodedOps);
        self.stats.delta_bytes = new_total;
        self.stats.wasm_transformed = self.wasm.len() as u64;
    }

    /// The parts of the split modules among the delta files, placed in the two streams.
    fn split_module_parts(&self) -> Vec<AlignedPart> {
        let mut aligned = Vec::new();
        for ((_, start, _), t) in self.delta.iter().zip(&self.delta_transform) {
            let Some(t) = t.map(|t| &self.wasm[t]) else { continue };
            let Some(k) = t.split_old_path().and_then(|old_path| self.split_reference_index(old_path)) else { continue };
            let old_start = self.reference[k].1;
            aligned.extend(t.parts.iter().map(|p| AlignedPart { new: (start + p.new.0, start + p.new.1), old: (old_start + p.old.0, old_start + p.old.1) }));
        }
        aligned
    }

    /// The old file (index in `reference`) a split module at old path `old_path` reads split:
    /// the one old file of a single-file patch.
    fn split_reference_index(&self, old_path: &str) -> Option<usize> {
        if self.tree.single_file {
            (self.reference.len() == 1).then_some(0)
        } else {
            self.reference.iter().position(|(p, ..)| *p == old_path)
        }
    }

    /// Stores the new module `t` names in its normalized form (docs/FORMAT.md §2.8): the tree
    /// gets its transform table row, and its ranges in `new_ranges` become ranges of the
    /// normalized form ([`FileForm::Normalized`]). Called before `header()`/`start_at()`, with
    /// the same transforms for every generator of one patch (the steps and the assembler).
    /// Refused if `t` was not made from this new build's file at its path (size and BLAKE3
    /// from the new signature), or the file is not a delta file.
    pub fn add_wasm_transform(&mut self, t: WasmTransform) -> Result<()> {
        if self.header_done || self.next != 0 {
            return Err(invalid("add_wasm_transform() after the generation began (call it before header() or start_at())"));
        }
        let Some(i) = self.tree.entries.iter().position(|e| e.path == t.path) else {
            return Err(invalid(format!("wasm transform of {:?}: no such file in the new build", t.path)));
        };
        let TreeEntryKind::File { size, source: FileSource::Delta, .. } = self.tree.entries[i].kind else {
            return Err(invalid(format!("wasm transform of {:?}: not a changed file (the patch copies it or it is no file)", t.path)));
        };
        if size != t.new_size || self.new_hashes[i] != t.new_blake3 {
            return Err(invalid(format!(
                "wasm transform of {:?}: made from another module than the new signature's ({} bytes, {size} signed)",
                t.path, t.new_size
            )));
        }
        if self.tree.transform(i).is_some() {
            return Err(invalid(format!("wasm transform of {:?} added twice", t.path)));
        }
        let needs = t.required_capabilities();
        if !needs.is_subset(self.reader) {
            return Err(invalid(format!("wasm transform of {:?} needs {} that the reader does not declare", t.path, needs.difference(self.reader))));
        }
        let mut split_reference = None;
        if let Some(old_path) = t.split_old_path() {
            // The applier reads that old file split (the old file at the module's path, the one
            // old file of a single-file patch, or the one a renamed module replaced, which the
            // patch's row names): so do the old ranges of that file, and its blocks (of the file
            // as it is) are no guide to where the split bytes match.
            let Some(k) = self.split_reference_index(old_path) else {
                return Err(invalid(format!("wasm transform of {:?}: split, but the old build has no file {old_path:?} to read", t.path)));
            };
            // The parts' old ends were measured on the old module (a version 2 record has none).
            if t.parts.last().is_some_and(|p| p.old.1 != self.reference[k].2) {
                return Err(invalid(format!("wasm transform of {:?}: its parts are of another old module than {old_path:?}", t.path)));
            }
            if self.reference_split[k] {
                return Err(invalid(format!("wasm transform of {:?}: old file {old_path:?} is read split for another module already", t.path)));
            }
            if old_path != t.path && !self.tree.single_file {
                split_reference = self.tree.old_files.iter().position(|f| f.path == old_path);
            }
            self.reference_split[k] = true;
            let (start, end) = (self.reference[k].1, self.reference[k].1 + self.reference[k].2);
            for list in self.blocks.values_mut() {
                list.retain(|(_, at)| !(start..end).contains(at));
            }
            self.blocks.retain(|_, list| !list.is_empty());
        }
        let at = self.tree.transforms.partition_point(|w| w.entry < i);
        self.tree.transforms.insert(at, WasmTransformed { entry: i, normalized_size: t.normalized_size, side_info: t.side_info.clone(), split_reference });
        self.wasm.push(t);
        self.lay_out_delta_stream();
        Ok(())
    }

    /// Plans up to `bytes` of old data per segment (default and least: `MAX_WINDOW_BYTES`, 8 MiB)
    /// for the ops form, whose copies may read anywhere in the reference stream. It is a cap:
    /// the candidates (block matches, the old data between them, the aligned part of the old
    /// file) are the same, and a plan grows past 8 MiB only where they cover more. A window
    /// segment still gets the default plan's spans (the format's limit). Memory per segment
    /// grows by about 5x the planned bytes (old bytes and their suffix array), so this is for
    /// hosts with memory to spare (the native `diff --bounded`); the Worker keeps the default.
    /// Called before the first `plan_segment`, the same for every step of one patch.
    pub fn set_old_budget(&mut self, bytes: u64) -> Result<()> {
        if !(MAX_WINDOW_BYTES..=MAX_OLD_BUDGET).contains(&bytes) {
            return Err(invalid(format!("old budget {bytes} is not in {MAX_WINDOW_BYTES}..={MAX_OLD_BUDGET} bytes")));
        }
        if self.planned.is_some() || self.next != 0 {
            return Err(invalid("set_old_budget() after the generation began"));
        }
        self.old_budget = bytes;
        Ok(())
    }

    /// Searches text segments' window form as the in-memory diff does (zstd level up to 19,
    /// its binary tree reaching 8 MiB back: the old spans, not only the recent text), instead
    /// of the Worker's cheaper search: 10% smaller text windows for about twice their CPU and
    /// ~60 MB more memory (BENCHMARKS.md, "Bounded diff at in-memory quality"). Off by default.
    pub fn set_deep_text_windows(&mut self, on: bool) {
        self.deep_text_windows = on;
    }

    /// Writes only what a reader with `reader` applies (docs/FORMAT.md §5): no LZMA segments,
    /// run-coded diffs, far windows or mode-blind digest outside it, whatever else is set, and
    /// [`PatchGenerator::add_wasm_transform`] refuses a transform it cannot read
    /// ([`WasmTransform::required_capabilities`]). Default: this build's own set. Called before
    /// the first transform and `header()`/`start_at()`, the same for every generator of one
    /// patch (the steps and the assembler).
    pub fn set_reader(&mut self, reader: Capabilities) -> Result<()> {
        if self.header_done || self.next != 0 || !self.wasm.is_empty() {
            return Err(invalid("set_reader() after a wasm transform or the generation began"));
        }
        self.reader = reader;
        self.tree.omit_mode_blind_digest = !reader.contains(Capability::ModeBlindDigest);
        self.lay_out_delta_stream();
        Ok(())
    }

    /// What the patch's reader understands ([`PatchGenerator::set_reader`]).
    pub fn reader(&self) -> Capabilities {
        self.reader
    }

    /// What a reader must understand to apply the patch (docs/FORMAT.md §5): its header
    /// flags' capabilities and its transforms'. Final once `header()` is written.
    pub fn required_capabilities(&self) -> Capabilities {
        self.tree
            .transforms
            .iter()
            .fold(Capabilities::required_by_flags(self.tree.flags()), |set, w| set.union(crate::transforms::required_by_side_info(&w.side_info)))
    }

    /// The LZMA window limit the reader allows (0: none).
    pub(super) fn lzma_windows(&self) -> u64 {
        if self.reader.contains(Capability::LzmaSegments) {
            self.lzma_windows
        } else {
            0
        }
    }

    /// Whether ops streams are tried as LZMA, as the reader allows.
    pub(super) fn lzma_streams(&self) -> bool {
        self.lzma_streams && self.reader.contains(Capability::LzmaSegments)
    }

    /// Tries each segment of a split module's part (docs/FORMAT.md §2.8.7) as an LZMA window
    /// segment (§2.6 `L`), and each stream of an ops segment as LZMA (§2.3 `M`), as the
    /// in-memory diff does at level 19 and above, and keeps each where it is smaller (5-9% on
    /// split modules and on ops streams; BENCHMARKS.md, "LZMA segments"). Off by default:
    /// LZMA's encoder takes about 12 bytes of memory per byte of window and part (up to 384 MiB
    /// at `MAX_LZMA_DICTIONARY`), more than a Worker's isolate has beside the generator, and
    /// its search costs time. Set it before `header()`: the patch's flags then allow LZMA
    /// segments.
    pub fn set_lzma_segments(&mut self, on: bool) -> Result<()> {
        if self.header_done {
            return Err(invalid("set_lzma_segments() after header()"));
        }
        self.lzma_windows = if on { MAX_LZMA_DICTIONARY } else { 0 };
        self.lzma_streams = on;
        Ok(())
    }

    /// Tries split modules' parts as LZMA window segments (§2.6 `L`) only where their window
    /// and data take at most `limit` bytes, so that the encoder takes at most about 12 x `limit`
    /// bytes while it runs (0: never): what a Worker can afford beside the generator. Set it
    /// before `header()`.
    pub fn set_lzma_windows_up_to(&mut self, limit: u64) -> Result<()> {
        if self.header_done {
            return Err(invalid("set_lzma_windows_up_to() after header()"));
        }
        self.lzma_windows = limit.min(MAX_LZMA_DICTIONARY);
        Ok(())
    }

    /// Tries each stream of an ops segment as LZMA too (§2.3 `M`), but not window segments: what
    /// the Worker can afford. An ops stream's dictionary is at most 1 MiB
    /// (`LZMA_STREAM_DICTIONARY`), so its encoder takes about 12 MiB while it runs, where a
    /// window segment's takes 12 bytes per byte of window and part. Saves 8% on game data
    /// (freedoom2-wad) and 5% on wasm pairs in the Worker (BENCHMARKS.md, "LZMA ops streams:
    /// capped, bounded, in the Worker"). Set it before `header()`.
    pub fn set_lzma_ops_streams(&mut self, on: bool) -> Result<()> {
        if self.header_done {
            return Err(invalid("set_lzma_ops_streams() after header()"));
        }
        self.lzma_streams = on;
        Ok(())
    }

    /// Reports what each segment's steps took to `trace` (off by default: nothing is
    /// measured). No effect on the patch's bytes.
    pub fn set_trace(&mut self, trace: Trace) {
        self.trace = trace;
    }

    /// Segments of the patch: 4 MiB of the new delta stream each, cut also where each part of a
    /// module stored in the field-split layout begins and ends.
    pub fn segment_count(&self) -> u64 {
        self.starts.len() as u64
    }

    /// Where segment `i` begins in the delta stream (for `i` = `segment_count()`, where the
    /// stream ends): a fan-out step's segments `first..end` are its bytes
    /// `segment_start(first)..segment_start(end)`.
    pub fn segment_start(&self, i: u64) -> Result<u64> {
        match usize::try_from(i).ok().and_then(|i| self.starts.get(i)) {
            Some(&start) => Ok(start),
            None if i == self.segment_count() => Ok(self.new_total),
            None => Err(invalid(format!("segment {i} out of range (the patch has {})", self.segment_count()))),
        }
    }

    /// Segments encoded as copy operations so far (the others are window segments).
    pub fn ops_segments(&self) -> u64 {
        self.ops_segments
    }

    /// What the patch does (counts of unchanged, renamed, delta files; sizes).
    pub fn stats(&self) -> &DiffStats {
        &self.stats
    }
}

/// Where each segment begins in a delta stream of `total` bytes: every `GENERATOR_SEGMENT`
/// bytes from the stream's start and from each end of a part in `aligned` (ascending).
fn segment_starts(total: u64, aligned: &[AlignedPart]) -> Vec<u64> {
    let mut starts = Vec::with_capacity(total.div_ceil(GENERATOR_SEGMENT) as usize + 2 * aligned.len());
    let mut at = 0;
    for end in aligned.iter().flat_map(|p| [p.new.0, p.new.1]).chain([total]) {
        while at < end.min(total) {
            starts.push(at);
            at = (at + GENERATOR_SEGMENT).min(end);
        }
    }
    starts
}

/// Whether a file's name says text (`TEXT_FILE_EXTENSIONS`).
fn has_text_name(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    name.rsplit_once('.').is_some_and(|(_, ext)| TEXT_FILE_EXTENSIONS.iter().any(|t| ext.eq_ignore_ascii_case(t)))
}
