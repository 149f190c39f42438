//! The plan of a patch's tree, shared by the in-memory diff and the bounded-memory generator:
//! each new file's source (a copy of an old file, or the delta stream) decided from sizes and
//! hashes alone, the statistics of that plan, and the patch's header and compressed tree.

use std::collections::HashMap;

use crate::error::Result;
use crate::patch_format::*;
use crate::zstd_frame::compress;

/// What a diff produced, for summaries.
#[derive(Debug, Clone, Default)]
pub struct DiffStats {
    /// Files in the new build.
    pub new_files: u64,
    /// New files identical to the old file at the same path (copied).
    pub unchanged: u64,
    /// New files identical to an old file at another path (copied).
    pub renamed: u64,
    /// New files whose bytes come from the delta stream.
    pub delta_files: u64,
    /// Old entries whose path the new build does not have.
    pub removed: u64,
    /// Bytes of all new files.
    pub new_bytes: u64,
    /// Bytes of the delta stream (the delta files, concatenated).
    pub delta_bytes: u64,
    /// Bytes of the reference stream (the old files a delta may read).
    pub reference_bytes: u64,
    /// Segments the delta stream was encoded in.
    pub segments: u64,
    /// Size of the patch.
    pub patch_bytes: u64,
    /// Delta files stored as normalized wasm modules.
    pub wasm_transformed: u64,
    /// Delta files (gzip or zlib) stored as their content, diffed against their old file's.
    pub compressed_transformed: u64,
}

/// A new build entry as the tree planner sees it: file content only by size and hash.
pub(crate) enum PlannedKind<'a> {
    Directory,
    Symlink(&'a str),
    File { executable: bool, size: u64, blake3: [u8; 32] },
}

/// Decides each new file's source from hashes alone (so it works from two
/// signatures as well as from two builds in memory): unchanged (same path and
/// hash) or renamed/moved (same hash elsewhere) files are copies, all others
/// (except empty files, which are free either way) come from the delta stream.
/// Every non-empty old file is in the reference stream when there is a delta.
pub(crate) fn plan_tree(
    single_file: bool,
    old_listing: Vec<ListedEntry>,
    old_files: &[(&str, u64, [u8; 32])],
    new_entries: &[(&str, PlannedKind)],
) -> (PatchTree, DiffStats) {
    let mut by_hash: HashMap<[u8; 32], usize> = HashMap::new();
    let mut by_path: HashMap<&str, usize> = HashMap::new();
    for (i, (path, _, hash)) in old_files.iter().enumerate() {
        by_hash.entry(*hash).or_insert(i);
        by_path.insert(path, i);
    }
    let mut stats = DiffStats::default();
    let mut any_delta = false;
    let mut entries = Vec::with_capacity(new_entries.len());
    for (path, kind) in new_entries {
        let kind = match kind {
            PlannedKind::Directory => TreeEntryKind::Directory,
            PlannedKind::Symlink(target) => TreeEntryKind::Symlink { target: target.to_string() },
            PlannedKind::File { executable, size, blake3 } => {
                stats.new_files += 1;
                let same_path = by_path.get(path).copied().filter(|&i| old_files[i].2 == *blake3);
                let source = match same_path.or_else(|| by_hash.get(blake3).copied()).filter(|_| *size > 0) {
                    Some(i) => {
                        if old_files[i].0 == *path {
                            stats.unchanged += 1;
                        } else {
                            stats.renamed += 1;
                        }
                        FileSource::Copy { old_index: i }
                    }
                    None => {
                        stats.delta_files += 1;
                        any_delta |= *size > 0;
                        FileSource::Delta
                    }
                };
                TreeEntryKind::File { executable: *executable, size: *size, source }
            }
        };
        entries.push(TreeEntry { path: path.to_string(), kind });
    }
    // The same count for every writer (the in-memory diff and the generator).
    let new_paths: std::collections::HashSet<&str> = new_entries.iter().map(|(p, _)| *p).collect();
    stats.removed = old_listing.iter().filter(|e| !new_paths.contains(e.path.as_str())).count() as u64;
    // Old files that are neither copied nor referenced need not be listed, but
    // indexes must stay stable: keep the table whole (it is small).
    let old_files = old_files.iter().map(|(path, size, _)| OldFile { path: path.to_string(), size: *size, in_reference: any_delta && *size > 0 }).collect();
    let mut tree = PatchTree {
        single_file,
        old_listing,
        old_files,
        entries,
        files_digest: [0; 32],
        transforms: Vec::new(),
        window_reach: None,
        run_coded_diff: false,
        lzma_segments: false,
        omit_mode_blind_digest: false,
    };
    tree.files_digest = tree.digest_of(|i| match new_entries[i].1 {
        PlannedKind::File { blake3, .. } => blake3,
        _ => unreachable!("the digest hashes files only"),
    });
    (tree, stats)
}

/// Magic, version, flags and the compressed tree: the patch up to its first segment.
pub(crate) fn encode_header_and_tree(tree: &PatchTree, level: i32) -> Result<Vec<u8>> {
    let tree_bytes = tree.encode()?;
    let tree_comp = compress(&tree_bytes, level)?;
    let mut out = Vec::with_capacity(32 + tree_comp.len());
    FixedHeader { flags: tree.flags(), tree_len: tree_bytes.len() as u64, tree_comp_len: tree_comp.len() as u64 }.encode(&mut out);
    out.extend_from_slice(&tree_comp);
    Ok(out)
}
