//! The patch container, version 2 (normative description: docs/FORMAT.md §2).
//! This module owns the constants, the limits and the tree section codec that the
//! writer (`diff`), the streaming applier (`apply`) and the reference applier share.

use crate::build::{validate_path, validate_symlink_target, TreeChecker, MAX_PATH_LEN};
use crate::error::{Error, Input, Result};
use crate::matcher::Op;
use crate::wire::{put_str, put_varint, unzigzag, zigzag, SliceReader};

pub const PATCH_MAGIC: [u8; 8] = *b"EDGEPTCH";
pub const PATCH_VERSION: u16 = 2;
pub const FLAG_SINGLE_FILE: u16 = 1;
pub const SEGMENT_TAG: u8 = b'S';
pub const WINDOW_SEGMENT_TAG: u8 = b'W';
/// Old bytes a window segment may take from the reference stream...
pub const MAX_WINDOW_BYTES: u64 = 8 << 20;
/// ...plus at most this many new bytes produced just before the segment.
pub const MAX_WINDOW_BACK: u64 = 4 << 20;
pub const MAX_WINDOW_SPANS: u64 = 1 << 16;
pub const END_TAG: u8 = b'E';

/// Decoded tree section may not exceed this (bounds apply-side memory).
pub const MAX_TREE_BYTES: u64 = 64 << 20;
/// New bytes one segment may produce; bounds apply-side memory.
pub const MAX_SEGMENT_NEW: u64 = 16 << 20;
/// Control bytes one segment may carry (the writer never comes near: an op
/// takes a few bytes and produces at least 9 new bytes in practice).
pub const MAX_SEGMENT_CTRL: u64 = 2 * MAX_SEGMENT_NEW;
pub const MAX_ENTRIES: u64 = 1 << 22;
/// zstd frames in a patch may not ask for a window above 2^24.
pub const MAX_WINDOW_LOG: u32 = 24;

pub const KIND_FILE: u8 = 0;
pub const KIND_SYMLINK: u8 = 1;
pub const KIND_DIRECTORY: u8 = 2;
/// Entry codes of the tree section (§2.1): kind, source and executable bit in one byte.
const CODE_DIRECTORY: u8 = 0;
const CODE_SYMLINK: u8 = 1;
const CODE_DELTA: u8 = 2;
const CODE_DELTA_EXECUTABLE: u8 = 3;
const CODE_COPY: u8 = 4;
const CODE_COPY_EXECUTABLE: u8 = 5;

