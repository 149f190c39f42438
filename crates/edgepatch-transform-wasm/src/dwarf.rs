//! The code addresses of DWARF (side info version 6, docs/FORMAT.md §2.8.3 "DWARF
//! addresses"): the `DW_LNE_set_address` operands of `.debug_line` custom sections, and the
//! address pairs of `.debug_ranges` and `.debug_loc`.
//!
//! A debug build (Emscripten `-g`, Rust without `strip`) carries DWARF whose addresses are
//! offsets into the code section. One function that grows by a byte moves every later
//! function, so every later line sequence's start address, range and location changed between
//! builds: on tree-sitter's debug build (a 245 KB `.debug_line`, 20,792 sequences) they were
//! most of the patch. Every such address is 4 bytes wide in wasm32, so they are rewritten in
//! place and the sections keep their sizes and structure.
//!
//! Hand-written rather than through `gimli`: what is needed is where each address lies in its
//! section, which a DWARF reader does not expose, and the walks below (a line header's opcode
//! table, then opcodes to skip; pairs and location expressions' lengths) are all of the
//! format they use.

use super::addresses::{AddressMap, Piece};
use super::index_sections;
use super::leb::read_unsigned;
use super::module::Section;
use super::TransformError;

/// The custom sections' names.
pub(crate) const LINE_SECTION: &[u8] = b".debug_line";
pub(crate) const RANGES_SECTION: &[u8] = b".debug_ranges";
pub(crate) const LOC_SECTION: &[u8] = b".debug_loc";

/// `DW_LNE_set_address`, an extended opcode.
const SET_ADDRESS: u8 = 2;
/// `DW_LNS_fixed_advance_pc`: its operand is a 2-byte value, not a LEB128.
const FIXED_ADVANCE_PC: u8 = 9;

#[cfg(test)]
/// Calls `address(at)` for each 4-byte `DW_LNE_set_address` operand of `contents` (a
/// `.debug_line` section's contents after its name), with its offset in `contents`, in
/// order. An error says where the walk failed, unless every unit walks to its end exactly.
pub(crate) fn set_addresses(contents: &[u8], mut address: impl FnMut(usize)) -> Result<(), (usize, &'static str)> {
    let mut walk = Walk::default();
    while let Some(at) = walk.next(contents)? {
        address(at);
    }
    Ok(())
}

/// A walk over a `.debug_line` section's units that stops at each `DW_LNE_set_address`
/// operand, so that its caller may rewrite the operand (and nothing else) between steps.
#[derive(Debug, Default)]
pub(crate) struct Walk {
    /// Where the walk is.
    at: usize,
    /// The end of the current unit (0 before the first).
    end: usize,
    opcode_base: u8,
    /// Where the current unit's standard opcode lengths start.
    lengths: usize,
}

impl Walk {
    /// The offset of the next operand, or None at the section's end.
    pub(crate) fn next(&mut self, contents: &[u8]) -> Result<Option<usize>, (usize, &'static str)> {
        loop {
            if self.at == self.end {
                if self.at == contents.len() {
                    return Ok(None);
                }
                self.unit(contents)?;
                continue;
            }
            let unit = &contents[..self.end];
            let opcode = unit[self.at];
            self.at += 1;
            if opcode == 0 {
                let from = self.at;
                let len = read_unsigned(unit, &mut self.at, 32).map_err(|_| (from, "bad LEB128 in a line program"))? as usize;
                let next = self.at.checked_add(len).filter(|&n| n <= self.end).ok_or((from, "extended line opcode past its unit"))?;
                let operand = self.at + 1;
                let set_address = len == 5 && unit[self.at] == SET_ADDRESS;
                self.at = next;
                if set_address {
                    return Ok(Some(operand));
                }
            } else if opcode >= self.opcode_base {
                // A special opcode: no operands.
            } else if opcode == FIXED_ADVANCE_PC {
                if self.at + 2 > self.end {
                    return Err((self.at, "line opcode operand past its unit"));
                }
                self.at += 2;
            } else {
                // Within the unit: `skip_leb` reads no further.
                for _ in 0..unit[self.lengths + usize::from(opcode) - 1] {
                    self.at = skip_leb(unit, self.at)?;
                }
            }
        }
    }

