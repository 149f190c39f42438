//! The patch container, version 2 (normative description: docs/FORMAT.md §2).
//! This module owns the constants, the limits and the tree section codec that the
//! writer (`diff`), the streaming applier (`apply`) and the reference applier share.

use crate::build::{validate_path, validate_symlink_target, TreeChecker, MAX_PATH_LEN};
use crate::error::{Error, Input, Result};
use crate::matcher::Op;
pub use crate::segment_codec::{WindowCodec, LZMA_STREAM_DICTIONARY, MAX_LZMA_DICTIONARY, MAX_WINDOW_LOG};
use crate::wire::{put_str, put_varint, unzigzag, zigzag, SliceReader};

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

/// The most path and target bytes a decoded tree section of `decoded` bytes may name (§2.7).
pub fn max_tree_name_bytes(decoded: u64) -> u64 {
    MAX_TREE_NAME_BYTES.min(TREE_NAME_FLOOR.saturating_add(TREE_NAME_EXPANSION.saturating_mul(decoded)))
}

/// The §2.7 rules on a tree section's size and what it names, in one place for both
/// sides: the decoder counts each name as it reads it and refuses the patch; the encoder
/// counts what it wrote and refuses to write a patch no applier would take (a build whose
/// directories nest so deep that the full path of every level breaks the name budget, say).
/// Depth has no rule of its own: each level's directory is an entry naming its whole path,
/// so depth is bounded by the path length and by this budget.
pub struct TreeBudget {
    decoded: u64,
    names_limit: u64,
    names: u64,
}

impl TreeBudget {
    /// The budget of a decoded tree section of `decoded` bytes.
    pub fn new(decoded: u64) -> TreeBudget {
        TreeBudget { decoded, names_limit: max_tree_name_bytes(decoded), names: 0 }
    }

    /// Counts one more path or link target of `len` bytes.
    pub fn count_name(&mut self, len: usize) -> std::result::Result<(), String> {
        self.names = self.names.saturating_add(len as u64);
        if self.names > self.names_limit {
            return Err(format!(
                "the tree's paths and link targets add up to more than {} bytes (the limit for a {}-byte tree section)",
                self.names_limit, self.decoded
            ));
        }
        Ok(())
    }

    /// The decoded section's size: 1..=[`MAX_TREE_BYTES`].
    pub fn check_section(decoded: u64) -> std::result::Result<(), String> {
        if decoded > MAX_TREE_BYTES {
            return Err(format!("tree section of {decoded} bytes, above the limit {MAX_TREE_BYTES}"));
        }
        Ok(())
    }

    /// Entries the tree names: at most [`MAX_NAMED_ENTRIES`].
    pub fn check_named(named: u64) -> std::result::Result<(), String> {
        if named > MAX_NAMED_ENTRIES {
            return Err(format!("the tree names {named} entries, above the limit {MAX_NAMED_ENTRIES}"));
        }
        Ok(())
    }

    /// Entries of the new tree, kept and named: at most [`MAX_ENTRIES`].
    pub fn check_entries(entries: u64) -> std::result::Result<(), String> {
        if entries > MAX_ENTRIES {
            return Err(format!("the new tree has {entries} entries, above the limit {MAX_ENTRIES}"));
        }
        Ok(())
    }
}

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
/// Entry codes of the tree section (§2.1): kind, source and executable bit in one byte.
const CODE_DIRECTORY: u8 = 0;
const CODE_SYMLINK: u8 = 1;
const CODE_DELTA: u8 = 2;
const CODE_DELTA_EXECUTABLE: u8 = 3;
const CODE_COPY: u8 = 4;
const CODE_COPY_EXECUTABLE: u8 = 5;

/// One entry of the old build as an applier lists it, without content: what a
/// tree patch keeps from the old build without naming it (§2.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedEntry {
    /// Relative, `/`-separated (empty for a single-file build's file).
    pub path: String,
    /// What the entry is.
    pub kind: ListedKind,
}

/// What a listed entry is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListedKind {
    /// A regular file.
    File {
        /// The executable bit.
        executable: bool,
        /// Size in bytes.
        size: u64,
    },
    /// A symlink.
    Symlink {
        /// Where the link points, as stored.
        target: String,
    },
    /// A directory.
    Directory,
}

/// BLAKE3 of a listing (sorted by path) in its canonical encoding (§2.1).
pub fn listing_digest(listing: &[ListedEntry]) -> [u8; 32] {
    digest_listing(listing, true)
}

/// The digest of `listing` as a system without executable bits lists it: every file not
/// executable (§2.1, flag bit 4).
pub fn mode_blind_listing_digest(listing: &[ListedEntry]) -> [u8; 32] {
    digest_listing(listing, false)
}

/// BLAKE3 of the canonical encoding of `listing`, with each file's executable byte, or 0 for
/// every file when `with_modes` is false.
fn digest_listing(listing: &[ListedEntry], with_modes: bool) -> [u8; 32] {
    let mut out = Vec::with_capacity(listing.len() * 48);
    put_varint(&mut out, listing.len() as u64);
    for e in listing {
        put_str(&mut out, &e.path);
        match &e.kind {
            ListedKind::File { executable, size } => {
                out.push(KIND_FILE);
                out.push((with_modes && *executable) as u8);
                put_varint(&mut out, *size);
            }
            ListedKind::Symlink { target } => {
                out.push(KIND_SYMLINK);
                put_str(&mut out, target);
            }
            ListedKind::Directory => out.push(KIND_DIRECTORY),
        }
    }
    *blake3::hash(&out).as_bytes()
}

/// Whether some file of `listing` is executable (then a tree patch carries the mode-blind digest).
fn has_executable(listing: &[ListedEntry]) -> bool {
    listing.iter().any(|e| matches!(e.kind, ListedKind::File { executable: true, .. }))
}

/// The listing of a single-file patch's old build: its one file, never executable.
pub fn single_file_listing(size: u64) -> Vec<ListedEntry> {
    vec![ListedEntry { path: String::new(), kind: ListedKind::File { executable: false, size } }]
}

/// An old file the patch reads: copied from, or part of the reference stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OldFile {
    /// The old build's path.
    pub path: String,
    /// Size in bytes.
    pub size: u64,
    /// Part of the concatenated old reference stream the delta reads from.
    pub in_reference: bool,
}

/// Where a new file's content comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileSource {
    /// The next `size` bytes of the delta stream.
    Delta,
    /// Identical to the old file at this index of `old_files`.
    Copy {
        /// Index into `old_files`.
        old_index: usize,
    },
}

/// What an entry of the new build is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TreeEntryKind {
    /// A regular file.
    File {
        /// The executable bit.
        executable: bool,
        /// Size in bytes.
        size: u64,
        /// Where the content comes from.
        source: FileSource,
    },
    /// A symlink.
    Symlink {
        /// Where the link points, as stored.
        target: String,
    },
    /// A directory.
    Directory,
}

/// One entry of the new build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeEntry {
    /// Relative, `/`-separated (empty in a single-file patch).
    pub path: String,
    /// What the entry is.
    pub kind: TreeEntryKind,
}

/// A delta file stored as the normalized form of a wasm module (§2.8): the
/// delta stream carries `normalized_size` bytes for it, and the inverse of
/// the wasm transform with `side_info` turns them into the file (whose size
/// is the entry's `size`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WasmTransformed {
    /// Index into `PatchTree::entries` (resolved) or `EncodedTree::named`.
    pub entry: usize,
    /// Bytes of the normalized form in the delta stream.
    pub normalized_size: u64,
    /// The side info, decoded (`wasm_transform` side info version 1).
    pub side_info: Vec<u8>,
    /// In the field-split layout, the old file it reads split when that is not the old file
    /// at its path (an index into [`PatchTree::old_files`]; `FLAG_SPLIT_REFERENCE`).
    pub split_reference: Option<usize>,
}

/// The new build and where its content comes from: everything the applier
/// must know before the delta stream starts (the patch's tree section,
/// resolved against the old build's listing).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PatchTree {
    /// Whether the patch turns one file into one file.
    pub single_file: bool,
    /// Every entry of the old build, sorted by path.
    pub old_listing: Vec<ListedEntry>,
    /// The old files the patch reads, by the index [`FileSource::Copy`] uses.
    pub old_files: Vec<OldFile>,
    /// The new build's entries, sorted by path.
    pub entries: Vec<TreeEntry>,
    /// BLAKE3 of the new files' BLAKE3s in [`PatchTree::digest_order`] (§2.1):
    /// one 32-byte hash verifies every file, where one per file would cost
    /// 32 incompressible bytes for each of a tree's thousands of files.
    pub files_digest: [u8; 32],
    /// The transformed delta files, ascending by entry (empty: flag clear).
    pub transforms: Vec<WasmTransformed>,
    /// How far back window segments reach, when above `BASE_WINDOW_BACK`
    /// (None: flag clear, the base reach).
    pub window_reach: Option<u64>,
    /// Some ops segment's diff stream is run-coded (`FLAG_RUN_CODED_DIFF`).
    pub run_coded_diff: bool,
    /// Some window segment is an LZMA one (`FLAG_LZMA_SEGMENTS`).
    pub lzma_segments: bool,
    /// Leave out the mode-blind digest (`FLAG_MODE_BLIND_DIGEST`) even where an old file is
    /// executable: the reader does not know it.
    pub omit_mode_blind_digest: bool,
}

