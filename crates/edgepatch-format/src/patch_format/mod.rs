//! The patch container, version 2 (normative description: docs/FORMAT.md §2): the segment
//! tags and the limits every reader enforces, here; the codec of each structure in its own
//! module, encoder beside decoder (the fixed header and its flags in `header`). The writers
//! (the in-memory diff and the generator), the streaming applier and the reference applier
//! all go through these.

mod control;
mod header;
mod listing;
mod ops_encoding;
mod run_coding;
mod segment_header;
mod tree;
mod unit_source;

pub use crate::segment_codec::{WindowCodec, LZMA_STREAM_DICTIONARY, MAX_LZMA_DICTIONARY, MAX_WINDOW_LOG};
pub use control::{decode_control, encode_control, Op, OpCursor};
pub use header::{
    FixedHeader, FLAG_LZMA_SEGMENTS, FLAG_MODE_BLIND_DIGEST, FLAG_RUN_CODED_DIFF, FLAG_SINGLE_FILE, FLAG_SPLIT_REFERENCE, FLAG_WASM_TRANSFORM,
    FLAG_WINDOW_REACH, PATCH_MAGIC, PATCH_VERSION,
};
pub use listing::{listing_digest, mode_blind_listing_digest, single_file_listing, ListedEntry, ListedKind};
pub use ops_encoding::{encode_ops_streams, OpsEncoding, OpsForms, OpsStream};
pub use run_coding::{encode_run_coded, expand_run_coded};
pub use segment_header::{read_segment_header, Segment, SegmentHeader, WindowSegmentHeader};
pub use tree::{
    max_tree_name_bytes, reads_old_split, split_layout_len, EncodedTransform, EncodedTree, FileSource, OldFile, PatchTree, TreeBudget, TreeEntry,
    TreeEntryKind, WasmTransformed,
};
pub use unit_source::UnitSource;

/// A transformed file's normalized form and the file itself are each at most
/// this large: the applier holds the normalized form whole (the inverse needs
/// the module's structure) while it writes the file (§2.8).
pub const MAX_WASM_TRANSFORM_BYTES: u64 = 64 << 20;
/// A transformed file's side info, decoded, is at most this large.
pub const MAX_WASM_SIDE_INFO: u64 = 4 << 20;

/// Tag byte of an ops segment.
pub const SEGMENT_TAG: u8 = b'S';
/// Tag byte of a window segment.
pub const WINDOW_SEGMENT_TAG: u8 = b'W';
/// Tag byte of an ops segment whose diff stream is run-coded (§2.3).
pub const RUN_CODED_SEGMENT_TAG: u8 = b'R';
/// Tag byte of a window segment whose data is raw LZMA (§2.6).
pub const LZMA_WINDOW_SEGMENT_TAG: u8 = b'L';
/// Tag byte of an ops segment some of whose streams are raw LZMA (§2.3).
pub const LZMA_OPS_SEGMENT_TAG: u8 = b'M';
/// Old bytes a window segment may take from the reference stream...
pub const MAX_WINDOW_BYTES: u64 = 8 << 20;
/// ...plus at most this many new bytes produced just before the segment, in a
/// patch without `FLAG_WINDOW_REACH` (the reach an applier keeps by default)...
pub const BASE_WINDOW_BACK: u64 = 4 << 20;
/// ...or at most the reach the patch declares, which is at most this (§2.6).
pub const MAX_WINDOW_BACK: u64 = 16 << 20;
/// Spans a window segment may list.
pub const MAX_WINDOW_SPANS: u64 = 1 << 16;
/// Tag byte of the end unit (the patch's checksum follows).
pub const END_TAG: u8 = b'E';

/// Decoded tree section may not exceed this (bounds apply-side memory).
pub const MAX_TREE_BYTES: u64 = 64 << 20;
/// The named entries' paths and symlink targets, decoded (front coding can make
/// 3 bytes of tree a 4096-byte path), may not exceed this in total...
pub const MAX_TREE_NAME_BYTES: u64 = 64 << 20;
/// ...nor `TREE_NAME_FLOOR + TREE_NAME_EXPANSION * decoded tree size` (§2.7):
/// a few KB of tree cannot claim 64 MiB of paths. Real trees name 3-30 path
/// bytes per tree byte; a bomb names up to 1,365.
pub const TREE_NAME_FLOOR: u64 = 1 << 20;
/// Path bytes a decoded tree byte may name, beyond the floor (§2.7).
pub const TREE_NAME_EXPANSION: u64 = 64;

/// New bytes one segment may produce; bounds apply-side memory.
pub const MAX_SEGMENT_NEW: u64 = 16 << 20;
/// Control bytes one segment may carry (the writer never comes near: an op
/// takes a few bytes and produces at least 9 new bytes in practice).
pub const MAX_SEGMENT_CTRL: u64 = 2 * MAX_SEGMENT_NEW;
/// Entries a tree may hold in all, kept ones included (§2.7).
pub const MAX_ENTRIES: u64 = 1 << 22;
/// Entries a tree patch may name (§2.7): the tree is held whole while it is
/// checked, at about 110 bytes an entry, so 2^20 named entries cost 114 MiB
/// (measured), where 2^22 cost 456 MiB from a 1.3 KB patch. Kept entries are
/// not named (they come from the old build's own listing).
pub const MAX_NAMED_ENTRIES: u64 = 1 << 20;

/// Entry kind byte of a regular file (listings and signatures).
pub const KIND_FILE: u8 = 0;
/// Entry kind byte of a symlink.
pub const KIND_SYMLINK: u8 = 1;
/// Entry kind byte of a directory.
pub const KIND_DIRECTORY: u8 = 2;

const _: () = assert!(crate::compressed_side_info::MAX_OLD_CONTENT == MAX_WASM_TRANSFORM_BYTES, "an old file read decoded has the transform table's limit");
const _: () = assert!(crate::compressed_side_info::MAX_INNER == MAX_WASM_SIDE_INFO, "an inner side info has a row's limit");
