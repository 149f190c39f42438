//! The wasm transform (src/wasm_transform): exact round trip on real modules
//! (the fixture game's game.wasm, the corpus' wasm when present) and on
//! hand-made modules with non-canonical LEB128s; references to functions that
//! merely moved normalize to the same bytes; hostile input never panics.

#[path = "wasm_transform/data.rs"]
mod data;
mod fixture_builds;
#[path = "wasm_transform/hostile.rs"]
mod hostile;
mod wasm_modules;

use edgepatch_core::wasm_transform::{
    forward, forward_with_stats, into_code_layout, inverse as inverse_in_memory, inverse_read, join_code_layout, join_code_layout_hash, reference,
    side_info_has_code_layout, split_code_layout, split_code_layout_in_place, split_code_layout_read, with_code_layout, with_code_layout_as, Normalized,
    TransformError, TransformStats,
};
use edgepatch_core::EntryContent;
use edgepatch_testkit::wasm::{self, id, section, vector, WasmModuleBuilder};
use edgepatch_testkit::{corpus, leb128, Rng};

/// The corpus' wasm pairs these tests take when the corpus is present.
const CORPUS_WASM: [&str; 2] = ["havok-wasm", "esbuild-wasm-adj"];

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

/// A module with function imports `env.<name>`, one `() -> ()` type, and the
/// given bodies (instructions without the final `end`). With `pc_base`, a
/// table and one element segment at that base list every defined function in
/// order, as Go's linker lays them out.
fn module(imports: &[&str], bodies: &[Vec<u8>], pc_base: Option<u32>) -> Vec<u8> {
    let import_items: Vec<Vec<u8>> = imports.iter().map(|name| [wasm::name(b"env"), wasm::name(name.as_bytes()), vec![0x00, 0x00]].concat()).collect();
    let mut m = WasmModuleBuilder::new();
    m.void_type().section(id::IMPORT, &vector(&import_items)).functions(bodies.len());
    if let Some(base) = pc_base {
        let mut table = vec![1u8, 0x70, 0x00];
        leb128::write_u64(&mut table, u64::from(base) + bodies.len() as u64);
        let mut seg = vec![1u8, 0x00, 0x41];
        leb128::write_i64(&mut seg, i64::from(base));
        seg.push(0x0b);
        let funcs: Vec<Vec<u8>> = (0..bodies.len()).map(|i| leb128::u64((imports.len() + i) as u64)).collect();
        seg.extend(vector(&funcs));
        m.section(id::TABLE, &table).section(id::ELEMENT, &seg);
    }
    m.code(&bodies.iter().map(|b| wasm::body(&[0], b)).collect::<Vec<_>>()).finish()
}

/// (start, contents start, contents size) of the first section `id` of a module.
fn find_section(m: &[u8], id: u8) -> Option<(usize, usize, usize)> {
    let mut pos = 8;
    while pos < m.len() {
        let mut at = pos + 1;
        let size = leb128::read_u64(m, &mut at) as usize;
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
    out.extend(leb128::u64(f));
    out
}

fn i64_const(v: i64) -> Vec<u8> {
    let mut out = vec![0x42];
    out.extend(leb128::i64(v));
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

/// `old` and `new` round-trip (see [`round_trip`]); their normalized forms, the old one as
/// its own reference and the new one against it, and the new one's counters.
fn normalized_both(old: &[u8], new: &[u8]) -> (Normalized, Normalized, TransformStats) {
    round_trip(old, new);
    let old_norm = forward(None, old).unwrap();
    let (new_norm, stats) = forward_with_stats(Some(&reference(old).unwrap()), new).unwrap();
    (old_norm, new_norm, stats)
}

/// Pseudo-random bytes whose windows are unique: the low byte of each value of
/// xorshift64* from `seed` (the data these tests' expectations were made on).
fn noise(seed: u64, len: usize) -> Vec<u8> {
    Rng::xorshift64_star(seed).bytes_from_bit(len, 0)
}

fn data_section(segments: &[(u32, Vec<u8>)]) -> Vec<u8> {
    let items: Vec<Vec<u8>> = segments
        .iter()
        .map(|(address, bytes)| {
            let mut s = vec![0x00, 0x41];
            s.extend(leb128::i64(i64::from(*address)));
            s.push(0x0b);
            s.extend(leb128::u64(bytes.len() as u64));
            s.extend_from_slice(bytes);
            s
        })
        .collect();
    section(11, &vector(&items))
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
    for name in CORPUS_WASM {
        match corpus::pair(name) {
            Ok(pair) => round_trip(&pair.old, &pair.new),
            Err(skip) => println!("NOTE: corpus wasm round trip of {name} not run: {skip}"),
        }
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
    [&m[..code_at], &section(9, &vector(&items)), &m[code_at..]].concat()
}

/// An active segment at `i32.const 1` (a C++ or Rust function table) listing `functions`.
fn table_segment(functions: &[u64]) -> (u8, Vec<u8>) {
    let indices: Vec<Vec<u8>> = functions.iter().map(|&f| leb128::u64(f)).collect();
    (0, [vec![0x41, 0x01, 0x0b], vector(&indices)].concat())
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
    let passive = |functions: &[u64]| (1u8, [vec![0x00], vector(&functions.iter().map(|&f| leb128::u64(f)).collect::<Vec<_>>())].concat());
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
    body.extend(leb128::u64_padded(1, 5));
    body.extend([0x42, 0x80, 0x80, 0x00, 0x1a]); // i64.const 0 in 3 bytes
    body.extend(call(0));
    body.push(0x0b);
    let mut code = leb128::u64(2);
    code.extend(leb128::u64_padded(body.len() as u64, 4));
    code.extend(&body);
    code.extend(leb128::u64(2));
    code.extend([0x00, 0x0b]);
    let mut m = b"\0asm\x01\0\0\0".to_vec();
    m.extend(section(1, &vector(&[vec![0x60, 0, 0]])));
    m.extend(section(3, &vector(&[vec![0], vec![0]])));
    m.push(10);
    m.extend(leb128::u64_padded(code.len() as u64, 5));
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
        b.extend(leb128::u64_padded(f, 5));
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

/// With no reference every function keeps its number and no address moves,
/// and size fields keep their widths, so a module whose immediates are
/// canonical is its own normalized form: an applier reads the old file as is.
#[test]
fn old_side_normalized_form_is_the_module_itself_when_canonical() {
    let m = module(&["a"], &[[call(1), i64_const(5)].concat(), call(0)], Some(0x1000));
    assert_eq!(forward(None, &m).unwrap().bytes, m);
    for pair in CORPUS_WASM.iter().filter_map(|name| corpus::pair(name).ok()) {
        assert!(forward(None, &pair.old).unwrap().bytes == pair.old, "{}: the old module is its own normalized form", pair.name);
    }
}
