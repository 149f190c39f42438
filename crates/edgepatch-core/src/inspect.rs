//! Describes a patch without applying it: reads it front to back, checks its
//! structure and checksum, and reports the tree and the segment sizes.

use std::io::Read;

use crate::apply::{read_header_and_tree, read_segment_header, PatchInput};
use crate::error::Result;
use crate::manifest::{EntryKind, EntrySource, Manifest, ManifestEntry, ManifestError, ManifestKind, SegmentRef};
use crate::patch_format::{EncodedTree, FileSource, ListedEntry, PatchTree, Segment, TreeEntryKind, PATCH_VERSION};
use edgepatch_format::{Capabilities, Capability};

/// What [`inspect_patch`] read from a patch.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct PatchInfo {
    /// The patch format version.
    pub version: u16,
    /// The tree as the patch states it; [`PatchInfo::resolve`] with the old
    /// build's listing gives the whole new tree.
    pub tree: EncodedTree,
    /// Where the tree section starts in the patch.
    pub tree_at: u64,
    /// Where the segments lie.
    pub layout: PatchLayout,
}

/// Where the segments lie in a patch.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct PatchLayout {
    /// The segments' headers, in patch order.
    pub segments: Vec<Segment>,
    /// Per segment: where it starts in the patch and how many bytes it takes.
    pub segment_spans: Vec<(u64, u64)>,
    /// The patch's size in bytes.
    pub patch_bytes: u64,
    /// BLAKE3 of the patch's head: its bytes before the first segment (header and tree section).
    pub head_blake3: [u8; 32],
}

impl PatchInfo {
    /// The whole tree, given the listing of the old build the patch was made from.
    pub fn resolve(&self, old_listing: Vec<ListedEntry>) -> Result<PatchTree> {
        self.tree.resolve(old_listing, self.tree_at)
    }

    /// `resolve` for a listing read where files have no executable bit when `modes_known`
    /// is false ([`crate::apply::OldBuild::modes_known`]).
    pub fn resolve_modes(&self, old_listing: Vec<ListedEntry>, modes_known: bool) -> Result<PatchTree> {
        self.tree.resolve_modes(old_listing, self.tree_at, modes_known)
    }

    /// What a reader must understand to apply this patch: its header flags' capabilities
    /// and each transformed file's side info's.
    pub fn required_capabilities(&self) -> Capabilities {
        let t = &self.tree;
        let mut set = Capabilities::BASELINE;
        let mut need = |on: bool, c: Capability| {
            if on {
                set = set.with(c);
            }
        };
        need(t.window_reach.is_some(), Capability::WindowReach);
        need(t.run_coded_diff, Capability::RunCodedOps);
        need(t.lzma_segments, Capability::LzmaSegments);
        need(t.mode_blind_digest.is_some(), Capability::ModeBlindDigest);
        need(t.transforms.iter().any(|w| w.split_reference.is_some()), Capability::WasmSplitReference);
        t.transforms.iter().fold(set, |set, w| set.union(crate::transforms::required_by_side_info(&w.side_info)))
    }
}

