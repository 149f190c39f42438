//! The wasm transform (src/wasm_transform): exact round trip on real modules
//! (the fixture game's game.wasm, the corpus' wasm when present) and on
//! hand-made modules with non-canonical LEB128s; references to functions that
//! merely moved normalize to the same bytes; hostile input never panics.

mod fixture_builds;
mod wasm_modules;

use edgepatch_core::wasm_transform::{
    forward, forward_with_stats, into_code_layout, inverse as inverse_in_memory, inverse_read, join_code_layout, join_code_layout_hash, reference,
    side_info_has_code_layout, split_code_layout, split_code_layout_in_place, split_code_layout_read, with_code_layout, with_code_layout_as, Normalized,
    TransformError, TransformStats,
};
use edgepatch_core::EntryContent;

fn game_wasm(tar: &str) -> Vec<u8> {
    let build = fixture_builds::load_tar(tar);
    let entry = build.entries.iter().find(|e| e.path == "game.wasm").expect("game.wasm in the fixture");
    match &entry.content {
        EntryContent::File { data, .. } => data.clone(),
        _ => panic!("game.wasm is not a file"),
    }
}

/// The inverse of `normalized`, in memory and read through a callback (an applier's scratch
/// space), which must agree: the same bytes, or both an error.
fn inverse(normalized: &[u8], side_info: &[u8]) -> Result<Vec<u8>, TransformError> {
    let held = inverse_in_memory(normalized, side_info);
    let mut read_out = Vec::new();
    let read = inverse_read(
        normalized.len() as u64,
        &mut |at, buf: &mut [u8]| {
            buf.copy_from_slice(&normalized[at as usize..at as usize + buf.len()]);
            Ok(())
        },
        side_info,
        &mut |piece: &[u8]| {
            read_out.extend_from_slice(piece);
            Ok::<(), TransformError>(())
        },
    );
    match (&held, read) {
        (Ok(bytes), Ok(())) => assert_eq!(*bytes, read_out, "the inverse read gives other bytes"),
        (Err(_), Err(_)) => {}
        (held, read) => panic!("the inverse in memory gives {:?}, read {read:?}", held.as_ref().map(|b| b.len())),
    }
    held
}

/// [`split_code_layout`] of a module read through a callback (an applier's scratch space),
/// which must agree with it: the same bytes, each written once, or both an error.
fn split_read(module: &[u8], side_info: &[u8]) -> Result<Vec<u8>, TransformError> {
    let held = split_code_layout(module, side_info);
    let (mut out, mut written) = (vec![0u8; module.len()], vec![false; module.len()]);
    let read = split_code_layout_read(
        module.len() as u64,
        &mut |at, buf: &mut [u8]| {
            buf.copy_from_slice(&module[at as usize..at as usize + buf.len()]);
            Ok::<(), TransformError>(())
        },
        side_info,
        &mut |at, bytes: &[u8]| {
            let at = at as usize;
            assert!(written[at..at + bytes.len()].iter().all(|w| !w), "bytes at {at} written twice");
            written[at..at + bytes.len()].fill(true);
            out[at..at + bytes.len()].copy_from_slice(bytes);
            Ok(())
        },
    );
    match (&held, read) {
        (Ok(bytes), Ok(())) => {
            assert!(written.iter().all(|&w| w), "every byte written");
            assert_eq!(*bytes, out, "the split read gives other bytes");
        }
        (Err(_), Err(_)) => {}
        (held, read) => panic!("the split in memory gives {:?}, read {read:?}", held.as_ref().map(|b| b.len())),
    }
    held
}

fn uleb(v: u64) -> Vec<u8> {
    uleb_padded(v, 0)
}

/// Unsigned LEB128, padded to `width` bytes when `width` is larger than needed.
fn uleb_padded(mut v: u64, width: usize) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 && out.len() + 1 >= width {
            out.push(b);
            return out;
        }
        out.push(b | 0x80);
    }
}

fn sleb(mut v: i64) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let b = (v as u8) & 0x7f;
        v >>= 7;
        if (v == 0 && b & 0x40 == 0) || (v == -1 && b & 0x40 != 0) {
            out.push(b);
            return out;
        }
        out.push(b | 0x80);
    }
}

fn section(id: u8, contents: &[u8]) -> Vec<u8> {
    let mut out = vec![id];
    out.extend(uleb(contents.len() as u64));
    out.extend_from_slice(contents);
    out
}

fn vec_of(items: &[Vec<u8>]) -> Vec<u8> {
    let mut out = uleb(items.len() as u64);
    for i in items {
        out.extend_from_slice(i);
    }
    out
}

/// A module with function imports `env.<name>`, one `() -> ()` type, and the
/// given bodies (instructions without the final `end`). With `pc_base`, a
/// table and one element segment at that base list every defined function in
/// order, as Go's linker lays them out.
fn module(imports: &[&str], bodies: &[Vec<u8>], pc_base: Option<u32>) -> Vec<u8> {
    let mut out = b"\0asm\x01\0\0\0".to_vec();
    out.extend(section(1, &vec_of(&[vec![0x60, 0, 0]])));
    let import_items: Vec<Vec<u8>> = imports
        .iter()
        .map(|name| {
            let mut i = vec_of(&[]);
            i.clear();
            i.extend(uleb(3));
            i.extend_from_slice(b"env");
            i.extend(uleb(name.len() as u64));
            i.extend_from_slice(name.as_bytes());
            i.extend([0x00, 0x00]);
            i
        })
        .collect();
    out.extend(section(2, &vec_of(&import_items)));
    out.extend(section(3, &vec_of(&vec![vec![0u8]; bodies.len()])));
    if let Some(base) = pc_base {
        let mut table = vec![1u8, 0x70, 0x00];
        table.extend(uleb(u64::from(base) + bodies.len() as u64));
        out.extend(section(4, &table));
        let mut seg = vec![1u8, 0x00, 0x41];
        seg.extend(sleb(i64::from(base)));
        seg.push(0x0b);
        let funcs: Vec<Vec<u8>> = (0..bodies.len()).map(|i| uleb((imports.len() + i) as u64)).collect();
        seg.extend(vec_of(&funcs));
        out.extend(section(9, &seg));
    }
    let code_items: Vec<Vec<u8>> = bodies
        .iter()
        .map(|b| {
            let mut body = vec![0u8]; // no locals
            body.extend_from_slice(b);
            body.push(0x0b);
            let mut item = uleb(body.len() as u64);
            item.extend(body);
            item
        })
        .collect();
    out.extend(section(10, &vec_of(&code_items)));
    out
}

