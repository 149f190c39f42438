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

use crate::error::ErrorKind;
use crate::perfect_hash;
use std::fmt;
use std::ops::Range;
use thiserror::Error;

/// First 8 bytes of every manifest.
pub const MAGIC: [u8; 8] = *b"EPMANIF\0";
/// The format version this code reads and writes.
pub const FORMAT_VERSION: u16 = 1;
/// Size of the fixed header in bytes.
pub const HEADER_LEN: usize = 96;
/// Size of the BLAKE3 trailer in bytes.
pub const TRAILER_LEN: usize = 32;
/// Longest path, CopyOf source path or symlink target, in bytes of UTF-8: the build's rule.
pub const MAX_PATH_LEN: usize = crate::build::MAX_PATH_LEN;
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
const ENTRY_FLAG_EXECUTABLE: u8 = 1;

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
    crate::build::relative_path_problem(path).map_or(Ok(()), Err)
}

/// The rule every format shares: a target is data, 1..=4096 bytes, no NUL.
fn check_symlink_target(t: &str) -> Result<(), &'static str> {
    crate::build::symlink_target_problem(t).map_or(Ok(()), Err)
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
    out.push(if e.executable { ENTRY_FLAG_EXECUTABLE } else { 0 });
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

        let ids_len = 2 + self.to_build.len() + self.from_build.as_ref().map_or(0, |f| 2 + f.len());
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
        out.push(if self.from_build.is_some() { FLAG_HAS_FROM_BUILD } else { 0 });
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

// ---------------------------------------------------------------- reading

fn le_u16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
fn le_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
fn le_u64(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(x)
}

/// Which record an error is about.
#[derive(Clone, Copy)]
enum RecordRef {
    Index(usize),
    Slot(u32),
}

impl fmt::Display for RecordRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecordRef::Index(i) => write!(f, "record {i}"),
            RecordRef::Slot(s) => write!(f, "record of index slot {s}"),
        }
    }
}

/// Bounds-checked reader over the records region.
struct RecordReader<'a> {
    /// The whole manifest.
    bytes: &'a [u8],
    /// End of the records region (start of the trailer), absolute.
    end: usize,
    /// Current position, absolute.
    pos: usize,
    who: RecordRef,
}

impl<'a> RecordReader<'a> {
    fn take(&mut self, len: usize, field: &str) -> Result<&'a [u8]> {
        match self.pos.checked_add(len) {
            Some(e) if e <= self.end => {
                let s = &self.bytes[self.pos..e];
                self.pos = e;
                Ok(s)
            }
            _ => Err(ManifestError::Truncated { what: format!("{} field {field}", self.who), at: self.pos as u64, end: self.end as u64 }),
        }
    }
    fn u8(&mut self, field: &str) -> Result<u8> {
        Ok(self.take(1, field)?[0])
    }
    fn u64(&mut self, field: &str) -> Result<u64> {
        Ok(le_u64(self.take(8, field)?, 0))
    }
    fn bad(&self, at: usize, reason: impl Into<String>) -> ManifestError {
        invalid(self.who.to_string(), at as u64, reason)
    }
    /// u16 length + UTF-8 bytes, length limited to MAX_PATH_LEN.
    fn str16(&mut self, field: &str) -> Result<&'a str> {
        let at = self.pos;
        let len = le_u16(self.take(2, field)?, 0) as usize;
        if len > MAX_PATH_LEN {
            return Err(self.bad(at, format!("{field} length {len} exceeds {MAX_PATH_LEN}")));
        }
        let raw = self.take(len, field)?;
        std::str::from_utf8(raw).map_err(|_| self.bad(at, format!("{field} is not UTF-8")))
    }
}

/// A manifest read in place from borrowed bytes; see the module docs.
#[derive(Clone, Copy)]
pub struct ManifestView<'a> {
    bytes: &'a [u8],
    kind: ManifestKind,
    n: u32,
    b: u32,
    s: u32,
    seed: u64,
    layout: Layout,
    /// Start of the trailer == end of the records region.
    records_end: u64,
    patch_size: u64,
    patch_blake3: [u8; 32],
    to_build: &'a str,
    from_build: Option<&'a str>,
}

impl fmt::Debug for ManifestView<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ManifestView")
            .field("len_bytes", &self.bytes.len())
            .field("kind", &self.kind)
            .field("entries", &self.n)
            .field("buckets", &self.b)
            .field("segments", &self.s)
            .field("seed", &self.seed)
            .field("to_build", &self.to_build)
            .field("from_build", &self.from_build)
            .finish_non_exhaustive()
    }
}

