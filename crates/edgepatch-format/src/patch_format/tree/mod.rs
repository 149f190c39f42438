//! The new build as a patch describes it (docs/FORMAT.md §2.1): its entries, where each
//! file's content comes from, the old files the patch reads and the transformed wasm files
//! (§2.8). `section` encodes and decodes the tree section, `resolve` turns a decoded section
//! into a [`PatchTree`] against the old build's listing, `budget` holds the §2.7 limits.

mod budget;
mod resolve;
mod section;

pub use budget::{max_tree_name_bytes, TreeBudget};
pub use section::{EncodedTransform, EncodedTree};

use super::listing::has_executable;
use super::{
    ListedEntry, BASE_WINDOW_BACK, FLAG_LZMA_SEGMENTS, FLAG_MODE_BLIND_DIGEST, FLAG_RUN_CODED_DIFF, FLAG_SINGLE_FILE, FLAG_SPLIT_REFERENCE,
    FLAG_WASM_TRANSFORM, FLAG_WINDOW_REACH,
};
use crate::compressed_side_info::old_content_len;
use crate::wasm_side_info::side_info_has_code_layout;

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
    /// executable: the reader does not know it (§5).
    pub omit_mode_blind_digest: bool,
}

/// [`PatchTree::split_old_file`], before the tree is put together.
fn split_old_file_of(single_file: bool, old_files: &[OldFile], entries: &[TreeEntry], w: &WasmTransformed) -> Option<usize> {
    if !reads_old_split(&w.side_info) {
        return None;
    }
    match (w.split_reference, single_file) {
        (Some(k), _) => Some(k),
        (None, true) => (!old_files.is_empty()).then_some(0),
        (None, false) => old_files.iter().position(|f| f.path == entries[w.entry].path),
    }
}

/// Whether a file with this side info (valid or not) reads its old file in a layout of the
/// transform's: a wasm module in the field-split layout (§2.8.7), or a compressed asset, whose
/// delta reads the old file decoded (§2.8.8).
pub fn reads_old_split(side_info: &[u8]) -> bool {
    side_info_has_code_layout(side_info) || old_content_len(side_info).is_some()
}

/// The bytes an old file of `size` bytes takes in the reference when a file with this side
/// info reads it split: the field-split layout keeps the file's length, a decoded old file
/// takes its decoded length.
pub fn split_layout_len(side_info: &[u8], size: u64) -> u64 {
    old_content_len(side_info).unwrap_or(size)
}

/// The bytes each old file takes in the reference stream (0 for one outside it): its size, or
/// its layout's length where a transformed file reads it split.
fn reference_lens(single_file: bool, old_files: &[OldFile], entries: &[TreeEntry], transforms: &[WasmTransformed]) -> Vec<u64> {
    let mut lens: Vec<u64> = old_files.iter().map(|f| if f.in_reference { f.size } else { 0 }).collect();
    for w in transforms {
        if let Some(k) = split_old_file_of(single_file, old_files, entries, w) {
            if old_files[k].in_reference {
                lens[k] = split_layout_len(&w.side_info, old_files[k].size);
            }
        }
    }
    lens
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
        let lens = self.reference_lens();
        self.transforms.iter().map(|w| w.normalized_size).sum::<u64>() + split.iter().map(|&k| lens[k]).sum::<u64>()
    }

    /// How many of the delta bytes produced last a window segment may reach
    /// (and an applier keeps): the declared reach, else `BASE_WINDOW_BACK`.
    pub fn window_back(&self) -> u64 {
        self.window_reach.unwrap_or(BASE_WINDOW_BACK)
    }

    /// Total bytes of the old reference stream.
    pub fn reference_bytes(&self) -> u64 {
        self.reference_lens().iter().sum()
    }

    /// The bytes each old file takes in the reference stream, by index into `old_files` (0
    /// for one outside it): its size, or, where a transformed file reads it split, its
    /// layout's length (a compressed asset's old file decoded, §2.8.8).
    pub fn reference_lens(&self) -> Vec<u64> {
        reference_lens(self.single_file, &self.old_files, &self.entries, &self.transforms)
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
}
