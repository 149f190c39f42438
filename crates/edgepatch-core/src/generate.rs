//! Bounded-memory patch generator, for places that cannot hold a build (a
//! 128 MB edge isolate): it makes a patch from the two builds' signatures and
//! reads of byte ranges that the caller performs (from R2, a disk, memory),
//! one 4 MiB segment at a time. Memory is one segment of new data, at most
//! 8 MiB of old data, 4 or 8 MiB of history (`GENERATOR_TEXT_REACH`) and one
//! zstd context, whatever the build sizes.
//!
//! Every delta segment is a window segment (docs/FORMAT.md §2): a zstd frame
//! whose prefix is the old spans chosen for it plus the new data just before
//! it. The old spans are chosen by *alignment*, not by full matching: the old
//! signature's block hashes are looked up with a rolling hash over the new
//! segment (rsync-style), the old data between two matched blocks is taken as
//! the likely source of the new data between them, and the part of the old
//! file with the same path at the same relative position fills what is left.
//! zstd then finds the byte-granular matches inside that window. The native
//! `diff` (a suffix array over all old data) finds more and makes smaller
//! patches; this one trades size for memory.
//!
//! Use: `header()`, then for each segment `new_ranges(i)` → read them →
//! `plan_segment(i, new)` → read the old ranges → `encode_segment(i, new, old)`,
//! then `finish()`; the bytes of these calls, in order, are the patch.
//!
//! Segments are 4 MiB of the delta stream, cut also where each part of a module
//! stored in the field-split layout begins and ends (its sections and field
//! streams); a part's segments are diffed against the old module's same part.
//!
//! Split into steps (a build too large for one invocation): segments depend on
//! each other only through the window's history, the 4 MiB of new data before
//! a segment, or 8 MiB where the patch declares that reach for text
//! (`GENERATOR_TEXT_REACH`). So a run of segments `k..m` is made
//! by a generator started with `start_at(k, new data of history_ranges(k))`,
//! and the same segments come out byte for byte as in one pass. One more
//! generator then assembles the patch: `header()`, `absorb_segment(i, bytes)`
//! for every segment the steps made, in order, and `finish()`/`manifest()`.

use std::collections::HashMap;

use xxhash_rust::xxh3::xxh3_64;

use crate::apply::{read_segment_header, PatchInput};
use crate::error::{Error, Result};
use crate::inspect::{patch_manifest, PatchLayout};
use crate::matcher::{match_new_data, split_streams, MatchParams, OldIndex, Op};
use crate::patch_format::*;
use crate::signature::{find_block_matches, Signature, SignedKind};
use crate::trace::Trace;
use crate::tree_plan::{encode_header_and_tree, plan_tree, DiffStats, PlannedKind};
use crate::window_plan::{is_text_segment, keep_densest, merge_weighted, AlignedPart, Overflow, WHOLE_FILES_BUDGET};
use crate::wire::put_varint;
use crate::zstd_frame::{compress_frame, FrameSearch, LongDistance};

mod wasm;
pub(crate) use wasm::normalize_even_unchanged;
pub use wasm::{normalize_for_patch, FileForm, NormalizedNew, PreparedTransform, WasmTransform, NORMALIZED_CHECK_CHUNK};

/// New bytes per segment (and how far back binary segments' windows reach).
pub const GENERATOR_SEGMENT: u64 = 4 << 20;
// Binary segments' windows (and text segments' in a patch that declares no more) reach one
// segment back: the base reach.
const _: () = assert!(GENERATOR_SEGMENT == BASE_WINDOW_BACK);
/// How far back text segments' windows reach in a patch that declares it (`FLAG_WINDOW_REACH`,
/// docs/FORMAT.md §2.6): two segments, the in-memory diff's `DEFAULT_WINDOW_REACH`. Files of a
/// build repeat each other's changes megabytes apart (bundles and their sources): three-tree's
/// Worker patch went from 235,837 to 217,233 bytes (BENCHMARKS.md, "Generator: text windows
/// reaching 8 MiB").
/// A fan-out step then carries two segments of history.
pub const GENERATOR_TEXT_REACH: u64 = 2 * GENERATOR_SEGMENT;
const _: () = assert!(GENERATOR_TEXT_REACH > BASE_WINDOW_BACK && GENERATOR_TEXT_REACH <= MAX_WINDOW_BACK);
const _: () = assert!(GENERATOR_TEXT_REACH.is_multiple_of(GENERATOR_SEGMENT));
/// The header is written before any segment is read, so the reach is declared from names:
/// a patch declares `GENERATOR_TEXT_REACH` when its delta stream is long enough for a window
/// to reach past `BASE_WINDOW_BACK` (three segments) and at least a segment of it is files
/// with these extensions (case-insensitive). Declaring costs an applier a ring of 8 MiB
/// instead of 4 MiB of its output, and a fan-out step 4 MiB more history.
const TEXT_FILE_EXTENSIONS: [&str; 22] = [
    "js", "mjs", "cjs", "jsx", "ts", "mts", "cts", "tsx", "css", "html", "htm", "json", "map", "svg", "xml", "txt", "md", "glsl", "wgsl", "vert", "frag",
    "yaml",
];
/// Old bytes around each block match taken into the window.
const MATCH_PADDING: u64 = 16 << 10;
/// Old bytes on each side of the position-aligned span of a changed file.
const ALIGN_MARGIN: u64 = 2 << 20;
/// The most old bytes `set_old_budget` plans per segment (a suffix array of 4 bytes per old
/// byte: about 1.3 GB at this).
pub const MAX_OLD_BUDGET: u64 = 256 << 20;
/// Two block matches whose old positions are this much further apart than
/// their new positions (plus this slack) do not bracket one changed region.
const GAP_SLACK: u64 = 64 << 10;
/// The window form's zstd level at most: above it, indexing the 12 MiB prefix at the optimal
/// parser's strategies costs 3-10x the CPU for 2-5% smaller window segments (measured:
/// BENCHMARKS.md, "Generator").
const WINDOW_FORM_MAX_LEVEL: i32 = 12;
/// The window form is tried when the ops form's compressed extra bytes exceed 1/this of the
/// segment...
const WINDOW_TRIAL_EXTRA_SHARE: u64 = 64;
/// ...and its compressed control stream is over 1/this of its diff and extra streams (a
/// control stream under 1/8 of the segment: the window form lost on all 11 such segments
/// measured, BENCHMARKS.md, "Generator CPU"), or whatever the extra bytes when it is over 1/5.
const WINDOW_TRIAL_CTRL_SHARE: u64 = 7;
/// Nor is it tried when the ops form is at most 1/this of the segment's new bytes (4 KiB of a
/// full segment): it could save no more than that, and lost on all 6 such segments measured.
const WINDOW_TRIAL_MIN_SHARE: u64 = 1024;
/// Text segments (see `is_text_segment`) get a costlier window form, `text_window`:
/// zstd's optimal parser, which is what beats the ops form's many short copies on text, with
/// long-distance matching to reach the old spans that its small tables do not. Measured on
/// three-tree (BENCHMARKS.md, "Generator: trees"): 273,654 -> 235,837 bytes for ~3 s more CPU
/// natively; the same search on the control-heavy *binary* segments of freedoom2-wad and
/// concat-101mib saves 1.4-1.9% for up to +45% CPU, so binary segments keep the lazy window.
const TEXT_WINDOW_MAX_LEVEL: i32 = 16;
const TEXT_WINDOW_HASH_LOG: u32 = 21;
/// The optimal parser's binary tree covers the last 2^(this - 1) bytes (128 KiB): the recent
/// text; what is further back is reached by the hash table and long-distance matching.
const TEXT_WINDOW_CHAIN_LOG: u32 = 18;
const TEXT_WINDOW_LDM_MIN_MATCH: u32 = 32;
/// `deep_text_window`'s level and binary tree (2^23 bytes back).
const DEEP_TEXT_WINDOW_MAX_LEVEL: i32 = 19;
const DEEP_TEXT_WINDOW_CHAIN_LOG: u32 = 24;
/// One position in 2^this enters the long-distance table (zstd's default at these window
/// sizes is 1 in 2^7; 2^4 finds ~1% more for no measurable CPU).
const TEXT_WINDOW_LDM_HASH_RATE_LOG: u32 = 4;
/// A text segment (`is_text_segment`) gets the text window form when its ops form is control-heavy and over 1/this of its new bytes (where the ops form
/// is already small the window form cannot win much, and the text search costs ~1 s).
const TEXT_MIN_OPS_SHARE: u64 = 256;
/// Old bytes on each side of a copy's source kept in a text window (zstd finds short matches
/// there that the copies did not use): a text window holds only the old bytes the ops copy
/// from, not every planned span, so the optimal parser indexes less (same size within 0.5%).
const TEXT_WINDOW_SPAN_PADDING: u64 = 4 << 10;
/// The generator's matcher searches every 4th position where nothing matches on binary
/// segments (`MatchParams::search_step`; text segments and the CLI's diff every position): 56-62% fewer suffix-array
/// searches on freedoom2-wad and esbuild-wasm-adj, their patches 0.1-0.6% *smaller* (fewer
/// short copies), measured over steps 1-16 (BENCHMARKS.md, "Generator CPU at the default level").
const GENERATOR_SEARCH_STEP: usize = 4;
/// zstd's match-finder tables are capped so that one context stays well under
/// 64 MiB at any level (measured: BENCHMARKS.md, "Generator").
const MAX_HASH_LOG: u32 = 22;
const MAX_CHAIN_LOG: u32 = 22;