/// [`PatchTree::split_old_file`], before the tree is put together.
fn split_old_file_of(single_file: bool, old_files: &[OldFile], entries: &[TreeEntry], w: &WasmTransformed) -> Option<usize> {
    if !crate::wasm_transform::side_info_has_code_layout(&w.side_info) {
        return None;
    }
    match (w.split_reference, single_file) {
        (Some(k), _) => Some(k),
        (None, true) => (!old_files.is_empty()).then_some(0),
        (None, false) => old_files.iter().position(|f| f.path == entries[w.entry].path),
    }
}

fn files_in_digest_order(entries: &[TreeEntry]) -> impl Iterator<Item = usize> + '_ {
    let files = move |copies: bool| {
        entries.iter().enumerate().filter_map(move |(i, e)| match &e.kind {
            TreeEntryKind::File { source, .. } => (matches!(source, FileSource::Copy { .. }) == copies).then_some(i),
            _ => None,
        })
    };
    files(true).chain(files(false))
}

/// Bytes the delta stream holds for each entry (0 for all but delta files):
/// a delta file's size, or its normalized size if it is transformed.
fn delta_lens<'a>(entries: &'a [TreeEntry], transforms: &'a [WasmTransformed]) -> impl Iterator<Item = u64> + 'a {
    let mut t = transforms.iter().peekable();
    entries.iter().enumerate().map(move |(i, e)| match &e.kind {
        TreeEntryKind::File { size, source: FileSource::Delta, .. } => t.next_if(|w| w.entry == i).map_or(*size, |w| w.normalized_size),
        _ => 0,
    })
}

impl PatchTree {
    /// Total bytes the delta stream must produce.
    pub fn delta_bytes(&self) -> u64 {
        delta_lens(&self.entries, &self.transforms).sum()
    }

    /// Bytes entry `i` takes in the delta stream (0 unless it is a delta file).
    pub fn delta_len(&self, i: usize) -> u64 {
        match &self.entries[i].kind {
            TreeEntryKind::File { size, source: FileSource::Delta, .. } => self.transform(i).map_or(*size, |w| w.normalized_size),
            _ => 0,
        }
    }

    /// The transform of entry `i`, if its delta is a normalized wasm module.
    pub fn transform(&self, i: usize) -> Option<&WasmTransformed> {
        self.transforms.binary_search_by_key(&i, |w| w.entry).ok().map(|j| &self.transforms[j])
    }

    /// The header flags this tree needs.
    pub fn flags(&self) -> u16 {
        (if self.single_file { FLAG_SINGLE_FILE } else { 0 })
            | (if self.transforms.is_empty() { 0 } else { FLAG_WASM_TRANSFORM })
            | (if self.window_reach.is_some() { FLAG_WINDOW_REACH } else { 0 })
            | (if self.run_coded_diff { FLAG_RUN_CODED_DIFF } else { 0 })
            | (if self.lzma_segments { FLAG_LZMA_SEGMENTS } else { 0 })
            | (if !self.single_file && !self.omit_mode_blind_digest && has_executable(&self.old_listing) { FLAG_MODE_BLIND_DIGEST } else { 0 })
            | (if self.transforms.iter().any(|w| w.split_reference.is_some()) { FLAG_SPLIT_REFERENCE } else { 0 })
    }

    /// The old file a transformed file in the field-split layout reads split (§2.8.7), by
    /// index into `old_files`: the one its row names, else the old file at its path (the
    /// one old file of a single-file patch). None for a file not in that layout, or with no
    /// such old file.
    pub fn split_old_file(&self, w: &WasmTransformed) -> Option<usize> {
        split_old_file_of(self.single_file, &self.old_files, &self.entries, w)
    }

    /// The most an applier puts in a sink's scratch space (`BuildSink::write_scratch`) for this
    /// patch: each transformed file's normalized form and each old module the delta stream
    /// reads split (§2.8.7), each taken once and never reused. What a caller must have room
    /// for besides the new build's files, while the apply runs.
    pub fn scratch_bytes(&self) -> u64 {
        let mut split: Vec<usize> = self.transforms.iter().filter_map(|w| self.split_old_file(w)).collect();
        split.sort_unstable();
        split.dedup();
        self.transforms.iter().map(|w| w.normalized_size).sum::<u64>() + split.iter().map(|&k| self.old_files[k].size).sum::<u64>()
    }

    /// How many of the delta bytes produced last a window segment may reach
    /// (and an applier keeps): the declared reach, else `BASE_WINDOW_BACK`.
    pub fn window_back(&self) -> u64 {
        self.window_reach.unwrap_or(BASE_WINDOW_BACK)
    }

    /// Total bytes of the old reference stream.
    pub fn reference_bytes(&self) -> u64 {
        self.old_files.iter().filter(|f| f.in_reference).map(|f| f.size).sum()
    }

