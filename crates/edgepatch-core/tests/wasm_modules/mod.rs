//! Made-up wasm modules for the tests of transformed patches (docs/FORMAT.md
//! §2.8): a module of `() -> ()` functions that call each other, whose next
//! version inserts functions, so that every later function index (and every
//! call to it) shifts, as after a recompile that adds code.
// Each test crate that includes this module uses part of it.
#![allow(dead_code)]

use edgepatch_testkit::leb128;
use edgepatch_testkit::rng::mix64;
use edgepatch_testkit::wasm::{body, id, section, WasmModuleBuilder};

/// A module whose functions are the logical functions `ids`, in that order:
/// a function's body depends only on its id (constants, and calls to other
/// ids), so two versions differ where ids were inserted and in the index of
/// every call to a function that moved.
pub fn module_of(ids: &[u64], all: u64) -> Vec<u8> {
    module_with(ids, all, &[])
}

/// [`module_of`] with `before_code` (encoded sections) before its code section.
fn module_with(ids: &[u64], all: u64, before_code: &[u8]) -> Vec<u8> {
    let index_of = |id: u64| ids.iter().position(|&x| x == id);
    let bodies: Vec<Vec<u8>> = ids
        .iter()
        .map(|&id| {
            let mut code = Vec::new();
            for k in 0..10u64 {
                let r = mix64(id * 64 + k);
                code.push(0x41); // i32.const
                leb128::write_i64(&mut code, (r % 5000) as i64);
                code.push(0x1a); // drop
                if let Some(callee) = index_of(mix64(r) % all) {
                    code.push(0x10); // call
                    leb128::write_u64(&mut code, callee as u64);
                }
            }
            body(&[0], &code) // no locals
        })
        .collect();
    WasmModuleBuilder::new().void_type().functions(ids.len()).raw(before_code).code(&bodies).finish()
}

/// Version 1 and version 2 of a module of `n` functions: version 2 inserts
/// `inserted` new functions near the start.
pub fn versions(n: u64, inserted: u64) -> (Vec<u8>, Vec<u8>) {
    let (v1, v2, all) = version_ids(n, inserted);
    (module_of(&v1, all), module_of(&v2, all))
}

/// The function ids of [`versions`]' two modules, and how many ids there are.
fn version_ids(n: u64, inserted: u64) -> (Vec<u64>, Vec<u64>, u64) {
    let all = n + inserted;
    let v1: Vec<u64> = (0..n).collect();
    let mut v2: Vec<u64> = (0..3.min(n)).collect();
    v2.extend(n..all);
    v2.extend(3.min(n)..n);
    (v1, v2, all)
}

/// [`versions`] with a function table, as C++ vtables and Rust trait objects
/// make: an element segment at `i32.const 1` listing every third function
/// (by id, in a scrambled order), so version 2's table lists other indices.
pub fn versions_with_table(n: u64, inserted: u64) -> (Vec<u8>, Vec<u8>) {
    let (v1, v2, all) = version_ids(n, inserted);
    let table: Vec<u64> = (0..n).filter(|id| id % 3 == 0).map(|id| (id * 7) % n).collect();
    let with_table = |ids: &[u64]| {
        let mut elem = vec![1u8, 0x00, 0x41, 0x01, 0x0b];
        leb128::write_u64(&mut elem, table.len() as u64);
        for id in &table {
            leb128::write_u64(&mut elem, ids.iter().position(|x| x == id).expect("every table id is defined") as u64);
        }
        module_with(ids, all, &section(id::ELEMENT, &elem))
    };
    (with_table(&v1), with_table(&v2))
}