impl<'a> ManifestView<'a> {
    /// Checks the header and the bounds of every section, in O(1) (the
    /// records, the index contents and the checksum are not read).
    pub fn open(bytes: &'a [u8]) -> Result<Self> {
        let len = bytes.len() as u64;
        if bytes.len() < MAGIC.len() {
            return Err(ManifestError::Truncated { what: "magic".into(), at: 0, end: len });
        }
        if bytes[..8] != MAGIC {
            return Err(ManifestError::BadMagic);
        }
        if bytes.len() < 10 {
            return Err(ManifestError::Truncated { what: "format version".into(), at: 8, end: len });
        }
        let version = le_u16(bytes, 8);
        if version != FORMAT_VERSION {
            return Err(ManifestError::UnsupportedVersion(version));
        }
        if bytes.len() < HEADER_LEN {
            return Err(ManifestError::Truncated { what: "header".into(), at: 0, end: len });
        }
        let hdr = |at: usize, reason: String| invalid("header", at as u64, reason);
        let kind = match bytes[10] {
            1 => ManifestKind::Build,
            2 => ManifestKind::Patch,
            k => return Err(hdr(10, format!("unknown manifest kind {k}"))),
        };
        let flags = bytes[11];
        if flags & !FLAG_HAS_FROM_BUILD != 0 {
            return Err(hdr(11, format!("unknown header flags {flags:#04x}")));
        }
        let declared = u64::from(le_u32(bytes, 12));
        if declared != len {
            return Err(ManifestError::LengthMismatch { declared, actual: len });
        }
        let n = le_u32(bytes, 16);
        let b = le_u32(bytes, 20);
        let s = le_u32(bytes, 24);
        if n > MAX_ENTRIES {
            return Err(hdr(16, format!("entry count {n} exceeds limit {MAX_ENTRIES}")));
        }
        if (n == 0) != (b == 0) || b > n {
            return Err(hdr(20, format!("bucket count {b} invalid for {n} entries (need 1..={n}, or 0 when empty)")));
        }
        if s > MAX_SEGMENTS {
            return Err(hdr(24, format!("segment count {s} exceeds limit {MAX_SEGMENTS}")));
        }
        let seed = le_u64(bytes, 48);
        let patch_size = le_u64(bytes, 56);
        let mut patch_blake3 = [0u8; 32];
        patch_blake3.copy_from_slice(&bytes[64..96]);

        // Build ids.
        let trailer = len.checked_sub(TRAILER_LEN as u64).filter(|&t| t >= HEADER_LEN as u64).ok_or(ManifestError::Truncated {
            what: "trailer".into(),
            at: HEADER_LEN as u64,
            end: len,
        })?;
        let mut ids = RecordReader { bytes, end: trailer as usize, pos: HEADER_LEN, who: RecordRef::Index(0) };
        let id = |r: &mut RecordReader<'a>, field: &str| -> Result<&'a str> {
            let at = r.pos as u64;
            let l = le_u16(r.take(2, field).map_err(|_| truncated_field(field, at, trailer))?, 0) as usize;
            if l > MAX_BUILD_ID_LEN {
                return Err(invalid(field, at, format!("length {l} exceeds {MAX_BUILD_ID_LEN}")));
            }
            let raw = r.take(l, field).map_err(|_| truncated_field(field, at + 2, trailer))?;
            std::str::from_utf8(raw).map_err(|_| invalid(field, at, "not UTF-8"))
        };
        let to_build = id(&mut ids, "to_build")?;
        let from_build = if flags & FLAG_HAS_FROM_BUILD != 0 { Some(id(&mut ids, "from_build")?) } else { None };

        // Sections must sit exactly where the counts put them.
        let layout = Layout::new(ids.pos as u64, n, b, s);
        let stored = [
            ("pilots", 28, layout.pilots),
            ("slots", 32, layout.slots),
            ("order", 36, layout.order),
            ("segments", 40, layout.segments),
            ("records", 44, layout.records),
        ];
        for (name, at, want) in stored {
            let got = u64::from(le_u32(bytes, at));
            if got != want {
                return Err(hdr(at, format!("{name} offset is {got}, the counts put it at {want}")));
            }
        }
        if layout.records > trailer {
            return Err(ManifestError::Truncated {
                what: format!("index and segment tables ({n} entries, {b} buckets, {s} segments)"),
                at: layout.pilots,
                end: trailer,
            });
        }
        let records_len = trailer - layout.records;
        if records_len < u64::from(n) * MIN_RECORD_LEN {
            return Err(ManifestError::Truncated {
                what: format!("records region for {n} entries (at least {MIN_RECORD_LEN} bytes each)"),
                at: layout.records,
                end: trailer,
            });
        }
        if n == 0 && records_len != 0 {
            return Err(invalid("records region", layout.records, "non-empty in a manifest without entries"));
        }
        Ok(ManifestView { bytes, kind, n, b, s, seed, layout, records_end: trailer, patch_size, patch_blake3, to_build, from_build })
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.n as usize
    }
    /// Whether the manifest has no entries.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }
    /// A build manifest or a patch manifest.
    pub fn kind(&self) -> ManifestKind {
        self.kind
    }
    /// The old build's name (patch manifests only).
    pub fn from_build(&self) -> Option<&'a str> {
        self.from_build
    }
    /// The new build's name.
    pub fn to_build(&self) -> &'a str {
        self.to_build
    }
    /// The patch's size in bytes (patch manifests).
    pub fn patch_size(&self) -> u64 {
        self.patch_size
    }
    /// BLAKE3 of the whole patch (patch manifests).
    pub fn patch_blake3(&self) -> [u8; 32] {
        self.patch_blake3
    }
    /// The manifest bytes this view reads.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }
    /// Byte range of the index (header, build ids, pilots and slots): what a
    /// client fetching by HTTP range requests needs before fetching one record.
    pub fn index_range(&self) -> Range<usize> {
        0..self.layout.order as usize
    }
    /// Number of the patch's segments.
    pub fn segment_count(&self) -> usize {
        self.s as usize
    }

    /// Segment `i`, in O(1).
    pub fn segment(&self, i: usize) -> Result<SegmentRef> {
        if i >= self.s as usize {
            return Err(ManifestError::IndexOutOfRange { index: i, len: self.s as usize });
        }
        // In bounds: open() checked segments + 32 * s <= records <= len.
        let at = self.layout.segments as usize + i * SEGMENT_LEN as usize;
        let b = self.bytes;
        let seg = SegmentRef { patch_offset: le_u64(b, at), patch_len: le_u64(b, at + 8), new_offset: le_u64(b, at + 16), new_len: le_u64(b, at + 24) };
        check_segment(&seg).map_err(|why| invalid(format!("segment {i}"), at as u64, why))?;
        Ok(seg)
    }

    /// All segments (the count was checked against the bytes present).
    pub fn segments(&self) -> Result<Vec<SegmentRef>> {
        (0..self.s as usize).map(|i| self.segment(i)).collect()
    }

    /// The entry for `path`, reading one pilot, one slot and one record.
    /// `Ok(None)` if the manifest has no such path.
    pub fn lookup(&self, path: &str) -> Result<Option<ManifestEntry>> {
        let Some(slot) = self.slot_for(path.as_bytes()) else {
            return Ok(None);
        };
        let off = self.table(self.layout.slots, slot);
        let who = RecordRef::Slot(slot);
        // Compare the stored path before decoding the rest of the record.
        let mut r = self.reader(off, who)?;
        let at = r.pos;
        let len = le_u16(r.take(2, "path")?, 0) as usize;
        if len > MAX_PATH_LEN || len == 0 {
            return Err(r.bad(at, format!("path length {len} not in 1..={MAX_PATH_LEN}")));
        }
        if len != path.len() || r.take(len, "path")? != path.as_bytes() {
            return Ok(None);
        }
        let (e, _) = self.record(off, who)?;
        Ok(Some(e))
    }

    /// Entry `i` in manifest order, in O(1).
    pub fn entry_at(&self, i: usize) -> Result<ManifestEntry> {
        if i >= self.n as usize {
            return Err(ManifestError::IndexOutOfRange { index: i, len: self.n as usize });
        }
        let off = self.table(self.layout.order, i as u32);
        Ok(self.record(off, RecordRef::Index(i))?.0)
    }

    /// Iterates over the entries in manifest order.
    pub fn entries(&self) -> impl ExactSizeIterator<Item = Result<ManifestEntry>> + '_ {
        (0..self.len()).map(move |i| self.entry_at(i))
    }

    /// Checks the BLAKE3 trailer (reads every byte; [`decode`] calls this).
    pub fn verify_checksum(&self) -> Result<()> {
        let t = self.records_end as usize;
        let actual = blake3::hash(&self.bytes[..t]);
        let expected = &self.bytes[t..];
        if actual.as_bytes()[..] != *expected {
            return Err(ManifestError::ChecksumMismatch { covered: t as u64, expected: hex(expected), actual: actual.to_hex().to_string() });
        }
        Ok(())
    }

    /// MPH slot for a key, or None for an empty manifest.
    fn slot_for(&self, key: &[u8]) -> Option<u32> {
        if self.n == 0 {
            return None;
        }
        let h = perfect_hash::key_hash(key, self.seed);
        let bucket = perfect_hash::bucket_of(h, self.b);
        let pilot = self.table(self.layout.pilots, bucket);
        Some(perfect_hash::slot_of(h, pilot, self.n))
    }

    /// u32 number `i` of the table at `base`. Callers pass `i` below the
    /// table's count, and open() checked that all tables are in bounds.
    fn table(&self, base: u64, i: u32) -> u32 {
        le_u32(self.bytes, base as usize + 4 * i as usize)
    }

    fn reader(&self, rel: u32, who: RecordRef) -> Result<RecordReader<'a>> {
        let at = self.layout.records + u64::from(rel);
        if at >= self.records_end {
            return Err(invalid(who.to_string(), at, format!("record offset {rel} is outside the records region (ends at byte {})", self.records_end)));
        }
        Ok(RecordReader { bytes: self.bytes, end: self.records_end as usize, pos: at as usize, who })
    }

    /// Decodes the record at `rel` (relative to the records region); returns
    /// it and the absolute offset just past it.
    fn record(&self, rel: u32, who: RecordRef) -> Result<(ManifestEntry, usize)> {
        let mut r = self.reader(rel, who)?;
        let start = r.pos;
        let path = r.str16("path")?;
        check_path(path).map_err(|why| r.bad(start, why))?;
        let kind_at = r.pos;
        let kind = match r.u8("kind")? {
            0 => EntryKind::File,
            1 => EntryKind::Symlink,
            2 => EntryKind::Directory,
            k => return Err(r.bad(kind_at, format!("unknown entry kind {k}"))),
        };
        let flags_at = r.pos;
        let flags = r.u8("flags")?;
        if flags & !ENTRY_FLAG_EXECUTABLE != 0 {
            return Err(r.bad(flags_at, format!("unknown entry flags {flags:#04x}")));
        }
        let size = r.u64("size")?;
        let mut blake3 = [0u8; 32];
        blake3.copy_from_slice(r.take(32, "blake3")?);
        let symlink_target = if kind == EntryKind::Symlink {
            let at = r.pos;
            let t = r.str16("symlink target")?;
            check_symlink_target(t).map_err(|why| r.bad(at, why))?;
            Some(t.to_owned())
        } else {
            None
        };
        let src_at = r.pos;
        let source = match r.u8("source")? {
            0 => EntrySource::None,
            1 => EntrySource::Unchanged,
            2 => {
                let at = r.pos;
                let p = r.str16("CopyOf source path")?;
                check_path(p).map_err(|why| r.bad(at, format!("CopyOf source path: {why}")))?;
                EntrySource::CopyOf { old_path: p.to_owned() }
            }
            3 => {
                let at = r.pos;
                let new_offset = r.u64("Delta offset")?;
                if new_offset.checked_add(size).is_none() {
                    return Err(r.bad(at, "Delta new_offset + size overflows u64"));
                }
                EntrySource::Delta { new_offset }
            }
            t => return Err(r.bad(src_at, format!("unknown source tag {t}"))),
        };
        let e = ManifestEntry { path: path.to_owned(), kind, executable: flags & ENTRY_FLAG_EXECUTABLE != 0, size, blake3, symlink_target, source };
        Ok((e, r.pos))
    }
}