    /// Indexes of the file entries in the order the files digest hashes them,
    /// which is the order an applier completes them: the copied files in entry
    /// order, then the delta-stream files in entry order.
    pub fn digest_order(&self) -> impl Iterator<Item = usize> + '_ {
        files_in_digest_order(&self.entries)
    }

    /// The files digest of this tree given each entry's BLAKE3 (`hash_of(i)`
    /// for entry `i`, asked only for files).
    pub fn digest_of(&self, mut hash_of: impl FnMut(usize) -> [u8; 32]) -> [u8; 32] {
        let mut digest = blake3::Hasher::new();
        for i in self.digest_order() {
            digest.update(&hash_of(i));
        }
        *digest.finalize().as_bytes()
    }

    /// Whether new entry `e` is old listing entry `o` kept as it is (same
    /// path, kind, mode, target; a file copied from the same path).
    fn keeps(&self, e: &TreeEntry, o: &ListedEntry) -> bool {
        e.path == o.path
            && match (&e.kind, &o.kind) {
                (TreeEntryKind::Directory, ListedKind::Directory) => true,
                (TreeEntryKind::Symlink { target }, ListedKind::Symlink { target: old }) => target == old,
                (TreeEntryKind::File { executable, source: FileSource::Copy { old_index }, .. }, ListedKind::File { executable: old_x, .. }) => {
                    executable == old_x && self.old_files[*old_index].path == o.path
                }
                _ => false,
            }
    }

    /// The tree section, version 2 (§2.1): the old build's entries kept as
    /// they are by runs over its listing; the others in columns (paths,
    /// codes, targets, sizes, copy sources) so that zstd sees like next to
    /// like, paths front-coded; the old table as positions in the listing.
    pub fn encode(&self) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        match (self.single_file, self.old_listing.as_slice()) {
            // A single file's listing is its size: 2-5 bytes instead of a digest.
            (true, [ListedEntry { kind: ListedKind::File { size, .. }, .. }]) => put_varint(&mut out, *size),
            (true, _) => return Err(Error::Invalid("a single-file patch's old build is one file".into())),
            (false, listing) => out.extend_from_slice(&listing_digest(listing)),
        }
        // Merge the sorted listing and entries: which old entries are kept.
        let mut kept_old = vec![false; self.old_listing.len()];
        let mut named = Vec::new();
        let mut named_index = Vec::new();
        let mut o = 0;
        for (i, e) in self.entries.iter().enumerate() {
            while o < self.old_listing.len() && self.old_listing[o].path.as_bytes() < e.path.as_bytes() {
                o += 1;
            }
            if o < self.old_listing.len() && self.keeps(e, &self.old_listing[o]) {
                kept_old[o] = true;
            } else {
                named.push(e);
                named_index.push(i);
            }
        }
        let mut runs = Vec::new();
        let mut i = 0;
        while i < kept_old.len() {
            let keep = kept_old[i..].iter().take_while(|k| **k).count();
            let drop = kept_old[i + keep..].iter().take_while(|k| !**k).count();
            runs.push((keep, drop));
            i += keep + drop;
        }
        put_varint(&mut out, runs.len() as u64);
        for (keep, drop) in runs {
            put_varint(&mut out, keep as u64);
            put_varint(&mut out, drop as u64);
        }
        put_varint(&mut out, named.len() as u64);
        let mut previous = "";
        for e in &named {
            put_front_coded(&mut out, previous, &e.path);
            previous = &e.path;
        }
        for e in &named {
            out.push(match &e.kind {
                TreeEntryKind::Directory => CODE_DIRECTORY,
                TreeEntryKind::Symlink { .. } => CODE_SYMLINK,
                TreeEntryKind::File { executable, source: FileSource::Delta, .. } => CODE_DELTA + *executable as u8,
                TreeEntryKind::File { executable, source: FileSource::Copy { .. }, .. } => CODE_COPY + *executable as u8,
            });
        }
        for e in &named {
            if let TreeEntryKind::Symlink { target } = &e.kind {
                put_str(&mut out, target);
            }
        }
        for &i in &named_index {
            if let TreeEntryKind::File { source: FileSource::Delta, .. } = &self.entries[i].kind {
                put_varint(&mut out, self.delta_len(i));
            }
        }
        for e in &named {
            if let TreeEntryKind::File { source: FileSource::Copy { old_index }, .. } = &e.kind {
                put_varint(&mut out, *old_index as u64);
            }
        }
        // Old files by their position among the listing's files (ascending).
        let file_ordinal: std::collections::HashMap<&str, u64> =
            self.old_listing.iter().filter(|e| matches!(e.kind, ListedKind::File { .. })).enumerate().map(|(n, e)| (e.path.as_str(), n as u64)).collect();
        put_varint(&mut out, self.old_files.len() as u64);
        let mut next = 0;
        for f in &self.old_files {
            let n = *file_ordinal.get(f.path.as_str()).ok_or_else(|| Error::Invalid(format!("old file {:?} is not in the old listing", f.path)))?;
            if n < next {
                return Err(Error::Invalid("old files are not in listing order".into()));
            }
            put_varint(&mut out, n - next);
            next = n + 1;
        }
        for f in &self.old_files {
            out.push(f.in_reference as u8);
        }
        out.extend_from_slice(&self.files_digest);
        if !self.transforms.is_empty() {
            self.encode_transforms(&mut out)?;
        }
        if let Some(reach) = self.window_reach {
            if !(BASE_WINDOW_BACK + 1..=MAX_WINDOW_BACK).contains(&reach) {
                return Err(Error::Invalid(format!("window reach {reach} outside {}..={MAX_WINDOW_BACK}", BASE_WINDOW_BACK + 1)));
            }
            put_varint(&mut out, reach);
        }
        if self.flags() & FLAG_MODE_BLIND_DIGEST != 0 {
            out.extend_from_slice(&mode_blind_listing_digest(&self.old_listing));
        }
        Self::check_budget(&out, &named, self.entries.len()).map_err(|what| Error::TreeBeyondLimits { what })?;
        Ok(out)
    }

    /// The decoder's tree rules (§2.7, [`TreeBudget`]) applied to an encoded section.
    fn check_budget(section: &[u8], named: &[&TreeEntry], entries: usize) -> std::result::Result<(), String> {
        TreeBudget::check_section(section.len() as u64)?;
        TreeBudget::check_named(named.len() as u64)?;
        TreeBudget::check_entries(entries as u64)?;
        let mut budget = TreeBudget::new(section.len() as u64);
        for e in named {
            budget.count_name(e.path.len())?;
        }
        for e in named {
            if let TreeEntryKind::Symlink { target } = &e.kind {
                budget.count_name(target.len())?;
            }
        }
        Ok(())
    }

    /// The wasm transform table (§2.8), after the files digest.
    fn encode_transforms(&self, out: &mut Vec<u8>) -> Result<()> {
        let delta_files: Vec<usize> =
            (0..self.entries.len()).filter(|&i| matches!(self.entries[i].kind, TreeEntryKind::File { source: FileSource::Delta, .. })).collect();
        put_varint(out, self.transforms.len() as u64);
        let split_references = self.flags() & FLAG_SPLIT_REFERENCE != 0;
        let mut next = 0u64;
        for w in &self.transforms {
            let ordinal = delta_files.binary_search(&w.entry).map_err(|_| Error::Invalid(format!("transformed entry {} is not a delta file", w.entry)))? as u64;
            let TreeEntryKind::File { size, .. } = self.entries[w.entry].kind else { unreachable!("delta files are files") };
            if ordinal < next
                || !(1..=MAX_WASM_TRANSFORM_BYTES).contains(&size)
                || !(8..=MAX_WASM_TRANSFORM_BYTES).contains(&w.normalized_size)
                || w.side_info.is_empty()
                || w.side_info.len() as u64 > MAX_WASM_SIDE_INFO
            {
                return Err(Error::Invalid(format!("transformed entry {} breaks the transform table's limits or order", w.entry)));
            }
            put_varint(out, ordinal - next);
            put_varint(out, size);
            put_varint(out, w.side_info.len() as u64);
            out.extend_from_slice(&w.side_info);
            if split_references {
                // What a decoder refuses (`EncodedTree::decode`), the writer does not write.
                let names = |k: usize| {
                    !self.single_file && self.old_files.get(k).is_some_and(|f| f.in_reference) && crate::wasm_transform::side_info_has_code_layout(&w.side_info)
                };
                match w.split_reference {
                    Some(k) if names(k) => put_varint(out, k as u64 + 1),
                    Some(k) => {
                        return Err(Error::Invalid(format!(
                            "transformed entry {}: split reference {k} is no old file of the reference, or the file is not split",
                            w.entry
                        )))
                    }
                    None => put_varint(out, 0),
                }
            }
            next = ordinal + 1;
        }
        Ok(())
    }
}

/// A tree section as the patch states it, before the old build's listing
/// resolves it into a [`PatchTree`] (what `inspect` can tell without the old build).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EncodedTree {
    /// Whether the patch turns one file into one file.
    pub single_file: bool,
    /// BLAKE3 of the old build's listing the patch was made from.
    pub listing_digest: [u8; 32],
    /// (keep, drop) runs over the old listing.
    pub runs: Vec<(u64, u64)>,
    /// The entries the patch names; a copy's size is 0 until resolved.
    pub named: Vec<TreeEntry>,
    /// Old files as (position among the listing's files, in_reference).
    pub old_table: Vec<(u64, bool)>,
    /// BLAKE3 the new files must hash to (§2.1).
    pub files_digest: [u8; 32],
    /// Transformed delta files; a named entry's `size` is its delta-stream
    /// size until resolved.
    pub transforms: Vec<EncodedTransform>,
    /// The declared window reach (`FLAG_WINDOW_REACH`), None when the flag is clear.
    pub window_reach: Option<u64>,
    /// `FLAG_RUN_CODED_DIFF` was set (it adds nothing to the tree section).
    pub run_coded_diff: bool,
    /// `FLAG_LZMA_SEGMENTS` was set (it adds nothing to the tree section).
    pub lzma_segments: bool,
    /// The old listing's mode-blind digest (`FLAG_MODE_BLIND_DIGEST`), None when the flag is clear.
    pub mode_blind_digest: Option<[u8; 32]>,
}

/// A row of the wasm transform table as the patch states it (§2.8).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedTransform {
    /// Index into `EncodedTree::named`.
    pub named: usize,
    /// The file's size (its normalized form's is the named entry's size).
    pub size: u64,
    /// The side info, decoded.
    pub side_info: Vec<u8>,
    /// The old file it reads split, by index into `EncodedTree::old_table`, when the row
    /// names one (`FLAG_SPLIT_REFERENCE`).
    pub split_reference: Option<u64>,
}

