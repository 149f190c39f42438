//! Hostile uploads to the writer: a module built to make the wasm transform's writer hold more
//! than its bounds allow (docs/WASM_TRANSFORM.md §5). Anyone with the owner's token, or a
//! compromised CI, can publish any build; the Worker then runs the writer on it in a 128 MB
//! isolate. Measured with a counting allocator, in a test binary of its own so that no other
//! test's allocations are counted.

use edgepatch_core::wasm_transform::{forward, inverse, reference};

mod counting_allocator;
use counting_allocator::{peak, reset_peak, Counting};

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn uleb(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn section(id: u8, contents: &[u8], out: &mut Vec<u8>) {
    out.push(id);
    uleb(contents.len() as u64, out);
    out.extend_from_slice(contents);
}

/// A module of `functions` small functions (each calls the next, so a renumbering changes
/// them) that exports `exports` of them under distinct names of 3 bytes, `first` the first
/// function's body constant (versions differ in it, so one body changes).
fn many_exports(functions: u64, exports: u64, first: u8) -> Vec<u8> {
    let mut out = b"\0asm\x01\0\0\0".to_vec();
    section(1, &[1, 0x60, 0, 0], &mut out);
    let mut funcs = Vec::new();
    uleb(functions, &mut funcs);
    funcs.extend(std::iter::repeat_n(0u8, functions as usize));
    section(3, &funcs, &mut out);
    let mut table = Vec::new();
    uleb(exports, &mut table);
    for e in 0..exports {
        table.extend_from_slice(&[3, (e & 0x7f) as u8, ((e >> 7) & 0x7f) as u8, ((e >> 14) & 0x7f) as u8, 0]);
        uleb(e % functions, &mut table);
    }
    section(7, &table, &mut out);
    let mut code = Vec::new();
    uleb(functions, &mut code);
    for f in 0..functions {
        let mut body = vec![0u8, 0x41, if f == 0 { first } else { 1 }, 0x1a, 0x10];
        uleb((f + 1) % functions, &mut body);
        body.push(0x0b);
        uleb(body.len() as u64, &mut code);
        code.extend(body);
    }
    section(10, &code, &mut out);
    out
}

/// A module exporting two million functions under distinct names: the writer reads at most
/// 262,144 names per module for matching (`MAX_NAMES`), so what it holds for them stays a few
/// MB instead of growing with the upload. For this 14 MB module the writer held 28.6 MB; with
/// the bound lifted, 225 MB (measured when the bound was written).
#[test]
fn a_module_naming_millions_of_functions_bounds_what_the_writer_holds() {
    let (exports, functions) = (2_000_000u64, 4096u64);
    let old = many_exports(functions, exports, 1);
    let new = many_exports(functions, exports, 2);
    let reference = reference(&old).unwrap();
    let before = reset_peak();
    let normalized = forward(Some(&reference), &new).unwrap();
    let held = peak() - before;
    assert_eq!(inverse(&normalized.bytes, &normalized.side_info).unwrap(), new);
    // The normalized module (about the upload's size) and the writer's own state.
    let bound = 2 * new.len() + (48 << 20);
    assert!(held < bound, "the writer held {held} bytes for a {}-byte module (bound {bound})", new.len());
}