/// [`versions`] with what names functions outside the code, as toolchains emit it: every fifth
/// function exported as `f<id>`, the first one as the start function, and a "name" section
/// with every function's name and local names for every seventh. Version 2's numbers differ
/// in all of them.
pub fn versions_with_names(n: u64, inserted: u64) -> (Vec<u8>, Vec<u8>) {
    let (v1, v2, all) = version_ids(n, inserted);
    let named = |ids: &[u64]| {
        let index = |id: u64| ids.iter().position(|&x| x == id).expect("a defined id") as u64;
        let name = |id: u64, out: &mut Vec<u8>| {
            let text = format!("f{id}");
            leb128::write_u64(out, text.len() as u64);
            out.extend_from_slice(text.as_bytes());
        };
        let exported: Vec<u64> = (0..n).filter(|id| id % 5 == 0).collect();
        let mut exports = Vec::new();
        leb128::write_u64(&mut exports, exported.len() as u64);
        for &id in &exported {
            name(id, &mut exports);
            exports.push(0);
            leb128::write_u64(&mut exports, index(id));
        }
        let mut start = Vec::new();
        leb128::write_u64(&mut start, index(ids[0]));
        let before_code = [section(id::EXPORT, &exports), section(id::START, &start)].concat();
        // The name section: its name, function names (1) by index, local names (2).
        let mut names = vec![4, b'n', b'a', b'm', b'e'];
        let mut functions = Vec::new();
        leb128::write_u64(&mut functions, ids.len() as u64);
        for (i, &id) in ids.iter().enumerate() {
            leb128::write_u64(&mut functions, i as u64);
            name(id, &mut functions);
        }
        let mut locals = Vec::new();
        let with_locals: Vec<(usize, u64)> = ids.iter().copied().enumerate().filter(|(_, id)| id % 7 == 0).collect();
        leb128::write_u64(&mut locals, with_locals.len() as u64);
        for (i, id) in with_locals {
            leb128::write_u64(&mut locals, i as u64);
            locals.extend_from_slice(&[1, 0]);
            name(id, &mut locals);
        }
        for (id, sub) in [(1u8, functions), (2, locals)] {
            names.push(id);
            leb128::write_u64(&mut names, sub.len() as u64);
            names.extend_from_slice(&sub);
        }
        let mut out = module_with(ids, all, &before_code);
        out.extend(section(id::CUSTOM, &names));
        out
    };
    (named(&v1), named(&v2))
}

/// The length of `module_of`'s last section (its code section), id and size field included.
fn code_section_len(m: &[u8]) -> usize {
    let mut at = 8;
    loop {
        let start = at;
        at += 1;
        let size = leb128::read_u64(m, &mut at) as usize;
        at += size;
        if at == m.len() {
            return m.len() - start;
        }
    }
}

/// Go's layout, made up: imports, a PC table (an element segment at slot
/// base 4 listing every defined function), bodies that hold PCs
/// (`i64.const (slot << 16) | k`) of other functions and call them, and a
/// data segment of 8-byte words, half of them PCs. Version 2 inserts
/// `inserted` functions near the start: every later slot and index shifts.
pub fn go_like_versions(n: u64, inserted: u64) -> (Vec<u8>, Vec<u8>) {
    let (v1, v2, all) = version_ids(n, inserted);
    (go_like_of(&v1, all, false), go_like_of(&v2, all, false))
}

/// [`go_like_versions`] with the data cut where zeros run, as Go's linker cuts it: a segment
/// of 12 bytes per function in module order (its PC and a number), 4 zero bytes between, so
/// every segment's address after the inserted functions moves (the split layout's data gaps,
/// §2.8.7).
pub fn go_like_segmented_versions(n: u64, inserted: u64) -> (Vec<u8>, Vec<u8>) {
    let (v1, v2, all) = version_ids(n, inserted);
    (go_like_of(&v1, all, true), go_like_of(&v2, all, true))
}