/// The wasm transform table (§2.8): which delta files are normalized wasm
/// modules, their sizes and side infos (and, with `split_references`, the old file
/// each reads split), every field bounded.
fn decode_transforms(r: &mut SliceReader, named: &[TreeEntry], split_references: bool) -> Result<Vec<EncodedTransform>> {
    let delta_files: Vec<usize> = (0..named.len()).filter(|&i| matches!(named[i].kind, TreeEntryKind::File { source: FileSource::Delta, .. })).collect();
    let at = r.offset();
    // A row takes at least 4 bytes (gap, size, side length, one side byte).
    let count = r.varint_max((delta_files.len() as u64).min(r.remaining() as u64 / 4), "wasm transform count")?;
    if count == 0 {
        return Err(Error::Corrupt { input: Input::Patch, offset: at, what: "wasm transform flag set with an empty transform table".into() });
    }
    let mut out = Vec::with_capacity(count as usize);
    let mut next = 0u64;
    for _ in 0..count {
        let at = r.offset();
        let ordinal = next.checked_add(r.varint("transformed file")?).filter(|&o| o < delta_files.len() as u64);
        let ordinal = ordinal.ok_or_else(|| Error::Corrupt { input: Input::Patch, offset: at, what: "transformed file beyond the delta files".into() })?;
        let entry = delta_files[ordinal as usize];
        let TreeEntryKind::File { size: normalized_size, .. } = named[entry].kind else { unreachable!("delta files are files") };
        let at = r.offset();
        let size = r.varint("transformed file size")?;
        if size == 0 || size > MAX_WASM_TRANSFORM_BYTES || !(8..=MAX_WASM_TRANSFORM_BYTES).contains(&normalized_size) {
            return Err(Error::Limit {
                input: Input::Patch,
                offset: at,
                what: format!(
                    "transformed file of {size} bytes from {normalized_size} normalized bytes: each must be 1 (8 normalized)..={MAX_WASM_TRANSFORM_BYTES}"
                ),
            });
        }
        let at = r.offset();
        let side_len = r.varint("side info size")?;
        if side_len == 0 || side_len > MAX_WASM_SIDE_INFO {
            return Err(Error::Limit { input: Input::Patch, offset: at, what: format!("side info of {side_len} bytes, not in 1..={MAX_WASM_SIDE_INFO}") });
        }
        let side_info = r.take(side_len as usize, "side info")?.to_vec();
        // Checked against the old table and the side info by `EncodedTree::decode`.
        let split_reference = if split_references { r.varint("split reference")?.checked_sub(1) } else { None };
        out.push(EncodedTransform { named: entry, size, side_info, split_reference });
        next = ordinal + 1;
    }
    Ok(out)
}

impl EncodedTree {
    /// How many delta bytes back a window segment of this patch may reach.
    pub fn window_back(&self) -> u64 {
        self.window_reach.unwrap_or(BASE_WINDOW_BACK)
    }

    /// Old entries kept without being named.
    pub fn kept(&self) -> u64 {
        self.runs.iter().map(|r| r.0).sum()
    }

    /// Bytes of the delta stream (the named delta files' sizes).
    pub fn delta_bytes(&self) -> u64 {
        delta_lens(&self.named, &[]).sum()
    }

    /// Decodes a tree section and checks what it can without the old build:
    /// counts, codes, paths, symlink targets, copy indexes; with
    /// `FLAG_WASM_TRANSFORM` in `flags`, the transform table after the digest.
    pub fn decode(bytes: &[u8], base: u64, flags: u16) -> Result<EncodedTree> {
        let single_file = flags & FLAG_SINGLE_FILE != 0;
        let mut r = SliceReader::new(bytes, base, Input::Patch);
        let listing_digest = if single_file { listing_digest(&single_file_listing(r.varint("old file size")?)) } else { r.array::<32>("old listing digest")? };
        // Every count below is bounded by the bytes left (each item takes at
        // least one byte), so no claimed count allocates more than the input.
        let run_count = r.varint_max(MAX_ENTRIES.min(r.remaining() as u64 / 2), "run count")? as usize;
        let mut runs = Vec::with_capacity(run_count);
        for _ in 0..run_count {
            let keep = r.varint_max(MAX_ENTRIES, "kept entries")?;
            let drop = r.varint_max(MAX_ENTRIES, "dropped entries")?;
            runs.push((keep, drop));
        }
        // An entry takes at least 3 bytes: its path's two varints and its code.
        let count = r.varint_max(MAX_NAMED_ENTRIES.min(r.remaining() as u64 / 3), "entry count")? as usize;
        let mut budget = TreeBudget::new(bytes.len() as u64);
        let mut count_name =
            |r: &SliceReader, len: usize| budget.count_name(len).map_err(|what| Error::Limit { input: Input::Patch, offset: r.offset(), what });
        let mut paths: Vec<String> = Vec::with_capacity(count);
        for _ in 0..count {
            let path = read_front_coded(&mut r, paths.last().map_or("", |p| p.as_str()), "entry path")?;
            count_name(&r, path.len())?;
            if !single_file {
                validate_path(&path)?;
            }
            paths.push(path);
        }
        let mut codes = Vec::with_capacity(count);
        for _ in 0..count {
            let code = r.u8("entry code")?;
            if code > CODE_COPY_EXECUTABLE {
                return Err(r.corrupt(format!("entry code {code} unknown")));
            }
            codes.push(code);
        }
        let mut named = Vec::with_capacity(count);
        for (path, &code) in paths.into_iter().zip(&codes) {
            let kind = match code {
                CODE_DIRECTORY => TreeEntryKind::Directory,
                CODE_SYMLINK => {
                    let target = r.string(MAX_PATH_LEN, "symlink target")?.to_string();
                    count_name(&r, target.len())?;
                    validate_symlink_target(&path, &target)?;
                    TreeEntryKind::Symlink { target }
                }
                _ => TreeEntryKind::File { executable: code & 1 == 1, size: 0, source: FileSource::Delta },
            };
            named.push(TreeEntry { path, kind });
        }
        let mut delta_total = 0u64;
        for (e, &code) in named.iter_mut().zip(&codes) {
            if let (TreeEntryKind::File { size, .. }, CODE_DELTA | CODE_DELTA_EXECUTABLE) = (&mut e.kind, code) {
                *size = r.varint("file size")?;
                delta_total = delta_total.checked_add(*size).ok_or_else(|| r.corrupt("the delta files' sizes add up to more than 2^64-1"))?;
            }
        }
        let mut copies = Vec::new();
        for (i, &code) in codes.iter().enumerate() {
            if code >= CODE_COPY {
                copies.push((i, r.offset(), r.varint("copy source")?));
            }
        }
        let old_count = r.varint_max(MAX_ENTRIES.min(r.remaining() as u64), "old file count")? as usize;
        let mut old_table = Vec::with_capacity(old_count);
        let mut next = 0u64;
        for _ in 0..old_count {
            let n = next.checked_add(r.varint_max(MAX_ENTRIES, "old file position")?).filter(|&n| n < MAX_ENTRIES);
            let n = n.ok_or_else(|| r.corrupt("old file position beyond the limit"))?;
            old_table.push((n, false));
            next = n + 1;
        }
        for f in &mut old_table {
            f.1 = match r.u8("old file flags")? {
                0 => false,
                1 => true,
                flag => return Err(r.corrupt(format!("old file flags {flag} unknown"))),
            };
        }
        for (i, at, old_index) in copies {
            if old_index >= old_count as u64 {
                return Err(Error::Corrupt { input: Input::Patch, offset: at, what: format!("copy source {old_index} is not an old file index") });
            }
            if let TreeEntryKind::File { source, .. } = &mut named[i].kind {
                *source = FileSource::Copy { old_index: old_index as usize };
            }
        }
        let files_digest = r.array::<32>("files digest")?;
        let split_references = flags & FLAG_SPLIT_REFERENCE != 0;
        if split_references && (single_file || flags & FLAG_WASM_TRANSFORM == 0) {
            return Err(r.corrupt("split references without a tree's wasm transform table"));
        }
        let transforms = if flags & FLAG_WASM_TRANSFORM != 0 { decode_transforms(&mut r, &named, split_references)? } else { Vec::new() };
        if split_references && transforms.iter().all(|w| w.split_reference.is_none()) {
            return Err(r.corrupt("split references flagged, but no row of the wasm transform table names one"));
        }
        for w in &transforms {
            let Some(k) = w.split_reference else { continue };
            if !old_table.get(k as usize).is_some_and(|f| f.1) {
                return Err(r.corrupt(format!("a wasm transform's split reference {k} is no old file of the reference stream")));
            }
            if !crate::wasm_transform::side_info_has_code_layout(&w.side_info) {
                return Err(r.corrupt("a wasm transform names a split reference, but its file is not in the field-split layout"));
            }
        }
        let window_reach = if flags & FLAG_WINDOW_REACH != 0 {
            let at = r.offset();
            let reach = r.varint("window reach")?;
            if reach > MAX_WINDOW_BACK {
                return Err(Error::Limit { input: Input::Patch, offset: at, what: format!("window reach {reach} bytes, above the limit {MAX_WINDOW_BACK}") });
            }
            if reach <= BASE_WINDOW_BACK {
                return Err(Error::Corrupt {
                    input: Input::Patch,
                    offset: at,
                    what: format!("window reach {reach} bytes declared, not above the base {BASE_WINDOW_BACK}"),
                });
            }
            Some(reach)
        } else {
            None
        };
        let mode_blind_digest = if flags & FLAG_MODE_BLIND_DIGEST != 0 {
            if single_file {
                return Err(r.corrupt("a single-file patch with a mode-blind listing digest"));
            }
            Some(r.array::<32>("mode-blind listing digest")?)
        } else {
            None
        };
        if !r.is_empty() {
            return Err(r.corrupt(match (mode_blind_digest, window_reach, transforms.is_empty()) {
                (Some(_), _, _) => "bytes after the mode-blind listing digest",
                (None, Some(_), _) => "bytes after the window reach",
                (None, None, true) => "bytes after the files digest",
                (None, None, false) => "bytes after the wasm transform table",
            }));
        }
        let run_coded_diff = flags & FLAG_RUN_CODED_DIFF != 0;
        let lzma_segments = flags & FLAG_LZMA_SEGMENTS != 0;
        Ok(EncodedTree {
            single_file,
            listing_digest,
            runs,
            named,
            old_table,
            files_digest,
            transforms,
            window_reach,
            run_coded_diff,
            lzma_segments,
            mode_blind_digest,
        })
    }

