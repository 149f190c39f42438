//! What the patch format reads in a transformed file's side info without decoding it
//! (docs/FORMAT.md §2.8.4, §2.8.7): whether the file is in the field-split layout, which
//! decides which old file its delta reads and whether a transform table row may name a
//! split reference. The side info's codec belongs to the wasm transform; these few header
//! bytes are the format's.

/// Side info version 3: the field-split layout, always.
pub const VERSION_CODE_LAYOUT: u8 = 3;
/// Side info version 4: element entries are immediates; byte 6 says the layout.
pub const VERSION_ELEMENTS: u8 = 4;
/// Side info version 5: function keys too; byte 6 says the layout.
pub const VERSION_INDEX_SECTIONS: u8 = 5;
/// Side info version 6: DWARF addresses too; byte 6 says the layout.
pub const VERSION_DWARF_ADDRESSES: u8 = 6;

/// Whether a side info (valid or not) says the normalized module and the old
/// module it is diffed against are in the field-split layout: the applier
/// must then read the old module in that layout. Byte 4 is the version (after
/// the magic `EPWT`); versions 4 to 6 carry the layout at byte 6 (0: none).
pub fn side_info_has_code_layout(side_info: &[u8]) -> bool {
    match side_info.get(4) {
        Some(&VERSION_CODE_LAYOUT) => true,
        Some(&VERSION_ELEMENTS | &VERSION_INDEX_SECTIONS | &VERSION_DWARF_ADDRESSES) => side_info.get(6).is_some_and(|&layout| layout != 0),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_layout_is_read_from_the_version_and_byte_6() {
        assert!(side_info_has_code_layout(b"EPWT\x03\x00"));
        assert!(!side_info_has_code_layout(b"EPWT\x01\x00\x01"));
        assert!(!side_info_has_code_layout(b"EPWT\x02\x00\x01"));
        for v in [4u8, 5, 6] {
            assert!(side_info_has_code_layout(&[b'E', b'P', b'W', b'T', v, 0, 1]));
            assert!(!side_info_has_code_layout(&[b'E', b'P', b'W', b'T', v, 0, 0]));
            assert!(!side_info_has_code_layout(&[b'E', b'P', b'W', b'T', v, 0]));
        }
        assert!(!side_info_has_code_layout(b"EPWT"));
    }
}
