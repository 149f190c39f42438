//! Reader capabilities (docs/FORMAT.md §5) for JS: what this build reads, what a patch or a
//! wasm transform needs, and a client's declared set read from its wire form. Sets cross
//! the boundary as their wire form, lowercase hexadecimal.

use edgepatch_core::Capabilities;
use wasm_bindgen::prelude::*;

use crate::js::core_err;

/// What this build's applier reads: the set a client names when it asks a server for an
/// update (`?reader=`).
#[wasm_bindgen(js_name = readerCapabilities)]
pub fn reader_capabilities() -> String {
    edgepatch_core::reader_capabilities().to_hex()
}

/// A client's declared set (`hex`, 1 to 16 hex digits) as this build writes for it: bits
/// this build does not know dropped. Throws on anything else.
#[wasm_bindgen(js_name = readerFor)]
pub fn reader_for(hex: &str) -> Result<String, JsError> {
    Ok(Capabilities::from_hex(hex).map_err(core_err)?.known().to_hex())
}

/// A list of capability names, `current`, `v0.1`, `baseline` or `current,-name` (the CLI's
/// `--reader`, a Worker's `READER_FLOOR`) as hex. Throws naming the known names.
#[wasm_bindgen(js_name = readerFromList)]
pub fn reader_from_list(list: &str) -> Result<String, JsError> {
    Ok(Capabilities::parse_list(list).map_err(core_err)?.to_hex())
}

/// The names of a set (`baseline` for none), for messages.
#[wasm_bindgen(js_name = capabilityNames)]
pub fn capability_names(hex: &str) -> Result<String, JsError> {
    Ok(Capabilities::from_hex(hex).map_err(core_err)?.to_string())
}

/// Whether a reader with `reader` applies what needs `needs`.
#[wasm_bindgen(js_name = readerCovers)]
pub fn reader_covers(reader: &str, needs: &str) -> Result<bool, JsError> {
    Ok(Capabilities::from_hex(needs).map_err(core_err)?.is_subset(Capabilities::from_hex(reader).map_err(core_err)?))
}

/// What a reader must understand to apply `patch` (read whole and checked, as `inspect`).
#[wasm_bindgen(js_name = patchNeeds)]
pub fn patch_needs(patch: &[u8]) -> Result<String, JsError> {
    Ok(edgepatch_core::inspect::inspect_patch(patch).map_err(core_err)?.required_capabilities().to_hex())
}
