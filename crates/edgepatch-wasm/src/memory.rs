//! The module's linear memory: its size, and one region reserved ahead of a phase.

use wasm_bindgen::prelude::*;

/// Reserves `bytes` of the module's memory in one piece, free again at once: one allocation
/// of that size made and dropped (its pages are not written), so that the allocator has one
/// region that large for what follows (the Worker's transform phase: worker/src/transform.ts).
/// At most 256 MiB.
#[cfg(feature = "diff")]
#[wasm_bindgen(js_name = reserveWasmMemory)]
pub fn reserve_wasm_memory(bytes: f64) -> Result<(), JsError> {
    if !(bytes >= 0.0 && bytes <= (256u64 << 20) as f64 && bytes.fract() == 0.0) {
        return Err(JsError::new(&format!("reserving {bytes} bytes: at most 256 MiB")));
    }
    let mut region: Vec<u8> = Vec::new();
    region.try_reserve_exact(bytes as usize).map_err(|_| JsError::new(&format!("cannot reserve {bytes} bytes")))?;
    // Kept observable, or the allocation could be optimized away.
    drop(std::hint::black_box(region));
    Ok(())
}

/// Current size of this module's linear memory in bytes (it only grows).
#[wasm_bindgen(js_name = wasmMemoryBytes)]
pub fn wasm_memory_bytes() -> f64 {
    #[cfg(target_arch = "wasm32")]
    return (core::arch::wasm32::memory_size(0) * 65536) as f64;
    #[cfg(not(target_arch = "wasm32"))]
    return 0.0;
}
