//! A decoded tree section resolved against the old build's listing (docs/FORMAT.md §2.1,
//! §2.2): the listing's digest checked, the kept entries filled in, and the tree rules
//! (§2.7) checked on the whole new tree.

use super::{split_old_file_of, EncodedTree, FileSource, OldFile, PatchTree, TreeBudget, TreeEntry, TreeEntryKind, WasmTransformed};
use crate::error::{Error, Input, Result};
use crate::patch_format::listing::has_executable;
use crate::patch_format::{listing_digest, ListedEntry, ListedKind};
use crate::path_rules::TreeChecker;

impl EncodedTree {
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
        let reference_lens = super::reference_lens(self.single_file, &old_files, &entries, &resolved_transforms);
        if reference_lens.iter().try_fold(0u64, |total, &len| total.checked_add(len)).is_none() {
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