/// Bytes `[offset, offset + len)` of the file at `path` of one build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ByteRange {
    /// The file's path in its build (empty for a single-file build).
    pub path: String,
    /// First byte of the range in the file.
    pub offset: u64,
    /// Bytes in the range.
    pub len: u64,
    /// Whether the range is of the file or of its normalized form (a new wasm module the
    /// patch stores transformed, [`PatchGenerator::add_wasm_transform`]); old ranges are of
    /// the file, or of the old module split where the new one is stored split.
    pub form: FileForm,
}

/// The largest window and part (bytes) a Worker's generator tries as an LZMA window segment
/// (§2.6 `L`, `PatchGenerator::set_lzma_windows_up_to`), and `diff --bounded
/// --worker-text-windows` with it: an encoder of about 49 MB while it runs, which fit in the
/// memory the generator had freed on every measured pair (BENCHMARKS.md, "The Worker's LZMA
/// window segments").
pub const ISOLATE_LZMA_WINDOW_LIMIT: u64 = 4 << 20;

/// Makes one patch from two builds' signatures, segment by segment, in bounded memory; the
/// caller reads the byte ranges it asks for (the call sequence is in this module's docs).
pub struct PatchGenerator {
    tree: PatchTree,
    level: i32,
    /// Delta files (path, start in the new stream, size), in stream order.
    delta: Vec<(String, u64, u64)>,
    /// For each delta file, the old file with the same path in the reference stream (start, size).
    counterpart: Vec<Option<(u64, u64)>>,
    /// For each delta file, its index in `wasm` if the patch stores it normalized.
    delta_transform: Vec<Option<usize>>,
    /// The transformed delta files, in the order they were added.
    wasm: Vec<WasmTransform>,
    /// Old files in the reference stream by path (start, size), and under the path of the new
    /// file that replaced each under another name (`renamed_files`): a delta file's counterpart.
    reference_by_path: HashMap<String, (u64, u64)>,
    new_total: u64,
    /// Where each segment begins in the delta stream (ascending, the first 0): every
    /// `GENERATOR_SEGMENT` bytes, and where each part of a split module begins and ends.
    starts: Vec<u64>,
    /// The parts of split modules in the delta stream, each with the old module's same part in
    /// the reference stream ([`WasmTransform`]'s parts), ascending.
    aligned: Vec<AlignedPart>,
    /// Old files in the reference stream (path, start, size).
    reference: Vec<(String, u64, u64)>,
    /// Per old file in the reference stream, whether it is read in the field-split layout.
    reference_split: Vec<bool>,
    reference_len: u64,
    block_size: usize,
    /// Weak hash -> (strong hash, position in the reference stream) of every whole old block.
    blocks: HashMap<u32, Vec<(u64, u64)>>,
    /// The last `tree.window_back()` bytes of the new stream (4 MiB, or 8 MiB where the
    /// patch declares `GENERATOR_TEXT_REACH`).
    history: Vec<u8>,
    next: u64,
    /// Segment planned: (index, old spans the ops form matches against, the window form's
    /// spans: the same, or at most `MAX_WINDOW_BYTES` of them when `old_budget` is larger,
    /// the block matches (position in the segment, in the reference stream) the plan found).
    planned: Option<Plan>,
    /// Old bytes planned per segment for the ops form at most (`set_old_budget`).
    old_budget: u64,
    /// Text windows searched as the in-memory diff's are (`set_deep_text_windows`).
    deep_text_windows: bool,
    /// Split modules' parts tried as LZMA window segments too where their window and data take
    /// at most this many bytes (`set_lzma_segments`, `set_lzma_windows_up_to`); 0: never.
    lzma_windows: u64,
    /// Ops segments' streams tried as LZMA too (`set_lzma_segments`, `set_lzma_ops_streams`).
    lzma_streams: bool,
    /// Where each segment's timing lines go (`set_trace`; off by default).
    trace: Trace,
    /// Over the patch bytes handed out (what the trailer checksum covers).
    hasher: blake3::Hasher,
    out_len: u64,
    segments: Vec<Segment>,
    spans: Vec<(u64, u64)>,
    header_done: bool,
    /// BLAKE3 of the whole patch, once finished.
    patch_blake3: Option<[u8; 32]>,
    /// Per new entry, its BLAKE3 (files) from the new signature, for the manifest.
    new_hashes: Vec<[u8; 32]>,
    stats: DiffStats,
    /// Segments kept in the ops form (the rest are window segments).
    ops_segments: u64,
    /// Started by `start_at`: makes a run of segments for a patch assembled elsewhere, so
    /// it has no header and its checksum covers only its own bytes (`finish` refuses).
    step: bool,
}

