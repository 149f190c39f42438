//! Binary, versioned manifest of a build or a patch, with an O(1) index.
//!
//! The byte layout is normative and described in `docs/FORMAT.md §4`.
//! In short: a fixed 96-byte little-endian header, the build ids, an index
//! (a minimal perfect hash from path to record: a pilot table and a slot
//! table), an entry-order table, a segment table, the records, and a 32-byte
//! BLAKE3 trailer over everything before it.
//!
//! [`ManifestView::open`] checks the header and the section bounds in O(1)
//! without reading the records; [`ManifestView::lookup`] then reads the
//! header, one pilot, one slot and one record. [`decode`] reads and checks
//! everything, including the checksum and the index.
//!
//! This module holds the types, the limits and the encoder; `view` the reader.

use crate::error::ErrorKind;
use crate::perfect_hash;
use thiserror::Error;

mod view;
pub use view::{decode, ManifestView};

/// First 8 bytes of every manifest.
pub const MAGIC: [u8; 8] = *b"EPMANIF\0";
/// The format version this code reads and writes.
pub const FORMAT_VERSION: u16 = 1;
/// Size of the fixed header in bytes.
pub const HEADER_LEN: usize = 96;
/// Size of the BLAKE3 trailer in bytes.
pub const TRAILER_LEN: usize = 32;
/// Longest path, CopyOf source path or symlink target, in bytes of UTF-8: the build's rule.
pub const MAX_PATH_LEN: usize = crate::path_rules::MAX_PATH_LEN;
/// Longest build id (`to_build`, `from_build`), in bytes of UTF-8.
pub const MAX_BUILD_ID_LEN: usize = 1024;
/// Most entries in one manifest (2^24).
pub const MAX_ENTRIES: u32 = 1 << 24;
/// Most segments in one manifest (2^24).
pub const MAX_SEGMENTS: u32 = 1 << 24;
/// Largest manifest in bytes (all offsets are u32).
pub const MAX_MANIFEST_LEN: u64 = u32::MAX as u64;
/// Smallest possible record: 1-byte path, kind, flags, size, blake3, source tag.
pub const MIN_RECORD_LEN: u64 = 2 + 1 + 1 + 1 + 8 + 32 + 1;
/// Largest possible record: path, symlink target and CopyOf source path all
/// at [`MAX_PATH_LEN`]. A client fetching one record by range request can
/// fetch this many bytes (clamped to the records region) without knowing its length.
pub const MAX_RECORD_LEN: u64 = 3 * (2 + MAX_PATH_LEN as u64) + 1 + 1 + 8 + 32 + 1;
/// Size of one entry of the segment table.
pub const SEGMENT_LEN: u64 = 32;

const FLAG_HAS_FROM_BUILD: u8 = 1;
/// Header flag: a patch manifest's `head_blake3` follows the build ids.
const FLAG_HAS_HEAD_BLAKE3: u8 = 2;
const ENTRY_FLAG_EXECUTABLE: u8 = 1;
/// Record flag: the file is stored decoded (see [`ManifestEntry::decoded`]).
const ENTRY_FLAG_DECODED: u8 = 2;

/// The coding a file stored decoded had, by its path's extension: `.gz` gzip, `.br` Brotli.
pub fn coding_of_path(path: &str) -> Option<Coding> {
    if path.ends_with(".gz") {
        Some(Coding::Gzip)
    } else if path.ends_with(".br") {
        Some(Coding::Brotli)
    } else {
        None
    }
}

/// A content coding a build ships files in (what `Content-Encoding` would name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Coding {
    /// gzip (RFC 1952), `.gz`.
    Gzip,
    /// Brotli (RFC 7932), `.br`.
    Brotli,
}

/// What a manifest describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ManifestKind {
    /// The complete contents of one build (header byte 1).
    Build,
    /// The contents of the build a patch produces, with where each entry comes from (byte 2).
    Patch,
}

impl std::fmt::Display for ManifestKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ManifestKind::Build => "build",
            ManifestKind::Patch => "patch",
        })
    }
}