fn go_like_of(ids: &[u64], all: u64, segmented: bool) -> Vec<u8> {
    const IMPORTS: u64 = 2;
    const BASE: u64 = 4;
    let index_of = |id: u64| ids.iter().position(|&x| x == id).map(|p| p as u64);
    let pc_of = |id: u64| index_of(id).map(|p| ((BASE + p) << 16) | (id % 7));
    let mut m = WasmModuleBuilder::new();
    m.void_type();
    let mut imports = Vec::new();
    leb128::write_u64(&mut imports, IMPORTS);
    for name in [&b"a"[..], b"b"] {
        imports.extend_from_slice(&[2, b'g', b'o']);
        imports.push(1);
        imports.extend_from_slice(name);
        imports.extend_from_slice(&[0, 0]);
    }
    m.section(id::IMPORT, &imports);
    m.functions(ids.len());
    let mut table = vec![1u8, 0x70, 0x00];
    leb128::write_u64(&mut table, BASE + ids.len() as u64);
    m.section(id::TABLE, &table);
    m.section(id::MEMORY, &[1, 0, 2]); // one memory of 2 pages
    let mut elem = vec![1u8, 0x00, 0x41];
    leb128::write_i64(&mut elem, BASE as i64);
    elem.push(0x0b);
    leb128::write_u64(&mut elem, ids.len() as u64);
    for p in 0..ids.len() as u64 {
        leb128::write_u64(&mut elem, IMPORTS + p);
    }
    m.section(id::ELEMENT, &elem);
    let mut bodies = Vec::new();
    for &id in ids {
        let mut body = vec![0u8];
        for k in 0..6u64 {
            let r = mix64(id * 64 + k);
            let target = mix64(r) % all;
            if let Some(pc) = pc_of(target) {
                body.push(0x42); // i64.const PC
                leb128::write_i64(&mut body, pc as i64);
                body.push(0x1a);
            }
            body.push(0x41);
            leb128::write_i64(&mut body, (r % 300) as i64);
            body.push(0x1a);
            if let Some(callee) = index_of(target) {
                body.push(0x10);
                leb128::write_u64(&mut body, IMPORTS + callee);
            }
        }
        body.push(0x0b);
        bodies.push(body);
    }
    m.code(&bodies);
    // 8-byte words at address 1024: a PC of every function, then a number.
    let mut words = Vec::new();
    for id in 0..all {
        if let Some(pc) = pc_of(id) {
            words.extend_from_slice(&pc.to_le_bytes());
            words.extend_from_slice(&mix64(id).to_le_bytes()[..4]);
            words.extend_from_slice(&[0; 4]);
        }
    }
    let mut data = Vec::new();
    if segmented {
        // In the functions' order: the inserted ones' segments come early, and move the rest.
        leb128::write_u64(&mut data, ids.len() as u64);
        for (k, &id) in ids.iter().enumerate() {
            data.extend_from_slice(&[0x00, 0x41]);
            leb128::write_i64(&mut data, 1024 + 16 * k as i64);
            data.push(0x0b);
            leb128::write_u64(&mut data, 12);
            data.extend_from_slice(&pc_of(id).expect("in this version").to_le_bytes());
            data.extend_from_slice(&mix64(id).to_le_bytes()[..4]);
        }
    } else {
        data.extend_from_slice(&[1u8, 0x00, 0x41]);
        leb128::write_i64(&mut data, 1024);
        data.push(0x0b);
        leb128::write_u64(&mut data, words.len() as u64);
        data.extend(words);
    }
    m.section(id::DATA, &data);
    m.finish()
}

/// LLVM's layout (Rust, C), made up: one memory, one data segment at 1 MiB
/// of pseudo-random bytes, and `n` functions whose loads address the data
/// through memarg offsets (`i32.const 0; i32.load offset=ADDR`). Version 2
/// inserts `grown` bytes in the middle of the data: every later address
/// moves (docs/FORMAT.md §2.8, side info version 2).
pub fn llvm_like_versions(n: u64, grown: usize) -> (Vec<u8>, Vec<u8>) {
    (llvm_like_of(n, 0), llvm_like_of(n, grown))
}

fn llvm_like_of(n: u64, grown: usize) -> Vec<u8> {
    const BASE: u64 = 1 << 20;
    const LEN: u64 = 1 << 16;
    let address = |a: u64| if a < LEN / 2 { BASE + a } else { BASE + a + grown as u64 };
    let mut m = WasmModuleBuilder::new();
    m.void_type().functions(n as usize);
    m.section(id::MEMORY, &[1, 0, 32]); // one memory of 32 pages (2 MiB)
    let mut bodies = Vec::new();
    for id in 0..n {
        let mut body = vec![0u8];
        for k in 0..8u64 {
            body.extend_from_slice(&[0x41, 0x00, 0x28, 0x02]); // i32.const 0; i32.load align=4
            leb128::write_u64(&mut body, address((mix64(id * 8 + k) % (LEN - 4)) & !3));
            body.push(0x1a); // drop
        }
        body.push(0x0b);
        bodies.push(body);
    }
    m.code(&bodies);
    let bytes: Vec<u8> = (0..LEN).map(|i| mix64(i) as u8).collect();
    let grown_bytes: Vec<u8> = (0..grown as u64).map(|i| mix64(i + (1 << 40)) as u8).collect();
    let data = [&bytes[..LEN as usize / 2], &grown_bytes, &bytes[LEN as usize / 2..]].concat();
    let mut seg = vec![1u8, 0x00, 0x41];
    leb128::write_i64(&mut seg, BASE as i64);
    seg.push(0x0b);
    leb128::write_u64(&mut seg, data.len() as u64);
    seg.extend(data);
    m.section(id::DATA, &seg);
    m.finish()
}