fn invalid(what: impl Into<String>) -> Error {
    Error::Invalid(what.into())
}

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
            trace: Trace::default(),
            hasher: blake3::Hasher::new(),
            out_len: 0,
            segments: Vec::new(),
            spans: Vec::new(),
            header_done: false,
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
        let declares = self.segment_count() >= 3 && text_bytes >= GENERATOR_SEGMENT;
        self.tree.window_reach = declares.then_some(GENERATOR_TEXT_REACH);
        // Any ops segment may store its diff run-coded; the header comes first, so every patch
        // with a delta stream declares it (an applier before the flag refuses these patches).
        self.tree.run_coded_diff = new_total > 0;
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

    fn emit(&mut self, bytes: Vec<u8>) -> Vec<u8> {
        self.hasher.update(&bytes);
        self.out_len += bytes.len() as u64;
        bytes
    }

    /// The first bytes of the patch: header and tree.
    pub fn header(&mut self) -> Result<Vec<u8>> {
        if self.header_done {
            return Err(invalid("header() called twice"));
        }
        self.tree.lzma_segments = (self.lzma_windows > 0 || self.lzma_streams) && self.new_total > 0;
        let bytes = encode_header_and_tree(&self.tree, self.level)?;
        self.reserve_history();
        self.header_done = true;
        Ok(self.emit(bytes))
    }

    fn segment_bounds(&self, i: u64) -> Result<(u64, u64)> {
        if i >= self.segment_count() {
            return Err(invalid(format!("segment {i} out of range (the patch has {})", self.segment_count())));
        }
        Ok((self.segment_start(i)?, self.segment_start(i + 1)?))
    }

    /// The part of a split module that holds all of `[a, b)` of the delta stream, if any
    /// (segments never straddle a part's ends).
    fn aligned_part(&self, a: u64, b: u64) -> Option<AlignedPart> {
        self.aligned[..self.aligned.partition_point(|p| p.new.0 <= a)].last().filter(|p| b <= p.new.1).copied()
    }

    /// The delta files with bytes in `[a, b)` of the new stream: (index in `delta`, the file
    /// (path, start, size), its index in `wasm` if the patch stores it transformed).
    fn delta_files_in(&self, a: u64, b: u64) -> impl Iterator<Item = (usize, &(String, u64, u64), Option<usize>)> {
        let first = self.delta.partition_point(|(_, start, size)| start + size <= a);
        self.delta[first..]
            .iter()
            .zip(&self.delta_transform[first..])
            .enumerate()
            .take_while(move |(_, ((_, start, _), _))| *start < b)
            .map(move |(k, (d, t))| (first + k, d, *t))
    }

    /// The new-build byte ranges whose concatenation is segment `i`'s new data.
    pub fn new_ranges(&self, i: u64) -> Result<Vec<ByteRange>> {
        let (a, b) = self.segment_bounds(i)?;
        Ok(self.ranges_of(a, b))
    }

    /// The new-build byte ranges whose concatenation is `[a, b)` of the delta stream.
    fn ranges_of(&self, a: u64, b: u64) -> Vec<ByteRange> {
        self.delta_files_in(a, b)
            .map(|(_, (path, start, size), t)| {
                let (from, to) = (a.max(*start), b.min(start + size));
                let form = if t.is_some() { FileForm::Normalized } else { FileForm::AsIs };
                ByteRange { path: path.clone(), offset: from - start, len: to - from, form }
            })
            .collect()
    }

    /// Chooses the old spans (at most `MAX_WINDOW_BYTES`) segment `i` is
    /// compressed against; returns them as old-build byte ranges to read.
    pub fn plan_segment(&mut self, i: u64, new: &[u8]) -> Result<Vec<ByteRange>> {
        self.check_turn(i, new)?;
        let (seg_start, _) = self.segment_bounds(i)?;
        // (start, end, weight per byte x 1024) candidate spans of the reference stream.
        let mut candidates: Vec<(u64, u64, u64)> = Vec::new();
        let matches = self.block_matches(new);
        for &(_, o) in &matches {
            candidates.push((o.saturating_sub(MATCH_PADDING), o + self.block_size as u64 + MATCH_PADDING, 4));
        }
        for pair in matches.windows(2) {
            let ((n1, o1), (n2, o2)) = (pair[0], pair[1]);
            if o2 > o1 && o2 - o1 <= 2 * (n2 - n1) + GAP_SLACK {
                candidates.push((o1, o2 + self.block_size as u64, 2));
            }
        }
        // Position alignment within each changed file's old version, or within the old module's
        // same part for a part of a split module: a part of at most `WHOLE_FILES_BUDGET` is
        // taken whole, and is the whole window (as the in-memory diff's stream-aligned segments).
        let (a, b) = (seg_start, seg_start + new.len() as u64);
        let align = |(na, nb): (u64, u64), (old_start, old_end): (u64, u64)| {
            let scale = |x: u64| (x as u128 * (old_end - old_start) as u128 / (nb - na).max(1) as u128) as u64;
            let (oa, ob) = (old_start + scale(a.max(na) - na), old_start + scale(b.min(nb) - na));
            (oa.saturating_sub(ALIGN_MARGIN).max(old_start), (ob + ALIGN_MARGIN).min(old_end), 1)
        };
        let part = self.aligned_part(a, b).filter(|p| p.old.1 > p.old.0);
        let whole_part = part.filter(|p| p.old.1 - p.old.0 <= WHOLE_FILES_BUDGET);
        match (whole_part, part) {
            (Some(p), _) => candidates.push((p.old.0, p.old.1, 8)),
            (None, Some(p)) => candidates.push(align(p.new, p.old)),
            (None, None) => {
                for (k, (_, start, size), _) in self.delta_files_in(a, b) {
                    if let Some((old_start, old_size)) = self.counterpart[k] {
                        candidates.push(align((*start, start + size), (old_start, old_start + old_size)));
                    }
                }
            }
        }
        let spans = choose_spans(candidates.clone(), self.reference_len, self.old_budget);
        let mut window = if self.old_budget > MAX_WINDOW_BYTES { choose_spans(candidates, self.reference_len, MAX_WINDOW_BYTES) } else { spans.clone() };
        if let Some(p) = whole_part {
            // The part is the densest candidate and within the budget, so a planned span holds it.
            if spans.iter().any(|&(s, len)| s <= p.old.0 && p.old.1 <= s + len) {
                window = vec![(p.old.0, p.old.1 - p.old.0)];
            }
        }
        // The window's spans are cut from the planned ones (`narrow_to_window`): a smaller budget
        // keeps a prefix of what a larger one keeps, its last span cut shorter (`Overflow::Cut`;
        // test `a_window_is_within_the_planned_spans`), and the whole part is the window only
        // when a planned span holds it.
        debug_assert!(window.iter().all(|&(ws, wl)| spans.iter().any(|&(s, len)| s <= ws && ws + wl <= s + len)));
        let ranges = self.reference_ranges(&spans);
        self.planned = Some((i, spans, window, matches));
        Ok(ranges)
    }

    /// Encodes segment `i` from its new data and the old data of its planned
    /// ranges (concatenated, in order). Returns the segment's patch bytes.
    pub fn encode_segment(&mut self, i: u64, new: &[u8], old: Vec<u8>) -> Result<Vec<u8>> {
        self.check_turn(i, new)?;
        self.check_normalized(i, new)?;
        let (spans, window_spans, matches) = match self.planned.take() {
            Some((p, spans, window, matches)) if p == i => (spans, window, matches),
            _ => return Err(invalid(format!("segment {i} was not planned (call plan_segment first)"))),
        };
        let want: u64 = spans.iter().map(|s| s.1).sum();
        if old.len() as u64 != want {
            return Err(invalid(format!("segment {i}: {} old bytes given, the plan needs {want}", old.len())));
        }
        // Two encodings of the segment against the same old spans. The ops form (the native
        // diff's: byte-granular copies with difference bytes, found by a suffix array over the
        // spans) wins on compiled code, where approximate matches dominate, and is cheap. The
        // window form (one zstd frame over the spans and the recent new data) can only win
        // where the ops form leaves much unexplained: many short matches (text), or new bytes
        // that the old spans lack but the new build's previous 4 MiB (8 MiB for text where the
        // patch declares it) may hold. It is tried only then (it costs most of a generation's
        // CPU at high levels), and the smaller kept.
        let t = self.trace.start();
        // A part of a split module: a field stream or a section, diffed against the old
        // module's same part, its window always tried (as the in-memory diff's).
        let (a, _) = self.segment_bounds(i)?;
        let part = self.aligned_part(a, a + new.len() as u64);
        let is_text = part.is_none() && is_text_segment(new);
        // Text keeps a search at every position: there the ops form competes with the text
        // window, whose many short matches the spaced search would hand to it.
        let search_step = if is_text { 1 } else { GENERATOR_SEARCH_STEP };
        let block = self.block_size as u64;
        let params = OpsParams { level: self.level, search_step, lzma: self.lzma_streams, trace: &self.trace };
        let (ops_form, copied) = encode_ops_segment(new, &old, &spans, (&matches, block), params)?;
        drop(matches);
        if let Some(t) = t {
            let of = part.map_or(String::new(), |p| format!(", part {}..{} against old {}..{}", p.new.0, p.new.1, p.old.0, p.old.1));
            self.trace.line(&format!(
                "segment {i} (new {a}..{}{of}): ops form {:.2}s ({:?} bytes)",
                a + new.len() as u64,
                t.elapsed().as_secs_f64(),
                ops_form.as_ref().map(|f| f.bytes.len())
            ));
        }
        // These rules read the zstd streams' sizes, on which they were measured (`OpsEncoding`).
        let control_heavy = ops_form.as_ref().is_some_and(|f| f.zstd_header.ctrl_comp * 5 > f.zstd_header.diff_comp + f.zstd_header.extra_comp);
        let try_window = part.is_some()
            || match &ops_form {
                None => true,
                Some(f) => {
                    let h = &f.zstd_header;
                    let rest = h.diff_comp + h.extra_comp;
                    f.zstd_len > new.len() as u64 / WINDOW_TRIAL_MIN_SHARE
                        && (control_heavy || (h.extra_comp > new.len() as u64 / WINDOW_TRIAL_EXTRA_SHARE && h.ctrl_comp * WINDOW_TRIAL_CTRL_SHARE > rest))
                }
            };
        let text = is_text && ops_form.as_ref().is_none_or(|f| control_heavy && f.zstd_len > new.len() as u64 / TEXT_MIN_OPS_SHARE);
        let ops_zstd_len = ops_form.as_ref().map(|f| f.zstd_len);
        let mut chosen = ops_form.map(|f| (f.bytes, Segment::Ops(f.header)));
        if try_window {
            let search = match (text, self.deep_text_windows) {
                (true, false) => text_window(self.level),
                (true, true) => deep_text_window(self.level),
                (false, _) => lazy_window(self.level),
            };
            let (spans, old, copied) = narrow_to_window(spans, old, copied, &window_spans, text);
            // The history's last `BASE_WINDOW_BACK` bytes go after the spans (`near`); text
            // reaches further back, into what goes before them (`far`, §2.6). A part's window
            // reaches back only within the part.
            let back = part.map_or(BASE_WINDOW_BACK, |p| (a - p.new.0).min(BASE_WINDOW_BACK));
            let (far, near) = self.history.split_at(self.history.len().saturating_sub(back as usize));
            let far = if text { far } else { &[][..] };
            let (spans, window) = window_of(spans, old, copied.filter(|_| text), far, near);
            let t = self.trace.start();
            // Long-distance matching needs a prefix to reach into.
            let search = FrameSearch { long_distance: search.long_distance.filter(|_| window.len() > far.len()), ..search };
            // A text segment with history past the base reach searches all of it. The header
            // declared the reach from names before any segment, so its appliers hold a ring
            // of that reach whatever a segment chooses (the in-memory diff, which declares a
            // reach only where a segment used it, keeps the near window unless the far saves
            // a tenth).
            // (Trying the near window too, and keeping it unless the far one saved a tenth,
            // cost a second frame per such segment: three-tree's native generation took
            // 5.7-6.2 s of CPU that way and 4.4-4.9 s this way, for a patch 2.2% smaller.)
            let mut frame = compress_frame(new, &window, search)?;
            // A window that beats the ops form over a transformed wasm module (§2.8) is mostly
            // new code, whose literals and short matches the optimal parser codes best: it is
            // searched again at the patch's level, with tables no larger than the lazy
            // window's. Measured in `diff --bounded` on resvg (its one segment): split
            // 482,468 -> 452,158 bytes for 0.6 s, renamed (normalized) 581,083 -> 527,549; the
            // other measured wasm pairs keep the ops form (BENCHMARKS.md, "Generator: the
            // field-split layout").
            // (Against the ops form's zstd size, as measured: LZMA streams would skip the deep
            // search where it wins, harfbuzz's first part among them.)
            let beats_ops = |len: usize| ops_zstd_len.is_none_or(|z| (len as u64) + 32 < z);
            if !text && self.level > WINDOW_FORM_MAX_LEVEL && beats_ops(frame.len()) && self.holds_transformed_module(i)? {
                let deep = compress_frame(new, &window, wasm_code_window(self.level))?;
                if t.is_some() {
                    self.trace.line(&format!("segment {i}: wasm code window at level {} ({} bytes)", self.level, deep.len()));
                }
                if deep.len() < frame.len() {
                    frame = deep;
                }
            }
            let back_len = far.len() + near.len();
            if let Some(t) = t {
                self.trace.line(&format!(
                    "segment {i}: window form {:.2}s ({} bytes; {} window bytes, back {back_len}, text {text})",
                    t.elapsed().as_secs_f64(),
                    frame.len(),
                    window.len()
                ));
            }
            let mut codec = WindowCodec::Zstd;
            if self.lzma_windows > 0 && part.is_some() {
                (frame, codec) = crate::lzma::smallest_window_form(new, &window, frame, self.lzma_windows);
            }
            drop(window);
            let header = WindowSegmentHeader { new_len: new.len() as u64, spans, back_len: back_len as u64, comp_len: frame.len() as u64, codec };
            if chosen.as_ref().is_none_or(|(bytes, _)| frame.len() + 32 + header.spans.len() * 8 < bytes.len()) {
                let mut out = Vec::with_capacity(frame.len() + 32 + header.spans.len() * 8);
                header.encode(&mut out);
                out.extend_from_slice(&frame);
                chosen = Some((out, Segment::Window(header)));
            }
        }
        let (out, segment) = chosen.expect("a segment form");
        if matches!(segment, Segment::Ops(_)) {
            self.ops_segments += 1;
        }
        self.spans.push((self.out_len, out.len() as u64));
        self.segments.push(segment);
        // Keep the last `window_back()` bytes of the new stream.
        let reach = self.tree.window_back() as usize;
        let keep = reach.saturating_sub(new.len()).min(self.history.len());
        self.history.drain(..self.history.len() - keep);
        self.history.extend_from_slice(&new[new.len().saturating_sub(reach)..]);
        self.next += 1;
        Ok(self.emit(out))
    }

    /// Allocates the history at its full size once, before the first segment's buffers: grown
    /// segment by segment, it landed between their freed pieces, the next large allocations
    /// found no piece big enough and the wasm memory (which never shrinks) grew: three-tree in
    /// the Worker 91.8 MiB that way, 74.1 MiB this way (BENCHMARKS.md, "Generator: text windows
    /// reaching 8 MiB").
    fn reserve_history(&mut self) {
        let reach = (self.tree.window_back() as usize).min(self.new_total as usize);
        self.history = Vec::with_capacity(reach);
    }

    /// The delta-stream bytes a step started at segment `first` needs as its history: the
    /// `window_back()` bytes before it (4 MiB, or 8 MiB where the patch declares
    /// `GENERATOR_TEXT_REACH`; fewer at the start).
    fn history_bounds(&self, first: u64) -> Result<(u64, u64)> {
        if first > self.segment_count() {
            return Err(invalid(format!("start_at({first}): the patch has {} segments", self.segment_count())));
        }
        let end = self.segment_start(first)?;
        Ok((end.saturating_sub(self.tree.window_back()), end))
    }

    /// The new-build ranges whose concatenation is the history `start_at(first, ..)` takes
    /// (none for 0).
    pub fn history_ranges(&self, first: u64) -> Result<Vec<ByteRange>> {
        let (a, b) = self.history_bounds(first)?;
        Ok(self.ranges_of(a, b))
    }

    /// Makes this generator one step of a split generation: it continues at segment `first`
    /// (no header), as if segments `0..first` had been encoded here. `history` is the new
    /// data of `history_ranges(first)`, concatenated (empty for 0): the window's back reach.
    /// Its segments are then byte-identical to one pass's; `finish` is refused (an
    /// assembling generator makes the end: `absorb_segment`).
    pub fn start_at(&mut self, first: u64, history: &[u8]) -> Result<()> {
        if self.header_done || self.next != 0 {
            return Err(invalid("start_at() on a generator that has begun (call it first, instead of header())"));
        }
        let (a, b) = self.history_bounds(first)?;
        if history.len() as u64 != b - a {
            return Err(invalid(format!("start_at({first}): {} history bytes given, the history is bytes {a}..{b}", history.len())));
        }
        // Exactly what encode_segment would have kept after segment first - 1.
        self.reserve_history();
        self.history.extend_from_slice(&history[history.len().saturating_sub(self.tree.window_back() as usize)..]);
        self.header_done = true;
        self.step = true;
        self.next = first;
        Ok(())
    }

    /// Takes segment `i` made by a step generator (`start_at`) into this patch, as if encoded
    /// here: after `header()`, every segment in order, then `finish()` and `manifest()`. The
    /// bytes are checked to be one whole segment of the right size (its header parsed as an
    /// applier does); the caller writes them to the patch after the header.
    pub fn absorb_segment(&mut self, i: u64, bytes: &[u8]) -> Result<()> {
        if !self.header_done || self.step || i != self.next {
            return Err(invalid(format!("segment {i} absorbed out of turn: header first, then segments in order (next is {})", self.next)));
        }
        let (a, b) = self.segment_bounds(i)?;
        let mut input = PatchInput::new(bytes);
        let segment = read_segment_header(&mut input, i, a, self.reference_len, self.tree.window_back())
            .map_err(|e| invalid(format!("segment {i}: {e}")))?
            .ok_or_else(|| invalid(format!("segment {i}: an end marker, not a segment")))?;
        if segment.new_len() != b - a {
            return Err(invalid(format!("segment {i} makes {} bytes, it has {}", segment.new_len(), b - a)));
        }
        if input.offset().checked_add(segment.compressed_len()) != Some(bytes.len() as u64) {
            return Err(invalid(format!("segment {i}: {} bytes given, its header says {}", bytes.len(), input.offset() + segment.compressed_len())));
        }
        if matches!(segment, Segment::Ops(_)) {
            self.ops_segments += 1;
        }
        self.spans.push((self.out_len, bytes.len() as u64));
        self.segments.push(segment);
        self.hasher.update(bytes);
        self.out_len += bytes.len() as u64;
        self.next += 1;
        Ok(())
    }

    /// The last bytes of the patch: the end marker and the checksum.
    pub fn finish(&mut self) -> Result<Vec<u8>> {
        if self.step {
            return Err(invalid("finish() on a step generator (start_at): the assembling generator finishes the patch"));
        }
        if !self.header_done || self.next != self.segment_count() || self.patch_blake3.is_some() {
            return Err(invalid(format!("finish() after {} of {} segments (header first, each segment once)", self.next, self.segment_count())));
        }
        let mut out = vec![END_TAG];
        put_varint(&mut out, self.next);
        put_varint(&mut out, self.new_total);
        let mut out = self.emit(out);
        out.extend_from_slice(self.hasher.finalize().as_bytes());
        self.out_len += 32;
        let mut whole = self.hasher.clone();
        whole.update(&out[out.len() - 32..]);
        self.patch_blake3 = Some(*whole.finalize().as_bytes());
        self.stats.segments = self.next;
        self.stats.patch_bytes = self.out_len;
        Ok(out)
    }

    /// The binary patch manifest (docs/FORMAT.md §4), once finished.
    pub fn manifest(&self, from_build: &str, to_build: &str) -> Result<Vec<u8>> {
        let blake3 = self.patch_blake3.ok_or_else(|| invalid("manifest() before finish()"))?;
        let layout = PatchLayout { segments: self.segments.clone(), segment_spans: self.spans.clone(), patch_bytes: self.out_len };
        let m = patch_manifest(&self.tree, &layout, |i| self.new_hashes[i], blake3, from_build, to_build).map_err(|e| invalid(e.to_string()))?;
        m.encode().map_err(|e| invalid(e.to_string()))
    }

    /// Checks every chunk of a normalized form that ends in segment `i` against its
    /// transform's hash (a chunk is at most 1 MiB, so it starts at the latest in the history,
    /// the 4 MiB or more before the segment).
    fn check_normalized(&self, i: u64, new: &[u8]) -> Result<()> {
        if self.wasm.is_empty() {
            return Ok(());
        }
        let (a, b) = self.segment_bounds(i)?;
        for (_, (_, start, _), t) in self.delta_files_in(a, b) {
            let Some(t) = t else { continue };
            let history_start = a - self.history.len() as u64;
            // Hashed where the bytes lie (the history, then this segment): no copy of a chunk.
            self.wasm[t].check_chunks_ending_in(a.saturating_sub(*start), b - start, |from, to, hasher| {
                let (from, to) = (from + start, to + start);
                if from < a {
                    hasher.update(&self.history[(from - history_start) as usize..]);
                }
                hasher.update(&new[(from.max(a) - a) as usize..(to - a) as usize]);
            })?;
        }
        Ok(())
    }

    /// Whether segment `i` holds bytes of a module the patch stores transformed.
    fn holds_transformed_module(&self, i: u64) -> Result<bool> {
        let (a, b) = self.segment_bounds(i)?;
        Ok(self.delta_files_in(a, b).any(|(.., t)| t.is_some()))
    }

    fn check_turn(&self, i: u64, new: &[u8]) -> Result<()> {
        if !self.header_done || i != self.next {
            return Err(invalid(format!("segment {i} out of turn: header first, then segments in order (next is {})", self.next)));
        }
        let (a, b) = self.segment_bounds(i)?;
        if new.len() as u64 != b - a {
            return Err(invalid(format!("segment {i}: {} new bytes given, it has {}", new.len(), b - a)));
        }
        Ok(())
    }

    /// (position in `new`, position in the reference stream) of old blocks found
    /// in `new` by the rolling weak hash and confirmed by the strong hash.
    fn block_matches(&self, new: &[u8]) -> Vec<(u64, u64)> {
        if self.blocks.is_empty() {
            return Vec::new();
        }
        find_block_matches(new, self.block_size, |weak, window| {
            let candidates = self.blocks.get(&weak)?;
            let strong = xxh3_64(window);
            candidates.iter().find(|(s, _)| *s == strong).map(|(_, at)| *at)
        })
    }

    /// Reference-stream spans as ranges of old files.
    fn reference_ranges(&self, spans: &[(u64, u64)]) -> Vec<ByteRange> {
        let mut out = Vec::new();
        for &(start, len) in spans {
            let mut at = start;
            while at < start + len {
                let k = self.reference.partition_point(|(_, s, _)| *s <= at) - 1;
                let (path, s, size) = &self.reference[k];
                let n = (start + len).min(s + size) - at;
                let form = if self.reference_split[k] { FileForm::OldSplit } else { FileForm::AsIs };
                out.push(ByteRange { path: path.clone(), offset: at - s, len: n, form });
                at += n;
            }
        }
        out
    }
}