/// (start, contents start, contents size) of the first section `id` of a module.
fn find_section(m: &[u8], id: u8) -> Option<(usize, usize, usize)> {
    let mut pos = 8;
    while pos < m.len() {
        let (mut size, mut shift, mut at) = (0usize, 0, pos + 1);
        loop {
            let b = m[at];
            size |= usize::from(b & 0x7f) << shift;
            shift += 7;
            at += 1;
            if b & 0x80 == 0 {
                break;
            }
        }
        if m[pos] == id {
            return Some((pos, at, size));
        }
        pos = at + size;
    }
    None
}

/// The function bodies of a module's code section (after the body count),
/// for modules whose code section is small (one-byte count).
fn code_bodies(m: &[u8]) -> Vec<u8> {
    let (_, at, size) = find_section(m, 10).expect("no code section");
    m[at + 1..at + size].to_vec()
}

fn call(f: u64) -> Vec<u8> {
    let mut out = vec![0x10];
    out.extend(uleb(f));
    out
}

fn i64_const(v: i64) -> Vec<u8> {
    let mut out = vec![0x42];
    out.extend(sleb(v));
    out.push(0x1a); // drop
    out
}

fn round_trip(old: &[u8], new: &[u8]) {
    let old_norm = forward(None, old).expect("old forward");
    assert_eq!(inverse(&old_norm.bytes, &old_norm.side_info).expect("old inverse"), old, "old side round trip");
    let r = reference(old).expect("reference");
    let new_norm = forward(Some(&r), new).expect("new forward");
    assert_eq!(inverse(&new_norm.bytes, &new_norm.side_info).expect("new inverse"), new, "new side round trip");
    // The field-split layout: a permutation of the bytes, undone by the inverse.
    // Both codings of the locals, and the one the writer picks.
    for split in [with_code_layout_as(&new_norm, false), with_code_layout_as(&new_norm, true), with_code_layout(&new_norm)].into_iter().flatten() {
        assert!(side_info_has_code_layout(&split.side_info) && !side_info_has_code_layout(&new_norm.side_info));
        assert_eq!(split.bytes.len(), new_norm.bytes.len());
        assert_eq!(inverse(&split.bytes, &split.side_info).expect("split inverse"), new, "split layout round trip");
        assert_eq!(split_read(&new_norm.bytes, &split.side_info).expect("split"), split.bytes);
        // In place, the same bytes; joined back a body at a time, the same hash.
        let mut in_place = new_norm.bytes.clone();
        split_code_layout_in_place(&mut in_place, &split.side_info).expect("split in place");
        assert_eq!(in_place, split.bytes, "split in place");
        let joined = join_code_layout(&split.bytes, &split.side_info).expect("join");
        assert_eq!(joined, new_norm.bytes);
        assert_eq!(join_code_layout_hash(&split.bytes, &split.side_info).expect("join hash"), blake3::hash(&joined));
    }
    // The generator's in-place form is the writer's pick.
    if let Ok(split) = with_code_layout(&new_norm) {
        let mut n = new_norm.clone();
        into_code_layout(&mut n, None).expect("into the split layout");
        assert_eq!((&n.bytes, &n.side_info), (&split.bytes, &split.side_info));
    }
}

/// Go's data cut into segments where zeros run (§2.8.7, the coding's data gaps): one function
/// inserted early moves every later segment's address, but as gaps the old and the new data
/// sections end in the same bytes; every split and join gives the module back.
#[test]
fn split_layout_codes_data_segment_addresses_as_gaps() {
    let (old, new) = wasm_modules::go_like_segmented_versions(400, 5);
    round_trip(&old, &new);
    let n = forward(Some(&reference(&old).expect("reference")), &new).expect("forward");
    let split = with_code_layout(&n).expect("split");
    let coding = if split.side_info[4] == 3 { split.side_info[6] } else { split.side_info[6] - 1 };
    assert_ne!(coding & 4, 0, "the writer codes the gaps: coding {coding}");
    let old_split = split_code_layout(&old, &split.side_info).expect("old split");
    let data = |m: &[u8]| {
        let (_, at, size) = find_section(m, 11).expect("a data section");
        m[at..at + size].to_vec()
    };
    let same_end = |a: &[u8], b: &[u8]| a.iter().rev().zip(b.iter().rev()).take_while(|(x, y)| x == y).count();
    let (old_data, new_data) = (data(&old_split), data(&split.bytes));
    assert!(same_end(&old_data, &new_data) * 10 > old_data.len() * 9, "as gaps, the segments after the inserted ones are the old bytes");
    assert!(same_end(&data(&old), &data(&n.bytes)) * 10 < old_data.len(), "as addresses, they all differ");
}

/// A debug build's `.debug_line` (side info version 6): the moved sequences' start addresses
/// normalize to the old ones, and every layout gives the module back.
#[test]
fn line_addresses_normalize_to_the_old_ones_and_round_trip() {
    let (old, new) = wasm_modules::versions_with_debug_line(300, 7);
    round_trip(&old, &new);
    let (n, stats) = forward_with_stats(Some(&reference(&old).unwrap()), &new).unwrap();
    assert_eq!(n.side_info[4], 6, "side info version 6");
    assert!(stats.dwarf_refs > 250, "{stats:?}");
    // The sequences' start addresses (`00 05 02` and 4 bytes, in the made-up line section after
    // the code): the normalized module's are the old module's, but for the 7 inserted
    // functions; the new module's are not.
    let starts = |m: &[u8]| -> std::collections::BTreeSet<u32> {
        let (_, code, size) = find_section(m, 10).unwrap();
        let after = &m[code + size..];
        let line = &after[..after.windows(13).position(|w| w == b".debug_ranges").unwrap()];
        line.windows(7).filter(|w| w[..3] == [0, 5, 2]).map(|w| u32::from_le_bytes([w[3], w[4], w[5], w[6]])).filter(|&a| a != 0).collect()
    };
    let (old_starts, normalized_starts, new_starts) = (starts(&old), starts(&n.bytes), starts(&new));
    assert!(old_starts.len() > 250);
    assert!(normalized_starts.difference(&old_starts).count() <= 7, "{:?}", normalized_starts.difference(&old_starts).collect::<Vec<_>>());
    assert!(new_starts.difference(&old_starts).count() > 250);
}

#[test]
fn game_wasm_round_trips_exactly() {
    let (v1, v2) = (game_wasm("game-v1.tar"), game_wasm("game-v2.tar"));
    // The fixture's game.wasm is a valid module holding one custom section and
    // no code: it must pass through unchanged in structure and round-trip.
    round_trip(&v1, &v2);
    round_trip(&v2, &v1);
}