/// Code a toolchain change re-emitted, made up: version 2 inserts a function
/// at the front (every call is renumbered) and gives the locals of two
/// functions in three other numbers (a register allocator's choice) and
/// a few more instructions: there nearly every local index differs, and the
/// instructions no longer line up with the old ones.
pub fn recompiled_versions(n: u64) -> (Vec<u8>, Vec<u8>) {
    (recompiled_of(n, false), recompiled_of(n, true))
}

fn recompiled_of(n: u64, recompiled: bool) -> Vec<u8> {
    let first = u64::from(recompiled);
    let count = n + first;
    let mut m = WasmModuleBuilder::new();
    m.void_type().functions(count as usize);
    let mut bodies = Vec::new();
    for f in 0..count {
        let id = if recompiled && f == 0 { n + 1 } else { f - first };
        // Locals 0..16 renamed by a permutation that depends on the function.
        let mut perm: Vec<u64> = (0..16).collect();
        if recompiled && id % 3 != 0 {
            for i in (1..16).rev() {
                perm.swap(i, (mix64(id * 16 + i as u64) % (i as u64 + 1)) as usize);
            }
        }
        let local = |l: u64| perm[l as usize];
        let mut body = vec![1u8, 16, 0x7f]; // 16 i32 locals
        for k in 0..24u64 {
            let r = mix64(id * 64 + k);
            for (op, l) in [(0x20u8, k % 3), (0x20, 3 + k % 2), (0x6a, 0), (0x21, 5 + (r >> 16) % 2)] {
                body.push(op);
                if op != 0x6a {
                    leb128::write_u64(&mut body, local(l));
                }
            }
            if recompiled && id % 3 != 0 && mix64(r).is_multiple_of(3) {
                // An instruction the new compiler adds here and there.
                body.extend([0x20, local(7) as u8, 0x1a]);
            }
            if k % 4 == 0 {
                body.push(0x41); // i32.const
                leb128::write_i64(&mut body, ((r >> 24) % 100_000) as i64);
                body.push(0x1a);
                body.push(0x10); // call
                leb128::write_u64(&mut body, first + (r >> 40) % n);
            }
        }
        body.push(0x0b);
        bodies.push(body);
    }
    m.code(&bodies);
    m.finish()
}

/// A module of `functions` small functions (each calls the next, so a renumbering changes
/// them) that exports `exports` of them under distinct names of 3 bytes, `first` the first
/// function's body constant (versions differ in it, so one body changes).
pub fn many_exports(functions: u64, exports: u64, first: u8) -> Vec<u8> {
    let mut m = WasmModuleBuilder::new();
    m.void_type().functions(functions as usize);
    let mut table = Vec::new();
    leb128::write_u64(&mut table, exports);
    for e in 0..exports {
        table.extend_from_slice(&[3, (e & 0x7f) as u8, ((e >> 7) & 0x7f) as u8, ((e >> 14) & 0x7f) as u8, 0]);
        leb128::write_u64(&mut table, e % functions);
    }
    m.section(id::EXPORT, &table);
    let mut bodies = Vec::new();
    for f in 0..functions {
        let mut body = vec![0u8, 0x41, if f == 0 { first } else { 1 }, 0x1a, 0x10];
        leb128::write_u64(&mut body, (f + 1) % functions);
        body.push(0x0b);
        bodies.push(body);
    }
    m.code(&bodies);
    m.finish()
}

/// [`versions`] as a debug build: each module ends with a `.debug_line` custom section
/// (docs/FORMAT.md §2.8.3, DWARF addresses) whose line sequences start at each body's code
/// address, as LLVM's DWARF for wasm does, then `.debug_ranges` and `.debug_loc` sections of
/// ranges and locations in the bodies, so version 2's inserted functions move every later
/// sequence's start, range and location. Units of DWARF versions 4, 2 and 5 alternate; a removed function's
/// sequence (here every thirteenth function's) starts at 0.
pub fn versions_with_debug_line(n: u64, inserted: u64) -> (Vec<u8>, Vec<u8>) {
    let (v1, v2, all) = version_ids(n, inserted);
    (with_debug_line(module_of(&v1, all), &v1), with_debug_line(module_of(&v2, all), &v2))
}