/// Reads `buf.len()` bytes of the build's file `path` from `offset`.
pub type ReadRange<'a> = dyn FnMut(&str, u64, &mut [u8]) -> Result<()> + 'a;

/// Drives a [`PatchGenerator`] over two builds whose files are read by range
/// through `read_old`/`read_new(path, offset, buf)` (memory, disk, object
/// storage); the patch goes to `out` as it is made. Returns the generator
/// (for `manifest` and `stats`).
pub fn generate_patch(
    old: Option<&Signature>,
    new: &Signature,
    level: i32,
    read_old: &mut ReadRange,
    read_new: &mut ReadRange,
    out: &mut dyn FnMut(&[u8]) -> Result<()>,
) -> Result<PatchGenerator> {
    generate_patch_transformed(old, new, level, Vec::new(), BuildReaders::builds(read_old, read_new), out)
}

/// How [`drive`] reads: the two builds' files, and the forms a patch's wasm transforms keep
/// (the normalized new modules, the split old ones) by the module's path.
pub struct BuildReaders<'a, 'b> {
    /// Files of the old build, as they are.
    pub old: &'a mut ReadRange<'b>,
    /// Files of the new build, as they are.
    pub new: &'a mut ReadRange<'b>,
    /// Normalized forms of new modules ([`FileForm::Normalized`]); none without transforms.
    pub normalized: Option<&'a mut ReadRange<'b>>,
    /// Split old modules ([`FileForm::OldSplit`]); none without split transforms.
    pub old_split: Option<&'a mut ReadRange<'b>>,
}