#[test]
fn corpus_wasm_round_trips_exactly() {
    let pairs = std::path::Path::new("/work/corpus/pairs");
    let mut seen = 0;
    for pair in ["havok-wasm", "esbuild-wasm-adj"] {
        let dir = pairs.join(pair);
        let (Ok(old), Ok(new)) = (std::fs::read(dir.join("old")), std::fs::read(dir.join("new"))) else {
            continue;
        };
        round_trip(&old, &new);
        seen += 1;
    }
    if seen == 0 {
        println!("NOTE: /work/corpus absent, corpus wasm round trip not run (CI has no corpus)");
    }
}

/// The transform's reason to exist: a function inserted at the front shifts
/// every later index, yet the unchanged bodies normalize to the same bytes.
#[test]
fn inserted_function_does_not_change_the_others_normalized_bytes() {
    let imports = ["a", "b"];
    // Defined functions start at index 2; bodies call each other and an import.
    let f = |calls: &[u64], extra: u8| {
        let mut b: Vec<u8> = calls.iter().flat_map(|&c| call(c)).collect();
        b.extend([0x41, extra, 0x1a]); // i32.const extra; drop: makes bodies distinct
        b
    };
    let old_bodies = vec![f(&[3, 4], 1), f(&[4, 0], 2), f(&[2], 3)];
    // New: a new function at defined index 0; everything else moves up by one.
    let new_bodies = vec![f(&[1], 9), f(&[4, 5], 1), f(&[5, 0], 2), f(&[3], 3)];
    let old = module(&imports, &old_bodies, None);
    let new = module(&imports, &new_bodies, None);
    let (old_norm, new_norm, stats) = normalized_both(&old, &new);
    assert_eq!(stats.matched_functions, 5, "{stats:?}");
    // The old module's bodies all appear, in order and verbatim, after the
    // inserted one in the new normalized code section.
    let (old_code, new_code) = (code_bodies(&old_norm.bytes), code_bodies(&new_norm.bytes));
    assert!(new_code.ends_with(&old_code), "unchanged bodies normalize identically");
    // Without the transform the same bytes differ.
    assert!(!code_bodies(&new).ends_with(&code_bodies(&old)), "the test must shift indices");
}

/// `m` with an element section (before its code section) of the given segments,
/// each `(flags, its bytes after the flags)`.
fn with_elements(m: &[u8], segments: &[(u8, Vec<u8>)]) -> Vec<u8> {
    let (code_at, _, _) = find_section(m, 10).expect("no code section");
    let items: Vec<Vec<u8>> = segments.iter().map(|(flags, rest)| [vec![*flags], rest.clone()].concat()).collect();
    [&m[..code_at], &section(9, &vec_of(&items)), &m[code_at..]].concat()
}

/// An active segment at `i32.const 1` (a C++ or Rust function table) listing `functions`.
fn table_segment(functions: &[u64]) -> (u8, Vec<u8>) {
    let indices: Vec<Vec<u8>> = functions.iter().map(|&f| uleb(f)).collect();
    (0, [vec![0x41, 0x01, 0x0b], vec_of(&indices)].concat())
}

/// Function tables (C++ vtables, Rust trait objects) list function indices in
/// the element section: they are renumbered with the functions (side info
/// version 4), passive and declarative segments too, and restored exactly; a
/// section with another form of segment is copied as it is.
#[test]
fn function_tables_are_renumbered_with_their_functions() {
    let f = |calls: &[u64], extra: u8| [calls.iter().flat_map(|&c| call(c)).collect::<Vec<u8>>(), vec![0x41, extra, 0x1a]].concat();
    let old_bodies = vec![f(&[2], 1), f(&[1], 2), f(&[], 3)];
    let new_bodies = vec![f(&[], 9), f(&[3], 1), f(&[2], 2), f(&[], 3)];
    let passive = |functions: &[u64]| (1u8, [vec![0x00], vec_of(&functions.iter().map(|&f| uleb(f)).collect::<Vec<_>>())].concat());
    let old_segments = vec![table_segment(&[3, 1, 2]), passive(&[2, 3])];
    let new_segments = vec![table_segment(&[4, 2, 3]), passive(&[3, 4])];
    let old = with_elements(&module(&["x"], &old_bodies, None), &old_segments);
    let new = with_elements(&module(&["x"], &new_bodies, None), &new_segments);
    let (old_norm, new_norm, _) = normalized_both(&old, &new);
    let elements = |m: &[u8]| {
        let (start, _, size) = find_section(m, 9).expect("element section");
        m[start..start + size].to_vec()
    };
    assert_eq!(elements(&new_norm.bytes), elements(&old_norm.bytes), "the tables normalize to the old ones");
    assert_ne!(elements(&new), elements(&old), "the test must renumber the tables");
    assert_eq!(new_norm.side_info[4], 4, "element entries need side info version 4");
    assert_eq!(forward(None, &new).unwrap().side_info[4], 1, "nothing renumbered: the version it was");

    // A segment of expressions (flags 5: `ref.func` items) is not a form the transform reads:
    // the section is copied, and the side info keeps its earlier version.
    let expressions = (5u8, vec![0x70, 0x01, 0xd2, 0x01, 0x0b]);
    let old = with_elements(&module(&["x"], &old_bodies, None), &[table_segment(&[3, 1, 2]), expressions.clone()]);
    let new = with_elements(&module(&["x"], &new_bodies, None), &[table_segment(&[4, 2, 3]), expressions]);
    round_trip(&old, &new);
    let new_norm = forward(Some(&reference(&old).unwrap()), &new).unwrap();
    assert_eq!(elements(&new_norm.bytes), elements(&new));
    assert_ne!(new_norm.side_info[4], 4);
}

/// Element sections over 4 MiB (docs/FORMAT.md §2.7): the writer keeps them as
/// they are, and the inverse refuses a version-4 side info over them, since it
/// holds the rebuilt sections.
#[test]
fn element_sections_over_4_mib_are_not_rewritten_and_refused_under_version_4() {
    let f = |extra: u8| vec![0x41, extra, 0x1a];
    let big = |first: u64| table_segment(&vec![first; (4 << 20) + 1]);
    let old = with_elements(&module(&["x"], &[f(1), f(2)], None), &[big(1)]);
    let new = with_elements(&module(&["x"], &[f(9), f(1), f(2)], None), &[big(2)]);
    let new_norm = forward(Some(&reference(&old).unwrap()), &new).unwrap();
    assert_ne!(new_norm.side_info[4], 4, "the writer does not rewrite tables over the limit");
    assert_eq!(inverse(&new_norm.bytes, &new_norm.side_info).unwrap(), new);
    // The smallest version-4 side info: offsets 0, layout 0, zero for every field, no element exceptions.
    let version_4 = [&b"EPWT\x04\0\0"[..], &[0u8; 9], &[0]].concat();
    let small = with_elements(&module(&["x"], &[], None), &[table_segment(&[0, 0])]);
    let (code_at, _, _) = find_section(&small, 10).unwrap();
    let without_code = &small[..code_at];
    assert_eq!(inverse(without_code, &version_4).unwrap(), without_code, "a table under the limit is rebuilt");
    let over = with_elements(&module(&["x"], &[], None), &[big(0)]);
    let (code_at, _, _) = find_section(&over, 10).unwrap();
    let err = inverse(&over[..code_at], &version_4).unwrap_err();
    assert!(err.to_string().contains("over 4 MiB"), "{err}");
}