/// Type of a directory entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EntryKind {
    /// Regular file (record byte 0).
    File,
    /// Symbolic link; `symlink_target` is set (record byte 1).
    Symlink,
    /// Directory (record byte 2).
    Directory,
}

/// Where the new content of an entry comes from when applying a patch.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum EntrySource {
    /// Same path and content as in the old build.
    Unchanged,
    /// Identical content at another path of the old build (rename or move).
    CopyOf {
        /// The old build's path of the same content.
        old_path: String,
    },
    /// Bytes `[new_offset, new_offset + size)` of the patch's delta stream.
    Delta {
        /// Where the content starts in the delta stream.
        new_offset: u64,
    },
    /// No source: build manifests, directories, symlinks.
    None,
}

/// One file, symlink or directory.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ManifestEntry {
    /// Relative path, `/`-separated, UTF-8 (see [`check_path`]).
    pub path: String,
    /// File, symlink or directory.
    pub kind: EntryKind,
    /// The executable bit (files only).
    pub executable: bool,
    /// The file is stored decoded: the build shipped it compressed in the coding its name's
    /// extension names ([`coding_of_path`]: `.gz`, `.br`), and `size` and `blake3` are those
    /// of its decoded content, which is what a client stores and a server answers its URL
    /// with (as a web server answers with `Content-Encoding`). Files only.
    pub decoded: bool,
    /// Content size in bytes.
    pub size: u64,
    /// BLAKE3 of the content.
    pub blake3: [u8; 32],
    /// Set exactly when `kind` is [`EntryKind::Symlink`].
    pub symlink_target: Option<String>,
    /// Where an apply gets the content from.
    pub source: EntrySource,
}

/// A segment of a patch: bytes `[patch_offset, patch_offset + patch_len)` of
/// the patch file decode to bytes `[new_offset, new_offset + new_len)` of the
/// delta stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SegmentRef {
    /// Where the segment starts in the patch.
    pub patch_offset: u64,
    /// How many bytes of the patch it takes.
    pub patch_len: u64,
    /// Where its output starts in the delta stream.
    pub new_offset: u64,
    /// How many bytes of the delta stream it makes.
    pub new_len: u64,
}

/// A fully decoded manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// A build manifest or a patch manifest.
    pub kind: ManifestKind,
    /// The old build's name; `None` in a build manifest.
    pub from_build: Option<String>,
    /// The new build's name.
    pub to_build: String,
    /// The patch's size in bytes (0 in a build manifest).
    pub patch_size: u64,
    /// BLAKE3 of the whole patch (zero in a build manifest).
    pub patch_blake3: [u8; 32],
    /// BLAKE3 of the patch's head: its bytes before the first segment (the fixed header and
    /// the tree section, where every file's transform and side info is stated). A client
    /// checks it before it decodes the tree, so nothing of a tree the manifest does not vouch
    /// for is ever decoded. `None` in a build manifest, and in patch manifests written
    /// before the field existed.
    pub head_blake3: Option<[u8; 32]>,
    /// The patch's segments, in order (empty in a build manifest).
    pub segments: Vec<SegmentRef>,
    /// In the order given to [`Manifest::encode`]; [`decode`] keeps it.
    pub entries: Vec<ManifestEntry>,
}