    /// The tree against the old build's listing (sorted by path), which must
    /// be the one the patch was made from (its digest is checked).
    pub fn resolve(&self, listing: Vec<ListedEntry>, tree_at: u64) -> Result<PatchTree> {
        self.resolve_modes(listing, tree_at, true)
    }

    /// `resolve`, for an old build read where files have no executable bit
    /// (`modes_known` false: Windows), whose listing has no file executable: it
    /// then matches the patch's mode-blind digest when the patch has one (§2.1).
    pub fn resolve_modes(&self, listing: Vec<ListedEntry>, tree_at: u64, modes_known: bool) -> Result<PatchTree> {
        let corrupt = |what: String| Error::Corrupt { input: Input::Patch, offset: tree_at, what };
        let digest = listing_digest(&listing);
        let blind_match = !modes_known && !has_executable(&listing) && self.mode_blind_digest == Some(digest);
        if digest != self.listing_digest && !blind_match {
            return Err(Error::WrongOldBuild { what: "its list of files, directories and links (paths, sizes, modes, link targets) differs".into() });
        }
        let files: Vec<usize> = listing.iter().enumerate().filter(|(_, e)| matches!(e.kind, ListedKind::File { .. })).map(|(i, _)| i).collect();
        let mut old_files = Vec::with_capacity(self.old_table.len());
        for &(n, in_reference) in &self.old_table {
            let &i = files.get(n as usize).ok_or_else(|| corrupt(format!("old file {n} is beyond the old build's {} files", files.len())))?;
            let ListedKind::File { size, .. } = listing[i].kind else { unreachable!("files only") };
            old_files.push(OldFile { path: listing[i].path.clone(), size, in_reference });
        }
        let mut kept = Vec::new();
        let mut at = 0usize;
        for &(keep, drop) in &self.runs {
            let end = at.checked_add(keep as usize).filter(|&e| e <= listing.len()).ok_or_else(|| corrupt("runs go beyond the old listing".into()))?;
            kept.extend(at..end);
            at = end.checked_add(drop as usize).filter(|&e| e <= listing.len()).ok_or_else(|| corrupt("runs go beyond the old listing".into()))?;
        }
        // A kept file copies the old file of the same path: its old-table
        // record, or one added after the table (not part of the reference).
        let mut entries = Vec::with_capacity(kept.len() + self.named.len());
        let mut named = self.named.iter().enumerate().peekable();
        let mut transforms = self.transforms.iter().peekable();
        let mut resolved_transforms = Vec::with_capacity(self.transforms.len());
        let mut kept = kept.into_iter().peekable();
        loop {
            let take_kept = match (kept.peek(), named.peek()) {
                (Some(&k), Some((_, n))) => listing[k].path.as_bytes() < n.path.as_bytes(),
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => break,
            };
            if take_kept {
                let k = kept.next().expect("peeked");
                let o = &listing[k];
                let kind = match &o.kind {
                    ListedKind::Directory => TreeEntryKind::Directory,
                    ListedKind::Symlink { target } => TreeEntryKind::Symlink { target: target.clone() },
                    ListedKind::File { executable, size } => {
                        let ordinal = files.partition_point(|&i| i < k) as u64;
                        let old_index = match self.old_table.binary_search_by_key(&ordinal, |f| f.0) {
                            Ok(j) => j,
                            Err(_) => {
                                old_files.push(OldFile { path: o.path.clone(), size: *size, in_reference: false });
                                old_files.len() - 1
                            }
                        };
                        TreeEntryKind::File { executable: *executable, size: *size, source: FileSource::Copy { old_index } }
                    }
                };
                entries.push(TreeEntry { path: o.path.clone(), kind });
            } else {
                let (n, named_entry) = named.next().expect("peeked");
                let mut e = named_entry.clone();
                match &mut e.kind {
                    TreeEntryKind::File { size, source: FileSource::Copy { old_index }, .. } => *size = old_files[*old_index].size,
                    // A transformed file's size is the file's; its delta-stream size moves to the transform.
                    TreeEntryKind::File { size, source: FileSource::Delta, .. } => {
                        if let Some(w) = transforms.next_if(|w| w.named == n) {
                            let split_reference = w.split_reference.map(|k| k as usize);
                            resolved_transforms.push(WasmTransformed {
                                entry: entries.len(),
                                normalized_size: *size,
                                side_info: w.side_info.clone(),
                                split_reference,
                            });
                            *size = w.size;
                        }
                    }
                    _ => {}
                }
                entries.push(e);
            }
        }
        if self.single_file {
            let ok_entries = matches!(entries.as_slice(), [TreeEntry { path, kind: TreeEntryKind::File { .. } }] if path.is_empty());
            let ok_old = old_files.len() <= 1 && old_files.iter().all(|f| f.path.is_empty());
            if !ok_entries || !ok_old {
                return Err(corrupt("single-file patch must hold exactly one file entry with an empty path".into()));
            }
        } else {
            let mut checker = TreeChecker::default();
            for e in &entries {
                checker.check(&e.path, matches!(e.kind, TreeEntryKind::Directory))?;
            }
        }
        let mut split_old: Vec<usize> = resolved_transforms.iter().filter_map(|w| split_old_file_of(self.single_file, &old_files, &entries, w)).collect();
        split_old.sort_unstable();
        if let Some(k) = split_old.windows(2).find(|k| k[0] == k[1]) {
            return Err(corrupt(format!("two files in the field-split layout read old file {:?} split", old_files[k[0]].path)));
        }
        if old_files.iter().filter(|f| f.in_reference).try_fold(0u64, |total, f| total.checked_add(f.size)).is_none() {
            return Err(corrupt("the old files the patch reads add up to more than 2^64-1 bytes".into()));
        }
        // Every later sum of file sizes (progress, the delta stream) is a part of this one.
        let mut file_sizes = entries.iter().filter_map(|e| if let TreeEntryKind::File { size, .. } = e.kind { Some(size) } else { None });
        if file_sizes.try_fold(0u64, |total, size| total.checked_add(size)).is_none() {
            return Err(corrupt("the new files add up to more than 2^64-1 bytes".into()));
        }
        TreeBudget::check_entries(entries.len() as u64).map_err(|what| Error::Limit { input: Input::Patch, offset: tree_at, what })?;
        Ok(PatchTree {
            single_file: self.single_file,
            old_listing: listing,
            old_files,
            entries,
            files_digest: self.files_digest,
            transforms: resolved_transforms,
            window_reach: self.window_reach,
            run_coded_diff: self.run_coded_diff,
            lzma_segments: self.lzma_segments,
            omit_mode_blind_digest: self.mode_blind_digest.is_none(),
        })
    }
}

/// A path as the length of the prefix it shares with `previous`, then the rest.
fn put_front_coded(out: &mut Vec<u8>, previous: &str, path: &str) {
    let mut shared = previous.bytes().zip(path.bytes()).take_while(|(a, b)| a == b).count();
    while !path.is_char_boundary(shared) {
        shared -= 1;
    }
    put_varint(out, shared as u64);
    put_str(out, &path[shared..]);
}

fn read_front_coded(r: &mut SliceReader, previous: &str, what: &str) -> Result<String> {
    let at = r.offset();
    let shared = r.varint_max(previous.len() as u64, what)? as usize;
    let rest = r.string(MAX_PATH_LEN, what)?;
    let corrupt = |why: &str| Error::Corrupt { input: Input::Patch, offset: at, what: format!("{what} {why}") };
    if !previous.is_char_boundary(shared) {
        return Err(corrupt("splits a character"));
    }
    if shared + rest.len() > MAX_PATH_LEN {
        return Err(corrupt(&format!("is longer than {MAX_PATH_LEN} bytes")));
    }
    let mut path = String::with_capacity(shared + rest.len());
    path.push_str(&previous[..shared]);
    path.push_str(rest);
    Ok(path)
}