    /// Reads the header of the unit at `self.at`, leaving the walk at its program.
    fn unit(&mut self, contents: &[u8]) -> Result<(), (usize, &'static str)> {
        let at = self.at;
        let unit_length = u32_at(contents, at)?;
        if unit_length >= 0xffff_fff0 {
            return Err((at, "64-bit DWARF line unit"));
        }
        let end = (at + 4).checked_add(unit_length as usize).filter(|&e| e <= contents.len()).ok_or((at, "line unit past its section"))?;
        let unit = &contents[..end];
        let version = u16::from_le_bytes([byte(unit, at + 4)?, byte(unit, at + 5)?]);
        if !(2..=5).contains(&version) {
            return Err((at + 4, "line unit version not 2 to 5"));
        }
        // Version 5 puts the address and segment selector sizes before the header length.
        let length_at = at + 6 + if version >= 5 { 2 } else { 0 };
        let header_length = u32_at(unit, length_at)? as usize;
        let program = (length_at + 4).checked_add(header_length).filter(|&p| p <= end).ok_or((length_at, "line header past its unit"))?;
        // minimum_instruction_length, [maximum_operations_per_instruction,] default_is_stmt,
        // line_base, line_range, then opcode_base and the standard opcodes' operand counts.
        let base_at = length_at + 4 + if version >= 4 { 5 } else { 4 };
        let opcode_base = byte(&unit[..program], base_at)?;
        if opcode_base == 0 || base_at + usize::from(opcode_base) > program {
            return Err((base_at, "line opcode base 0, or its opcode lengths past the header"));
        }
        *self = Walk { at: program, end, opcode_base, lengths: base_at + 1 };
        Ok(())
    }
}

/// The code address map of a new module against an old one: for each new body (its size
/// field's and its contents' offsets in the code section's contents, and the contents' offset
/// in the old code section of the old body it is matched to, if any), a piece that moves its
/// addresses where the old body's are. An unmatched body keeps the previous body's delta.
/// `end` is the new code section's contents' length. None where nothing moves.
pub(crate) fn code_map(bodies: impl Iterator<Item = (u64, u64, Option<u64>)>, end: u64) -> Option<AddressMap> {
    let mut pieces: Vec<Piece> = Vec::new();
    for (size_field, contents, old) in bodies {
        let Some(old) = old else { continue };
        let delta = old as i64 - contents as i64;
        if pieces.last().is_none_or(|p| p.delta != delta) {
            pieces.push(Piece { new_start: size_field, delta });
        }
    }
    if pieces.iter().all(|p| p.delta == 0) {
        return None;
    }
    // One past the end: a sequence may start where the last body ends.
    AddressMap::from_pieces(pieces, end + 1).ok()
}

/// What an address is: where something starts (a line sequence, a range, a location), or
/// one past where it ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Start,
    End,
}

/// The value the inverse gives for an address `n` that is not an exception: a start's image
/// under the code address map's inverse, an end's the image of `n - 1` plus one, where that
/// is defined and fits 32 bits; else `n`.
pub(crate) fn inverse_value(map: &AddressMap, kind: Kind, n: u32) -> u32 {
    let restored = match kind {
        Kind::Start => map.inverse(u64::from(n)),
        Kind::End => n.checked_sub(1).and_then(|m| map.inverse(u64::from(m))).map(|a| a + 1),
    };
    restored.and_then(|a| u32::try_from(a).ok()).unwrap_or(n)
}

/// The normalized value of address `a`: its image where the inverse gives `a` back from it,
/// else `a` itself where that gives it back, else None (an exception, kept verbatim).
pub(crate) fn forward_value(map: &AddressMap, kind: Kind, a: u32) -> Option<u32> {
    let image = match kind {
        Kind::Start => map.forward(u64::from(a)),
        Kind::End => a.checked_sub(1).and_then(|m| map.forward(u64::from(m))).map(|n| n + 1),
    };
    let image = image.and_then(|n| u32::try_from(n).ok()).filter(|&n| inverse_value(map, kind, n) == a);
    image.or((inverse_value(map, kind, a) == a).then_some(a))
}

/// Which addresses a section holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Holds {
    /// `.debug_line`: line addresses.
    Line,
    /// `.debug_ranges` (false) or `.debug_loc` (true): range addresses.
    Ranges { loc: bool },
}

impl Holds {
    /// Which kind of address: 0 line addresses, 1 range addresses (each numbered on its own).
    pub(crate) fn kind(self) -> usize {
        usize::from(self != Holds::Line)
    }

    /// What a custom section of this name holds.
    pub(crate) fn of(name: &[u8]) -> Option<Holds> {
        match name {
            LINE_SECTION => Some(Holds::Line),
            RANGES_SECTION => Some(Holds::Ranges { loc: false }),
            LOC_SECTION => Some(Holds::Ranges { loc: true }),
            _ => None,
        }
    }
}

/// A walk over a section that holds `holds`, stopping at each of its addresses (a range's two
/// together), so that its caller may rewrite them between steps.
enum Places {
    Line(Walk),
    Ranges(PairWalk),
}

impl Places {
    fn new(holds: Holds) -> Places {
        match holds {
            Holds::Line => Places::Line(Walk::default()),
            Holds::Ranges { loc } => Places::Ranges(PairWalk { at: 0, loc }),
        }
    }