#[test]
fn go_pcs_are_renumbered_with_their_functions() {
    let base = 0x1000u32;
    let pc = |defined: u32, block: i64| (i64::from(base + defined) << 16) | block;
    let old_bodies = vec![[call(1), i64_const(pc(1, 3))].concat(), [i64_const(pc(0, 0)), i64_const(4_921_520)].concat()];
    let new_bodies = vec![i64_const(7), [call(2), i64_const(pc(2, 3))].concat(), [i64_const(pc(1, 0)), i64_const(4_921_520)].concat()];
    let old = module(&["x"], &old_bodies, Some(base));
    let new = module(&["x"], &new_bodies, Some(base));
    let (old_norm, new_norm, stats) = normalized_both(&old, &new);
    assert!(stats.pc_refs >= 2 && stats.function_refs >= 1, "{stats:?}");
    assert!(code_bodies(&new_norm.bytes).ends_with(&code_bodies(&old_norm.bytes)), "renumbered bodies equal the old ones");
    assert!(!code_bodies(&new).ends_with(&code_bodies(&old)), "the test must shift indices and PCs");
}

#[test]
fn non_canonical_lebs_round_trip_exactly() {
    // A padded call index, a padded i64.const, a padded body size and a padded
    // code section size.
    let mut body = vec![0u8, 0x10];
    body.extend(uleb_padded(1, 5));
    body.extend([0x42, 0x80, 0x80, 0x00, 0x1a]); // i64.const 0 in 3 bytes
    body.extend(call(0));
    body.push(0x0b);
    let mut code = uleb(2);
    code.extend(uleb_padded(body.len() as u64, 4));
    code.extend(&body);
    code.extend(uleb(2));
    code.extend([0x00, 0x0b]);
    let mut m = b"\0asm\x01\0\0\0".to_vec();
    m.extend(section(1, &vec_of(&[vec![0x60, 0, 0]])));
    m.extend(section(3, &vec_of(&[vec![0], vec![0]])));
    m.push(10);
    m.extend(uleb_padded(code.len() as u64, 5));
    m.extend(&code);
    round_trip(&m, &m);
    let (n, stats) = forward_with_stats(None, &m).unwrap();
    assert_eq!(stats.exceptions, 2, "the two padded immediates are kept verbatim");
    assert_eq!(inverse(&n.bytes, &n.side_info).unwrap(), m);
}

#[test]
fn unknown_instructions_keep_the_body_raw() {
    let bodies = vec![vec![0xfb, 0x7f, 0x10, 0x00], call(0)];
    let m = module(&[], &bodies, None);
    let (n, stats) = forward_with_stats(None, &m).unwrap();
    assert_eq!(stats.raw_bodies, 1);
    assert_eq!(inverse(&n.bytes, &n.side_info).unwrap(), m);
}

/// A body whose walk fails part way (an unknown instruction after immediates that were
/// renumbered or kept as exceptions) is kept raw: what the walk rewrote and counted before
/// the failure is taken back, so the later bodies' exception ordinals and the counters are
/// those of the walked bodies alone.
#[test]
fn a_body_that_stops_walking_part_way_takes_back_what_it_rewrote() {
    let imports = ["a", "b"];
    let padded_call = |f: u64| {
        let mut b = vec![0x10];
        b.extend(uleb_padded(f, 5));
        b
    };
    let tagged = |tag: u8, mut b: Vec<u8>| {
        b.extend([0x41, tag, 0x1a]);
        b
    };
    let old_bodies = vec![tagged(1, [call(3), padded_call(2)].concat()), tagged(2, [call(2), padded_call(3)].concat())];
    // New: a function inserted at defined index 0 shifts the others up by one. The second body
    // renumbers a call and keeps a padded one before it meets an unknown instruction.
    let broken = [call(4), padded_call(3), vec![0xfb, 0x7f]].concat();
    let new_bodies = vec![tagged(9, call(0)), tagged(1, [call(4), padded_call(3)].concat()), broken, tagged(2, [call(3), padded_call(4)].concat())];
    let old = module(&imports, &old_bodies, None);
    let new = module(&imports, &new_bodies, None);
    let r = reference(&old).unwrap();
    let (n, stats) = forward_with_stats(Some(&r), &new).unwrap();
    assert_eq!(stats.raw_bodies, 1, "{stats:?}");
    // Two walked bodies with a padded call each; the raw body's padded call is not counted.
    assert_eq!(stats.exceptions, 2, "{stats:?}");
    // call 4 and call 3 of the walked bodies (and not the raw body's call 4).
    assert_eq!(stats.function_refs, 2, "{stats:?}");
    assert_eq!(inverse(&n.bytes, &n.side_info).unwrap(), new);
    // The raw body is in the normalized form as it is.
    let raw_body = {
        let mut b = vec![0u8];
        b.extend(&new_bodies[2]);
        b.push(0x0b);
        b
    };
    assert!(code_bodies(&n.bytes).windows(raw_body.len()).any(|w| w == raw_body));
}