/// Sizes of one segment as written in its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SegmentHeader {
    /// New bytes the segment produces.
    pub new_len: u64,
    /// Control stream bytes, decompressed.
    pub ctrl_raw: u64,
    /// Control stream bytes in the patch.
    pub ctrl_comp: u64,
    /// Difference bytes, decompressed.
    pub diff_raw: u64,
    /// Difference bytes in the patch.
    pub diff_comp: u64,
    /// 0 for a plain diff stream (tag `S`); else the size of its run-coded
    /// form (tag `R`, §2.3), which the diff frame decompresses to.
    pub diff_coded: u64,
    /// Extra (literal) bytes, decompressed.
    pub extra_raw: u64,
    /// Extra bytes in the patch.
    pub extra_comp: u64,
    /// The LZMA properties byte of each stream (control, diff, extra) stored as raw LZMA, None
    /// for a zstd frame; any LZMA stream makes the segment an `M` one (§2.3).
    pub lzma: [Option<u8>; 3],
}

impl SegmentHeader {
    /// Appends the header's encoding (tag and varints) to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        if self.lzma.iter().any(Option::is_some) {
            out.push(LZMA_OPS_SEGMENT_TAG);
            out.push(u8::from(self.diff_coded > 0));
            put_varint(out, self.new_len);
            put_varint(out, self.ctrl_raw);
            put_varint(out, self.ctrl_comp);
            put_varint(out, self.diff_raw);
            if self.diff_coded > 0 {
                put_varint(out, self.diff_coded);
            }
            for v in [self.diff_comp, self.extra_raw, self.extra_comp] {
                put_varint(out, v);
            }
            out.push(self.lzma.iter().enumerate().map(|(i, p)| u8::from(p.is_some()) << i).sum());
            out.extend(self.lzma.iter().flatten());
            return;
        }
        if self.diff_coded > 0 {
            out.push(RUN_CODED_SEGMENT_TAG);
            for v in [self.new_len, self.ctrl_raw, self.ctrl_comp, self.diff_raw, self.diff_coded, self.diff_comp, self.extra_raw, self.extra_comp] {
                put_varint(out, v);
            }
            return;
        }
        out.push(SEGMENT_TAG);
        for v in [self.new_len, self.ctrl_raw, self.ctrl_comp, self.diff_raw, self.diff_comp, self.extra_raw, self.extra_comp] {
            put_varint(out, v);
        }
    }

    /// Bytes the segment's three streams take in the patch.
    pub fn compressed_len(&self) -> u64 {
        self.ctrl_comp + self.diff_comp + self.extra_comp
    }

    /// Checks the sizes against the limits and each other.
    pub fn validate(&self, offset: u64) -> Result<()> {
        let bad = |what: String| Err(Error::Corrupt { input: Input::Patch, offset, what });
        let limit = |what: String| Err(Error::Limit { input: Input::Patch, offset, what });
        if self.new_len == 0 {
            return bad("segment produces 0 bytes".into());
        }
        if self.new_len > MAX_SEGMENT_NEW {
            return limit(format!("segment produces {} bytes, above the limit {MAX_SEGMENT_NEW}", self.new_len));
        }
        if self.diff_raw.checked_add(self.extra_raw) != Some(self.new_len) {
            return bad("segment diff and extra sizes do not add up to its output size".into());
        }
        if self.ctrl_raw == 0 {
            return bad("segment control stream is empty".into());
        }
        if self.ctrl_raw > MAX_SEGMENT_CTRL {
            return limit(format!("segment control size {} above the limit {MAX_SEGMENT_CTRL}", self.ctrl_raw));
        }
        if self.diff_coded > self.diff_raw {
            return bad(format!("run-coded diff of {} bytes for {} diff bytes: larger than the stream it codes", self.diff_coded, self.diff_raw));
        }
        // The diff frame holds the run-coded form when there is one.
        let diff_frame_raw = if self.diff_coded > 0 { self.diff_coded } else { self.diff_raw };
        for (raw, comp) in [(self.ctrl_raw, self.ctrl_comp), (diff_frame_raw, self.diff_comp), (self.extra_raw, self.extra_comp)] {
            // zstd never expands by more than a small bound; reject absurd claims.
            if comp > raw + raw / 64 + 1024 || (raw == 0) != (comp == 0) {
                return bad(format!("segment stream compressed size {comp} implausible for {raw} bytes"));
            }
        }
        Ok(())
    }
}

/// The three streams of an ops segment (§2.3), which a writer may compress with different
/// zstd parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OpsStream {
    Ctrl,
    Diff,
    Extra,
}

/// A stream's zstd frame shorter than this is not tried as LZMA: a few bytes to gain.
const LZMA_STREAM_MIN: usize = 64;

/// The LZMA parameters an ops stream is tried with, one set per stream: the byte before
/// predicts a control stream's and a diff stream's next byte little and new bytes' (code,
/// text) well (measured on rive's and freedoom2-wad's streams: within 1-2% of the best of
/// five sets each; BENCHMARKS.md, "LZMA segments").
fn ops_stream_props(stream: OpsStream) -> crate::lzma::LzmaProps {
    let lc = match stream {
        OpsStream::Ctrl => 1,
        OpsStream::Diff => 0,
        OpsStream::Extra => 3,
    };
    crate::lzma::LzmaProps { lc, lp: 0, pb: 0 }
}

/// The smaller of `frame` (zstd's, of `data`) and `data` as raw LZMA: (bytes, the LZMA
/// properties byte if LZMA).
fn smaller_with_lzma(data: &[u8], frame: Vec<u8>, stream: OpsStream) -> (Vec<u8>, Option<u8>) {
    let props = ops_stream_props(stream);
    if frame.len() >= LZMA_STREAM_MIN {
        if let Some(l) = crate::lzma::compress_stream(data, props).filter(|l| l.len() < frame.len()) {
            return (l, Some(props.byte()));
        }
    }
    (frame, None)
}

/// An ops segment as a writer made it (`encode_ops_streams`).
pub(crate) struct OpsEncoding {
    /// The segment's bytes: header and streams.
    pub bytes: Vec<u8>,
    pub header: SegmentHeader,
    /// The header, and the length in bytes, of the same segment with zstd streams only. The
    /// writers' rules for when a window form is worth trying were measured on these sizes,
    /// and read them still: LZMA's smaller streams would otherwise skip trials whose window
    /// wins (harfbuzz's Worker patch grew 1.4% that way).
    pub zstd_header: SegmentHeader,
    pub zstd_len: u64,
}

/// Which optional forms an ops segment's streams may take (what the reader understands).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OpsForms {
    /// Raw LZMA streams (tag `M`, flags bit 6).
    pub lzma: bool,
    /// A run-coded diff stream (flags bit 3).
    pub run_coded: bool,
}

/// An ops segment from its three raw streams, as both writers (the in-memory diff and the
/// generator) make it: each stream compressed by `compress` (which returns no frame for an
/// empty stream), the diff stream run-coded (tag `R`) where that frame is the smaller. With
/// `forms.lzma`, each stream is also tried as raw LZMA and the smaller kept (tag `M`, §2.3);
/// without `forms.run_coded`, the diff stream is never run-coded (a reader without flag bit 3).
pub(crate) fn encode_ops_streams(
    new_len: u64,
    ctrl: &[u8],
    diff: &[u8],
    extra: &[u8],
    forms: OpsForms,
    mut compress: impl FnMut(&[u8], OpsStream) -> Result<Vec<u8>>,
) -> Result<OpsEncoding> {
    let with_lzma = |data: &[u8], frame: Vec<u8>, stream: OpsStream| if forms.lzma { smaller_with_lzma(data, frame, stream) } else { (frame, None) };
    let c = compress(ctrl, OpsStream::Ctrl)?;
    let c_zstd = c.len() as u64;
    let (c, c_lzma) = with_lzma(ctrl, c, OpsStream::Ctrl);
    let mut d = compress(diff, OpsStream::Diff)?;
    let mut diff_coded = 0;
    // The diff stream as it is or run-coded, whichever zstd makes smaller, and then that one
    // as LZMA if smaller still (one LZMA search per stream).
    let mut d_zstd = d.len() as u64;
    let mut d_lzma = None;
    if forms.run_coded && !diff.is_empty() {
        let coded = encode_run_coded(diff);
        if coded.len() < diff.len() {
            let dc = compress(&coded, OpsStream::Diff)?;
            if dc.len() < d.len() {
                d_zstd = dc.len() as u64;
                (d, diff_coded) = (dc, coded.len() as u64);
                (d, d_lzma) = with_lzma(&coded, d, OpsStream::Diff);
            }
        }
        // `coded` is freed here, before the extra stream's compressor is allocated.
    }
    if diff_coded == 0 {
        (d, d_lzma) = with_lzma(diff, d, OpsStream::Diff);
    }
    let e = compress(extra, OpsStream::Extra)?;
    let e_zstd = e.len() as u64;
    let (e, e_lzma) = with_lzma(extra, e, OpsStream::Extra);
    let header = SegmentHeader {
        new_len,
        ctrl_raw: ctrl.len() as u64,
        ctrl_comp: c.len() as u64,
        diff_raw: diff.len() as u64,
        diff_coded,
        diff_comp: d.len() as u64,
        extra_raw: extra.len() as u64,
        extra_comp: e.len() as u64,
        lzma: [c_lzma, d_lzma, e_lzma],
    };
    let zstd_header = SegmentHeader { ctrl_comp: c_zstd, diff_comp: d_zstd, extra_comp: e_zstd, lzma: [None; 3], ..header };
    let mut out = Vec::with_capacity(32 + c.len() + d.len() + e.len());
    zstd_header.encode(&mut out);
    let zstd_len = out.len() as u64 + c_zstd + d_zstd + e_zstd;
    out.clear();
    header.encode(&mut out);
    out.extend_from_slice(&c);
    out.extend_from_slice(&d);
    out.extend_from_slice(&e);
    Ok(OpsEncoding { bytes: out, header, zstd_header, zstd_len })
}

