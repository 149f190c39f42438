//! Addresses into the data: data segments, passive data, memory inits,
//! variables past the data and memarg offsets normalize to the old ones.

use super::*;

fn i32_const(v: i64) -> Vec<u8> {
    let mut out = vec![0x41];
    out.extend(leb128::i64(v));
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
        passive.extend(leb128::u64(data.len() as u64));
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
        passive.extend(leb128::u64((data.len() + gap) as u64));
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
    out.extend(leb128::u64(address));
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