/// The split layout puts each field of every body in its own stream: the
/// opcodes of all bodies together, then their local indices, and so on.
#[test]
fn split_layout_groups_each_field_and_round_trips() {
    // Two bodies: local.get 0, i32.const 1000, call f, local.get 1, drop (`module` adds end).
    let body = |f: u8| vec![0x20, 0x00, 0x41, 0xe8, 0x07, 0x10, f, 0x20, 0x01, 0x1a];
    let m = module(&["a"], &[body(0), body(1)], None);
    let n = forward(None, &m).unwrap();
    let split = with_code_layout_as(&n, false).unwrap();
    let all_opcodes = [0x20, 0x41, 0x10, 0x20, 0x1a, 0x0b].repeat(2);
    let at = split.bytes.windows(all_opcodes.len()).position(|w| w == all_opcodes).expect("the opcodes of both bodies in one stream");
    // Then labels (none) and block types (none), the locals of both bodies, ...
    assert_eq!(&split.bytes[at + all_opcodes.len()..][..4], &[0x00, 0x01, 0x00, 0x01], "local indices follow the opcodes");
    assert_eq!(inverse(&split.bytes, &split.side_info).unwrap(), m);
    // As move-to-front ranks, local 0 then local 1 of each body are ranks 0 and 1;
    // the second body starts its list over.
    let ranked = with_code_layout_as(&n, true).unwrap();
    assert_eq!(&ranked.bytes[at + all_opcodes.len()..][..4], &[0x00, 0x01, 0x00, 0x01]);
    // Local 1 used twice: rank 1, then rank 0.
    let twice = module(&[], &[vec![0x20, 0x01, 0x20, 0x01, 0x6a, 0x1a]], None);
    let ranked = with_code_layout_as(&forward(None, &twice).unwrap(), true).unwrap();
    let ops = [0x20, 0x20, 0x6a, 0x1a, 0x0b];
    let at = ranked.bytes.windows(ops.len()).position(|w| w == ops).expect("the opcodes");
    assert_eq!(&ranked.bytes[at + ops.len()..][..2], &[0x01, 0x00]);
    assert_eq!(inverse(&ranked.bytes, &ranked.side_info).unwrap(), twice);
    // A module the walker cannot read has no split layout.
    let unknown = module(&[], &[vec![0xfb, 0x7f, 0x10, 0x00]], None);
    assert!(split_read(&unknown, &split.side_info).is_err());
    // In place, an error leaves the module as it was.
    let mut in_place = unknown.clone();
    assert!(split_code_layout_in_place(&mut in_place, &split.side_info).is_err());
    assert_eq!(in_place, unknown);
    let mut n = forward(None, &unknown).unwrap();
    let before = n.clone();
    assert!(into_code_layout(&mut n, None).is_err());
    assert_eq!((n.bytes, n.side_info), (before.bytes, before.side_info));
}

/// In the split layout a one-byte alignment is stored XOR the last one of the same instruction
/// (docs/FORMAT.md §2.8.7): a load's natural alignment repeated is 0 after its first, another
/// instruction keeps its own last, bit 6 (a memory index follows) is kept, and a longer
/// alignment is copied.
#[test]
fn split_layout_codes_alignments_against_the_last_of_their_instruction() {
    // i32.load align 2 (twice), i64.load align 3, i32.load align 0, i32.load align 2, then
    // i32.load align 0x42 (memory index 0 follows) and i64.load with a two-byte align 3;
    // each on i32.const 0, dropped.
    let load = |op: u8, align: &[u8]| [&[0x41, 0x00, op][..], align, &[0x00, 0x1a]].concat();
    let body = [load(0x28, &[2]), load(0x28, &[2]), load(0x29, &[3]), load(0x28, &[0]), load(0x28, &[2]), load(0x28, &[0x42, 0x00]), load(0x29, &[0x83, 0x00])]
        .concat();
    let m = module(&[], &[body], None);
    let split = with_code_layout_as(&forward(None, &m).unwrap(), false).unwrap();
    // The alignment stream, between the opcodes' stream and the offsets (seven 0s).
    let coded = [2, 0, 3, 2, 2, 0x42 ^ 2, 0x00, 0x83, 0x00];
    let at = split.bytes.windows(coded.len() + 7).position(|w| w[..coded.len()] == coded && w[coded.len()..].iter().all(|&b| b == 0));
    assert!(at.is_some(), "coded alignments {coded:02x?} in {:02x?}", split.bytes);
    assert_eq!(inverse(&split.bytes, &split.side_info).unwrap(), m);
    assert_eq!(split_read(&m, &split.side_info).unwrap(), split.bytes, "the streaming split codes as the whole-module one");
    let mut in_place = m.clone();
    split_code_layout_in_place(&mut in_place, &split.side_info).unwrap();
    assert_eq!(in_place, split.bytes, "the in-place split codes as the whole-module one");
}

#[test]
fn not_wasm_is_an_error() {
    for bad in [&b""[..], b"\0asm", b"\0asm\x02\0\0\0", b"PK\x03\x04 not a module", b"\0asm\x01\0\0\0\x0a\x05\x01"] {
        assert!(matches!(forward(None, bad), Err(TransformError::NotWasm { .. })), "{bad:?}");
    }
}

/// xorshift64*: deterministic mutations without extra crates.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn mutate(rng: &mut Rng, data: &[u8]) -> Vec<u8> {
    let mut m = data.to_vec();
    match rng.below(4) {
        0 => m.truncate(rng.below(m.len().max(1))),
        1 => {
            for _ in 0..1 + rng.below(8) {
                let i = rng.below(m.len().max(1));
                if let Some(b) = m.get_mut(i) {
                    *b ^= 1 << rng.below(8);
                }
            }
        }
        2 => {
            let i = rng.below(m.len().max(1));
            if let Some(b) = m.get_mut(i) {
                *b = [0x00, 0x7f, 0x80, 0xff][rng.below(4)];
            }
        }
        _ => {
            let i = rng.below(m.len().max(1));
            let at = i.min(m.len());
            m.splice(at..at, [0xff, 0xff, 0xff, 0xff, 0x0f]);
        }
    }
    m
}