/// An old file the patch reads: copied from, or part of the reference stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OldFile {
    pub path: String,
    pub size: u64,
    /// Part of the concatenated old reference stream the delta reads from.
    pub in_reference: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileSource {
    /// The next `size` bytes of the delta stream.
    Delta,
    /// Identical to the old file at this index of `old_files`.
    Copy { old_index: usize },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TreeEntryKind {
    File { executable: bool, size: u64, source: FileSource },
    Symlink { target: String },
    Directory,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeEntry {
    pub path: String,
    pub kind: TreeEntryKind,
}

/// Everything the applier must know before the delta stream starts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PatchTree {
    pub single_file: bool,
    pub old_files: Vec<OldFile>,
    pub entries: Vec<TreeEntry>,
    /// BLAKE3 of the new files' BLAKE3s in [`PatchTree::digest_order`] (§2.1):
    /// one 32-byte hash verifies every file, where one per file would cost
    /// 32 incompressible bytes for each of a tree's thousands of files.
    pub files_digest: [u8; 32],
}

impl PatchTree {
    /// Total bytes the delta stream must produce.
    pub fn delta_bytes(&self) -> u64 {
        self.entries
            .iter()
            .filter_map(|e| match &e.kind {
                TreeEntryKind::File { size, source: FileSource::Delta, .. } => Some(*size),
                _ => None,
            })
            .sum()
    }

    /// Total bytes of the old reference stream.
    pub fn reference_bytes(&self) -> u64 {
        self.old_files.iter().filter(|f| f.in_reference).map(|f| f.size).sum()
    }

    /// Indexes of the file entries in the order the files digest hashes them,
    /// which is the order an applier completes them: the copied files in entry
    /// order, then the delta-stream files in entry order.
    pub fn digest_order(&self) -> impl Iterator<Item = usize> + '_ {
        let files = |copies: bool| {
            self.entries.iter().enumerate().filter_map(move |(i, e)| match &e.kind {
                TreeEntryKind::File { source, .. } => (matches!(source, FileSource::Copy { .. }) == copies).then_some(i),
                _ => None,
            })
        };
        files(true).chain(files(false))
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

    /// The tree section, version 2 (§2.1): columns (paths, codes, targets,
    /// sizes, copy sources, then the old table) so that zstd sees like next to
    /// like, paths front-coded, and old paths that a new entry repeats given
    /// by reference.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        put_varint(&mut out, self.entries.len() as u64);
        let mut previous = "";
        for e in &self.entries {
            put_front_coded(&mut out, previous, &e.path);
            previous = &e.path;
        }
        for e in &self.entries {
            out.push(match &e.kind {
                TreeEntryKind::Directory => CODE_DIRECTORY,
                TreeEntryKind::Symlink { .. } => CODE_SYMLINK,
                TreeEntryKind::File { executable, source: FileSource::Delta, .. } => CODE_DELTA + *executable as u8,
                TreeEntryKind::File { executable, source: FileSource::Copy { .. }, .. } => CODE_COPY + *executable as u8,
            });
        }
        for e in &self.entries {
            if let TreeEntryKind::Symlink { target } = &e.kind {
                put_str(&mut out, target);
            }
        }
        for e in &self.entries {
            if let TreeEntryKind::File { size, source: FileSource::Delta, .. } = &e.kind {
                put_varint(&mut out, *size);
            }
        }
        for e in &self.entries {
            if let TreeEntryKind::File { source: FileSource::Copy { old_index }, .. } = &e.kind {
                put_varint(&mut out, *old_index as u64);
            }
        }
        put_varint(&mut out, self.old_files.len() as u64);
        let (mut next_entry, mut previous_explicit) = (0usize, "");
        for f in &self.old_files {
            // Both lists are sorted by path, so a repeated path is found by walking forward.
            let rest = &self.entries[next_entry.min(self.entries.len())..];
            match rest.iter().position(|e| e.path.as_bytes() >= f.path.as_bytes()).filter(|&k| rest[k].path == f.path) {
                Some(k) => {
                    put_varint(&mut out, k as u64 + 1);
                    next_entry += k + 1;
                }
                None => {
                    put_varint(&mut out, 0);
                    put_front_coded(&mut out, previous_explicit, &f.path);
                    previous_explicit = &f.path;
                }
            }
        }
        for f in &self.old_files {
            put_varint(&mut out, f.size);
        }
        for f in &self.old_files {
            out.push(f.in_reference as u8);
        }
        out.extend_from_slice(&self.files_digest);
        out
    }

    /// Decodes and validates a tree section: paths, order, parents, symlink
    /// targets, indexes, copy sizes and the single-file shape.
    pub fn decode(bytes: &[u8], base: u64, single_file: bool) -> Result<PatchTree> {
        let mut r = SliceReader::new(bytes, base, Input::Patch);
        // Every entry takes at least two bytes (path prefix and code): a count
        // beyond that is caught before anything is allocated for it.
        let count = r.varint_max(MAX_ENTRIES.min(bytes.len() as u64 / 2), "entry count")? as usize;
        let mut paths: Vec<String> = Vec::with_capacity(count);
        let mut checker = TreeChecker::default();
        for _ in 0..count {
            let path = read_front_coded(&mut r, paths.last().map_or("", |p| p.as_str()), "entry path")?;
            paths.push(path);
        }
        let mut codes = Vec::with_capacity(count);
        for path in &paths {
            let code = r.u8("entry code")?;
            if code > CODE_COPY_EXECUTABLE {
                return Err(r.corrupt(format!("entry code {code} unknown")));
            }
            if !single_file {
                checker.check(path, code == CODE_DIRECTORY)?;
            }
            codes.push(code);
        }
        let mut entries = Vec::with_capacity(count);
        let mut copies = Vec::new();
        for (path, &code) in paths.into_iter().zip(&codes) {
            let kind = match code {
                CODE_DIRECTORY => TreeEntryKind::Directory,
                CODE_SYMLINK => {
                    let target = r.string(MAX_PATH_LEN, "symlink target")?.to_string();
                    validate_symlink_target(&path, &target)?;
                    TreeEntryKind::Symlink { target }
                }
                _ => TreeEntryKind::File { executable: code & 1 == 1, size: 0, source: FileSource::Delta },
            };
            entries.push(TreeEntry { path, kind });
        }
        for (e, &code) in entries.iter_mut().zip(&codes) {
            if let (TreeEntryKind::File { size, .. }, CODE_DELTA | CODE_DELTA_EXECUTABLE) = (&mut e.kind, code) {
                *size = r.varint("file size")?;
            }
        }
        for (i, &code) in codes.iter().enumerate() {
            if code >= CODE_COPY {
                copies.push((i, r.offset(), r.varint("copy source")?));
            }
        }
        let old_count = r.varint_max(MAX_ENTRIES.min(r.remaining() as u64 / 2), "old file count")? as usize;
        let mut old_paths = Vec::with_capacity(old_count);
        let (mut next_entry, mut previous_explicit) = (0usize, String::new());
        for _ in 0..old_count {
            let at = r.offset();
            let path = match r.varint("old file path reference")? {
                0 => {
                    let path = read_front_coded(&mut r, &previous_explicit, "old file path")?;
                    if !single_file {
                        validate_path(&path)?;
                    }
                    previous_explicit.clone_from(&path);
                    path
                }
                k => {
                    let e = next_entry.checked_add(k as usize - 1).and_then(|i| entries.get(i).map(|e| (i, e)));
                    let (i, e) = e.ok_or_else(|| Error::Corrupt { input: Input::Patch, offset: at, what: format!("old file path reference {k} is past the last entry") })?;
                    next_entry = i + 1;
                    e.path.clone()
                }
            };
            old_paths.push(path);
        }
        let mut old_files = Vec::with_capacity(old_count);
        for path in old_paths {
            let size = r.varint("old file size")?;
            old_files.push(OldFile { path, size, in_reference: false });
        }
        for f in &mut old_files {
            f.in_reference = match r.u8("old file flags")? {
                0 => false,
                1 => true,
                flag => return Err(r.corrupt(format!("old file flags {flag} unknown"))),
            };
        }
        for (i, at, old_index) in copies {
            let f = old_files.get(old_index as usize).ok_or_else(|| Error::Corrupt {
                input: Input::Patch,
                offset: at,
                what: format!("copy source {old_index} is not an old file index"),
            })?;
            if let TreeEntryKind::File { size, source, .. } = &mut entries[i].kind {
                (*size, *source) = (f.size, FileSource::Copy { old_index: old_index as usize });
            }
        }
        let files_digest = r.array::<32>("files digest")?;
        if !r.is_empty() {
            return Err(r.corrupt("bytes after the files digest"));
        }
        if single_file {
            let ok_entries = matches!(entries.as_slice(), [TreeEntry { path, kind: TreeEntryKind::File { .. } }] if path.is_empty());
            let ok_old = old_files.len() <= 1 && old_files.iter().all(|f| f.path.is_empty());
            if !ok_entries || !ok_old {
                return Err(Error::Corrupt {
                    input: Input::Patch,
                    offset: base,
                    what: "single-file patch must hold exactly one file entry with an empty path".into(),
                });
            }
        }
        Ok(PatchTree { single_file, old_files, entries, files_digest })
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
    pub new_len: u64,
    pub ctrl_raw: u64,
    pub ctrl_comp: u64,
    pub diff_raw: u64,
    pub diff_comp: u64,
    pub extra_raw: u64,
    pub extra_comp: u64,
}

impl SegmentHeader {
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(SEGMENT_TAG);
        for v in [self.new_len, self.ctrl_raw, self.ctrl_comp, self.diff_raw, self.diff_comp, self.extra_raw, self.extra_comp] {
            put_varint(out, v);
        }
    }

    pub fn compressed_len(&self) -> u64 {
        self.ctrl_comp + self.diff_comp + self.extra_comp
    }

    /// Checks the sizes against the limits and each other.
    pub fn validate(&self, offset: u64) -> Result<()> {
        let bad = |what: String| Err(Error::Corrupt { input: Input::Patch, offset, what });
        if self.new_len == 0 || self.new_len > MAX_SEGMENT_NEW {
            return bad(format!("segment produces {} bytes (must be 1..={MAX_SEGMENT_NEW})", self.new_len));
        }
        if self.diff_raw.checked_add(self.extra_raw) != Some(self.new_len) {
            return bad("segment diff and extra sizes do not add up to its output size".into());
        }
        if self.ctrl_raw == 0 || self.ctrl_raw > MAX_SEGMENT_CTRL {
            return bad(format!("segment control size {} out of range", self.ctrl_raw));
        }
        for (raw, comp) in [(self.ctrl_raw, self.ctrl_comp), (self.diff_raw, self.diff_comp), (self.extra_raw, self.extra_comp)] {
            // zstd never expands by more than a small bound; reject absurd claims.
            if comp > raw + raw / 64 + 1024 || (raw == 0) != (comp == 0) {
                return bad(format!("segment stream compressed size {comp} implausible for {raw} bytes"));
            }
        }
        Ok(())
    }
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
#[derive(Default, Clone, Copy)]
struct DiagonalHistory([i64; 3]);

impl DiagonalHistory {
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

/// Decodes a control stream into ops, checking its shape (not yet the bounds
/// of old data, which the applier checks as it goes).
pub fn decode_control(ctrl: &[u8], max_ops: u64, offset: u64) -> Result<Vec<Op>> {
    let mut r = SliceReader::new(ctrl, offset, Input::Patch);
    let count = r.varint_max(max_ops.min(ctrl.len() as u64), "op count")? as usize;
    let mut ops = Vec::with_capacity(count);
    let mut history = DiagonalHistory::default();
    for _ in 0..count {
        let code = r.varint("diagonal code")?;
        let diagonal = match code {
            0 => history.0[1],
            1 => history.0[2],
            c => {
                let delta = unzigzag(c - 2);
                history.0[0].checked_add(delta).ok_or_else(|| r.corrupt("diagonal overflows"))?
            }
        };
        history.use_diagonal(diagonal);
        ops.push(Op { diagonal, copy_len: 0, extra_len: 0 });
    }
    for op in ops.iter_mut() {
        op.copy_len = r.varint("copy length")?;
    }
    for op in ops.iter_mut() {
        op.extra_len = r.varint("extra length")?;
    }
    if !r.is_empty() {
        return Err(r.corrupt("bytes after the last control op"));
    }
    Ok(ops)
}

/// A window segment: its new bytes are one zstd frame compressed with a prefix
/// made of spans of the old reference stream (better than ops for text, where
/// many short matches make the control stream dominate).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WindowSegmentHeader {
    pub new_len: u64,
    /// (start in the reference stream, length), ascending and disjoint.
    pub spans: Vec<(u64, u64)>,
    /// New-stream bytes just before this segment that follow the spans in the window.
    pub back_len: u64,
    pub comp_len: u64,
}

impl WindowSegmentHeader {
    pub fn window_len(&self) -> u64 {
        self.spans.iter().map(|s| s.1).sum::<u64>() + self.back_len
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(WINDOW_SEGMENT_TAG);
        put_varint(out, self.new_len);
        put_varint(out, self.spans.len() as u64);
        let mut end = 0;
        for &(start, len) in &self.spans {
            put_varint(out, start - end);
            put_varint(out, len);
            end = start + len;
        }
        put_varint(out, self.back_len);
        put_varint(out, self.comp_len);
    }
}

/// A segment as announced by its header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    Ops(SegmentHeader),
    Window(WindowSegmentHeader),
}

impl Segment {
    pub fn new_len(&self) -> u64 {
        match self {
            Segment::Ops(h) => h.new_len,
            Segment::Window(w) => w.new_len,
        }
    }

    pub fn compressed_len(&self) -> u64 {
        match self {
            Segment::Ops(h) => h.compressed_len(),
            Segment::Window(w) => w.comp_len,
        }
    }
}