/// The run-coded form of a diff stream (§2.3): `varint run_count`, every run's
/// count of zero bytes, every run's count of literal bytes (each >= 1), then the
/// literal bytes; zeros after the last run are implied. A diff stream is mostly
/// zeros with short islands (a renamed identifier in minified code): coded
/// this way, zstd sees the island lengths and the gaps as two columns, and
/// repeated island patterns as repeated byte strings (react-dom 18.2.0 ->
/// 18.3.1: 12,104 bytes of diff frame become 9,391).
pub fn encode_run_coded(diff: &[u8]) -> Vec<u8> {
    let mut runs: Vec<(u64, u64)> = Vec::new();
    let mut literals = Vec::new();
    let mut at = 0;
    while at < diff.len() {
        let zeros = diff[at..].iter().take_while(|&&b| b == 0).count();
        let start = at + zeros;
        if start == diff.len() {
            break;
        }
        let len = diff[start..].iter().take_while(|&&b| b != 0).count();
        runs.push((zeros as u64, len as u64));
        literals.extend_from_slice(&diff[start..start + len]);
        at = start + len;
    }
    let mut out = Vec::with_capacity(runs.len() * 3 + literals.len() + 10);
    put_varint(&mut out, runs.len() as u64);
    for r in &runs {
        put_varint(&mut out, r.0);
    }
    for r in &runs {
        put_varint(&mut out, r.1);
    }
    out.extend_from_slice(&literals);
    out
}

/// Expands a run-coded diff stream (§2.3) into `out`, which becomes exactly
/// `diff_len` bytes. Errors say what was wrong; offsets are within `coded`.
pub fn expand_run_coded(coded: &[u8], diff_len: u64, out: &mut Vec<u8>) -> std::result::Result<(), String> {
    let mut r = SliceReader::new(coded, 0, Input::Patch);
    let err = |e: Error| e.to_string();
    // Each run takes at least two bytes of the coded form.
    let count = r.varint_max(coded.len() as u64 / 2, "run count").map_err(err)? as usize;
    let mut runs = Vec::with_capacity(count);
    for _ in 0..count {
        runs.push(r.varint_max(diff_len, "zero run").map_err(err)?);
    }
    out.clear();
    let mut literal_total = 0u64;
    let mut lens = Vec::with_capacity(count);
    for _ in 0..count {
        let len = r.varint_max(diff_len, "literal run").map_err(err)?;
        if len == 0 {
            return Err(format!("empty literal run at byte {}", r.offset()));
        }
        literal_total += len;
        lens.push(len);
    }
    if literal_total != r.remaining() as u64 {
        return Err(format!("runs name {literal_total} literal bytes, the coded stream has {} left", r.remaining()));
    }
    let expanded = runs.iter().chain(&lens).try_fold(0u64, |a, &b| a.checked_add(b).filter(|&t| t <= diff_len));
    if expanded.is_none() {
        return Err(format!("runs expand past the segment's {diff_len} diff bytes"));
    }
    out.reserve_exact(diff_len as usize);
    let literals = &coded[coded.len() - r.remaining()..];
    let mut at = 0usize;
    for (&zeros, &len) in runs.iter().zip(&lens) {
        out.resize(out.len() + zeros as usize, 0);
        out.extend_from_slice(&literals[at..at + len as usize]);
        at += len as usize;
    }
    out.resize(diff_len as usize, 0);
    Ok(())
}

/// The control stream of a segment: the op count, then every op's diagonal
/// code, then every copy length, then every extra length (columns compress
/// better than interleaved fields). A diagonal is old position minus new
/// position; code 0 names the diagonal used before the current one, code 1 the
/// one before that, and code `2 + zigzag(delta)` a diagonal `delta` away from
/// the current one. The current diagonal starts at 0 in every segment.
pub fn encode_control(ops: &[Op]) -> Vec<u8> {
    let mut out = Vec::with_capacity(ops.len() * 6 + 10);
    put_varint(&mut out, ops.len() as u64);
    let mut history = DiagonalHistory::default();
    for op in ops {
        match history.code_for(op.diagonal) {
            DiagonalCode::Repeat(k) => out.push(k),
            DiagonalCode::Delta(delta) => put_varint(&mut out, zigzag(delta).wrapping_add(2)),
        }
        history.use_diagonal(op.diagonal);
    }
    for op in ops {
        put_varint(&mut out, op.copy_len);
    }
    for op in ops {
        put_varint(&mut out, op.extra_len);
    }
    out
}

enum DiagonalCode {
    Repeat(u8),
    Delta(i64),
}

/// The current diagonal and the two used before it.
#[derive(Debug, Default, Clone, Copy)]
struct DiagonalHistory([i64; 3]);

impl DiagonalHistory {
    /// The diagonal a code names (§2.4), or None if it overflows.
    fn decode(&self, code: u64) -> Option<i64> {
        match code {
            0 => Some(self.0[1]),
            1 => Some(self.0[2]),
            c => self.0[0].checked_add(unzigzag(c - 2)),
        }
    }

    fn code_for(&self, diagonal: i64) -> DiagonalCode {
        if diagonal != self.0[0] {
            if diagonal == self.0[1] {
                return DiagonalCode::Repeat(0);
            }
            if diagonal == self.0[2] {
                return DiagonalCode::Repeat(1);
            }
        }
        DiagonalCode::Delta(diagonal.wrapping_sub(self.0[0]))
    }

    fn use_diagonal(&mut self, diagonal: i64) {
        let h = &mut self.0;
        if diagonal == h[0] {
        } else if diagonal == h[1] {
            h.swap(0, 1);
        } else if diagonal == h[2] {
            *h = [h[2], h[0], h[1]];
        } else {
            *h = [diagonal, h[0], h[1]];
        }
    }
}

/// An ops segment's control stream, checked whole and then read one op at a
/// time: the ops are never collected, so a segment costs its control bytes
/// and nothing per op (a 32 MiB control stream holds up to 11M ops, which as a
/// `Vec<Op>` would take 256 MiB).
#[derive(Debug, Clone, Default)]
pub struct OpCursor {
    left: u64,
    /// Read positions in the diagonal, copy and extra columns.
    pos: [usize; 3],
    history: DiagonalHistory,
}

