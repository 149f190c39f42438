//! The side info: what the inverse needs besides the normalized bytes
//! (docs/WASM_TRANSFORM.md §3 gives the layout).

use super::addresses::Piece;
use super::leb::{read_unsigned, write_unsigned};
use super::module::PcTable;
use super::walker::{Coding, FIELDS};
use super::TransformError;

pub(crate) const MAGIC: &[u8; 4] = b"EPWT";
/// Version 1: immediates are function indices and `i32`/`i64` constants.
const VERSION_CONSTANTS: u8 = 1;
/// Version 2: memarg offsets are immediates too (docs/FORMAT.md §2.8.3).
const VERSION_MEMARG_OFFSETS: u8 = 2;
/// Version 2's fields with a byte saying whether memarg offsets are rewritten
/// after the version, and the code section's field-split layout at the end.
pub(super) const VERSION_CODE_LAYOUT: u8 = edgepatch_format::wasm_side_info::VERSION_CODE_LAYOUT;
/// Version 3's fields with one layout byte (0 interleaved, 1 split, 2 split
/// with locals as move-to-front ranks, 3 and 4 as 1 and 2 with alignments coded, 5 to 8 as 1
/// to 4 with data gaps), and
/// element entries as immediates:
/// their exceptions at the end.
pub(super) const VERSION_ELEMENTS: u8 = edgepatch_format::wasm_side_info::VERSION_ELEMENTS;
/// Version 4's fields with a byte of which sections outside the code name functions in the
/// old numbering (bit 0 the element sections, then [`super::index_sections`]' kinds), the
/// element exceptions after it if bit 0 is set.
pub(super) const VERSION_INDEX_SECTIONS: u8 = edgepatch_format::wasm_side_info::VERSION_INDEX_SECTIONS;
/// Version 5's fields with DWARF's code addresses rewritten: bit 4 (line programs) or 5
/// (ranges and locations) of the `sections` byte set, and the code address map and their
/// exceptions at the end.
pub(super) const VERSION_DWARF_ADDRESSES: u8 = edgepatch_format::wasm_side_info::VERSION_DWARF_ADDRESSES;
/// Bit 0 of version 5's `sections` byte: the element sections (version 4's).
const ELEMENTS_BIT: u8 = 1;
/// Every bit version 5's `sections` byte may have.
const SECTION_BITS: u8 = ELEMENTS_BIT | super::index_sections::EXPORTS | super::index_sections::START | super::index_sections::NAMES;
/// Bit 4 of version 6's `sections` byte: the `.debug_line` sections' addresses.
const LINE_ADDRESSES_BIT: u8 = 1 << 4;
/// Bit 5 of version 6's `sections` byte: the `.debug_ranges` and `.debug_loc` sections' addresses.
const RANGE_ADDRESSES_BIT: u8 = 1 << 5;

/// New function indices `[new_start, new_start + len)` are normalized to
/// `[norm_start, norm_start + len)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Run {
    pub new_start: u64,
    pub norm_start: u64,
    pub len: u64,
}

/// The function renumbering, both ways, stored as runs.
#[derive(Debug, Clone)]
pub(crate) struct FunctionMap {
    /// Sorted by `new_start`, contiguous from 0.
    pub runs: Vec<Run>,
    /// Indices into `runs`, sorted by `norm_start`.
    by_norm: Vec<usize>,
}

impl FunctionMap {
    pub fn from_forward(map: &[u64]) -> FunctionMap {
        let mut runs: Vec<Run> = Vec::new();
        for (i, &n) in map.iter().enumerate() {
            match runs.last_mut() {
                Some(r) if r.norm_start + r.len == n => r.len += 1,
                _ => runs.push(Run { new_start: i as u64, norm_start: n, len: 1 }),
            }
        }
        FunctionMap::from_runs(runs).expect("a matching is injective")
    }