impl<'a, 'b> BuildReaders<'a, 'b> {
    /// The two builds only (a patch without wasm transforms).
    pub fn builds(old: &'a mut ReadRange<'b>, new: &'a mut ReadRange<'b>) -> Self {
        BuildReaders { old, new, normalized: None, old_split: None }
    }
}

/// [`generate_patch`] storing the new modules of `transforms` normalized (and their old
/// modules split where a transform says so), read as `readers` says.
pub fn generate_patch_transformed(
    old: Option<&Signature>,
    new: &Signature,
    level: i32,
    transforms: Vec<WasmTransform>,
    readers: BuildReaders,
    out: &mut dyn FnMut(&[u8]) -> Result<()>,
) -> Result<PatchGenerator> {
    let mut g = PatchGenerator::new(old, new, level)?;
    for t in transforms {
        g.add_wasm_transform(t)?;
    }
    drive(g, readers, out)
}

/// Makes the whole patch with `g`, set up but not begun (its transforms added, its old
/// budget set), reading as [`generate_patch_transformed`] does.
pub fn drive(mut g: PatchGenerator, readers: BuildReaders, out: &mut dyn FnMut(&[u8]) -> Result<()>) -> Result<PatchGenerator> {
    out(&g.header()?)?;
    let BuildReaders { old, new, mut normalized, mut old_split } = readers;
    let read_all = |ranges: &[ByteRange], build: &mut ReadRange, form: &mut Option<&mut ReadRange>, form_read: FileForm| -> Result<Vec<u8>> {
        let mut buf = vec![0u8; ranges.iter().map(|r| r.len as usize).sum()];
        let mut at = 0;
        for r in ranges {
            let read: &mut ReadRange = match (r.form, form.as_deref_mut()) {
                (FileForm::AsIs, _) => build,
                (f, Some(form)) if f == form_read => form,
                (f, _) => return Err(invalid(format!("a range of {f:?} of {:?}, which this generation has no reader for", r.path))),
            };
            read(&r.path, r.offset, &mut buf[at..at + r.len as usize])?;
            at += r.len as usize;
        }
        Ok(buf)
    };
    for i in 0..g.segment_count() {
        let new_bytes = read_all(&g.new_ranges(i)?, new, &mut normalized, FileForm::Normalized)?;
        let old_ranges = g.plan_segment(i, &new_bytes)?;
        let old_bytes = read_all(&old_ranges, old, &mut old_split, FileForm::OldSplit)?;
        out(&g.encode_segment(i, &new_bytes, old_bytes)?)?;
    }
    out(&g.finish()?)?;
    Ok(g)
}

/// The planned spans, their bytes and the ops' copied pieces cut down to a window's:
/// `window` (a subset of `spans` from `plan_segment`, at most `MAX_WINDOW_BYTES`), or for a
/// `text` window the copied pieces if they fit in that budget. As given when the plan is the
/// window's.
fn narrow_to_window(
    spans: Vec<(u64, u64)>,
    old: Vec<u8>,
    copied: Option<Vec<CopiedSpan>>,
    window: &[(u64, u64)],
    text: bool,
) -> (Spans, Vec<u8>, Option<Vec<CopiedSpan>>) {
    if spans == window {
        return (spans, old, copied);
    }
    // Where each planned span starts in `old`.
    let mut starts = Vec::with_capacity(spans.len());
    let mut at = 0u64;
    for &(_, len) in &spans {
        starts.push(at);
        at += len;
    }
    let offset_of = |reference_at: u64| -> u64 {
        let k = spans.partition_point(|s| s.0 <= reference_at) - 1;
        starts[k] + (reference_at - spans[k].0)
    };
    let copied = copied.filter(|c| text && c.iter().map(|p| p.2).sum::<u64>() <= MAX_WINDOW_BYTES);
    if let Some(copied) = copied {
        // Only the pieces are read from `old`: renumber them into a window of their own.
        let mut bytes = Vec::with_capacity(copied.iter().map(|p| p.2 as usize).sum());
        let mut pieces = Vec::with_capacity(copied.len());
        for &(at, start, len) in &copied {
            pieces.push((bytes.len() as u64, start, len));
            bytes.extend_from_slice(&old[at as usize..(at + len) as usize]);
        }
        let spans = pieces.iter().map(|p| (p.1, p.2)).collect();
        return (spans, bytes, Some(pieces));
    }
    let mut bytes = Vec::with_capacity(window.iter().map(|w| w.1 as usize).sum());
    for &(start, len) in window {
        let at = offset_of(start) as usize;
        bytes.extend_from_slice(&old[at..at + len as usize]);
    }
    (window.to_vec(), bytes, None)
}