    /// The next address's (or range's two addresses') offset in `contents`; None at its end.
    fn next(&mut self, contents: &[u8]) -> Result<Option<Place>, (usize, &'static str)> {
        Ok(match self {
            Places::Line(walk) => walk.next(contents)?.map(Place::Line),
            Places::Ranges(walk) => walk.next(contents)?.map(Place::Range),
        })
    }
}

/// Where a line address is, or a range's begin (its end follows it).
#[derive(Clone, Copy)]
enum Place {
    Line(usize),
    Range(usize),
}

impl Place {
    /// (offset, kind) of each address of the place.
    fn addresses(self) -> impl Iterator<Item = (usize, Kind)> {
        let (first, second) = match self {
            Place::Line(at) => ((at, Kind::Start), None),
            Place::Range(at) => ((at, Kind::Start), Some((at + 4, Kind::End))),
        };
        std::iter::once(first).chain(second)
    }
}

/// What the forward transform of a new module's sections (`contents`, each after its name,
/// and what it holds) would do: how many addresses change, and the ordinals of those kept
/// verbatim. None if a section does not walk (such sections are then left as they are) or if
/// there are more exceptions than `max_exceptions`.
pub(crate) fn plan<'a>(contents: impl Iterator<Item = (&'a [u8], Holds)>, map: &AddressMap, max_exceptions: usize) -> Option<(u64, Vec<u64>)> {
    let (mut changed, mut exceptions, mut ordinal) = (0u64, Vec::new(), 0u64);
    for (section, holds) in contents {
        let mut places = Places::new(holds);
        while let Some(place) = places.next(section).ok()? {
            for (a, n) in forward_place(section, place, map).into_iter().take(place.addresses().count()) {
                match n {
                    Some(n) => changed += u64::from(n != a),
                    None if exceptions.len() < max_exceptions => exceptions.push(ordinal),
                    None => return None,
                }
                ordinal += 1;
            }
        }
    }
    Some((changed, exceptions))
}

/// Each address of `place` and its normalized value (None: kept verbatim, an exception), in
/// the first one or two slots. A range's two are kept both where their values would read as
/// another kind of entry.
fn forward_place(contents: &[u8], place: Place, map: &AddressMap) -> [(u32, Option<u32>); 2] {
    let mut out = [(0, None); 2];
    for (slot, (at, kind)) in out.iter_mut().zip(place.addresses()) {
        let a = read(contents, at);
        *slot = (a, forward_value(map, kind, a));
    }
    if let Place::Range(_) = place {
        let value = |(a, n): (u32, Option<u32>)| n.unwrap_or(a);
        if changes_kind(value(out[0]), value(out[1])) {
            out = [(out[0].0, None), (out[1].0, None)];
        }
    }
    out
}

/// Whether a range rewritten to `(begin, end)` would read as another kind of entry (the end of
/// a list, or a base address selection), which the writer never writes.
fn changes_kind(begin: u32, end: u32) -> bool {
    (begin == 0 && end == 0) || begin == u32::MAX
}

/// Which way [`rewrite`] maps the addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Way {
    Forward,
    Inverse,
}

/// Rewrites the addresses of one section's contents (after its name) that holds `holds` in
/// place: those whose ordinal (counted from `*ordinal` on, over every section of its kind)
/// is not in `exceptions[*next..]` (ascending), and advances both counters. An error if the
/// section does not walk (`at` is the contents' offset in the module, for the message).
#[allow(clippy::too_many_arguments)]
pub(crate) fn rewrite(
    contents: &mut [u8],
    holds: Holds,
    at: usize,
    map: &AddressMap,
    way: Way,
    exceptions: &[u64],
    ordinal: &mut u64,
    next: &mut usize,
) -> Result<(), TransformError> {
    let mut places = Places::new(holds);
    while let Some(place) = places.next(contents).map_err(|(offset, what)| TransformError::Normalized { offset: at + offset, what })? {
        // The writer's values are decided for the place as a whole (a range's two together).
        let forward = match way {
            Way::Forward => Some(forward_place(contents, place, map)),
            Way::Inverse => None,
        };
        for (k, (address_at, kind)) in place.addresses().enumerate() {
            if exceptions.get(*next) == Some(&*ordinal) {
                *next += 1;
            } else {
                let value = read(contents, address_at);
                let mapped = match forward {
                    Some(values) => values[k].1.unwrap_or(value),
                    None => inverse_value(map, kind, value),
                };
                write(contents, address_at, mapped);
            }
            *ordinal += 1;
        }
    }
    Ok(())
}