/// Hostile modules: forward either refuses or round-trips exactly; hostile
/// normalized bytes and side info give an error or some output, never a panic.
#[test]
fn hostile_input_never_panics_and_accepted_input_round_trips() {
    let game = game_wasm("game-v1.tar");
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    // A module with many instruction kinds: calls, Go PCs, blocks, br_table,
    // memory access, locals, f64 constants.
    let bodies: Vec<Vec<u8>> = (0..24u64)
        .map(|i| {
            let mut b = vec![0x02, 0x40, 0x41, 0x01, 0x0e, 0x02, 0x00, 0x00, 0x00, 0x0b];
            b.extend(call(rng.next() % 26));
            b.extend(i64_const((i64::from(0x1000 + (rng.next() % 24) as u32) << 16) | (i as i64)));
            b.extend([0x41, 0x08, 0x29, 0x03, 0x10, 0x1a, 0x44, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0x1a]);
            b
        })
        .collect();
    let mut medium = module(&["a", "b"], &bodies, Some(0x1000));
    // Data with pointers into itself and PCs, so data words are rewritten too.
    let words: Vec<u8> = (0..64u64).flat_map(|i| (if i % 2 == 0 { 4096 + i * 8 } else { (0x1003 << 16) | i }).to_le_bytes()).collect();
    medium.extend(data_section(&[(4096, [noise(7, 600), words].concat()), (8192, noise(8, 300))]));
    let r = reference(&medium).unwrap();
    // A debug build whose line addresses moved (side info version 6).
    let (debug_old, debug_new) = wasm_modules::versions_with_debug_line(60, 3);
    let debug_reference = reference(&debug_old).unwrap();
    let (mut accepted, mut line_addresses) = (0, 0);
    for round in 0..900 {
        let (base, reference): (&[u8], _) = match round % 5 {
            0 => (&game, (round % 2 == 0).then_some(&r)),
            1 => (&debug_new, Some(&debug_reference)),
            _ => (&medium, (round % 2 == 0).then_some(&r)),
        };
        let hostile = mutate(&mut rng, base);
        if let Ok(n) = forward(reference, &hostile) {
            accepted += 1;
            line_addresses += usize::from(n.side_info[4] == 6);
            assert_eq!(inverse(&n.bytes, &n.side_info).expect("inverse of an accepted module"), hostile, "round {round}");
            let bad_bytes = mutate(&mut rng, &n.bytes);
            let _ = inverse(&bad_bytes, &n.side_info);
            let bad_side = mutate(&mut rng, &n.side_info);
            let _ = inverse(&n.bytes, &bad_side);
            if let Ok(split) = with_code_layout_as(&n, round % 3 == 0) {
                assert_eq!(inverse(&split.bytes, &split.side_info).expect("inverse of the split layout"), hostile, "round {round}, split");
                let _ = inverse(&mutate(&mut rng, &split.bytes), &split.side_info);
                let _ = inverse(&split.bytes, &mutate(&mut rng, &split.side_info));
                // In place: the same bytes, or an error that leaves a (hostile) module as it was.
                let mut in_place = n.bytes.clone();
                split_code_layout_in_place(&mut in_place, &split.side_info).expect("split in place");
                assert_eq!(in_place, split.bytes, "round {round}, split in place");
                let odd = mutate(&mut rng, &n.bytes);
                let mut odd_in_place = odd.clone();
                match split_read(&odd, &split.side_info) {
                    Ok(odd_split) => {
                        split_code_layout_in_place(&mut odd_in_place, &split.side_info).expect("splits as split does");
                        assert_eq!(odd_in_place, odd_split, "round {round}, mutated split in place");
                    }
                    Err(_) => {
                        assert!(split_code_layout_in_place(&mut odd_in_place, &split.side_info).is_err());
                        assert_eq!(odd_in_place, odd, "round {round}, a failed split in place changed the module");
                    }
                }
            }
        }
    }
    assert!(accepted > 100, "mutations kept some modules parseable ({accepted})");
    assert!(line_addresses > 20, "mutated debug builds kept their line addresses rewritten ({line_addresses})");
}

/// Pseudo-random bytes: data whose windows are unique.
fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut rng = Rng(seed);
    (0..len).map(|_| rng.next() as u8).collect()
}

fn data_section(segments: &[(u32, Vec<u8>)]) -> Vec<u8> {
    let items: Vec<Vec<u8>> = segments
        .iter()
        .map(|(address, bytes)| {
            let mut s = vec![0x00, 0x41];
            s.extend(sleb(i64::from(*address)));
            s.push(0x0b);
            s.extend(uleb(bytes.len() as u64));
            s.extend_from_slice(bytes);
            s
        })
        .collect();
    section(11, &vec_of(&items))
}

fn i32_const(v: i64) -> Vec<u8> {
    let mut out = vec![0x41];
    out.extend(sleb(v));
    out.push(0x1a);
    out
}

/// Data grows in the middle: the addresses after the insertion, in code and in
/// pointers stored in the data, normalize to the old ones.
#[test]
fn shifted_data_addresses_normalize_to_the_old_ones() {
    let (a, b) = (noise(1, 2048), noise(2, 2048));
    let base = 1024u32;
    let pointer_to_b = |b_at: u32| [noise(3, 12), (b_at + 100).to_le_bytes().to_vec()].concat(); // 4-aligned
    let build = |gap: usize| {
        let b_at = base + 2048 + gap as u32;
        let data = [a.clone(), noise(4, gap), b.clone(), pointer_to_b(b_at)].concat();
        let bodies = vec![[i32_const(i64::from(b_at)), i32_const(i64::from(b_at) + 1500), i32_const(i64::from(base) + 10)].concat()];
        let mut m = module(&[], &bodies, None);
        m.extend(data_section(&[(base, data)]));
        m
    };
    let (old, new) = (build(0), build(256));
    let (old_norm, new_norm, stats) = normalized_both(&old, &new);
    assert!(stats.address_refs >= 2 && stats.data_refs >= 1, "{stats:?}");
    assert_eq!(code_bodies(&new_norm.bytes), code_bodies(&old_norm.bytes), "code addresses normalize");
    assert_ne!(code_bodies(&new), code_bodies(&old), "the test must shift addresses");
    // The stored pointer (the module's last 4 bytes) normalizes to the old one.
    assert_eq!(new_norm.bytes[new_norm.bytes.len() - 4..], old_norm.bytes[old_norm.bytes.len() - 4..]);
    assert_ne!(new[new.len() - 4..], old[old.len() - 4..]);
}

/// `i32.const address; i32.const 0; i32.const len; memory.init segment 0`, as
/// wasm-ld's `__wasm_init_memory` places a passive segment.
fn memory_init(segment: u8, address: i64, len: usize) -> Vec<u8> {
    let mut out = [i32_const(address), i32_const(0), i32_const(len as i64)].concat();
    out.retain(|&b| b != 0x1a); // the three constants stay on the stack for memory.init
    out.extend([0xfc, 0x08, segment, 0x00]);
    out
}

