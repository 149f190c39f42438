//! The wasm transform: a WebAssembly module's normalized form for diffing, and its inverse.
//!
//! A WebAssembly module is rewritten into a "normalized" form in which the
//! references that merely shift between two builds (function indices of
//! `call`/`return_call`/`ref.func`, and Go's code addresses in `i64.const`)
//! are expressed in the old build's numbering, so an unchanged function has
//! the same bytes in both normalized forms and a byte-granular diff of the
//! normalized forms finds it whole. [`inverse`](fn@inverse) rebuilds the exact original
//! bytes from the normalized form and a small side info, for every input,
//! non-canonical LEB128s included. docs/WASM_TRANSFORM.md is the
//! specification.
//!
//! ```text
//! old ──forward(None)──────────► old'  ┐
//! new ──forward(Some(ref(old)))─► new' ├─ diff old' → new'   (+ side info)
//!                                       ┘
//! apply: old' = forward(None, old).normalized; new' = patch(old'); new = inverse(new', side)
//! ```
//!
//! Where each part is: [`forward`](fn@forward) (and what the writer learns of a module in `survey`,
//! `matching`, `addresses`), the [`inverse`](fn@inverse) (bounded memory where the normalized form is read
//! through a callback: `read_at`), the side info (`side_info`), and the code section's
//! field-split layout (`split_layout`, on the instruction walker: `walker`, `field_split`,
//! `field_join`). [`Wasm`] is the transform behind the interface every transform implements
//! (edgepatch-format's `Transform`), which is how the core reaches it (`transform`).

#![warn(missing_docs)]

mod addresses;
mod data_gaps;
mod dwarf;
mod elements;
mod error;
mod field_join;
mod field_split;
mod forward;
mod immediates;
mod index_sections;
mod inverse;
mod leb;
mod matching;
mod module;
mod read_at;
mod references;
mod side_info;
mod split_layout;
mod survey;
mod transform;
mod walker;
mod window;

pub use elements::MAX_ELEMENT_BYTES;
pub use error::TransformError;
pub use forward::{forward, forward_with_stats, is_own_normalized_form, reference, Normalized, TransformStats, WasmReference};
pub use inverse::{inverse, inverse_emit, inverse_read, inverse_to};
pub use read_at::{ReadAt, WriteAt};
pub use side_info::{side_info_has_code_layout, side_info_has_dwarf_addresses};
pub use split_layout::{
    into_code_layout, join_code_layout, join_code_layout_hash, layout_parts, section_parts, split_code_layout, split_code_layout_in_place,
    split_code_layout_parts, split_code_layout_read, with_code_layout, with_code_layout_against, with_code_layout_as, LayoutPart, LayoutParts,
};
pub use transform::Wasm;