    /// Checks that the runs are contiguous in new indices and do not overlap
    /// in normalized ones (so the map is invertible).
    pub fn from_runs(runs: Vec<Run>) -> Result<FunctionMap, &'static str> {
        let mut next = 0u64;
        for r in &runs {
            if r.new_start != next || r.len == 0 || r.norm_start.checked_add(r.len).is_none() {
                return Err("function runs not contiguous");
            }
            next = r.new_start.checked_add(r.len).ok_or("function runs overflow")?;
        }
        let mut by_norm: Vec<usize> = (0..runs.len()).collect();
        by_norm.sort_by_key(|&i| runs[i].norm_start);
        for w in by_norm.windows(2) {
            let (a, b) = (&runs[w[0]], &runs[w[1]]);
            if a.norm_start + a.len > b.norm_start {
                return Err("function runs overlap");
            }
        }
        Ok(FunctionMap { runs, by_norm })
    }

    /// True when every function keeps its number.
    pub fn is_identity(&self) -> bool {
        self.runs.iter().all(|r| r.new_start == r.norm_start)
    }

    pub fn forward(&self, index: u64) -> Option<u64> {
        let i = self.runs.partition_point(|r| r.new_start <= index).checked_sub(1)?;
        let r = &self.runs[i];
        (index < r.new_start + r.len).then(|| r.norm_start + (index - r.new_start))
    }

    pub fn inverse(&self, normalized: u64) -> Option<u64> {
        let i = self.by_norm.partition_point(|&k| self.runs[k].norm_start <= normalized).checked_sub(1)?;
        let r = &self.runs[self.by_norm[i]];
        (normalized < r.norm_start + r.len).then(|| r.new_start + (normalized - r.norm_start))
    }
}

#[derive(Debug, Clone, Default)]
pub(crate) struct SideInfo {
    /// Whether memarg offsets are rewritten immediates (version 2).
    pub memarg_offsets: bool,
    /// Width of the original code section's size field (0: no code section).
    pub code_size_width: u8,
    pub ref_pc: Option<PcTable>,
    pub runs: Vec<Run>,
    /// Ordinals of function bodies kept verbatim.
    pub raw_bodies: Vec<u64>,
    /// (body ordinal, original width) of body size fields whose normalized
    /// value did not fit the original width.
    pub size_widths: Vec<(u64, u8)>,
    /// Ordinals of immediates kept verbatim.
    pub exceptions: Vec<u64>,
    /// The data address map's pieces and the end of the new data.
    pub address_pieces: Vec<Piece>,
    pub address_end: u64,
    /// Ordinals of data words kept verbatim.
    pub data_exceptions: Vec<u64>,
    /// The normalized module's code section is in the field-split layout
    /// (version 3, or 4 with a layout).
    pub code_layout: Option<CodeLayout>,
    /// The element sections' function indices are rewritten (version 4).
    pub elements: bool,
    /// Ordinals of element entries kept verbatim (version 4).
    pub element_exceptions: Vec<u64>,
    /// Which sections outside the code and elements name functions in the old numbering
    /// ([`super::index_sections`]' bits; version 5 when not 0).
    pub index_sections: u8,
    /// DWARF's code addresses are in the old module's code (version 6).
    pub dwarf: Option<DwarfAddresses>,
}

impl DwarfAddresses {
    /// The exceptions of the kind of address a section holds, if that kind is rewritten.
    pub fn exceptions(&self, holds: super::dwarf::Holds) -> Option<&[u64]> {
        [&self.line, &self.ranges][holds.kind()].as_deref()
    }
}

/// How DWARF's code addresses map (side info version 6).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct DwarfAddresses {
    /// The code address map: offsets into the new code section's contents to the old one's.
    pub pieces: Vec<Piece>,
    pub end: u64,
    /// The `.debug_line` sections' addresses are rewritten: the ordinals of those kept verbatim.
    pub line: Option<Vec<u64>>,
    /// The `.debug_ranges` and `.debug_loc` sections' addresses are rewritten: the ordinals of
    /// those kept verbatim.
    pub ranges: Option<Vec<u64>>,
}

/// How a split code section is laid out (docs/FORMAT.md §2.8.7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CodeLayout {
    /// Local indices below 128 as move-to-front ranks, one-byte alignments coded.
    pub coding: Coding,
    /// Each field stream's length.
    pub lens: [u64; FIELDS],
}

