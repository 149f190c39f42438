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
//!
//! The generator's parts: `setup` (the delta stream's layout, the settings), `plan` (a
//! segment's byte ranges and the old spans it is compressed against), `encode` (a planned
//! segment as copy operations or as a window, the smaller kept), `ops_form` and `diagonals`
//! (the copy operations), `window_form` (the window and its zstd search), `steps` (header,
//! end, and generation split into steps), `drive` (a whole patch from two readers), `wasm`
//! (transformed wasm modules).

use std::collections::HashMap;

use crate::error::Error;
use crate::patch_format::{OpsEncoding, PatchTree, Segment, BASE_WINDOW_BACK, MAX_WINDOW_BACK};
use crate::trace::Trace;
use crate::tree_plan::DiffStats;
use crate::window_plan::AlignedPart;
use edgepatch_format::Capabilities;

mod diagonals;
mod drive;
mod encode;
mod ops_form;
mod plan;
mod setup;
mod steps;
mod wasm;
mod window_form;

pub use drive::{drive, generate_patch, generate_patch_transformed, BuildReaders, ReadRange};
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
    /// What the patch's reader understands (`set_reader`).
    reader: Capabilities,
    /// Where each segment's timing lines go (`set_trace`; off by default).
    trace: Trace,
    /// Over the patch bytes handed out (what the trailer checksum covers).
    hasher: blake3::Hasher,
    out_len: u64,
    segments: Vec<Segment>,
    spans: Vec<(u64, u64)>,
    header_done: bool,
    /// BLAKE3 of the header and tree (the patch's head), once `header()` made them.
    head_blake3: [u8; 32],
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

/// Spans of the reference stream (start, len), ascending and disjoint.
type Spans = Vec<(u64, u64)>;

/// A planned segment: its index, spans for the ops form and for the window form, and its
/// block matches (position in the segment, in the reference stream).
type Plan = (u64, Spans, Spans, Vec<(u64, u64)>);

/// An ops segment as encoded: its bytes and header, and its zstd-only sizes.
type OpsForm = OpsEncoding;

/// A piece of a window: (offset in the planned spans' concatenation, start in the reference
/// stream, length).
type CopiedSpan = (u64, u64, u64);
