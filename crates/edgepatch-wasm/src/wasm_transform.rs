//! Transformed wasm modules for a generated patch: a changed module pair prepared (normalized,
//! maybe split) whole or in two halves from buffers filled in place.

use wasm_bindgen::prelude::*;

use js_sys::Uint8Array;

use crate::js::{hex, view_of};

/// A changed wasm module to store normalized in a generated patch (docs/FORMAT.md §2.8):
/// `prepareWasmTransform(path, oldModule, newModule)` reads both modules whole and returns
/// undefined (store the module as it is: not wasm, nothing renumbered, above the caps) or
/// this. Keep `takeNormalized()`'s bytes where the generation's steps can read their ranges
/// (those with `normalized: true`), and give `record` to every generator of the patch
/// (`addWasmTransform`). The record is small (the side info and a hash per MiB). Where the
/// module is stored in the field-split layout (`oldSplitBlake3` set), keep the old module
/// split (`oldSplitView()`) too: old ranges with `oldSplit: true` are read from it, after
/// checking it against `oldSplitBlake3`.
#[cfg(feature = "diff")]
#[wasm_bindgen]
pub struct PreparedWasmTransform {
    record: Vec<u8>,
    normalized: Vec<u8>,
    normalized_size: u64,
    old_split: Vec<u8>,
    old_split_blake3: Option<String>,
}

#[cfg(feature = "diff")]
#[wasm_bindgen]
impl PreparedWasmTransform {
    /// The transform, encoded (for `PatchGenerator.addWasmTransform`).
    #[wasm_bindgen(getter)]
    pub fn record(&self) -> Vec<u8> {
        self.record.clone()
    }

    /// Bytes of the normalized form.
    #[wasm_bindgen(getter, js_name = normalizedSize)]
    pub fn normalized_size(&self) -> f64 {
        self.normalized_size as f64
    }

    /// The normalized form, moved out of the module's memory (a second call returns nothing).
    #[wasm_bindgen(js_name = takeNormalized)]
    pub fn take_normalized(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.normalized)
    }

    /// A view of the normalized form where it is, in the module's memory (no copy into JS):
    /// valid until this is freed or the memory grows (then detached: take it again).
    #[wasm_bindgen(js_name = normalizedView)]
    pub fn normalized_view(&mut self) -> Uint8Array {
        view_of(&mut self.normalized)
    }

    /// BLAKE3 (hex) of the old module split, if the patch stores the module in the
    /// field-split layout; undefined otherwise.
    #[wasm_bindgen(getter, js_name = oldSplitBlake3)]
    pub fn old_split_blake3(&self) -> Option<String> {
        self.old_split_blake3.clone()
    }

    /// A view of the old module split (empty unless `oldSplitBlake3` is set), as
    /// `normalizedView()`.
    #[wasm_bindgen(js_name = oldSplitView)]
    pub fn old_split_view(&mut self) -> Uint8Array {
        view_of(&mut self.old_split)
    }
}

/// A whole wasm module filled in place in the module's memory (`view()`), for
/// `normalizeWasmModuleFilled` and `finishFilled`: a caller short of memory (a Worker) reads it there from its
/// store without holding a copy in JS.
#[cfg(feature = "diff")]
#[wasm_bindgen]
pub struct ModuleBuffer {
    bytes: Vec<u8>,
}

#[cfg(feature = "diff")]
#[wasm_bindgen]
impl ModuleBuffer {
    /// `size` bytes (at most the format's cap on a transformed module), zeroed.
    #[wasm_bindgen(constructor)]
    pub fn new(size: f64) -> Result<ModuleBuffer, JsError> {
        use edgepatch_core::patch_format::MAX_WASM_TRANSFORM_BYTES;
        if !(size >= 0.0 && size <= MAX_WASM_TRANSFORM_BYTES as f64 && size.fract() == 0.0) {
            return Err(JsError::new(&format!("module buffer of {size} bytes: at most {MAX_WASM_TRANSFORM_BYTES}")));
        }
        Ok(ModuleBuffer { bytes: vec![0; size as usize] })
    }

    /// A view of the buffer to fill: valid until the buffer is consumed or the memory grows
    /// (then detached, `byteLength` 0: take it again).
    pub fn view(&mut self) -> Uint8Array {
        view_of(&mut self.bytes)
    }
}

/// A changed module pair half prepared (`normalizeWasmModuleFilled`): the new module
/// normalized, waiting for the old module again (`finishFilled`), which chooses the layout the
/// patch stores it in. For a caller short of memory (a Worker): the old module is not held
/// during the new one's forward transform, the phase's peak.
#[cfg(feature = "diff")]
#[wasm_bindgen]
pub struct NormalizedWasmModule {
    inner: Option<edgepatch_core::generate::NormalizedNew>,
}

#[cfg(feature = "diff")]
#[wasm_bindgen]
impl NormalizedWasmModule {
    /// The transform (see [`PreparedWasmTransform`]) from the old module read again into a
    /// filled buffer, which it consumes; undefined: store the module as it is. Once only.
    #[wasm_bindgen(js_name = finishFilled)]
    pub fn finish_filled(&mut self, old_module: ModuleBuffer) -> Result<Option<PreparedWasmTransform>, JsError> {
        let n = self.inner.take().ok_or_else(|| JsError::new("finishFilled called twice"))?;
        Ok(n.finish(old_module.bytes).map(prepared_to_js))
    }

    /// The old module is at `oldPath`, another path than the new one (`renamedCounterparts`):
    /// in the field-split layout, that old file is the one read split (the ranges the
    /// generator asks for with `oldSplit: true` name its path).
    pub fn renamed(&mut self, old_path: &str) {
        self.inner = self.inner.take().map(|n| n.renamed(old_path));
    }
}

/// The first half of [`prepare_wasm_transform`] from two filled [`ModuleBuffer`]s, which it
/// consumes (the core frees each as soon as it can); undefined: store the module as it is.
#[cfg(feature = "diff")]
#[wasm_bindgen(js_name = normalizeWasmModuleFilled)]
pub fn normalize_wasm_module_filled(path: &str, old_module: ModuleBuffer, new_module: ModuleBuffer) -> Option<NormalizedWasmModule> {
    let n = edgepatch_core::generate::WasmTransform::normalize_owned(path, old_module.bytes, new_module.bytes)?;
    Some(NormalizedWasmModule { inner: Some(n) })
}

/// See [`PreparedWasmTransform`]. `path` is the module's path in the new build ("" for a
/// single file). Holds both modules throughout: a caller short of memory uses
/// `normalizeWasmModuleFilled` and `finishFilled`.
#[cfg(feature = "diff")]
#[wasm_bindgen(js_name = prepareWasmTransform)]
pub fn prepare_wasm_transform(path: &str, old_module: Vec<u8>, new_module: Vec<u8>) -> Option<PreparedWasmTransform> {
    edgepatch_core::generate::WasmTransform::prepare(path, &old_module, &new_module).map(prepared_to_js)
}

#[cfg(feature = "diff")]
fn prepared_to_js(p: edgepatch_core::generate::PreparedTransform) -> PreparedWasmTransform {
    PreparedWasmTransform {
        record: p.transform.encode(),
        normalized_size: p.normalized.len() as u64,
        normalized: p.normalized,
        old_split_blake3: p.transform.old_split_blake3().map(|h| hex(&h)),
        old_split: p.old_split.unwrap_or_default(),
    }
}