/// Everything that can go wrong encoding or reading a manifest.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ManifestError {
    /// Not a manifest (wrong magic bytes).
    #[error("bad magic: not an edgepatch manifest (expected \"EPMANIF\\0\")")]
    BadMagic,
    /// A format version this build does not read.
    #[error("unsupported manifest version {0} (this build reads version {FORMAT_VERSION})")]
    UnsupportedVersion(u16),
    /// `what`, at byte `at`, runs past the end at byte `end`.
    #[error("manifest truncated: {what} at byte {at} runs past end {end}")]
    Truncated {
        /// The field being read.
        what: String,
        /// Where it starts.
        at: u64,
        /// Where the manifest ends.
        end: u64,
    },
    /// The header's length disagrees with the bytes given.
    #[error("manifest length mismatch: header says {declared} bytes, got {actual}")]
    LengthMismatch {
        /// The length the header states.
        declared: u64,
        /// The bytes given.
        actual: u64,
    },
    /// A field that breaks the format: `what` at byte `at`, and why.
    #[error("invalid manifest: {what} at byte {at}: {reason}")]
    Invalid {
        /// The field.
        what: String,
        /// Where it starts.
        at: u64,
        /// What is wrong with it.
        reason: String,
    },
    /// The trailer's BLAKE3 does not match the bytes it covers.
    #[error("manifest checksum mismatch: BLAKE3 of bytes 0..{covered} is {actual}, trailer says {expected}")]
    ChecksumMismatch {
        /// Bytes the trailer covers.
        covered: u64,
        /// The trailer's BLAKE3 (hex).
        expected: String,
        /// The BLAKE3 of the bytes (hex).
        actual: String,
    },
    /// An entry asked for by index beyond the manifest's entries.
    #[error("entry index {index} out of range: manifest has {len} entries")]
    IndexOutOfRange {
        /// The index asked for.
        index: usize,
        /// The manifest's number of entries.
        len: usize,
    },
    /// A manifest that cannot be encoded (bad path, too many entries, ...).
    #[error("cannot encode manifest: {0}")]
    Encode(String),
    /// A manifest of the other kind than the one the caller needs (a build
    /// manifest where an apply must be bound to a patch manifest).
    #[error("a {expected} manifest is needed, this is a {found} manifest")]
    WrongKind {
        /// The kind needed.
        expected: ManifestKind,
        /// The kind given.
        found: ManifestKind,
    },
}

impl ManifestError {
    /// The [`ErrorKind`] a manifest error counts as.
    pub fn kind(&self) -> ErrorKind {
        use ManifestError as M;
        match self {
            M::BadMagic => ErrorKind::Magic,
            M::UnsupportedVersion(_) => ErrorKind::Version,
            M::Truncated { .. } | M::LengthMismatch { .. } => ErrorKind::Truncated,
            M::Invalid { .. } | M::ChecksumMismatch { .. } => ErrorKind::Corrupt,
            M::IndexOutOfRange { .. } | M::Encode(_) | M::WrongKind { .. } => ErrorKind::Invalid,
        }
    }
}

type Result<T, E = ManifestError> = std::result::Result<T, E>;

fn invalid(what: impl Into<String>, at: u64, reason: impl Into<String>) -> ManifestError {
    ManifestError::Invalid { what: what.into(), at, reason: reason.into() }
}

/// Checks a manifest path (also used for `CopyOf` source paths): 1 to
/// [`MAX_PATH_LEN`] bytes, no NUL, not starting with `/`, and no empty, `.`
/// or `..` components (so no trailing `/` and no `//`). Returns why not.
pub fn check_path(path: &str) -> Result<(), &'static str> {
    crate::path_rules::relative_path_problem(path).map_or(Ok(()), Err)
}

/// The rule every format shares: a target is data, 1..=4096 bytes, no NUL.
fn check_symlink_target(t: &str) -> Result<(), &'static str> {
    crate::path_rules::symlink_target_problem(t).map_or(Ok(()), Err)
}

fn check_segment(s: &SegmentRef) -> Result<(), &'static str> {
    if s.patch_offset.checked_add(s.patch_len).is_none() {
        return Err("patch_offset + patch_len overflows u64");
    }
    if s.new_offset.checked_add(s.new_len).is_none() {
        return Err("new_offset + new_len overflows u64");
    }
    Ok(())
}

fn kind_code(k: EntryKind) -> u8 {
    match k {
        EntryKind::File => 0,
        EntryKind::Symlink => 1,
        EntryKind::Directory => 2,
    }
}

// ---------------------------------------------------------------- encoding

/// Byte offsets of the sections, computed from the counts (the canonical layout).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Layout {
    pilots: u64,
    slots: u64,
    order: u64,
    segments: u64,
    records: u64,
}