impl CodeLayout {
    /// The coding as the side info writes it: bit 0 locals as ranks, bit 1 alignments coded,
    /// bit 2 data gaps.
    fn coding_bits(&self) -> u8 {
        u8::from(self.coding.locals_mtf) | u8::from(self.coding.aligns) << 1 | u8::from(self.coding.gaps) << 2
    }

    /// The coding of [`Self::coding_bits`]' byte, if it is one.
    fn coding_of(bits: u8) -> Option<Coding> {
        (bits <= 7).then_some(Coding { locals_mtf: bits & 1 != 0, aligns: bits & 2 != 0, gaps: bits & 4 != 0 })
    }
}

fn put_ascending(out: &mut Vec<u8>, values: impl ExactSizeIterator<Item = u64>) {
    write_unsigned(out, values.len() as u64);
    let mut prev = 0u64;
    for (i, v) in values.enumerate() {
        write_unsigned(out, if i == 0 { v } else { v - prev - 1 });
        prev = v;
    }
}

impl SideInfo {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        if self.index_sections != 0 || self.dwarf.is_some() {
            out.push(if self.dwarf.is_some() { VERSION_DWARF_ADDRESSES } else { VERSION_INDEX_SECTIONS });
            out.push(u8::from(self.memarg_offsets));
            out.push(self.code_layout.map_or(0, |l| 1 + l.coding_bits()));
        } else if self.elements {
            out.push(VERSION_ELEMENTS);
            out.push(u8::from(self.memarg_offsets));
            out.push(self.code_layout.map_or(0, |l| 1 + l.coding_bits()));
        } else if let Some(layout) = &self.code_layout {
            out.push(VERSION_CODE_LAYOUT);
            out.push(u8::from(self.memarg_offsets));
            out.push(layout.coding_bits());
        } else {
            out.push(if self.memarg_offsets { VERSION_MEMARG_OFFSETS } else { VERSION_CONSTANTS });
        }
        write_unsigned(&mut out, u64::from(self.code_size_width));
        match self.ref_pc {
            None => out.push(0),
            Some(t) => {
                out.push(1);
                write_unsigned(&mut out, u64::from(t.base));
                write_unsigned(&mut out, u64::from(t.first));
            }
        }
        write_unsigned(&mut out, self.runs.len() as u64);
        let mut expected = 0u64;
        for r in &self.runs {
            write_unsigned(&mut out, zigzag(r.norm_start.wrapping_sub(expected) as i64));
            write_unsigned(&mut out, r.len);
            expected = r.norm_start + r.len;
        }
        put_ascending(&mut out, self.raw_bodies.iter().copied());
        put_ascending(&mut out, self.size_widths.iter().map(|w| w.0));
        out.extend(self.size_widths.iter().map(|w| w.1));
        put_ascending(&mut out, self.exceptions.iter().copied());
        put_pieces(&mut out, &self.address_pieces, self.address_end);
        put_ascending(&mut out, self.data_exceptions.iter().copied());
        for &len in self.code_layout.iter().flat_map(|l| l.lens.iter()) {
            write_unsigned(&mut out, len);
        }
        if self.index_sections != 0 || self.dwarf.is_some() {
            let line = if self.dwarf.as_ref().is_some_and(|d| d.line.is_some()) { LINE_ADDRESSES_BIT } else { 0 };
            let ranges = if self.dwarf.as_ref().is_some_and(|d| d.ranges.is_some()) { RANGE_ADDRESSES_BIT } else { 0 };
            out.push(self.index_sections | line | ranges | if self.elements { ELEMENTS_BIT } else { 0 });
        }
        if self.elements {
            put_ascending(&mut out, self.element_exceptions.iter().copied());
        }
        if let Some(dwarf) = &self.dwarf {
            put_pieces(&mut out, &dwarf.pieces, dwarf.end);
            for exceptions in [&dwarf.line, &dwarf.ranges].into_iter().flatten() {
                put_ascending(&mut out, exceptions.iter().copied());
            }
        }
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<SideInfo, TransformError> {
        let mut r = Reader { bytes, pos: 0 };
        if bytes.len() < 5 || &bytes[..4] != MAGIC {
            return Err(r.err("bad magic"));
        }
        r.pos = 5;
        // (memarg offsets, split layout, the split layout's coding)
        let none = Coding::default();
        let (memarg_offsets, split, coding) = match bytes[4] {
            VERSION_CONSTANTS => (false, false, none),
            VERSION_MEMARG_OFFSETS => (true, false, none),
            VERSION_CODE_LAYOUT => {
                let offsets = r.flag("memarg offsets flag not 0 or 1")?;
                let coding = r.byte()?;
                (offsets, true, CodeLayout::coding_of(coding).ok_or_else(|| r.err("locals coding not 0 to 7"))?)
            }
            VERSION_ELEMENTS | VERSION_INDEX_SECTIONS | VERSION_DWARF_ADDRESSES => {
                let offsets = r.flag("memarg offsets flag not 0 or 1")?;
                match r.byte()? {
                    0 => (offsets, false, none),
                    layout @ 1..=8 => (offsets, true, CodeLayout::coding_of(layout - 1).expect("0 to 7")),
                    _ => return Err(r.err("layout not 0 to 8")),
                }
            }
            _ => return Err(TransformError::SideInfo { offset: 4, what: "unsupported version" }),
        };
        let code_size_width = r.varint()?;
        if code_size_width > 5 {
            return Err(r.err("code size width over 5"));
        }
        let ref_pc = match r.byte()? {
            0 => None,
            1 => Some(PcTable { base: r.u32()?, first: r.u32()?, len: u32::MAX }),
            _ => return Err(r.err("bad PC table flag")),
        };
        let count = r.count()?;
        let mut runs = Vec::with_capacity(count);
        let (mut expected, mut new_start) = (0u64, 0u64);
        for _ in 0..count {
            let norm_start = expected.wrapping_add(unzigzag(r.varint()?) as u64);
            let len = r.varint()?;
            let end = norm_start.checked_add(len).ok_or_else(|| r.err("function run overflows"))?;
            runs.push(Run { new_start, norm_start, len });
            new_start = new_start.checked_add(len).ok_or_else(|| r.err("function runs overflow"))?;
            expected = end;
        }
        let raw_bodies = r.ascending()?;
        let positions = r.ascending()?;
        let mut size_widths = Vec::with_capacity(positions.len());
        for p in positions {
            let w = r.byte()?;
            if !(1..=5).contains(&w) {
                return Err(r.err("size field width not in 1..=5"));
            }
            size_widths.push((p, w));
        }
        let exceptions = r.ascending()?;
        let (address_pieces, address_end) = r.pieces()?;
        let data_exceptions = r.ascending()?;
        let code_layout = if split {
            let mut lens = [0u64; FIELDS];
            for len in &mut lens {
                *len = r.varint()?;
            }
            Some(CodeLayout { coding, lens })
        } else {
            None
        };
        let (elements, index_sections, dwarf) = match bytes[4] {
            VERSION_ELEMENTS => (true, 0, 0),
            VERSION_INDEX_SECTIONS => {
                let bits = r.byte()?;
                if bits & !SECTION_BITS != 0 || bits & !ELEMENTS_BIT == 0 {
                    return Err(r.err("sections byte names no section outside the elements, or an unknown one"));
                }
                (bits & ELEMENTS_BIT != 0, bits & !ELEMENTS_BIT, 0)
            }
            VERSION_DWARF_ADDRESSES => {
                let bits = r.byte()?;
                let dwarf = LINE_ADDRESSES_BIT | RANGE_ADDRESSES_BIT;
                if bits & !(SECTION_BITS | dwarf) != 0 || bits & dwarf == 0 {
                    return Err(r.err("version 6 sections byte without DWARF addresses, or with an unknown bit"));
                }
                (bits & ELEMENTS_BIT != 0, bits & SECTION_BITS & !ELEMENTS_BIT, bits & dwarf)
            }
            _ => (false, 0, 0),
        };
        let element_exceptions = if elements { r.ascending()? } else { Vec::new() };
        let dwarf = if dwarf != 0 {
            let (pieces, end) = r.pieces()?;
            let line = if dwarf & LINE_ADDRESSES_BIT != 0 { Some(r.ascending()?) } else { None };
            let ranges = if dwarf & RANGE_ADDRESSES_BIT != 0 { Some(r.ascending()?) } else { None };
            Some(DwarfAddresses { pieces, end, line, ranges })
        } else {
            None
        };
        if r.pos != bytes.len() {
            return Err(r.err("bytes after the end"));
        }
        Ok(SideInfo {
            memarg_offsets,
            code_size_width: code_size_width as u8,
            ref_pc,
            runs,
            raw_bodies,
            size_widths,
            exceptions,
            address_pieces,
            address_end,
            data_exceptions,
            code_layout,
            elements,
            element_exceptions,
            index_sections,
            dwarf,
        })
    }
}

