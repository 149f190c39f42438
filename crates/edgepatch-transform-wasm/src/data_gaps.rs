//! The split layout's data gaps (docs/FORMAT.md §2.8.7, bit 2 of the coding): each active
//! data segment's `i32.const` address stored as its distance from the end of the segment
//! before it. Go's linker cuts its data into segments wherever zeros run (esbuild: 98,396
//! segments), so one segment that grew moved the address of every later one; as gaps, the
//! segments that did not change have the same bytes in both builds.
//!
//! Length-preserving: a gap is written in the address's own width. The split codes the old
//! module and the new one alike (no side info needed); the join restores the new one.

use super::addresses::data_segment_walk;
use super::leb::{read_signed, write_signed, write_signed_padded};
use super::module::{ParseError, ParseResult, Section};

/// Which way the gaps are taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Way {
    /// Addresses to gaps (a split). An address whose LEB128 is not canonical is left as it is.
    Split,
    /// Gaps to addresses (a join). Every address is restored, and must come out canonical in
    /// its width.
    Join,
}

/// An address field's new bytes: at most 5 (an s32).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Field {
    bytes: [u8; 5],
    len: u8,
}

impl Field {
    fn of(bytes: &[u8]) -> Field {
        let mut field = Field { bytes: [0; 5], len: bytes.len() as u8 };
        field.bytes[..bytes.len()].copy_from_slice(bytes);
        field
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }
}

/// The bytes to put at module offsets (each the width of what it replaces) to take the gaps
/// of data section `section` (of `module`) the `way` given. A section that does not walk has
/// none (as it has no data words, §2.8.3).
pub(crate) fn replacements(module: &[u8], section: &Section, way: Way) -> ParseResult<Vec<(usize, Field)>> {
    let mut out = Vec::new();
    // The end of the last active segment, as an address.
    let mut prev_end = 0u32;
    for segment in data_segment_walk(module, section) {
        let Some(address) = segment.address else { continue };
        let len = (segment.end - segment.start) as u32;
        let mut address = address as u32;
        if let Some((at, width)) = segment.address_field {
            let mut p = at;
            let value = read_signed(module, &mut p, 32).map_err(|_| ParseError { offset: at, what: "a data segment's address does not read" })?;
            // Values of `width` bytes are taken modulo 2^(7 width) (2^32 for 5 bytes), as
            // signed numbers: every gap of a canonical address fits its width, and gives it back.
            let bits = (7 * width as u32).min(32);
            let wrap = |v: i64| (v << (64 - bits)) >> (64 - bits);
            let mut field = Vec::with_capacity(width);
            match way {
                Way::Split => {
                    let mut canonical = Vec::with_capacity(5);
                    write_signed(&mut canonical, value);
                    if canonical.len() == width {
                        let gap = wrap(value - i64::from(prev_end));
                        let fits = write_signed_padded(&mut field, gap, width);
                        debug_assert!(fits, "a gap fits its address's width");
                        out.push((at, Field::of(&field)));
                    }
                }
                Way::Join => {
                    let restored = wrap(value + i64::from(prev_end));
                    write_signed(&mut field, restored);
                    if field.len() != width {
                        return Err(ParseError { offset: at, what: "a data segment's gap gives an address not of its width" });
                    }
                    address = restored as u32;
                    out.push((at, Field::of(&field)));
                }
            }
        }
        prev_end = address.wrapping_add(len);
    }
    Ok(out)
}

/// [`replacements`] put in place in `module` (of `section`, its last data section).
pub(crate) fn in_place(module: &mut [u8], section: &Section, way: Way) -> ParseResult<()> {
    for (at, field) in replacements(module, section, way)? {
        module[at..at + field.bytes().len()].copy_from_slice(field.bytes());
    }
    Ok(())
}

/// Whether the join gives every address of `module`'s data section `section` back: each is
/// canonical, so the split codes them all (and a coded canonical address joins back exactly:
/// it lies in the signed range of its width's bits, which the gap is taken modulo).
pub(crate) fn round_trips(module: &[u8], section: &Section) -> bool {
    let Ok(split) = replacements(module, section, Way::Split) else { return false };
    split.len() == data_segment_walk(module, section).iter().filter(|s| s.address.is_some() && s.address_field.is_some()).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A data section of active segments at these (address, bytes), addresses in the widths given.
    fn section(segments: &[(i64, usize, &[u8])]) -> (Vec<u8>, Section) {
        let mut contents = vec![segments.len() as u8];
        for &(address, width, bytes) in segments {
            contents.extend_from_slice(&[0, 0x41]);
            assert!(write_signed_padded(&mut contents, address, width));
            contents.push(0x0b);
            contents.push(bytes.len() as u8);
            contents.extend_from_slice(bytes);
        }
        let mut module = vec![11, contents.len() as u8];
        module.extend_from_slice(&contents);
        let end = module.len();
        (module, Section { start: 0, contents: 2, end })
    }

    #[test]
    fn gaps_are_distances_from_the_last_segment_and_join_back() {
        let (module, s) = section(&[(0x13f43, 3, b"abc"), (0x13f50, 3, b"de"), (0x100, 2, b"f"), (-1, 1, b"g")]);
        let split = replacements(&module, &s, Way::Split).unwrap();
        let values: Vec<i64> = split.iter().map(|(_, b)| read_signed(b.bytes(), &mut 0, 32).unwrap()).collect();
        // 0x13f43 from 0; 0x13f50 - 0x13f46; 0x100 - 0x13f52 modulo 2^14 (430), as a signed
        // number; -1 (0xffffffff) - 0x101 modulo 2^7 (126), as a signed number.
        assert_eq!(values, vec![0x13f43, 10, 430, -2]);
        assert_eq!(split.iter().map(|(_, b)| b.bytes().len()).collect::<Vec<_>>(), vec![3, 3, 2, 1], "each in its address's width");
        let mut coded = module.clone();
        in_place(&mut coded, &s, Way::Split).unwrap();
        assert_ne!(coded, module);
        in_place(&mut coded, &s, Way::Join).unwrap();
        assert_eq!(coded, module);
        assert!(round_trips(&module, &s));
    }

    #[test]
    fn a_padded_address_is_left_and_keeps_the_join_from_being_chosen() {
        // 5 written in 3 bytes: not canonical, so the split leaves it and the join would not.
        let (module, s) = section(&[(5, 3, b"abc"), (16, 1, b"d")]);
        let split = replacements(&module, &s, Way::Split).unwrap();
        assert_eq!(split.len(), 1, "only the canonical address is coded");
        assert!(!round_trips(&module, &s));
    }

    #[test]
    fn a_gap_that_joins_to_a_narrower_address_is_refused() {
        // A coded gap of 0 after a segment ending at 1 restores address 1, one byte, in 3.
        let (module, s) = section(&[(0, 1, b"a"), (0, 3, b"b")]);
        assert!(replacements(&module, &s, Way::Join).is_err());
    }
}