impl Layout {
    /// All arithmetic in u64 on u32 inputs: cannot overflow.
    fn new(ids_end: u64, n: u32, b: u32, s: u32) -> Layout {
        let pilots = ids_end;
        let slots = pilots + 4 * u64::from(b);
        let order = slots + 4 * u64::from(n);
        let segments = order + 4 * u64::from(n);
        let records = segments + SEGMENT_LEN * u64::from(s);
        Layout { pilots, slots, order, segments, records }
    }
}

fn put_u16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_le_bytes());
}
fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}
fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}
fn put_str16(out: &mut Vec<u8>, s: &str) {
    // Callers check the length limit (<= 4096) first.
    put_u16(out, s.len() as u16);
    out.extend_from_slice(s.as_bytes());
}

fn encode_record(out: &mut Vec<u8>, e: &ManifestEntry) {
    put_str16(out, &e.path);
    out.push(kind_code(e.kind));
    out.push(if e.executable { ENTRY_FLAG_EXECUTABLE } else { 0 } | if e.decoded { ENTRY_FLAG_DECODED } else { 0 });
    put_u64(out, e.size);
    out.extend_from_slice(&e.blake3);
    if let Some(t) = &e.symlink_target {
        put_str16(out, t);
    }
    match &e.source {
        EntrySource::None => out.push(0),
        EntrySource::Unchanged => out.push(1),
        EntrySource::CopyOf { old_path } => {
            out.push(2);
            put_str16(out, old_path);
        }
        EntrySource::Delta { new_offset } => {
            out.push(3);
            put_u64(out, *new_offset);
        }
    }
}

fn check_entry(i: usize, e: &ManifestEntry) -> Result<()> {
    let bad = |why: &str| ManifestError::Encode(format!("entry {i} ({:?}): {why}", e.path));
    check_path(&e.path).map_err(bad)?;
    match (e.kind, &e.symlink_target) {
        (EntryKind::Symlink, Some(t)) => check_symlink_target(t).map_err(bad)?,
        (EntryKind::Symlink, None) => return Err(bad("symlink without a target")),
        (_, Some(_)) => return Err(bad("symlink target on a non-symlink")),
        (_, None) => {}
    }
    if e.decoded && (e.kind != EntryKind::File || coding_of_path(&e.path).is_none()) {
        return Err(bad("stored decoded, but not a file named .gz or .br"));
    }
    match &e.source {
        EntrySource::CopyOf { old_path } => check_path(old_path).map_err(|why| bad(&format!("CopyOf source path: {why}")))?,
        EntrySource::Delta { new_offset } => {
            if new_offset.checked_add(e.size).is_none() {
                return Err(bad("Delta new_offset + size overflows u64"));
            }
        }
        EntrySource::Unchanged | EntrySource::None => {}
    }
    Ok(())
}

