//! The patch container, version 1 (normative description: docs/FORMAT.md §3).
//! This module owns the constants, the limits and the tree section codec that the
//! writer (`diff`), the streaming applier (`apply`) and the reference applier share.

use crate::build::{validate_path, validate_symlink_target, TreeChecker, MAX_PATH_LEN};
use crate::error::{Error, Input, Result};
use crate::matcher::Op;
use crate::wire::{put_str, put_varint, unzigzag, zigzag, SliceReader};

pub const PATCH_MAGIC: [u8; 8] = *b"EDGEPTCH";
pub const PATCH_VERSION: u16 = 1;
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
pub const SOURCE_DELTA: u8 = 0;
pub const SOURCE_COPY: u8 = 1;

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
    File { executable: bool, size: u64, blake3: [u8; 32], source: FileSource },
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

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        put_varint(&mut out, self.old_files.len() as u64);
        for f in &self.old_files {
            put_str(&mut out, &f.path);
            put_varint(&mut out, f.size);
            out.push(f.in_reference as u8);
        }
        put_varint(&mut out, self.entries.len() as u64);
        for e in &self.entries {
            put_str(&mut out, &e.path);
            match &e.kind {
                TreeEntryKind::File { executable, size, blake3, source } => {
                    out.push(KIND_FILE);
                    out.push(*executable as u8);
                    put_varint(&mut out, *size);
                    out.extend_from_slice(blake3);
                    match source {
                        FileSource::Delta => out.push(SOURCE_DELTA),
                        FileSource::Copy { old_index } => {
                            out.push(SOURCE_COPY);
                            put_varint(&mut out, *old_index as u64);
                        }
                    }
                }
                TreeEntryKind::Symlink { target } => {
                    out.push(KIND_SYMLINK);
                    put_str(&mut out, target);
                }
                TreeEntryKind::Directory => out.push(KIND_DIRECTORY),
            }
        }
        out
    }

    /// Decodes and validates a tree section: paths, order, parents, symlink
    /// targets, indexes and the single-file shape.
    pub fn decode(bytes: &[u8], base: u64, single_file: bool) -> Result<PatchTree> {
        let mut r = SliceReader::new(bytes, base, Input::Patch);
        let old_count = r.varint_max(MAX_ENTRIES, "old file count")? as usize;
        let mut old_files = Vec::with_capacity(old_count.min(bytes.len() / 3));
        for _ in 0..old_count {
            let path = r.string(MAX_PATH_LEN, "old file path")?.to_string();
            if !single_file {
                validate_path(&path)?;
            }
            let size = r.varint("old file size")?;
            let flag = r.u8("old file flags")?;
            if flag > 1 {
                return Err(r.corrupt(format!("old file flags {flag} unknown")));
            }
            old_files.push(OldFile { path, size, in_reference: flag == 1 });
        }
        let count = r.varint_max(MAX_ENTRIES, "entry count")? as usize;
        let mut entries = Vec::with_capacity(count.min(bytes.len() / 3));
        let mut checker = TreeChecker::default();
        for _ in 0..count {
            let path = r.string(MAX_PATH_LEN, "entry path")?.to_string();
            let kind_at = r.offset();
            let kind = match r.u8("entry kind")? {
                KIND_FILE => {
                    let executable = match r.u8("file flags")? {
                        0 => false,
                        1 => true,
                        f => return Err(r.corrupt(format!("file flags {f} unknown"))),
                    };
                    let size = r.varint("file size")?;
                    let blake3 = r.array::<32>("file hash")?;
                    let source = match r.u8("file source")? {
                        SOURCE_DELTA => FileSource::Delta,
                        SOURCE_COPY => {
                            let i = r.varint("copy source")?;
                            let f = old_files.get(i as usize).ok_or_else(|| {
                                r.corrupt(format!("copy source {i} is not an old file index"))
                            })?;
                            if f.size != size {
                                return Err(r.corrupt(format!("copy of {:?} has size {size}, the old file {}", f.path, f.size)));
                            }
                            FileSource::Copy { old_index: i as usize }
                        }
                        s => return Err(r.corrupt(format!("file source {s} unknown"))),
                    };
                    TreeEntryKind::File { executable, size, blake3, source }
                }
                KIND_SYMLINK => {
                    let target = r.string(MAX_PATH_LEN, "symlink target")?.to_string();
                    validate_symlink_target(&path, &target)?;
                    TreeEntryKind::Symlink { target }
                }
                KIND_DIRECTORY => TreeEntryKind::Directory,
                k => {
                    return Err(Error::Corrupt { input: Input::Patch, offset: kind_at, what: format!("entry kind {k} unknown") })
                }
            };
            if !single_file {
                checker.check(&path, matches!(kind, TreeEntryKind::Directory))?;
            }
            entries.push(TreeEntry { path, kind });
        }
        if !r.is_empty() {
            return Err(r.corrupt("bytes after the last tree entry"));
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
        Ok(PatchTree { single_file, old_files, entries })
    }
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