/// A walk over a `.debug_ranges` or (`loc`) `.debug_loc` section's entries that stops at each
/// range's or location's pair of addresses.
struct PairWalk {
    at: usize,
    loc: bool,
}

impl PairWalk {
    /// The offset of the next range's begin (its end follows it), or None at the section's end.
    fn next(&mut self, contents: &[u8]) -> Result<Option<usize>, (usize, &'static str)> {
        while self.at < contents.len() {
            let at = self.at;
            if contents.len() - at < 8 {
                return Err((at, "range entry past its section"));
            }
            let (begin, end) = (read(contents, at), read(contents, at + 4));
            self.at += 8;
            if (begin == 0 && end == 0) || begin == u32::MAX {
                // The end of a list, or a base address selection.
                continue;
            }
            if self.loc {
                let len = contents.get(self.at..self.at + 2).ok_or((self.at, "location expression past its section"))?;
                let len = usize::from(u16::from_le_bytes([len[0], len[1]]));
                self.at = (self.at + 2).checked_add(len).filter(|&e| e <= contents.len()).ok_or((self.at, "location expression past its section"))?;
            }
            return Ok(Some(at));
        }
        Ok(None)
    }
}

fn byte(bytes: &[u8], at: usize) -> Result<u8, (usize, &'static str)> {
    bytes.get(at).copied().ok_or((at, "line unit truncated"))
}

fn u32_at(bytes: &[u8], at: usize) -> Result<u32, (usize, &'static str)> {
    let b = bytes.get(at..at + 4).ok_or((at, "line unit truncated"))?;
    Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// Skips one LEB128 (of at most 10 bytes: DWARF's operands are 64-bit at most) whose value
/// nothing here needs.
fn skip_leb(bytes: &[u8], at: usize) -> Result<usize, (usize, &'static str)> {
    for i in 0..10 {
        match bytes.get(at + i) {
            Some(b) if b & 0x80 == 0 => return Ok(at + i + 1),
            Some(_) => {}
            None => return Err((at, "line opcode operand past its unit")),
        }
    }
    Err((at, "line opcode operand over 10 bytes"))
}

/// Reads the 4-byte address at `at`.
pub(crate) fn read(contents: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([contents[at], contents[at + 1], contents[at + 2], contents[at + 3]])
}

/// Writes the 4-byte address at `at`.
pub(crate) fn write(contents: &mut [u8], at: usize, value: u32) {
    contents[at..at + 4].copy_from_slice(&value.to_le_bytes());
}

/// What DWARF section `section` is (`Holds`), and where its contents after its name start.
pub(crate) fn dwarf_holds(bytes: &[u8], section: &Section) -> Option<(Holds, usize)> {
    if bytes[section.start] != 0 {
        return None;
    }
    let (name, contents) = index_sections::custom_name(bytes, section)?;
    Some((Holds::of(name)?, contents))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A version 4 unit: header (opcode base 13), then `program`.
    fn unit(program: &[u8]) -> Vec<u8> {
        let mut header = vec![1, 1, 1, 0xfb, 14, 13, 0, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 1];
        header.extend_from_slice(&[0, 0]); // no include directories, no files
        let mut unit = 4u16.to_le_bytes().to_vec();
        unit.extend_from_slice(&(header.len() as u32).to_le_bytes());
        unit.extend_from_slice(&header);
        unit.extend_from_slice(program);
        let mut out = (unit.len() as u32).to_le_bytes().to_vec();
        out.extend_from_slice(&unit);
        out
    }

    #[test]
    fn finds_each_set_address_operand_and_skips_the_rest() {
        // set_address 0x1234; advance_line -3 (SLEB); copy; fixed_advance_pc 2; special;
        // set_address 0x50; end_sequence.
        let program = [0, 5, 2, 0x34, 0x12, 0, 0, 3, 0x7d, 1, 9, 2, 0, 0x20, 0, 5, 2, 0x50, 0, 0, 0, 0, 1, 1];
        let section = [unit(&program), unit(&program)].concat();
        let mut found = Vec::new();
        set_addresses(&section, |at| found.push(read(&section, at))).unwrap();
        assert_eq!(found, [0x1234, 0x50, 0x1234, 0x50]);
    }

    #[test]
    fn refuses_a_program_that_runs_past_its_unit() {
        let mut section = unit(&[0, 5, 2, 0x34, 0x12, 0, 0]);
        let cut = section.len() - 2;
        section[0] -= 2; // the unit now ends inside the operand
        section.truncate(cut);
        assert!(set_addresses(&section, |_| {}).is_err());
        assert!(set_addresses(&[1, 0, 0], |_| {}).is_err());
        assert!(set_addresses(&unit(&[1, 3]), |_| {}).is_err(), "an operand LEB128 past the end");
    }
}
