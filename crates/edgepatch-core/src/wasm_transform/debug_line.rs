//! The code addresses of DWARF line programs (side info version 6, docs/FORMAT.md §2.8.3
//! "Line addresses"): the `DW_LNE_set_address` operands of a `.debug_line` custom section.
//!
//! A debug build (Emscripten `-g`, Rust without `strip`) carries DWARF whose addresses are
//! offsets into the code section. One function that grows by a byte moves every later
//! function, so every later line sequence's start address changed between builds: on
//! tree-sitter's debug build (a 245 KB `.debug_line`, 20,792 sequences) they were most of the
//! patch. The operands have a fixed width (4 bytes in wasm32), so they are rewritten in place
//! and the section keeps its size and structure.
//!
//! Hand-written rather than through `gimli`: what is needed is where each operand lies in the
//! section, which a line program reader does not expose, and the walk below (a header's
//! opcode table, then opcodes to skip) is all of the format it uses.

use super::addresses::{AddressMap, Piece};
use super::leb::read_unsigned;
use super::module::Section;
use super::TransformError;

/// The custom section's name.
pub(crate) const SECTION_NAME: &[u8] = b".debug_line";

const CUSTOM_SECTION: u8 = 0;
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
                for _ in 0..unit[self.lengths + usize::from(opcode) - 1] {
                    self.at = skip_leb(unit, self.at)?;
                }
            }
            if self.at > self.end {
                return Err((self.at, "line program past its unit"));
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

/// The value the inverse gives for an operand `n` that is not an exception: its image under
/// the code address map's inverse where that is defined and fits 32 bits, else `n`.
pub(crate) fn inverse_value(map: &AddressMap, n: u32) -> u32 {
    map.inverse(u64::from(n)).and_then(|a| u32::try_from(a).ok()).unwrap_or(n)
}

/// The normalized value of address `a`: its image where the inverse gives `a` back from it,
/// else `a` itself where that gives it back, else None (an exception, kept verbatim).
pub(crate) fn forward_value(map: &AddressMap, a: u32) -> Option<u32> {
    let image = map.forward(u64::from(a)).and_then(|n| u32::try_from(n).ok()).filter(|&n| inverse_value(map, n) == a);
    image.or((inverse_value(map, a) == a).then_some(a))
}

/// Each `.debug_line` custom section of a module: (its index, where its contents after the
/// name start).
pub(crate) fn sections<'a>(bytes: &'a [u8], sections: &'a [Section]) -> impl Iterator<Item = (usize, usize)> + 'a {
    sections.iter().enumerate().filter(|(_, section)| bytes[section.start] == CUSTOM_SECTION).filter_map(|(index, section)| {
        super::index_sections::custom_name(bytes, section).filter(|(name, _)| *name == SECTION_NAME).map(|(_, contents)| (index, contents))
    })
}

/// What the forward transform of a new module's `.debug_line` sections (`contents`, each
/// after its name) would do: how many operands change, and the ordinals of those kept
/// verbatim. None if a section does not walk (the module's sections are then left as they
/// are) or if there are more exceptions than `max_exceptions`.
pub(crate) fn plan<'a>(contents: impl Iterator<Item = &'a [u8]>, map: &AddressMap, max_exceptions: usize) -> Option<(u64, Vec<u64>)> {
    let (mut changed, mut exceptions, mut ordinal) = (0u64, Vec::new(), 0u64);
    for section in contents {
        let mut walk = Walk::default();
        while let Some(at) = walk.next(section).ok()? {
            let a = read(section, at);
            match forward_value(map, a) {
                Some(n) => changed += u64::from(n != a),
                None if exceptions.len() < max_exceptions => exceptions.push(ordinal),
                None => return None,
            }
            ordinal += 1;
        }
    }
    Some((changed, exceptions))
}

/// Which way [`rewrite`] maps the operands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Way {
    Forward,
    Inverse,
}

/// Rewrites the operands of one `.debug_line` section's contents (after its name) in place,
/// those whose ordinal (counted from `*ordinal` on, over every such section) is not in
/// `exceptions[*next..]` (ascending), and advances both counters. An error if the section
/// does not walk (`at` is the contents' offset in the module, for the message).
pub(crate) fn rewrite(
    contents: &mut [u8],
    at: usize,
    map: &AddressMap,
    way: Way,
    exceptions: &[u64],
    ordinal: &mut u64,
    next: &mut usize,
) -> Result<(), TransformError> {
    let mut walk = Walk::default();
    while let Some(operand) = walk.next(contents).map_err(|(offset, what)| TransformError::Normalized { offset: at + offset, what })? {
        if exceptions.get(*next) == Some(&*ordinal) {
            *next += 1;
        } else {
            let value = read(contents, operand);
            let mapped = match way {
                Way::Forward => forward_value(map, value).unwrap_or(value),
                Way::Inverse => inverse_value(map, value),
            };
            write(contents, operand, mapped);
        }
        *ordinal += 1;
    }
    Ok(())
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