/// A module with shared memory keeps its data in passive segments, placed by
/// `memory.init` at start (Emscripten's and Rust's threaded builds). Data
/// grows in the middle: the constants pointing after the insertion normalize to
/// the old addresses, learned from where the `memory.init`s put the data. A
/// segment placed at two addresses is not used to learn from.
#[test]
fn addresses_into_passive_data_normalize_to_the_old_ones() {
    let (a, b) = (noise(11, 2048), noise(12, 2048));
    let base = 1024u32;
    let build = |gap: usize, init_twice: bool| {
        let b_at = base + 2048 + gap as u32;
        let data = [a.clone(), noise(13, gap), b.clone()].concat();
        let mut init = memory_init(0, i64::from(base), data.len());
        if init_twice {
            init.extend(memory_init(0, i64::from(base) + 65536, data.len()));
        }
        let bodies = vec![init, [i32_const(i64::from(b_at)), i32_const(i64::from(b_at) + 1500), i32_const(i64::from(base) + 10)].concat()];
        let mut m = with_memory(&module(&[], &bodies, None), 2);
        let mut passive = vec![0x01]; // one segment, flags 1 (passive)
        passive.extend([0x01]);
        passive.extend(uleb(data.len() as u64));
        passive.extend_from_slice(&data);
        m.extend(section(11, &passive));
        m
    };
    // The second body: the constants the test looks at (the first holds the placement).
    let second_body = |m: &[u8]| {
        let code = code_bodies(m); // after the count: the first body's size (one byte here), then it
        let first_len = code[0] as usize;
        assert!(first_len < 0x80);
        code[1 + first_len..].to_vec()
    };
    for init_twice in [false, true] {
        let (old, new) = (build(0, init_twice), build(256, init_twice));
        let (old_norm, new_norm, stats) = normalized_both(&old, &new);
        assert_ne!(second_body(&new), second_body(&old), "the test must shift addresses");
        if init_twice {
            assert_eq!(stats.address_pieces, 0, "a segment placed twice teaches nothing: {stats:?}");
            assert_ne!(second_body(&new_norm.bytes), second_body(&old_norm.bytes));
        } else {
            assert!(stats.address_refs >= 2, "{stats:?}");
            assert_eq!(second_body(&new_norm.bytes), second_body(&old_norm.bytes), "code addresses normalize");
        }
    }
}

/// Hostile placements (an upload the Worker's generator reads): a `memory.init`
/// of a segment that does not exist, of an active one, past the segment's end,
/// or at an address that wraps, teaches nothing and breaks nothing: both
/// modules round-trip.
#[test]
fn hostile_memory_inits_are_ignored() {
    let data = noise(21, 4096);
    let build = |inits: &[Vec<u8>], gap: usize| {
        let body = [inits.concat(), i32_const(1024 + 100)].concat();
        let mut m = with_memory(&module(&[], &[body], None), 2);
        let mut passive = vec![0x02, 0x01];
        passive.extend(uleb((data.len() + gap) as u64));
        passive.extend_from_slice(&noise(22, gap));
        passive.extend_from_slice(&data);
        passive.extend([0x00, 0x41, 0x00, 0x0b, 0x01, 0x07]); // an active segment at 0 of one byte
        m.extend(section(11, &passive));
        m
    };
    let hostile = [
        memory_init(7, 1024, 16),      // no segment 7
        memory_init(1, 1024, 1),       // segment 1 is active
        memory_init(0, 1024, 1 << 20), // past the segment's end
        memory_init(0, -9, 64),        // i32 -9: the address 2^32 - 9, which wraps
    ];
    for init in &hostile {
        let (old, new) = (build(std::slice::from_ref(init), 0), build(std::slice::from_ref(init), 64));
        round_trip(&old, &new);
    }
    round_trip(&build(&hostile, 0), &build(&hostile, 64));
}

/// With no reference every function keeps its number and no address moves,
/// and size fields keep their widths, so a module whose immediates are
/// canonical is its own normalized form: an applier reads the old file as is.
#[test]
fn old_side_normalized_form_is_the_module_itself_when_canonical() {
    let m = module(&["a"], &[[call(1), i64_const(5)].concat(), call(0)], Some(0x1000));
    assert_eq!(forward(None, &m).unwrap().bytes, m);
    for pair in ["havok-wasm", "esbuild-wasm-adj"] {
        if let Ok(old) = std::fs::read(std::path::Path::new("/work/corpus/pairs").join(pair).join("old")) {
            assert!(forward(None, &old).unwrap().bytes == old, "{pair}: the old module is its own normalized form");
        }
    }
}

/// `old` and `new` round-trip (see [`round_trip`]); their normalized forms, the old one as
/// its own reference and the new one against it, and the new one's counters.
fn normalized_both(old: &[u8], new: &[u8]) -> (Normalized, Normalized, TransformStats) {
    round_trip(old, new);
    let old_norm = forward(None, old).unwrap();
    let (new_norm, stats) = forward_with_stats(Some(&reference(old).unwrap()), new).unwrap();
    (old_norm, new_norm, stats)
}

/// `m` with a memory section of `pages` 64 KiB pages before its code section.
fn with_memory(m: &[u8], pages: u8) -> Vec<u8> {
    let (code_at, _, _) = find_section(m, 10).expect("no code section");
    [&m[..code_at], &section(5, &[1, 0, pages]), &m[code_at..]].concat()
}

/// Zero-initialized variables lie past the data segments, below the memory's
/// initial size, and move with the data's end: constants pointing there
/// normalize to the old ones when the old code has them, while a constant in
/// that range that is the same in both builds (not an address that moved)
/// stays as it is.
#[test]
fn variables_past_the_data_move_with_its_end() {
    let (a, b) = (noise(5, 2048), noise(6, 2048));
    let base = 1024u32;
    let same = 100_000i64; // in the tail of a 2-page memory, equal in both builds
    let build = |gap: usize| {
        let data = [a.clone(), noise(7, gap), b.clone()].concat();
        let data_end = i64::from(base) + data.len() as i64;
        let vars = [data_end + 64, data_end + 512, data_end + 4000];
        let bodies = vec![
            [i32_const(vars[0]), i64_const(vars[1]), i32_const(same)].concat(),
            [i32_const(vars[2]), i32_const(vars[0])].concat(),
            [i64_const(vars[1]), i32_const(i64::from(base) + 10)].concat(),
        ];
        let mut m = with_memory(&module(&[], &bodies, None), 2);
        m.extend(data_section(&[(base, data)]));
        m
    };
    let (old, new) = (build(0), build(256));
    let (old_norm, new_norm, _) = normalized_both(&old, &new);
    assert_ne!(code_bodies(&new), code_bodies(&old), "the test must move the variables");
    assert_eq!(code_bodies(&new_norm.bytes), code_bodies(&old_norm.bytes), "the variables' addresses normalize, the equal constant stays");
}

