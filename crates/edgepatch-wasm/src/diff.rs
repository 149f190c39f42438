//! `diffFiles`: the core's in-memory diff of two single files.

use edgepatch_core::{diff_builds, Build, DiffOptions};
use wasm_bindgen::prelude::*;

/// Makes a single-file patch from `old` to `new` (zstd `level` 1..=22, default
/// 19), byte-identical to `edgepatch diff --level N OLD NEW PATCH`. The whole
/// of both files is held in wasm memory, plus a suffix array of `old` (~5x its size).
#[cfg(feature = "diff")]
#[wasm_bindgen(js_name = diffFiles)]
pub fn diff_files(old: Vec<u8>, new: Vec<u8>, level: Option<i32>) -> Result<Vec<u8>, JsError> {
    let opts = DiffOptions { level: level.unwrap_or(19), threads: 1, ..DiffOptions::default() };
    let (patch, _stats) = diff_builds(&Build::single_file(old), &Build::single_file(new), &opts, &|_, _| {}).map_err(|e| JsError::new(&e.to_string()))?;
    Ok(patch)
}