impl Manifest {
    /// Encodes the manifest. Entries keep their order; paths must be unique
    /// and valid ([`check_path`]). Deterministic: same manifest, same bytes.
    pub fn encode(&self) -> Result<Vec<u8>> {
        let enc = |m: String| ManifestError::Encode(m);
        let n = u32::try_from(self.entries.len())
            .ok()
            .filter(|&n| n <= MAX_ENTRIES)
            .ok_or_else(|| enc(format!("{} entries, limit is {MAX_ENTRIES}", self.entries.len())))?;
        let s = u32::try_from(self.segments.len())
            .ok()
            .filter(|&s| s <= MAX_SEGMENTS)
            .ok_or_else(|| enc(format!("{} segments, limit is {MAX_SEGMENTS}", self.segments.len())))?;
        if self.to_build.len() > MAX_BUILD_ID_LEN {
            return Err(enc(format!("to_build longer than {MAX_BUILD_ID_LEN} bytes")));
        }
        if let Some(f) = &self.from_build {
            if f.len() > MAX_BUILD_ID_LEN {
                return Err(enc(format!("from_build longer than {MAX_BUILD_ID_LEN} bytes")));
            }
        }
        if self.head_blake3.is_some() && self.kind != ManifestKind::Patch {
            return Err(enc("a head BLAKE3 in a build manifest (patch manifests only)".into()));
        }
        for (i, seg) in self.segments.iter().enumerate() {
            check_segment(seg).map_err(|why| enc(format!("segment {i}: {why}")))?;
        }
        for (i, e) in self.entries.iter().enumerate() {
            check_entry(i, e)?;
        }
        {
            let mut seen = std::collections::HashSet::with_capacity(self.entries.len());
            for e in &self.entries {
                if !seen.insert(e.path.as_str()) {
                    return Err(enc(format!("duplicate path {:?}", e.path)));
                }
            }
        }

        // Records, in entry order, and their offsets in the records region.
        let mut records = Vec::with_capacity(self.entries.len() * 96);
        let mut order = Vec::with_capacity(self.entries.len());
        for e in &self.entries {
            let off = u32::try_from(records.len()).map_err(|_| enc("records region larger than 4 GiB".into()))?;
            order.push(off);
            encode_record(&mut records, e);
        }

        let keys: Vec<&[u8]> = self.entries.iter().map(|e| e.path.as_bytes()).collect();
        let mph = perfect_hash::build(&keys).ok_or_else(|| enc("could not build the perfect hash (no seed worked)".into()))?;
        let b = perfect_hash::bucket_count_for(n);
        let mut slots = vec![0u32; n as usize];
        for (i, &slot) in mph.slots.iter().enumerate() {
            slots[slot as usize] = order[i];
        }

        let ids_len = 2 + self.to_build.len() + self.from_build.as_ref().map_or(0, |f| 2 + f.len()) + self.head_blake3.map_or(0, |h| h.len());
        let layout = Layout::new((HEADER_LEN + ids_len) as u64, n, b, s);
        let total = layout.records + records.len() as u64 + TRAILER_LEN as u64;
        if total > MAX_MANIFEST_LEN {
            return Err(enc(format!("manifest would be {total} bytes, limit is {MAX_MANIFEST_LEN}")));
        }

        let mut out = Vec::with_capacity(total as usize);
        out.extend_from_slice(&MAGIC);
        put_u16(&mut out, FORMAT_VERSION);
        out.push(match self.kind {
            ManifestKind::Build => 1,
            ManifestKind::Patch => 2,
        });
        out.push(if self.from_build.is_some() { FLAG_HAS_FROM_BUILD } else { 0 } | if self.head_blake3.is_some() { FLAG_HAS_HEAD_BLAKE3 } else { 0 });
        put_u32(&mut out, total as u32);
        put_u32(&mut out, n);
        put_u32(&mut out, b);
        put_u32(&mut out, s);
        for off in [layout.pilots, layout.slots, layout.order, layout.segments, layout.records] {
            put_u32(&mut out, off as u32);
        }
        put_u64(&mut out, mph.seed);
        put_u64(&mut out, self.patch_size);
        out.extend_from_slice(&self.patch_blake3);
        debug_assert_eq!(out.len(), HEADER_LEN);
        put_str16(&mut out, &self.to_build);
        if let Some(f) = &self.from_build {
            put_str16(&mut out, f);
        }
        if let Some(h) = &self.head_blake3 {
            out.extend_from_slice(h);
        }
        debug_assert_eq!(out.len() as u64, layout.pilots);
        for p in &mph.pilots {
            put_u32(&mut out, *p);
        }
        for v in &slots {
            put_u32(&mut out, *v);
        }
        for v in &order {
            put_u32(&mut out, *v);
        }
        for seg in &self.segments {
            put_u64(&mut out, seg.patch_offset);
            put_u64(&mut out, seg.patch_len);
            put_u64(&mut out, seg.new_offset);
            put_u64(&mut out, seg.new_len);
        }
        debug_assert_eq!(out.len() as u64, layout.records);
        out.extend_from_slice(&records);
        let sum = blake3::hash(&out);
        out.extend_from_slice(sum.as_bytes());
        debug_assert_eq!(out.len() as u64, total);
        Ok(out)
    }
}