/// An address map: `varint count`, each piece's start as the step from the previous one's and
/// its delta zigzagged, then the end as the step from the last start.
fn put_pieces(out: &mut Vec<u8>, pieces: &[Piece], end: u64) {
    write_unsigned(out, pieces.len() as u64);
    let mut prev = 0u64;
    for p in pieces {
        write_unsigned(out, p.new_start.wrapping_sub(prev));
        write_unsigned(out, zigzag(p.delta));
        prev = p.new_start;
    }
    write_unsigned(out, end.wrapping_sub(prev));
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn err(&self, what: &'static str) -> TransformError {
        TransformError::SideInfo { offset: self.pos, what }
    }

    fn byte(&mut self) -> Result<u8, TransformError> {
        let b = *self.bytes.get(self.pos).ok_or_else(|| self.err("truncated"))?;
        self.pos += 1;
        Ok(b)
    }

    /// A byte that must be 0 (false) or 1 (true).
    fn flag(&mut self, what: &'static str) -> Result<bool, TransformError> {
        match self.byte()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(self.err(what)),
        }
    }

    fn varint(&mut self) -> Result<u64, TransformError> {
        let at = self.pos;
        read_unsigned(self.bytes, &mut self.pos, 64).map_err(|_| TransformError::SideInfo { offset: at, what: "bad varint" })
    }

    fn u32(&mut self) -> Result<u32, TransformError> {
        u32::try_from(self.varint()?).map_err(|_| self.err("value over 32 bits"))
    }

    /// A count of entries that each take at least one byte: never more than
    /// the bytes left, so a hostile count cannot make us allocate.
    fn count(&mut self) -> Result<usize, TransformError> {
        let n = self.varint()?;
        if n > (self.bytes.len() - self.pos) as u64 {
            return Err(self.err("count larger than the side info"));
        }
        Ok(n as usize)
    }

    /// [`put_pieces`]' map.
    fn pieces(&mut self) -> Result<(Vec<Piece>, u64), TransformError> {
        let count = self.count()?;
        let mut pieces = Vec::with_capacity(count);
        let mut prev = 0u64;
        for _ in 0..count {
            let new_start = prev.checked_add(self.varint()?).ok_or_else(|| self.err("address piece overflows"))?;
            pieces.push(Piece { new_start, delta: unzigzag(self.varint()?) });
            prev = new_start;
        }
        let end = prev.checked_add(self.varint()?).ok_or_else(|| self.err("address end overflows"))?;
        Ok((pieces, end))
    }

    fn ascending(&mut self) -> Result<Vec<u64>, TransformError> {
        let n = self.count()?;
        let mut out = Vec::with_capacity(n);
        let mut prev = 0u64;
        for i in 0..n {
            let d = self.varint()?;
            let v = if i == 0 { d } else { prev.checked_add(d).and_then(|v| v.checked_add(1)).ok_or_else(|| self.err("ordinal overflows"))? };
            out.push(v);
            prev = v;
        }
        Ok(out)
    }
}

/// Whether a side info says the modules are in the field-split layout: a fact of the patch
/// format's (its header bytes), defined there once.
pub use edgepatch_format::wasm_side_info::side_info_has_code_layout;

/// Whether `side_info` (encoded) says the module's DWARF line programs' addresses are in the
/// old module's code (version 6, docs/FORMAT.md §2.8.3 "Line addresses").
pub fn side_info_has_dwarf_addresses(side_info: &[u8]) -> bool {
    side_info.get(4) == Some(&VERSION_DWARF_ADDRESSES)
}