impl OpCursor {
    /// Checks the whole control stream of a segment producing `new_len`
    /// bytes, `diff_len` of them from the diff stream and `extra_len` from
    /// the extra stream (§2.4, §2.5): varints and columns, no bytes after the
    /// last column, each op producing 1.. bytes (sums checked, never
    /// wrapped), and the ops together using exactly the segment's diff and
    /// extra bytes. Only the bounds of the old data are left to the applier.
    pub fn new(ctrl: &[u8], new_len: u64, diff_len: u64, extra_len: u64, offset: u64) -> Result<OpCursor> {
        let mut r = SliceReader::new(ctrl, offset, Input::Patch);
        // Each op takes at least 3 bytes and produces at least 1.
        let count = r.varint_max(new_len.min(ctrl.len() as u64 / 3), "op count")?;
        let diag_at = ctrl.len() - r.remaining();
        let mut history = DiagonalHistory::default();
        for _ in 0..count {
            let code = r.varint("diagonal code")?;
            let diagonal = history.decode(code).ok_or_else(|| r.corrupt("diagonal overflows"))?;
            history.use_diagonal(diagonal);
        }
        let copy_at = ctrl.len() - r.remaining();
        for _ in 0..count {
            r.varint("copy length")?;
        }
        let extra_at = ctrl.len() - r.remaining();
        let mut copies = SliceReader::new(&ctrl[copy_at..], offset + copy_at as u64, Input::Patch);
        let (mut copied, mut added) = (0u64, 0u64);
        for _ in 0..count {
            let copy = copies.varint("copy length")?;
            let extra = r.varint("extra length")?;
            if copy.checked_add(extra).is_none_or(|n| n == 0) {
                return Err(r.corrupt(format!("an op of copy length {copy} and extra length {extra} produces nothing or overflows")));
            }
            copied = copied
                .checked_add(copy)
                .filter(|&n| n <= diff_len)
                .ok_or_else(|| r.corrupt(format!("ops copy more than the segment's {diff_len} diff bytes")))?;
            added = added
                .checked_add(extra)
                .filter(|&n| n <= extra_len)
                .ok_or_else(|| r.corrupt(format!("ops add more than the segment's {extra_len} extra bytes")))?;
        }
        if !r.is_empty() {
            return Err(r.corrupt("bytes after the last control op"));
        }
        if copied != diff_len || added != extra_len {
            return Err(r.corrupt(format!("ops use {copied} diff and {added} extra bytes, the segment has {diff_len} and {extra_len}")));
        }
        Ok(OpCursor { left: count, pos: [diag_at, copy_at, extra_at], history: DiagonalHistory::default() })
    }

    /// The ops not yet read.
    pub fn remaining(&self) -> u64 {
        self.left
    }

    /// The next op of `ctrl` (the stream this cursor was made for), or None
    /// after the last.
    pub fn next_op(&mut self, ctrl: &[u8]) -> Option<Op> {
        if self.left == 0 {
            return None;
        }
        let mut read = |column: usize| -> Option<u64> {
            let mut r = SliceReader::new(ctrl.get(self.pos[column]..)?, 0, Input::Patch);
            let v = r.varint("control op").ok()?;
            self.pos[column] = ctrl.len() - r.remaining();
            Some(v)
        };
        let (code, copy_len, extra_len) = (read(0)?, read(1)?, read(2)?);
        let diagonal = self.history.decode(code)?;
        self.history.use_diagonal(diagonal);
        self.left -= 1;
        Some(Op { diagonal, copy_len, extra_len })
    }
}

/// Decodes a whole control stream into ops (for tools and tests; the
/// applier reads them one at a time through [`OpCursor`]).
pub fn decode_control(ctrl: &[u8], new_len: u64, diff_len: u64, extra_len: u64, offset: u64) -> Result<Vec<Op>> {
    let mut cursor = OpCursor::new(ctrl, new_len, diff_len, extra_len, offset)?;
    let mut ops = Vec::new();
    while let Some(op) = cursor.next_op(ctrl) {
        ops.push(op);
    }
    Ok(ops)
}

/// A window segment: its new bytes are one zstd frame compressed with a prefix
/// made of spans of the old reference stream (better than ops for text, where
/// many short matches make the control stream dominate).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WindowSegmentHeader {
    /// New bytes the segment produces.
    pub new_len: u64,
    /// (start in the reference stream, length), ascending and disjoint.
    pub spans: Vec<(u64, u64)>,
    /// New-stream bytes just before this segment in the window: the last
    /// `BASE_WINDOW_BACK` of them follow the spans, any before those precede them (§2.6).
    pub back_len: u64,
    /// Bytes of the zstd frame (or LZMA data) in the patch.
    pub comp_len: u64,
    /// How the segment's data is compressed.
    pub codec: WindowCodec,
}

impl WindowSegmentHeader {
    /// Bytes of the window: the spans plus the back bytes.
    pub fn window_len(&self) -> u64 {
        self.spans.iter().map(|s| s.1).sum::<u64>() + self.back_len
    }

    /// Appends the header's encoding (tag and varints) to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(match self.codec {
            WindowCodec::Zstd => WINDOW_SEGMENT_TAG,
            WindowCodec::Lzma { .. } => LZMA_WINDOW_SEGMENT_TAG,
        });
        put_varint(out, self.new_len);
        put_varint(out, self.spans.len() as u64);
        let mut end = 0;
        for &(start, len) in &self.spans {
            put_varint(out, start - end);
            put_varint(out, len);
            end = start + len;
        }
        put_varint(out, self.back_len);
        if let WindowCodec::Lzma { props } = self.codec {
            out.push(props);
        }
        put_varint(out, self.comp_len);
    }
}

/// A segment as announced by its header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    /// A segment of copy/add ops (bsdiff-like).
    Ops(SegmentHeader),
    /// A segment compressed against a window of old bytes.
    Window(WindowSegmentHeader),
}

impl Segment {
    /// New bytes the segment produces.
    pub fn new_len(&self) -> u64 {
        match self {
            Segment::Ops(h) => h.new_len,
            Segment::Window(w) => w.new_len,
        }
    }

    /// Bytes the segment takes in the patch after its header.
    pub fn compressed_len(&self) -> u64 {
        match self {
            Segment::Ops(h) => h.compressed_len(),
            Segment::Window(w) => w.comp_len,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctrl(codes: &[u64], copies: &[u64], extras: &[u64]) -> Vec<u8> {
        let mut c = Vec::new();
        put_varint(&mut c, codes.len() as u64);
        for v in codes.iter().chain(copies).chain(extras) {
            put_varint(&mut c, *v);
        }
        c
    }

    #[test]
    fn diagonal_history_follows_the_diagonal_alone() {
        // -3 explicitly (code 2 + zigzag(-3) = 7), back to 0 (code 0), then code 1
        // names h2 = 0 = h0: the history stays (0, -3, 0), so code 0 names -3 (FORMAT.md §2.4).
        let c = ctrl(&[7, 0, 1, 0], &[0; 4], &[1; 4]);
        let ops = decode_control(&c, 4, 0, 4, 0).unwrap();
        assert_eq!(ops.iter().map(|o| o.diagonal).collect::<Vec<_>>(), [-3, 0, 0, -3]);
    }

    #[test]
    fn op_sums_are_checked_before_any_output() {
        let err = |c: &[u8], new_len, diff, extra| decode_control(c, new_len, diff, extra, 100).unwrap_err();
        // copy_len + extra_len overflows.
        assert!(matches!(err(&ctrl(&[2], &[u64::MAX], &[1]), 1, 0, 1), Error::Corrupt { .. }));
        // An op producing nothing.
        assert!(matches!(err(&ctrl(&[2, 2], &[0, 0], &[1, 0]), 2, 0, 1), Error::Corrupt { .. }));
        // Ops using more extra bytes than the segment has, or fewer.
        assert!(matches!(err(&ctrl(&[2], &[0], &[5]), 4, 0, 4), Error::Corrupt { .. }));
        assert!(matches!(err(&ctrl(&[2], &[0], &[3]), 4, 0, 4), Error::Corrupt { .. }));
        // More ops than 3 bytes each can hold: a limit, before anything is read.
        let mut c = Vec::new();
        put_varint(&mut c, 1000);
        assert!(matches!(err(&c, 4096, 0, 4096), Error::Limit { .. }));
        // The diagonal overflows: i64::MAX - 1, then as much again.
        assert!(matches!(err(&ctrl(&[u64::MAX - 1, u64::MAX - 1], &[0, 0], &[1, 1]), 2, 0, 2), Error::Corrupt { .. }));
    }

    #[test]
    fn run_coding_round_trips_and_refuses_bad_runs() {
        let diff: Vec<u8> = [&[0u8; 5][..], &[255, 1], &[0; 300], &[7], &[0; 9]].concat();
        let coded = encode_run_coded(&diff);
        // Two runs: zeros 5 and 300, lengths 2 and 1, then the 3 literal bytes; the last zeros implied.
        assert_eq!(coded, [2, 5, 0xac, 2, 2, 1, 255, 1, 7]);
        let mut out = Vec::new();
        expand_run_coded(&coded, diff.len() as u64, &mut out).unwrap();
        assert_eq!(out, diff);
        // All zeros: no runs at all.
        expand_run_coded(&encode_run_coded(&[0; 40]), 40, &mut out).unwrap();
        assert_eq!(out, [0; 40]);
        // Runs past the diff size, an empty literal run, literal bytes missing or left over.
        assert!(expand_run_coded(&coded, diff.len() as u64 - 10, &mut out).is_err());
        assert!(expand_run_coded(&[1, 0, 0], 4, &mut out).is_err());
        assert!(expand_run_coded(&[1, 0, 2, 9], 4, &mut out).is_err());
        assert!(expand_run_coded(&[1, 0, 1, 9, 9], 4, &mut out).is_err());
    }
}
