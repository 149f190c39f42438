//! The tree section's bytes (docs/FORMAT.md §2.1, §2.8.1): [`PatchTree::encode`] writes
//! them, [`EncodedTree::decode`] reads them back as the patch states them, checking all it
//! can without the old build. Paths are front-coded, entries in columns.

use super::reads_old_split;
use super::{delta_lens, FileSource, PatchTree, TreeBudget, TreeEntry, TreeEntryKind};
use crate::error::{Error, Input, Result};
use crate::patch_format::*;
use crate::path_rules::{validate_path, validate_symlink_target, MAX_PATH_LEN};
use crate::wire::{put_str, put_varint, SliceReader};

/// Entry codes of the tree section (§2.1): kind, source and executable bit in one byte.
const CODE_DIRECTORY: u8 = 0;
const CODE_SYMLINK: u8 = 1;
const CODE_DELTA: u8 = 2;
const CODE_DELTA_EXECUTABLE: u8 = 3;
const CODE_COPY: u8 = 4;
const CODE_COPY_EXECUTABLE: u8 = 5;

impl PatchTree {
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
                let names = |k: usize| !self.single_file && self.old_files.get(k).is_some_and(|f| f.in_reference) && reads_old_split(&w.side_info);
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
            if !reads_old_split(&w.side_info) {
                return Err(r.corrupt("a wasm transform names a split reference, but its file is not in the field-split layout nor decoded"));
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