/// Zero-initialized variables laid out anew: past the data, one group moves
/// with the data's end and another by a displacement of its own (a toolchain
/// placed a variable before it, or reordered them). Bodies that kept their
/// shape pair their constants with the old ones, which gives the second group
/// a piece of its own, so that a changed body pointing at both groups
/// normalizes to the old addresses.
#[test]
fn variables_laid_out_anew_past_the_data_normalize_where_unchanged_bodies_place_them() {
    let (a, b) = (noise(13, 2048), noise(14, 2048));
    let base = 1024u32;
    // One build: its data grows by `gap`, its second group of variables lies `second` past its
    // data, and its changed body ends with a `nop` if `edited`.
    let build = |gap: usize, second: i64, edited: bool| {
        let data = [a.clone(), noise(15, gap), b.clone()].concat();
        let data_end = i64::from(base) + data.len() as i64;
        let first_group = |k: i64| data_end + 64 + 16 * k;
        let second_group = |k: i64| data_end + second + 16 * k;
        let mut bodies: Vec<Vec<u8>> = (0..12).map(|k| [i32_const(k), i32_const(first_group(k)), i32_const(second_group(k))].concat()).collect();
        let mut changed = [i32_const(second_group(3)), i32_const(first_group(5)), i32_const(second_group(11))].concat();
        if edited {
            changed.push(0x01);
        }
        bodies.push(changed);
        let mut m = with_memory(&module(&[], &bodies, None), 4);
        m.extend(data_section(&[(base, data)]));
        m
    };
    let (old, new) = (build(0, 8192, false), build(256, 4096, true));
    round_trip(&old, &new);
    let new_norm = forward(Some(&reference(&old).unwrap()), &new).unwrap();
    assert_ne!(code_bodies(&new), code_bodies(&build(0, 8192, true)), "the test must move the variables");
    assert_eq!(code_bodies(&new_norm.bytes), code_bodies(&build(0, 8192, true)), "both groups normalize to the old addresses, in the changed body too");
}

/// A number that falls in the data's range without being an address (a
/// character code, a mask): where the new data grew, it would get a fresh
/// address like the grown bytes, but it is a constant of the old code as it
/// is, so the writer keeps it (an exception) and it stays equal to the old
/// one, while an address into data that moved still normalizes.
#[test]
fn a_number_where_the_data_grew_stays_as_it_is() {
    let (a, b) = (noise(16, 2048), noise(17, 2048));
    let base = 1024u32;
    let number = i64::from(base) + 2048 + 100; // in the old `b`, and in the new grown bytes
    let build = |gap: usize| {
        let data = [a.clone(), noise(18, gap), b.clone()].concat();
        let b_at = i64::from(base) + 2048 + gap as i64;
        let bodies = vec![[i32_const(number), i32_const(b_at + 8)].concat(), [i32_const(b_at + 1000), i32_const(number)].concat()];
        let mut m = module(&[], &bodies, None);
        m.extend(data_section(&[(base, data)]));
        m
    };
    let (old, new) = (build(0), build(4096));
    let (old_norm, new_norm, stats) = normalized_both(&old, &new);
    assert_ne!(code_bodies(&new), code_bodies(&old), "the test must move the addresses");
    assert_eq!(code_bodies(&new_norm.bytes), code_bodies(&old_norm.bytes), "the number stays, the addresses normalize");
    assert_eq!(stats.exceptions, 2, "the number is kept as an exception where it occurs: {stats:?}");
}

/// `i32.const 0; i32.load offset=ADDR; drop`: LLVM (Rust, C) folds a constant
/// address into the memarg offset of a load or store.
fn load_at(address: u64) -> Vec<u8> {
    let mut out = vec![0x41, 0x00, 0x28, 0x02];
    out.extend(uleb(address));
    out.push(0x1a);
    out
}

/// Addresses folded into memarg offsets move with the data like constants do:
/// they normalize to the old ones (side info version 2), while a small offset
/// (a field of a struct, below the data) stays; a pair whose offsets do not
/// move keeps side info version 1.
#[test]
fn memarg_offsets_into_the_data_normalize_to_the_old_ones() {
    let (a, b) = (noise(8, 2048), noise(9, 2048));
    let base = 1024u32;
    let build = |gap: usize| {
        let b_at = u64::from(base) + 2048 + gap as u64;
        let data = [a.clone(), noise(10, gap), b.clone()].concat();
        let bodies = vec![[load_at(b_at + 8), load_at(12)].concat(), [load_at(b_at + 1000), load_at(u64::from(base) + 16)].concat()];
        let mut m = module(&[], &bodies, None);
        m.extend(data_section(&[(base, data)]));
        m
    };
    let (old, new) = (build(0), build(256));
    let (old_norm, new_norm, stats) = normalized_both(&old, &new);
    assert_ne!(code_bodies(&new), code_bodies(&old), "the test must move the addresses");
    assert_eq!(stats.offset_refs, 2, "{stats:?}");
    assert_eq!(code_bodies(&new_norm.bytes), code_bodies(&old_norm.bytes), "folded addresses normalize");
    assert_eq!(new_norm.side_info[4], 2, "side info version 2 when offsets are rewritten");
    let unmoved = forward(Some(&reference(&old).unwrap()), &build(0)).unwrap();
    assert_eq!(unmoved.side_info[4], 1, "version 1 when no offset moves");
}

/// A table of 16-byte entries whose order changed (5 bytes of each in a
/// segment of its own, zeros between, as LLVM splits Rust's statics): no
/// 16-byte window anchors them, so the map learned from the data alone
/// leaves every entry where it was. Bodies that kept their shape pair their
/// constants with the old ones, which places each entry exactly, and the
/// addresses of the reordered entries normalize to the old ones.
#[test]
fn addresses_into_reordered_entries_normalize_to_the_old_ones() {
    let (a, b) = (noise(11, 2048), noise(12, 2048));
    let base = 1024u32;
    let entries: Vec<Vec<u8>> = (0..32).map(|k| noise(100 + k, 5)).collect();
    let table_at = u64::from(base) + 2048;
    let build = |order: &[usize]| {
        // slot[k]: where entry k lies in this build
        let mut slot = vec![0u64; order.len()];
        let mut segments = vec![(base, a.clone())];
        for (position, &k) in order.iter().enumerate() {
            slot[k] = table_at + 16 * position as u64;
            segments.push((slot[k] as u32, entries[k].clone()));
        }
        segments.push(((table_at + 16 * order.len() as u64) as u32, b.clone()));
        // Body k: a constant of its own (below the data: its shape) and the
        // address of entry k.
        let bodies: Vec<Vec<u8>> = (0..order.len()).map(|k| [i32_const(k as i64), i32_const(slot[k] as i64)].concat()).collect();
        let mut m = module(&[], &bodies, None);
        m.extend(data_section(&segments));
        m
    };
    let in_order: Vec<usize> = (0..32).collect();
    let reordered: Vec<usize> = (0..32).map(|p| (p * 7 + 3) % 32).collect();
    let (old, new) = (build(&in_order), build(&reordered));
    let (old_norm, new_norm, stats) = normalized_both(&old, &new);
    assert_ne!(code_bodies(&new), code_bodies(&old), "the test must move the entries");
    assert_eq!(code_bodies(&new_norm.bytes), code_bodies(&old_norm.bytes), "the entries' addresses normalize: {stats:?}");
    assert_eq!(stats.exceptions, 0, "{stats:?}");
}