/// Merges candidate spans (start, end, weight per byte; weights add where they overlap),
/// keeps the densest within `budget` bytes (cutting the last one that does not fit), and
/// returns them as ascending, disjoint (start, len).
fn choose_spans(mut candidates: Vec<(u64, u64, u64)>, reference_len: u64, budget: u64) -> Vec<(u64, u64)> {
    candidates.retain_mut(|c| {
        c.1 = c.1.min(reference_len);
        if c.0 >= c.1 {
            return false;
        }
        c.2 *= c.1 - c.0;
        true
    });
    let mut kept = keep_densest(merge_weighted(candidates), budget, &mut 0, Overflow::Cut);
    kept.sort_unstable();
    kept.into_iter().map(|(s, e)| (s, e - s)).collect()
}

/// The segment `new` as copy operations from the reference stream (docs/FORMAT.md §2, "ops
/// segment"), matched against `old`: the concatenation of the reference spans `spans`
/// (start, len). Matching runs on the concatenation; a copy crossing from one span into the
/// next is split there, and every copy is moved to the span's place in the reference. None
/// when nothing in `old` matches (the window form is then all there is). Also returns the
/// old bytes the copies read (`copied_spans`), for a text window.
fn encode_ops_segment(
    new: &[u8],
    old: &[u8],
    spans: &[(u64, u64)],
    (block_matches, block): (&[(u64, u64)], u64),
    params: OpsParams,
) -> Result<(Option<OpsForm>, Option<Vec<CopiedSpan>>)> {
    let OpsParams { level, search_step, lzma, trace } = params;
    if old.is_empty() || old.len() >= i32::MAX as usize {
        return Ok((None, None));
    }
    // Where each span starts in `old` (window coordinates).
    let mut starts = Vec::with_capacity(spans.len());
    let mut at = 0u64;
    for &(_, len) in spans {
        starts.push(at);
        at += len;
    }
    let t = trace.start();
    let ops = match diagonal_ops(new, old, spans, &starts, block_matches, block) {
        Some(ops) => {
            // The suffix array's memory, taken and given back as its segments do, so that what
            // follows (streams, zstd) lands where it lands after one: a linear memory never
            // shrinks, and fast segments' buffers placed anywhere else left the next suffix
            // array no room (a 560 MiB game pack: 98.5 MB of wasm memory instead of 85.1 MB).
            drop(std::hint::black_box(Vec::<u8>::with_capacity(OldIndex::bytes_for(old.len()))));
            if let Some(t) = t {
                trace.line(&format!("  along the block matches' diagonals {:.2}s", t.elapsed().as_secs_f64()));
            }
            ops
        }
        None => {
            let index = OldIndex::new(old);
            if let Some(t) = t {
                trace.line(&format!("  suffix array of {} bytes {:.2}s", old.len(), t.elapsed().as_secs_f64()));
            }
            let ops = match_new_data(&index, new, MatchParams { search_step, ..MatchParams::default() }, &|_| {});
            if let Some(t) = t {
                trace.line(&format!("  matched {:.2}s", t.elapsed().as_secs_f64()));
            }
            ops
        }
    };
    if ops.iter().all(|op| op.copy_len == 0) {
        return Ok((None, None));
    }
    // Made now, while the suffix array's memory is free, and small: it outlives `ops`.
    let copied = copied_spans(&ops, spans);
    let (diff, extra) = split_streams(old, new, &ops);
    let mut remapped = Vec::with_capacity(ops.len() + spans.len());
    let (mut new_at, mut last_diagonal) = (0u64, 0i64);
    for op in &ops {
        let (mut w, mut left) = ((new_at as i64 + op.diagonal) as u64, op.copy_len);
        let mut piece_at = new_at;
        if left == 0 {
            remapped.push(Op { diagonal: last_diagonal, copy_len: 0, extra_len: op.extra_len });
        }
        while left > 0 {
            let k = starts.partition_point(|&s| s <= w) - 1;
            let (ref_start, len) = spans[k];
            let piece = left.min(starts[k] + len - w);
            let diagonal = (ref_start + (w - starts[k])) as i64 - piece_at as i64;
            left -= piece;
            remapped.push(Op { diagonal, copy_len: piece, extra_len: if left == 0 { op.extra_len } else { 0 } });
            last_diagonal = diagonal;
            w += piece;
            piece_at += piece;
        }
        new_at += op.copy_len + op.extra_len;
    }
    let ctrl = encode_control(&remapped);
    // `ops` was allocated above the suffix array: freed before the streams' zstd contexts are
    // allocated, so that they reuse the array's memory rather than grow the heap (wasm memory
    // never shrinks; holding `ops` longer cost 34 MB on freedoom2-wad).
    drop(ops);
    if ctrl.len() as u64 > MAX_SEGMENT_CTRL {
        return Ok((None, copied));
    }
    let t = trace.start();
    let encoded = encode_ops_streams(new.len() as u64, &ctrl, &diff, &extra, lzma, |data, stream| compress_capped(data, level, stream))?;
    let header = encoded.header;
    if let Some(t) = t {
        trace.line(&format!(
            "  ctrl {} -> {}, diff {} -> {}{}, extra {} -> {} ({:.2}s)",
            header.ctrl_raw,
            header.ctrl_comp,
            header.diff_raw,
            header.diff_comp,
            if header.diff_coded > 0 { " run-coded" } else { "" },
            header.extra_raw,
            header.extra_comp,
            t.elapsed().as_secs_f64()
        ));
    }
    Ok((Some(encoded), copied))
}

/// How `encode_ops_segment` searches and compresses: the zstd level, the matcher's search step
/// (`MatchParams::search_step`), whether the streams are tried as LZMA too (§2.3 `M`), and
/// where its timing lines go.
#[derive(Clone, Copy)]
struct OpsParams<'a> {
    level: i32,
    search_step: usize,
    lzma: bool,
    trace: &'a Trace,
}

/// A segment whose block matches leave at most 1/`DIAGONAL_MAX_UNCOVERED` of it uncovered is
/// matched along their diagonals instead of by the suffix-array search, if that leaves at most
/// 1/`DIAGONAL_MAX_LITERAL` of it literal (256 bytes of a 4 MiB segment).
const DIAGONAL_MAX_UNCOVERED: u64 = 8;
const DIAGONAL_MAX_LITERAL: u64 = 16 << 10;