/// `m`, the module of function ids `ids`, with a unit (a compilation unit's line program) for
/// each run of functions whose ids share their quotient by 16.
fn with_debug_line(mut m: Vec<u8>, ids: &[u64]) -> Vec<u8> {
    let code_len = code_section_len(&m);
    let code = &m[m.len() - code_len..];
    let read = |at: &mut usize| leb128::read_u64(code, at);
    let mut at = 1;
    read(&mut at); // the section's size
    let contents = at;
    let count = read(&mut at);
    // (a body's contents' code address, its length)
    let mut bodies = Vec::new();
    for _ in 0..count {
        let len = read(&mut at);
        bodies.push(((at - contents) as u32, len));
        at += len as usize;
    }
    let mut units = Vec::new();
    let mut from = 0;
    while from < bodies.len() {
        let unit_id = ids[from] / 16;
        let to = from + ids[from..].iter().take_while(|&&id| id / 16 == unit_id).count();
        let chunk = bodies[from..to].iter().zip(&ids[from..to]);
        from = to;
        let version: u16 = [4, 2, 5][unit_id as usize % 3];
        let mut program = Vec::new();
        for (&(address, len), &id) in chunk {
            program.extend_from_slice(&[0, 5, 2]); // DW_LNE_set_address
            program.extend_from_slice(&(if id % 13 == 5 { 0 } else { address }).to_le_bytes());
            program.push(3); // DW_LNS_advance_line
            leb128::write_i64(&mut program, id as i64 % 7 - 3);
            program.push(0x20 + (id % 16) as u8); // a special opcode
            program.extend_from_slice(&[9, 2, 0]); // DW_LNS_fixed_advance_pc 2
            program.push(2); // DW_LNS_advance_pc
            leb128::write_u64(&mut program, len.saturating_sub(2));
            program.extend_from_slice(&[0, 1, 1]); // DW_LNE_end_sequence
        }
        let mut header = vec![1];
        if version >= 4 {
            header.push(1); // maximum_operations_per_instruction
        }
        header.extend_from_slice(&[1, 0xfb, 14, 13, 0, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 1]);
        header.extend_from_slice(b"src\0\0main.c\0\x01\0\0\0");
        let mut unit = version.to_le_bytes().to_vec();
        if version == 5 {
            unit.extend_from_slice(&[4, 0]);
        }
        unit.extend_from_slice(&(header.len() as u32).to_le_bytes());
        unit.extend_from_slice(&header);
        unit.extend_from_slice(&program);
        units.extend_from_slice(&(unit.len() as u32).to_le_bytes());
        units.extend_from_slice(&unit);
    }
    // Ranges: a list per unit of 16 function ids, each body's (start, end), a base address
    // selection (0xFFFFFFFF, 0) first; locations: a list per body, its first half, `DW_OP_reg0`.
    let (mut ranges, mut locations) = (Vec::new(), Vec::new());
    let mut from = 0;
    while from < bodies.len() {
        let unit_id = ids[from] / 16;
        let to = from + ids[from..].iter().take_while(|&&id| id / 16 == unit_id).count();
        ranges.extend_from_slice(&[0xff; 4]);
        ranges.extend_from_slice(&[0; 4]);
        for (&(address, len), &id) in bodies[from..to].iter().zip(&ids[from..to]) {
            let start = if id % 13 == 5 { 0 } else { address };
            ranges.extend_from_slice(&start.to_le_bytes());
            ranges.extend_from_slice(&(start + len as u32).to_le_bytes());
            locations.extend_from_slice(&start.to_le_bytes());
            locations.extend_from_slice(&(start + len as u32 / 2).to_le_bytes());
            locations.extend_from_slice(&[1, 0, 0x50]);
            locations.extend_from_slice(&[0; 8]);
        }
        ranges.extend_from_slice(&[0; 8]);
        from = to;
    }
    for (name, contents) in [(&b".debug_line"[..], &units), (b".debug_ranges", &ranges), (b".debug_loc", &locations)] {
        let mut custom = Vec::new();
        leb128::write_u64(&mut custom, name.len() as u64);
        custom.extend_from_slice(name);
        custom.extend_from_slice(contents);
        m.extend(section(0, &custom));
    }
    m
}
