//! Shared by the `wasm_inverse` target and the seed generator: real wasm modules
//! (the fixture game's game.wasm in both versions, the arcade example's logic.wasm, the
//! made-up modules of the core's tests), their forward transforms (the normalized form
//! and side info a patch carries), and the input framing of `wasm_inverse`.

use edgepatch_core::wasm_transform::{forward, reference, with_code_layout_against, Normalized};

/// The made-up modules of the core's wasm tests (calls, tables, names, Go-like code
/// addresses, LLVM-like data addresses, DWARF line programs and ranges).
#[path = "../../crates/edgepatch-core/tests/wasm_modules/mod.rs"]
#[allow(clippy::all)]
mod wasm_modules;

/// Input mode byte: the rest is `side info length (u32 LE) | side info | normalized`.
pub const MODE_RAW: u8 = 0;

/// A file of a ustar archive (the fixture builds are plain tars).
pub fn tar_file(tar: &[u8], name: &str) -> Option<Vec<u8>> {
    let mut at = 0;
    while at + 512 <= tar.len() {
        let header = &tar[at..at + 512];
        if header.iter().all(|&b| b == 0) {
            return None;
        }
        let field = |range: std::ops::Range<usize>| {
            let f = &header[range];
            &f[..f.iter().position(|&b| b == 0).unwrap_or(f.len())]
        };
        let path = String::from_utf8_lossy(field(0..100)).into_owned();
        let size = usize::from_str_radix(std::str::from_utf8(field(124..136)).ok()?.trim(), 8).ok()?;
        let data = at + 512;
        if path.trim_start_matches("./") == name {
            return tar.get(data..data + size).map(<[u8]>::to_vec);
        }
        at = data + size.div_ceil(512) * 512;
    }
    None
}

/// Pairs of real modules (old, new) the transform is used on, by name.
pub fn module_pairs() -> Vec<(&'static str, Vec<u8>, Vec<u8>)> {
    let game = |v| tar_file(&std::fs::read(format!("{}/../fixtures/game-v{v}.tar", env!("CARGO_MANIFEST_DIR"))).expect("fixture tar"), "game.wasm");
    let arcade = |v| std::fs::read(format!("{}/../fixtures/arcade/v{v}/logic.wasm", env!("CARGO_MANIFEST_DIR"))).expect("arcade logic.wasm");
    let mut pairs = Vec::new();
    let mut add = |name, (old, new): (Vec<u8>, Vec<u8>)| pairs.push((name, old, new));
    add("calls", wasm_modules::versions(40, 5));
    add("table", wasm_modules::versions_with_table(30, 4));
    add("names", wasm_modules::versions_with_names(30, 4));
    add("go-like", wasm_modules::go_like_versions(24, 3));
    add("go-like-segmented", wasm_modules::go_like_segmented_versions(24, 3));
    add("llvm-like", wasm_modules::llvm_like_versions(24, 64));
    add("recompiled", wasm_modules::recompiled_versions(24));
    add("debug-line", wasm_modules::versions_with_debug_line(40, 5));
    add("arcade", (arcade(1), arcade(2)));
    add("game", (game(1).expect("game.wasm in game-v1.tar"), game(2).expect("game.wasm in game-v2.tar")));
    pairs
}

/// What a patch carries for the new module of each pair: its normalized form against the old
/// one, as is and in the field-split code layout (the form the diff writes), and the old
/// module's own normalized form. Forms the transform refuses are left out.
pub fn normalized_forms() -> Vec<(String, Normalized)> {
    let mut out = Vec::new();
    for (name, old, new) in module_pairs() {
        let Ok(r) = reference(&old) else { continue };
        if let Ok(n) = forward(Some(&r), &new) {
            if let Ok(split) = with_code_layout_against(&n, &old) {
                out.push((format!("{name}-split"), split));
            }
            out.push((name.to_string(), n));
        }
        if let Ok(n) = forward(None, &old) {
            out.push((format!("{name}-old"), n));
        }
    }
    out
}

/// A raw-mode input of `wasm_inverse`.
pub fn raw_input(n: &Normalized) -> Vec<u8> {
    let mut out = vec![MODE_RAW];
    out.extend_from_slice(&(n.side_info.len() as u32).to_le_bytes());
    out.extend_from_slice(&n.side_info);
    out.extend_from_slice(&n.bytes);
    out
}

/// Splits a raw-mode input (after its mode byte) into (side info, normalized).
pub fn split_raw(data: &[u8]) -> (&[u8], &[u8]) {
    let Some((len, rest)) = data.split_first_chunk::<4>() else { return (data, &[]) };
    let len = (u32::from_le_bytes(*len) as usize).min(rest.len());
    rest.split_at(len)
}
