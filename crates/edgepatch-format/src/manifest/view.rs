//! Reading a manifest (docs/FORMAT.md §4): [`ManifestView`] checks the header and the
//! section bounds in O(1) and then looks up one record at a time; [`decode`] reads and
//! checks everything.

use std::fmt;
use std::ops::Range;

use super::*;
use crate::perfect_hash;

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
    head_blake3: Option<[u8; 32]>,
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
        if flags & !(FLAG_HAS_FROM_BUILD | FLAG_HAS_HEAD_BLAKE3) != 0 {
            return Err(hdr(11, format!("unknown header flags {flags:#04x}")));
        }
        if flags & FLAG_HAS_HEAD_BLAKE3 != 0 && kind != ManifestKind::Patch {
            return Err(hdr(11, "a head BLAKE3 in a build manifest (patch manifests only)".into()));
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
        let head_blake3 = if flags & FLAG_HAS_HEAD_BLAKE3 != 0 {
            let at = ids.pos as u64;
            let raw = ids.take(32, "head_blake3").map_err(|_| truncated_field("head_blake3", at, trailer))?;
            Some(<[u8; 32]>::try_from(raw).expect("32 bytes taken"))
        } else {
            None
        };

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
        Ok(ManifestView { bytes, kind, n, b, s, seed, layout, records_end: trailer, patch_size, patch_blake3, to_build, from_build, head_blake3 })
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
    /// BLAKE3 of the patch's bytes before its first segment (patch manifests that state it).
    pub fn head_blake3(&self) -> Option<[u8; 32]> {
        self.head_blake3
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
        if flags & !(ENTRY_FLAG_EXECUTABLE | ENTRY_FLAG_DECODED) != 0 {
            return Err(r.bad(flags_at, format!("unknown entry flags {flags:#04x}")));
        }
        let decoded = flags & ENTRY_FLAG_DECODED != 0;
        if decoded && (kind != EntryKind::File || coding_of_path(path).is_none()) {
            return Err(r.bad(flags_at, "stored decoded (flags bit 1), but not a file named .gz or .br"));
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
        let e = ManifestEntry { path: path.to_owned(), kind, executable: flags & ENTRY_FLAG_EXECUTABLE != 0, decoded, size, blake3, symlink_target, source };
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
        head_blake3: v.head_blake3,
        segments,
        entries,
    })
}
