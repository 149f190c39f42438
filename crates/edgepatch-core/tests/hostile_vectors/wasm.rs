//! Hostile wasm transform tables and side info (docs/FORMAT.md §2.8).

use edgepatch_core::error::ErrorKind;
use edgepatch_testkit::leb128;

use super::encoding::*;
use super::{patch_vector, Vector};

/// Appends the vectors of the wasm transform.
pub fn push(v: &mut Vec<Vector>) {
    // The wasm transform table and side info (docs/FORMAT.md §2.8): one delta
    // file of 8 bytes (a bare wasm header, produced by one extra-bytes op).
    {
        // One delta file holding `module` (made by one extra-bytes op when `with_body`).
        let with_module = |module: &[u8], table: &[u8], with_body: bool| {
            let len = module.len() as u64;
            let mut tree = delta_files_tree(&[len]);
            tree.extend_from_slice(table);
            let mut p = PatchBytes::new(&tree);
            p.flags = 2;
            if with_body {
                p.body = ops_segment(len, &control(&[(2, 0, len)]), &[], module);
                (p.segments, p.delta) = (1, len);
            }
            p.encode()
        };
        let transformed = |table: &[u8], with_body: bool| with_module(b"\0asm\x01\0\0\0", table, with_body);
        let row = |size: u64, side_len: u64, side: &[u8]| {
            let mut t = vec![1, 0];
            leb128::write_u64(&mut t, size);
            leb128::write_u64(&mut t, side_len);
            t.extend_from_slice(side);
            t
        };
        // The smallest side info (no renumbering): magic, version 1, then zero for every field.
        let identity_side = b"EPWT\x01\0\0\0\0\0\0\0\0\0";
        v.push(patch_vector(
            "wasm-transform-empty-table",
            "the wasm transform flag with an empty transform table",
            ErrorKind::Corrupt,
            transformed(&[0], true),
        ));
        v.push(patch_vector(
            "wasm-side-info-over-cap",
            "a side info claiming 4 MiB + 1 bytes (above the cap)",
            ErrorKind::Limit,
            transformed(&row(8, (4 << 20) + 1, b"EPWT"), true),
        ));
        v.push(patch_vector(
            "wasm-size-over-cap",
            "a transformed file of 64 MiB + 1 bytes (above the cap the applier holds)",
            ErrorKind::Limit,
            transformed(&row((64 << 20) + 1, identity_side.len() as u64, identity_side), true),
        ));
        v.push(patch_vector("wasm-side-info-garbage", "a side info that is not one (bad magic)", ErrorKind::Corrupt, transformed(&row(8, 4, b"XXXX"), true)));
        let trailing = [&identity_side[..], &[0]].concat();
        v.push(patch_vector(
            "wasm-side-info-trailing-bytes",
            "the smallest side info with a byte after it",
            ErrorKind::Corrupt,
            transformed(&row(8, trailing.len() as u64, &trailing), true),
        ));
        v.push(patch_vector(
            "wasm-inverted-size-mismatch",
            "a valid side info whose module inverts to 8 bytes where the tree says 9",
            ErrorKind::Corrupt,
            transformed(&row(9, identity_side.len() as u64, identity_side), true),
        ));
        // Normalized forms that cost the module a byte or three per record the applier keeps:
        // 12 MiB of them (a few KiB of patch) made it allocate hundreds of MB before the caps
        // of docs/FORMAT.md §2.8.2.
        let bomb = |head: &[u8], section_id: u8, count: usize, record: &[u8], tail: &[u8]| {
            let mut contents = Vec::new();
            if section_id != 0 {
                leb128::write_u64(&mut contents, count as u64);
            }
            for _ in 0..count {
                contents.extend_from_slice(record);
            }
            let mut module = b"\0asm\x01\0\0\0".to_vec();
            module.extend_from_slice(head);
            if section_id == 0 {
                module.extend_from_slice(&contents);
            } else {
                module.push(section_id);
                leb128::write_u64(&mut module, contents.len() as u64);
                module.extend_from_slice(&contents);
            }
            module.extend_from_slice(tail);
            with_module(&module, &row(module.len() as u64, identity_side.len() as u64, identity_side), true)
        };
        v.push(patch_vector(
            "wasm-normalized-many-sections",
            "a 12 MiB normalized form of four million empty custom sections (3 bytes each)",
            ErrorKind::Corrupt,
            bomb(&[], 0, 4 << 20, &[0, 1, 0], &[]),
        ));
        v.push(patch_vector(
            "wasm-normalized-many-imports",
            "a 12 MiB normalized form importing two million functions (6 bytes each)",
            ErrorKind::Corrupt,
            bomb(&[1, 4, 1, 0x60, 0, 0], 2, 2 << 20, &[1, b'a', 1, b'b', 0, 0], &[]),
        ));
        v.push(patch_vector(
            "wasm-normalized-many-bodies",
            "a 12 MiB normalized form whose code section holds twelve million empty bodies (1 byte each)",
            ErrorKind::Corrupt,
            bomb(&[], 10, 12 << 20, &[0], &[]),
        ));
        // Versions 1 to 6 are the only ones (2: memarg offsets are immediates; 3: the split
        // layout; 4: element entries are immediates; 5: exports, start and names too; 6: line
        // and range addresses too).
        let version_7 = b"EPWT\x07\0\0\0\0\0\0\0\0\0";
        v.push(patch_vector(
            "wasm-side-info-version-7",
            "a side info of version 7 (only 1 to 6 exist)",
            ErrorKind::Corrupt,
            transformed(&row(8, version_7.len() as u64, version_7), true),
        ));
        // Version 6: offsets 0, layout 0, zero for every field, the sections byte, then the code
        // address map and the line exceptions (`line`).
        let line_side = |sections: u8, line: &[u8]| [&b"EPWT\x06\0\0"[..], &[0u8; 9], &[sections], line].concat();
        // A `.debug_line` section whose one unit claims 16 bytes where 2 follow; a
        // `.debug_ranges` of 7 bytes; a `.debug_loc` whose one location's expression claims 5
        // bytes where 1 follows.
        let past_unit = [&b"\0asm\x01\0\0\0\x00\x12\x0b.debug_line"[..], &[16, 0, 0, 0, 4, 0]].concat();
        let past_ranges = [&b"\0asm\x01\0\0\0\x00\x15\x0d.debug_ranges"[..], &[1, 0, 0, 0, 2, 0, 0]].concat();
        let past_loc = [&b"\0asm\x01\0\0\0\x00\x16\x0a.debug_loc"[..], &[1, 0, 0, 0, 2, 0, 0, 0, 5, 0, 0x50]].concat();
        let line_vectors: [(&str, &str, &[u8], Vec<u8>); 5] = [
            (
                "wasm-dwarf-sections-byte-no-kind",
                "a version-6 side info whose sections byte names neither kind of DWARF address",
                b"\0asm\x01\0\0\0",
                line_side(2, &[0, 0, 0]),
            ),
            (
                "wasm-line-exception-beyond",
                "a version-6 side info keeping line address 0 in a module without line programs",
                b"\0asm\x01\0\0\0",
                line_side(0x10, &[0, 0, 1, 0]),
            ),
            (
                "wasm-line-unit-past-section",
                "a version-6 side info on a module whose .debug_line unit runs past its section",
                &past_unit,
                line_side(0x10, &[0, 0, 0]),
            ),
            (
                "wasm-ranges-entry-past-section",
                "a version-6 side info on a module whose .debug_ranges ends inside an entry",
                &past_ranges,
                line_side(0x20, &[0, 0, 0]),
            ),
            (
                "wasm-loc-expression-past-section",
                "a version-6 side info on a module whose .debug_loc location expression runs past its section",
                &past_loc,
                line_side(0x20, &[0, 0, 0]),
            ),
        ];
        for (name, what, module, side) in line_vectors {
            v.push(patch_vector(name, what, ErrorKind::Corrupt, with_module(module, &row(module.len() as u64, side.len() as u64, &side), true)));
        }
        // Version 5: offsets 0, layout 0, zero for every field, the sections byte.
        let names_side = |sections: u8| [&b"EPWT\x05\0\0"[..], &[0u8; 9], &[sections]].concat();
        for (name, what, sections) in [
            ("wasm-sections-byte-elements-only", "a version-5 side info whose sections byte names no section besides the elements", 1u8),
            ("wasm-sections-byte-unknown-bit", "a version-5 side info whose sections byte has a bit no section has", 0x12),
        ] {
            let side = [names_side(sections), if sections & 1 != 0 { vec![0] } else { vec![] }].concat();
            v.push(patch_vector(name, what, ErrorKind::Corrupt, transformed(&row(8, side.len() as u64, &side), true)));
        }
        // Exports said renumbered (bit 1), in a module whose export section claims one export
        // and ends inside its name; and a name section (bit 3) whose function names subsection
        // runs past the section.
        let not_in_form: [(&str, &str, &[u8], u8); 2] = [
            (
                "wasm-exports-not-in-form",
                "a version-5 side info renumbering exports in a module whose export section ends inside an export",
                b"\0asm\x01\0\0\0\x07\x02\x01\x05",
                2,
            ),
            (
                "wasm-names-subsection-past-section",
                "a version-5 side info renumbering names in a module whose function names run past the name section",
                b"\0asm\x01\0\0\0\x00\x08\x04name\x01\x09\x01",
                8,
            ),
        ];
        for (name, what, module, sections) in not_in_form {
            let side = names_side(sections);
            v.push(patch_vector(name, what, ErrorKind::Corrupt, with_module(module, &row(module.len() as u64, side.len() as u64, &side), true)));
        }
        // Version 4 (element entries): offsets 0, a layout byte, zero for every field, the
        // element exceptions.
        let elements_side = |layout: u8, element_exceptions: &[u8]| [&b"EPWT\x04\0"[..], &[layout], &[0u8; 9], element_exceptions].concat();
        let bad_layout = elements_side(9, &[0]);
        v.push(patch_vector(
            "wasm-elements-layout-byte",
            "a version-4 side info whose layout byte is 9 (only 0 to 8 exist)",
            ErrorKind::Corrupt,
            transformed(&row(8, bad_layout.len() as u64, &bad_layout), true),
        ));
        let beyond = elements_side(0, &[1, 0]);
        v.push(patch_vector(
            "wasm-elements-exception-beyond",
            "a version-4 side info naming element entry 0 in a module with no element section",
            ErrorKind::Corrupt,
            transformed(&row(8, beyond.len() as u64, &beyond), true),
        ));
        // An element section of expressions (flags 5: `ref.func 0`), not function indices.
        let expressions = b"\0asm\x01\0\0\0\x09\x07\x01\x05\x70\x01\xd2\x00\x0b";
        let plain = elements_side(0, &[0]);
        v.push(patch_vector(
            "wasm-elements-not-indices",
            "a version-4 side info on a module whose element section lists expressions, not function indices",
            ErrorKind::Corrupt,
            with_module(expressions, &row(expressions.len() as u64, plain.len() as u64, &plain), true),
        ));
        // The split layout (§2.8.7): a module whose code section holds `contents`,
        // with a version-3 side info giving the 12 field streams' lengths.
        let split = |contents: &[u8], lens: [u8; 12]| {
            let mut module = b"\0asm\x01\0\0\0\x0a".to_vec();
            module.push(contents.len() as u8);
            module.extend_from_slice(contents);
            // Version 3, offsets 0, locals as they are (0), code size width 1, then zero for every
            // field, then the lengths.
            let mut side = b"EPWT\x03\0\0\x01\0\0\0\0\0\0\0\0".to_vec();
            side.extend_from_slice(&lens);
            with_module(&module, &row(module.len() as u64, side.len() as u64, &side), true)
        };
        let locals_8 = b"EPWT\x03\0\x08\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0";
        v.push(patch_vector(
            "wasm-split-locals-coding",
            "a split-layout side info whose coding byte is 8 (only 0 to 7 exist: bit 0 locals as ranks, bit 1 alignments coded, bit 2 data gaps)",
            ErrorKind::Corrupt,
            transformed(&row(8, locals_8.len() as u64, locals_8), true),
        ));
        let mut other = [0u8; 12];
        other[11] = 2;
        v.push(patch_vector(
            "wasm-split-streams-past-section",
            "a split-layout side info whose field streams are longer than the code section",
            ErrorKind::Corrupt,
            split(&[0x00], other),
        ));
        let mut left_over = [0u8; 12];
        (left_over[0], left_over[11]) = (1, 1);
        v.push(patch_vector(
            "wasm-split-stream-left-over",
            "a split code section with an opcode byte no body uses",
            ErrorKind::Corrupt,
            split(&[0x0b, 0x00], left_over),
        ));
        let mut truncated_body = [0u8; 12];
        (truncated_body[0], truncated_body[11]) = (1, 3);
        v.push(patch_vector(
            "wasm-split-body-past-streams",
            "a split code section whose one body claims more instructions than its streams hold",
            ErrorKind::Corrupt,
            split(&[0x0b, 0x01, 0x05, 0x00], truncated_body),
        ));
        // Data gaps (§2.8.7, coding bit 2): an empty split code section, and a data section
        // whose second segment's gap, 0, restores address 1 (where the first segment ends):
        // one byte, in a field of three.
        let mut gap_module = b"\0asm\x01\0\0\0\x0a\x01\x00".to_vec();
        let segments = b"\x02\x00\x41\x00\x0b\x01a\x00\x41\x80\x80\x00\x0b\x01b";
        gap_module.extend_from_slice(&[0x0b, segments.len() as u8]);
        gap_module.extend_from_slice(segments);
        let mut gap_side = b"EPWT\x03\0\x04\x01\0\0\0\0\0\0\0\0".to_vec();
        gap_side.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        v.push(patch_vector(
            "wasm-data-gap-narrower-address",
            "a split module with data gaps whose segment's gap restores an address narrower than its field",
            ErrorKind::Corrupt,
            with_module(&gap_module, &row(gap_module.len() as u64, gap_side.len() as u64, &gap_side), true),
        ));
        // Version 2 listing immediate 0 as an exception in a module with no code.
        let exception_beyond = b"EPWT\x02\0\0\0\0\0\x01\0\0\0\0";
        v.push(patch_vector(
            "wasm-v2-exception-beyond-module",
            "a version-2 side info naming an immediate the module does not have",
            ErrorKind::Corrupt,
            transformed(&row(8, exception_beyond.len() as u64, exception_beyond), true),
        ));
        // Split references (flags bit 5, §2.8.1): a row naming the old file a renamed module
        // reads split. The old table is checked before the listing, so the empty old build
        // serves: `old_file` is None for no old files, else whether the one is in the reference.
        let naming = |flags: u16, old_file: Option<bool>, side: &[u8], named: u64| {
            let mut tree = delta_files_tree(&[8]);
            if let Some(in_reference) = old_file {
                tree.truncate(tree.len() - 33);
                tree.extend_from_slice(&[1, 0, in_reference as u8]);
                tree.extend_from_slice(&[0u8; 32]);
            }
            if flags & 2 != 0 {
                tree.extend(row(8, side.len() as u64, side));
                leb128::write_u64(&mut tree, named);
            }
            let mut p = PatchBytes::new(&tree);
            p.flags = flags;
            p.encode()
        };
        let split_side = b"EPWT\x03\0\0\x01\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0";
        v.push(patch_vector(
            "wasm-split-reference-without-table",
            "flags bit 5 (split references) in a patch without a wasm transform table",
            ErrorKind::Corrupt,
            naming(32, Some(true), split_side, 1),
        ));
        v.push(patch_vector(
            "wasm-split-reference-beyond-old-table",
            "a row naming old file 0 as read split in a patch whose old table is empty",
            ErrorKind::Corrupt,
            naming(2 | 32, None, split_side, 1),
        ));
        v.push(patch_vector(
            "wasm-split-reference-not-in-reference",
            "a row naming as read split an old file the reference stream does not hold",
            ErrorKind::Corrupt,
            naming(2 | 32, Some(false), split_side, 1),
        ));
        v.push(patch_vector(
            "wasm-split-reference-unsplit-file",
            "a row naming an old file read split for a file not in the field-split layout",
            ErrorKind::Corrupt,
            naming(2 | 32, Some(true), identity_side, 1),
        ));
        v.push(patch_vector(
            "wasm-split-reference-none-named",
            "flags bit 5 set, but no row names an old file",
            ErrorKind::Corrupt,
            naming(2 | 32, Some(true), split_side, 0),
        ));
    }
}