fn truncated_field(field: &str, at: u64, end: u64) -> ManifestError {
    ManifestError::Truncated { what: field.to_owned(), at, end }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Decodes and checks a whole manifest: header, checksum, segments, every
/// record (contiguous, in the order table's order, ending at the trailer) and
/// the index (every entry's path leads to its own record, so paths are unique).
pub fn decode(bytes: &[u8]) -> Result<Manifest> {
    let v = ManifestView::open(bytes)?;
    v.verify_checksum()?;
    let segments = v.segments()?;
    // n <= records_len / MIN_RECORD_LEN was checked by open(): bounded by the bytes present.
    let mut entries = Vec::with_capacity(v.len());
    let mut rel: u64 = 0;
    for i in 0..v.len() {
        let who = RecordRef::Index(i);
        let stored = v.table(v.layout.order, i as u32);
        if u64::from(stored) != rel {
            return Err(invalid(
                format!("order table entry {i}"),
                v.layout.order + 4 * i as u64,
                format!("points at record offset {stored}, but record {i} starts at {rel}"),
            ));
        }
        let (e, end) = v.record(stored, who)?;
        let slot = v.slot_for(e.path.as_bytes()).unwrap_or(0);
        let via_index = v.table(v.layout.slots, slot);
        if via_index != stored {
            return Err(invalid(
                format!("index slot {slot}"),
                v.layout.slots + 4 * u64::from(slot),
                format!("path {:?} of record {i} leads to record offset {via_index}, not {stored}", e.path),
            ));
        }
        rel = end as u64 - v.layout.records;
        entries.push(e);
    }
    if v.layout.records + rel != v.records_end {
        return Err(invalid(
            "records region",
            v.layout.records + rel,
            format!("{} unused bytes after the last record", v.records_end - v.layout.records - rel),
        ));
    }
    Ok(Manifest {
        kind: v.kind,
        from_build: v.from_build.map(str::to_owned),
        to_build: v.to_build.to_owned(),
        patch_size: v.patch_size,
        patch_blake3: v.patch_blake3,
        segments,
        entries,
    })
}
