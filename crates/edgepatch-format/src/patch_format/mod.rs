//! The patch container, version 2 (normative description: docs/FORMAT.md §2): the magic,
//! the version, the header flags, the segment tags and the limits every reader enforces,
//! here; the codec of each structure in its own module, encoder beside decoder. The
//! writers (the in-memory diff and the generator), the streaming applier and the
//! reference applier all go through these.

mod control;
mod listing;
mod ops_encoding;
mod run_coding;
mod segment_header;
mod tree;

pub use crate::segment_codec::{WindowCodec, LZMA_STREAM_DICTIONARY, MAX_LZMA_DICTIONARY, MAX_WINDOW_LOG};
pub use control::{decode_control, encode_control, Op, OpCursor};
pub use listing::{listing_digest, mode_blind_listing_digest, single_file_listing, ListedEntry, ListedKind};
pub use ops_encoding::{encode_ops_streams, OpsEncoding, OpsStream};
pub use run_coding::{encode_run_coded, expand_run_coded};
pub use segment_header::{Segment, SegmentHeader, WindowSegmentHeader};
pub use tree::{max_tree_name_bytes, EncodedTransform, EncodedTree, FileSource, OldFile, PatchTree, TreeBudget, TreeEntry, TreeEntryKind, WasmTransformed};

/// First bytes of every patch.
pub const PATCH_MAGIC: [u8; 8] = *b"EDGEPTCH";
/// The patch format version this build writes and reads.
pub const PATCH_VERSION: u16 = 2;
/// Header flag: the patch turns one file into one file (no tree).
pub const FLAG_SINGLE_FILE: u16 = 1;
/// The tree section ends with a wasm transform table (§2.8): some delta files
/// are stored in a normalized form that the applier turns back into the file.
/// A patch without transformed files leaves it clear, so it is byte for byte
/// what a writer without the transform makes, and older appliers (which
/// refuse unknown flags) refuse a patch that has them instead of misapplying it.
pub const FLAG_WASM_TRANSFORM: u16 = 2;
/// A transformed file's normalized form and the file itself are each at most
/// this large: the applier holds the normalized form whole (the inverse needs
/// the module's structure) while it writes the file (§2.8).
pub const MAX_WASM_TRANSFORM_BYTES: u64 = 64 << 20;
/// A transformed file's side info, decoded, is at most this large.
pub const MAX_WASM_SIDE_INFO: u64 = 4 << 20;
/// The tree section ends with the patch's window reach (§2.6): some window
/// segment reaches more than `BASE_WINDOW_BACK` bytes back into the delta
/// stream. Older appliers keep only 4 MiB of it and refuse unknown flags, so
/// they refuse such a patch instead of misapplying it; a patch whose windows
/// stay within 4 MiB leaves it clear and is byte for byte what it was before.
pub const FLAG_WINDOW_REACH: u16 = 4;
/// The patch may hold ops segments whose diff stream is run-coded (tag
/// `RUN_CODED_SEGMENT_TAG`, §2.3). Older appliers refuse unknown flags, so they
/// refuse such a patch at its header; a patch without one leaves it clear and
/// is byte for byte what it was before.
pub const FLAG_RUN_CODED_DIFF: u16 = 8;
/// The tree section ends with the old listing's mode-blind digest (§2.1): the digest of
/// the old listing with no file executable. Set exactly when some old file is executable,
/// so that an applier on a system without executable bits (Windows) can still recognize
/// the old build; a patch whose old build has no executable file leaves it clear and is
/// byte for byte what it was before. Older appliers refuse unknown flags.
pub const FLAG_MODE_BLIND_DIGEST: u16 = 16;
/// Each row of the wasm transform table names the old file a field-split file reads split
/// (§2.8.1): a renamed module (content-hashed names) is split against the old file it
/// replaced, at another path. Set only when some row names one, so a patch whose split files
/// all read the old file at their own path is byte for byte what it was before. Older
/// appliers refuse unknown flags.
pub const FLAG_SPLIT_REFERENCE: u16 = 32;
/// The patch may hold LZMA segments: window segments whose data is raw LZMA primed with the
/// window (tag `LZMA_WINDOW_SEGMENT_TAG`, §2.6), and ops segments some of whose streams are
/// raw LZMA (tag `LZMA_OPS_SEGMENT_TAG`, §2.3), where those are smaller than zstd's frames
/// (5-9% on split wasm modules' field streams and on ops streams). Set only when one occurs
/// (by the in-memory diff; a writer that writes the tree first sets it where it may write
/// one), so a patch without one is byte for byte what it was before. Older appliers refuse
/// unknown flags.
pub const FLAG_LZMA_SEGMENTS: u16 = 64;
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
