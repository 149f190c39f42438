//! WebAssembly bindings over `edgepatch-core`: bindings only, no patch logic of
//! their own.
//!
//! - [`PatchApplier`]: the core's push-driven applier. Patch bytes are pushed in
//!   chunks as they arrive; old data is read through a JS object
//!   (`fileSize`, `readAt`); the new build leaves through a JS sink object
//!   (`createDirectory`, `createSymlink`, `beginFile`, `writeFile`, `finishFile`).
//! - [`diff_files`] (`diffFiles` in JS): the core's diff of two single files,
//!   on one thread (wasm has none).
//!
//! Errors are JS `Error`s carrying the core's message. Callbacks are called
//! synchronously from inside `push`; they must not call back into the same
//! applier, and a callback that throws fails the apply with its message.
//!
//! The bindings by what they bind: `apply` ([`PatchApplier`]) over `js_build` (the old
//! build and the sink as JS objects), `diff`, `generator` and `wasm_transform` (the
//! bounded-memory generator and its transformed wasm modules), `manifest`
//! ([`ManifestReader`]), `signer` (signatures and BLAKE3), `trust` (names, key ids, signed
//! statements), `documents` (update descriptors, channel documents, the channel rules, key rotations),
//! `memory` (the module's memory), `capabilities` (what a reader understands);
//! `js` holds the conversions they share.

mod apply;
mod capabilities;
#[cfg(feature = "diff")]
mod diff;
mod documents;
mod generator;
mod js;
mod js_build;
mod manifest;
mod memory;
mod signer;
mod trust;
#[cfg(feature = "diff")]
mod wasm_transform;

pub use apply::PatchApplier;
pub use capabilities::{capability_names, patch_needs, reader_capabilities, reader_covers, reader_for, reader_from_list};
#[cfg(feature = "diff")]
pub use diff::diff_files;
pub use documents::{accept_channel, check_channel_document, check_update_descriptor, follow_rotations};
pub use generator::{isolate_lzma_window_limit, ByteRanges};
#[cfg(feature = "diff")]
pub use generator::{renamed_counterparts, PatchGenerator};
pub use js_build::{ApplyProgress, ApplySummary, JsBuildSink, JsResumePoint, MaybeResumePoint, OldBuildSource};
pub use manifest::{ManifestEntries, ManifestReader, ManifestSegments, MaybeManifestEntry};
#[cfg(feature = "diff")]
pub use memory::reserve_wasm_memory;
pub use memory::wasm_memory_bytes;
pub use signer::{blake3_hex, FileHasher, Signer};
pub use trust::{channel_statement, check_name, key_id, rotation_statement, update_statement, verify_ed25519};
#[cfg(feature = "diff")]
pub use wasm_transform::{normalize_wasm_module_filled, prepare_wasm_transform, ModuleBuffer, NormalizedWasmModule, PreparedWasmTransform};

use wasm_bindgen::prelude::*;

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = console, js_name = error)]
    fn console_error(message: &str);
}

/// A panic is a bug; say what it was on the console before the trap.
#[wasm_bindgen(start)]
fn start() {
    std::panic::set_hook(Box::new(|info| console_error(&format!("edgepatch-wasm panicked: {info}"))));
}