/// Copy operations along the block matches' diagonals, for a segment the block matches almost
/// cover (a large file with scattered edits: a game's data pack, most segments of a big build).
/// The suffix array over the planned old spans costs most of such a segment's CPU and finds
/// the same copies: the matched blocks lie on a few diagonals, and what lies between them is
/// taken as bsdiff takes it, each side's copy extended over the gap while its bytes agree more
/// often than not (the difference bytes carry the rest), the remainder literal. `starts[k]` is
/// where span `k` begins in `old`; `matches` are (position in `new`, position in the reference
/// stream) of whole `block`-byte old blocks. None where the matches cover less or leave more
/// literal.
fn diagonal_ops(new: &[u8], old: &[u8], spans: &[(u64, u64)], starts: &[u64], matches: &[(u64, u64)], block: u64) -> Option<Vec<Op>> {
    let len = new.len() as u64;
    // (start, end, diagonal) in `new`, contiguous blocks of one diagonal joined.
    let mut runs: Vec<(u64, u64, i64)> = Vec::new();
    for &(n, o) in matches {
        let k = spans.partition_point(|s| s.0 <= o).checked_sub(1)?;
        let (span_start, span_len) = spans[k];
        if o + block > span_start + span_len || n + block > len {
            continue; // a block the plan cut off (over the budget): not in `old`
        }
        let diagonal = (starts[k] + o - span_start) as i64 - n as i64;
        match runs.last_mut() {
            Some(r) if r.1 == n && r.2 == diagonal => r.1 = n + block,
            Some(r) if r.1 > n => return None, // overlapping matches: never made by find_block_matches
            _ => runs.push((n, n + block, diagonal)),
        }
    }
    let covered: u64 = runs.iter().map(|r| r.1 - r.0).sum();
    if runs.is_empty() || covered < len - len / DIAGONAL_MAX_UNCOVERED {
        return None;
    }
    // Whether new[at] equals the old byte `diagonal` away (false outside `old`).
    let agrees = |at: u64, diagonal: i64| usize::try_from(at as i64 + diagonal).ok().and_then(|o| old.get(o)).is_some_and(|&b| b == new[at as usize]);
    // The bytes after `from` (before it, going back) a copy on `diagonal` takes over a gap of
    // `gap` bytes, with its running agreement count per length: the longest best score of
    // 2 x agreeing - length, as bsdiff extends.
    let extend = |from: u64, gap: u64, diagonal: i64, back: bool| -> (u64, Vec<u32>) {
        let (mut agreeing, mut best, mut best_len) = (0i64, 0i64, 0u64);
        let mut prefix = Vec::with_capacity(gap as usize + 1);
        prefix.push(0u32);
        for t in 0..gap {
            let at = if back { from - 1 - t } else { from + t };
            agreeing += agrees(at, diagonal) as i64;
            prefix.push(agreeing as u32);
            if 2 * agreeing - (t as i64 + 1) > best {
                (best, best_len) = (2 * agreeing - (t as i64 + 1), t + 1);
            }
        }
        (best_len, prefix)
    };
    let mut ops = Vec::with_capacity(runs.len() + 1);
    // Before the first run: its copy extended back, the rest literal.
    let (first_start, _, first_diagonal) = runs[0];
    let (back, _) = extend(first_start, first_start, first_diagonal, true);
    if back < first_start {
        ops.push(Op { diagonal: first_diagonal, copy_len: 0, extra_len: first_start - back });
    }
    let mut copy_start = first_start - back;
    for (k, &(_, end, diagonal)) in runs.iter().enumerate() {
        let next = runs.get(k + 1).copied();
        let gap_end = next.map_or(len, |r| r.0);
        let gap = gap_end - end;
        let (mut forward, forward_prefix) = extend(end, gap, diagonal, false);
        let mut backward = 0;
        if let Some((next_start, _, next_diagonal)) = next {
            let (b, backward_prefix) = extend(next_start, gap, next_diagonal, true);
            backward = b;
            if forward + backward > gap {
                // Both copies want the middle: split where together they agree most.
                let (lo, hi) = (gap - backward, forward);
                let agreeing_at = |split: u64| forward_prefix[split as usize] + backward_prefix[(gap - split) as usize];
                let split = (lo..=hi).max_by_key(|&split| (agreeing_at(split), std::cmp::Reverse(split))).unwrap_or(lo);
                (forward, backward) = (split, gap - split);
            }
        }
        let op = Op { diagonal, copy_len: end + forward - copy_start, extra_len: gap - forward - backward };
        match ops.last_mut() {
            // One copy across a gap its diagonal explains (an edit: difference bytes).
            Some(last) if last.extra_len == 0 && last.diagonal == diagonal => (last.copy_len, last.extra_len) = (last.copy_len + op.copy_len, op.extra_len),
            _ => ops.push(op),
        }
        copy_start = gap_end - backward;
    }
    // Literal bytes left where the suffix array may find copies on other diagonals (a header
    // whose edit moved what follows it, text): its search is worth its cost there.
    let literal: u64 = ops.iter().map(|op| op.extra_len).sum();
    (literal <= len / DIAGONAL_MAX_LITERAL).then_some(ops)
}

/// Spans of the reference stream (start, len), ascending and disjoint.
type Spans = Vec<(u64, u64)>;

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

/// A planned segment: its index, spans for the ops form and for the window form, and its
/// block matches (position in the segment, in the reference stream).
type Plan = (u64, Spans, Spans, Vec<(u64, u64)>);

/// An ops segment as encoded: its bytes and header, and its zstd-only sizes.
type OpsForm = OpsEncoding;

/// A piece of a window: (offset in the planned spans' concatenation, start in the reference
/// stream, length).
type CopiedSpan = (u64, u64, u64);

/// The old bytes `ops` copy from, each padded by `TEXT_WINDOW_SPAN_PADDING` and merged, cut at
/// the planned spans' boundaries, ascending. None when the ops copy nothing or the pieces
/// would be more spans than a window segment may list (the planned spans are used whole then).
fn copied_spans(ops: &[Op], spans: &[(u64, u64)]) -> Option<Vec<CopiedSpan>> {
    let old_len: u64 = spans.iter().map(|s| s.1).sum();
    let mut sources: Vec<(u64, u64)> = Vec::new();
    let mut new_at = 0i64;
    for op in ops {
        if op.copy_len > 0 {
            let start = (new_at + op.diagonal) as u64;
            sources.push((start.saturating_sub(TEXT_WINDOW_SPAN_PADDING), (start + op.copy_len + TEXT_WINDOW_SPAN_PADDING).min(old_len)));
        }
        new_at += (op.copy_len + op.extra_len) as i64;
    }
    if sources.is_empty() {
        return None;
    }
    sources.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::with_capacity(sources.len());
    for (a, b) in sources {
        match merged.last_mut() {
            Some(m) if a <= m.1 => m.1 = m.1.max(b),
            _ => merged.push((a, b)),
        }
    }
    // Cut at the planned spans' boundaries (each planned span is one reference range).
    let mut out = Vec::with_capacity(merged.len());
    let (mut k, mut span_at) = (0usize, 0u64);
    for (mut a, b) in merged {
        while a < b {
            while span_at + spans[k].1 <= a {
                span_at += spans[k].1;
                k += 1;
            }
            let end = b.min(span_at + spans[k].1);
            out.push((a, spans[k].0 + (a - span_at), end - a));
            a = end;
        }
    }
    (out.len() as u64 <= MAX_WINDOW_SPANS).then_some(out)
}

/// A window form's spans and window bytes (`far`, the spans' old bytes, then `near`: §2.6):
/// all of the planned spans and their bytes `old`, or, given `copied`, only those pieces of them.
fn window_of(spans: Vec<(u64, u64)>, old: Vec<u8>, copied: Option<Vec<CopiedSpan>>, far: &[u8], near: &[u8]) -> (Vec<(u64, u64)>, Vec<u8>) {
    match copied {
        Some(copied) => {
            let mut window = Vec::with_capacity(far.len() + copied.iter().map(|c| c.2 as usize).sum::<usize>() + near.len());
            window.extend_from_slice(far);
            for &(at, _, len) in &copied {
                window.extend_from_slice(&old[at as usize..(at + len) as usize]);
            }
            drop(old);
            window.extend_from_slice(near);
            (copied.iter().map(|&(_, start, len)| (start, len)).collect(), window)
        }
        None if far.is_empty() => {
            let mut window = old;
            window.extend_from_slice(near);
            (spans, window)
        }
        None => {
            let mut window = Vec::with_capacity(far.len() + old.len() + near.len());
            window.extend_from_slice(far);
            window.extend_from_slice(&old);
            drop(old);
            window.extend_from_slice(near);
            (spans, window)
        }
    }
}

/// Whether a file's name says text (`TEXT_FILE_EXTENSIONS`).
fn has_text_name(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    name.rsplit_once('.').is_some_and(|(_, ext)| TEXT_FILE_EXTENSIONS.iter().any(|t| ext.eq_ignore_ascii_case(t)))
}

/// One zstd frame of `data` (a stream of an ops segment), with the match finder's tables
/// capped as the window form's are, so a generation stays within an isolate's memory.
/// At levels 16-18 (17: the Worker's default) the extra stream (literal new bytes, compressed
/// with no reference) gets level 19's search (btultra2 where 17 is btopt; 3-byte matches as
/// before): where the stream is large, as in a Go module's or duckdb's data, that is 4.6% and
/// 2.8% of the patch for 18% and 6% more CPU; elsewhere the stream is small and so are the
/// gain and the cost (BENCHMARKS.md, "Generator: the extra stream at level 19"). The diff
/// stream keeps the level's parameters (a shallower search cost esbuild-wasm-adj 0.7% of its
/// patch for 0.1 s).
fn compress_capped(data: &[u8], level: i32, stream: OpsStream) -> Result<Vec<u8>> {
    if data.is_empty() {
        return Ok(Vec::new());
    }
    let level = match stream {
        OpsStream::Extra if (16..19).contains(&level) => 19,
        _ => level,
    };
    compress_frame(data, &[], capped(level))
}