/// Reads a patch through and checks its structure and checksum. Without the
/// old build, window spans are not checked against the reference's size.
pub fn inspect_patch<R: Read>(patch: R) -> Result<PatchInfo> {
    let mut input = PatchInput::new(patch);
    let mut head_blake3 = [0; 32];
    let (tree, tree_at) = read_header_and_tree(&mut input, |_, hash| {
        head_blake3 = hash;
        Ok(())
    })?;
    let mut segments = Vec::new();
    let mut produced = 0;
    let mut scratch = (Vec::new(), Vec::new());
    let reference_len = u64::MAX;
    let mut segment_spans = Vec::new();
    loop {
        let start = input.offset();
        let Some(segment) = read_segment_header(&mut input, segments.len() as u64, produced, reference_len, tree.window_back())? else { break };
        match &segment {
            Segment::Ops(h) => {
                // Decompress to check the frames; nothing is kept.
                input.ops_stream(h.lzma[0], h.ctrl_comp, h.ctrl_raw, &mut scratch.0, &mut scratch.1, "segment control")?;
                // A run-coded diff (§2.3) is checked as the frame it is.
                input.ops_stream(
                    h.lzma[1],
                    h.diff_comp,
                    if h.diff_coded > 0 { h.diff_coded } else { h.diff_raw },
                    &mut scratch.0,
                    &mut scratch.1,
                    "segment diff",
                )?;
                input.ops_stream(h.lzma[2], h.extra_comp, h.extra_raw, &mut scratch.0, &mut scratch.1, "segment extra")?;
            }
            // Its frame needs the old data to decompress: only skipped here.
            Segment::Window(w) => {
                scratch.0.resize(w.comp_len as usize, 0);
                input.exact(&mut scratch.0, "window segment frame")?;
            }
        }
        produced += segment.new_len();
        segments.push(segment);
        segment_spans.push((start, input.offset() - start));
    }
    let patch_bytes = input.finish()?;
    Ok(PatchInfo { version: PATCH_VERSION, tree, tree_at, layout: PatchLayout { segments, segment_spans, patch_bytes, head_blake3 } })
}

/// The patch manifest of a tree patch: every entry of the new build with its
/// hash and where its content comes from, and where each segment lies in the
/// patch, so a client can look up one file and fetch only what it needs.
/// The patch carries one digest for all files, not a hash per file:
/// `file_hash(i)` gives the BLAKE3 of file entry `i` (from the new build or its
/// signature), and together they must reproduce the patch's files digest.
pub fn patch_manifest(
    tree: &PatchTree,
    layout: &PatchLayout,
    file_hash: impl Fn(usize) -> [u8; 32],
    patch_blake3: [u8; 32],
    from_build: &str,
    to_build: &str,
) -> Result<Manifest, ManifestError> {
    if tree.digest_of(&file_hash) != tree.files_digest {
        return Err(ManifestError::Encode("the file hashes given are not those of the build this patch produces (files digest differs)".into()));
    }
    let mut entries = Vec::with_capacity(tree.entries.len());
    let mut delta_at = 0u64;
    for (i, e) in tree.entries.iter().enumerate() {
        let (kind, executable, size, blake3, symlink_target, source) = match &e.kind {
            TreeEntryKind::Directory => (EntryKind::Directory, false, 0, [0; 32], None, EntrySource::None),
            TreeEntryKind::Symlink { target } => (EntryKind::Symlink, false, 0, [0; 32], Some(target.clone()), EntrySource::None),
            TreeEntryKind::File { executable, size, source } => {
                let source = match source {
                    // A transformed file's range of the delta stream holds its
                    // normalized form (docs/FORMAT.md §2.8), not its bytes.
                    FileSource::Delta => {
                        let len = tree.delta_len(i);
                        delta_at += len;
                        EntrySource::Delta { new_offset: delta_at - len }
                    }
                    FileSource::Copy { old_index } => match &tree.old_files[*old_index].path {
                        p if *p == e.path => EntrySource::Unchanged,
                        p => EntrySource::CopyOf { old_path: p.clone() },
                    },
                };
                (EntryKind::File, *executable, *size, file_hash(i), None, source)
            }
        };
        entries.push(ManifestEntry { path: e.path.clone(), kind, executable, decoded: false, size, blake3, symlink_target, source });
    }
    let mut new_offset = 0;
    let segments = layout
        .segments
        .iter()
        .zip(&layout.segment_spans)
        .map(|(s, &(patch_offset, patch_len))| {
            new_offset += s.new_len();
            SegmentRef { patch_offset, patch_len, new_offset: new_offset - s.new_len(), new_len: s.new_len() }
        })
        .collect();
    Ok(Manifest {
        kind: ManifestKind::Patch,
        from_build: Some(from_build.to_string()),
        to_build: to_build.to_string(),
        patch_size: layout.patch_bytes,
        patch_blake3,
        head_blake3: Some(layout.head_blake3),
        segments,
        entries,
    })
}