/// The level's search with zstd's tables capped (a 12-16 MiB prefix would otherwise want
/// 64+ MiB of them).
fn capped(level: i32) -> FrameSearch {
    FrameSearch { hash_log: Some(MAX_HASH_LOG), chain_log: Some(MAX_CHAIN_LOG), ..FrameSearch::level(level) }
}

/// Binary segments' window form: the ops form found the copies, the window only mops up
/// (lazy2 at 12).
fn lazy_window(level: i32) -> FrameSearch {
    capped(level.min(WINDOW_FORM_MAX_LEVEL))
}

/// The window form of a segment holding transformed wasm code: the patch's level (btultra2 at 19,
/// as the in-memory diff) within the lazy window's table caps, so its tables take no more
/// memory than the lazy window's (freed before it). Measured on resvg's segment: 454,184
/// bytes; with each table a quarter of that, and long-distance matching to reach the old
/// module's streams, 464,404.
fn wasm_code_window(level: i32) -> FrameSearch {
    capped(level.min(DEEP_TEXT_WINDOW_MAX_LEVEL))
}

/// `set_deep_text_windows`' text window form: the in-memory diff's level (btultra2 at 19) with
/// the binary tree over 2^(DEEP_TEXT_WINDOW_CHAIN_LOG - 1) bytes (tree and tables ~100 MB),
/// long-distance matching as `text_window`. Measured on three-tree: chain logs 22, 23, 24 gave
/// 220,910, 216,002, 211,201 bytes for the same CPU (the tree's size is not its cost).
fn deep_text_window(level: i32) -> FrameSearch {
    let level = level.min(DEEP_TEXT_WINDOW_MAX_LEVEL);
    FrameSearch { level, hash_log: Some(MAX_HASH_LOG), chain_log: Some(DEEP_TEXT_WINDOW_CHAIN_LOG), ..text_window(level) }
}

/// Text segments' window form: the optimal parser (btopt at 16) over recent text,
/// long-distance matching into the old spans.
fn text_window(level: i32) -> FrameSearch {
    FrameSearch {
        hash_log: Some(TEXT_WINDOW_HASH_LOG),
        chain_log: Some(TEXT_WINDOW_CHAIN_LOG),
        long_distance: Some(LongDistance { min_match: Some(TEXT_WINDOW_LDM_MIN_MATCH), hash_rate_log: Some(TEXT_WINDOW_LDM_HASH_RATE_LOG) }),
        ..FrameSearch::level(level.min(TEXT_WINDOW_MAX_LEVEL))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matcher::rebuild;

    fn noise(mut x: u64, n: usize) -> Vec<u8> {
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    #[test]
    fn a_window_is_within_the_planned_spans() {
        // Random candidates (start, end, weight) over 64 MiB; the window's budget (16 MiB, as
        // MAX_WINDOW_BYTES) and several plan budgets at and above it.
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |m: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % m
        };
        for round in 0..200 {
            let candidates: Vec<(u64, u64, u64)> = (0..1 + next(60))
                .map(|_| {
                    let start = next(64 << 20);
                    (start, start + 1 + next(8 << 20), 1 + next(8))
                })
                .collect();
            let window = choose_spans(candidates.clone(), 64 << 20, 16 << 20);
            for budget in [16 << 20, 17 << 20, 32 << 20, 96 << 20] {
                let spans = choose_spans(candidates.clone(), 64 << 20, budget);
                for &(ws, wl) in &window {
                    assert!(
                        spans.iter().any(|&(s, len)| s <= ws && ws + wl <= s + len),
                        "round {round}, budget {budget}: window span ({ws}, {wl}) outside {spans:?}"
                    );
                }
            }
        }
    }

    /// `diagonal_ops` of `new` against `old` laid at reference position 1000 (one span), with
    /// the block matches a generator's plan finds (4 KiB blocks).
    fn along_diagonals(old: &[u8], new: &[u8]) -> Option<Vec<Op>> {
        const BLOCK: usize = 4096;
        let blocks: HashMap<u64, u64> = old.chunks_exact(BLOCK).enumerate().map(|(k, b)| (xxh3_64(b), (k * BLOCK) as u64 + 1000)).collect();
        let matches = find_block_matches(new, BLOCK, |_, window| blocks.get(&xxh3_64(window)).copied());
        diagonal_ops(new, old, &[(1000, old.len() as u64)], &[0], &matches, BLOCK as u64)
    }

    #[test]
    fn scattered_edits_and_a_short_insertion_are_matched_along_the_diagonals() {
        let old = noise(1, 1 << 20);
        let mut new = old.clone();
        for k in 0..20 {
            new[k * 50_000 + 777] ^= 0x5a;
        }
        new.splice(600_000..600_000, noise(2, 40));
        let ops = along_diagonals(&old, &new).expect("block matches cover the segment");
        let (diff, extra) = split_streams(&old, &new, &ops);
        assert_eq!(rebuild(&old, &ops, &diff, &extra), new);
        // The inserted bytes are literal (give or take a byte that happens to agree), the edits
        // are difference bytes on the copies, nothing else differs.
        assert!((36..=40).contains(&extra.len()), "{} literal bytes", extra.len());
        assert_eq!(diff.iter().filter(|&&d| d != 0).count(), 20);
        assert_eq!(ops.len(), 2, "two diagonals: {ops:?}");
    }

    /// Any block matches (true ones among made-up ones that do not match, overlap or fall
    /// outside the spans, as a hostile signature could name), any spans: never a panic, and
    /// whatever ops come back rebuild the new bytes exactly.
    #[test]
    fn any_matches_give_ops_that_rebuild_or_none() {
        const BLOCK: usize = 512;
        let mut taken = 0;
        for case in 0..300u64 {
            let mut r = noise(case + 11, 64);
            let mut next = |n: u64| -> u64 {
                r.rotate_left(7);
                let x = u64::from_le_bytes(r[..8].try_into().unwrap()) ^ (case << 32);
                r[..8].copy_from_slice(&x.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_le_bytes());
                x.wrapping_mul(0x2545_F491_4F6C_DD1D) % n.max(1)
            };
            let old: Vec<u8> = noise(case, 16 << 10 | next(8 << 10) as usize).iter().map(|b| b % (4 + case % 200) as u8).collect();
            let mut new = old.clone();
            for _ in 0..next(6) {
                let at = next(new.len() as u64) as usize;
                match next(3) {
                    0 => new[at] ^= 1 + next(255) as u8,
                    1 => drop(new.splice(at..at, noise(case + 99, next(300) as usize + 1))),
                    _ => drop(new.drain(at..(at + next(300) as usize).min(new.len()))),
                }
            }
            // Two spans of the old data laid apart in the reference stream.
            let cut = next(old.len() as u64);
            let spans = [(100, cut), (200_000, old.len() as u64 - cut)];
            let starts = [0, cut];
            let to_reference = |w: u64| if w < cut { 100 + w } else { 200_000 + w - cut };
            let blocks: HashMap<u64, u64> = old.chunks_exact(BLOCK).enumerate().map(|(k, b)| (xxh3_64(b), to_reference((k * BLOCK) as u64))).collect();
            let mut matches = find_block_matches(&new, BLOCK, |_, window| blocks.get(&xxh3_64(window)).copied());
            for _ in 0..next(3) {
                matches.push((next(new.len() as u64), next(300_000)));
            }
            if next(2) == 0 {
                matches.sort_unstable();
            }
            if let Some(ops) = diagonal_ops(&new, &old, &spans, &starts, &matches, BLOCK as u64) {
                let (diff, extra) = split_streams(&old, &new, &ops);
                assert_eq!(rebuild(&old, &ops, &diff, &extra), new, "case {case}");
                taken += 1;
            }
        }
        assert!(taken > 30, "the path was taken in {taken} of 300 cases");
    }

    #[test]
    fn what_block_matches_leave_unexplained_goes_to_the_suffix_array() {
        let old = noise(3, 1 << 20);
        // An edit near the start moves what follows it: the bytes before the first matched
        // block lie on another diagonal, which only the suffix array would find.
        let mut moved = old.clone();
        moved.splice(100..100, noise(4, 7));
        assert!(along_diagonals(&old, &moved).is_none());
        // 160 KiB of new data: more than 1/8 of the segment uncovered.
        let mut fresh = old.clone();
        fresh.splice(500_000..500_000, noise(5, 160 << 10));
        assert!(along_diagonals(&old, &fresh).is_none());
        // The same bytes: one copy.
        assert_eq!(along_diagonals(&old, &old).unwrap(), vec![Op { diagonal: 0, copy_len: old.len() as u64, extra_len: 0 }]);
    }
}
