//! The wasm transform behind the interface every transform implements (edgepatch-format's
//! `Transform`): [`Wasm`], whose methods are this crate's forward, inverse and field-split
//! layout of an old module, and how its errors become the interface's.

use std::borrow::Cow;

use edgepatch_format::transform::{Emit, Normalized, NormalizedBytes, ReadAt, Transform, TransformStop, WriteAt};
use edgepatch_format::Capabilities;

use crate::error::TransformError;
use crate::forward::{forward, is_own_normalized_form, reference};
use crate::inverse::{inverse_emit, inverse_read, inverse_to};
use crate::module::MAGIC;
use crate::side_info;
use crate::split_layout::{split_code_layout_in_place, split_code_layout_read};

/// The wasm transform (docs/FORMAT.md §2.8): a WebAssembly module's normalized form against
/// the old module, its streaming inverse, and the old module in the field-split layout.
#[derive(Debug, Clone, Copy, Default)]
pub struct Wasm;

/// A module the transform does not read is not its input; anything else it refuses is a
/// corrupt side info or normalized form.
impl From<TransformError> for TransformStop {
    fn from(e: TransformError) -> Self {
        match e {
            TransformError::NotWasm { .. } => TransformStop::NotInput(Box::new(e)),
            e => TransformStop::Corrupt(Box::new(e)),
        }
    }
}

impl Transform for Wasm {
    fn id(&self) -> [u8; 4] {
        *side_info::MAGIC
    }

    /// Both start with the wasm magic (`\0asm`); the version is the forward's to check.
    fn detect(&self, old: &[u8], new: &[u8]) -> bool {
        old.starts_with(&MAGIC[..4]) && new.starts_with(&MAGIC[..4])
    }

    /// Against the old module's reference, where the old module is its own normalized form
    /// (`forward(None, old)` would not change it, as the applier reads it as it is).
    fn forward(&self, old: Cow<'_, [u8]>, new: &[u8]) -> Result<Normalized, TransformStop> {
        let reference = reference(&old)?;
        // forward(None, old).bytes == old, checked body by body, without building that copy.
        if !is_own_normalized_form(&old)? {
            return Err(TransformError::NotWasm { offset: 0, what: "the old module is not its own normalized form" }.into());
        }
        drop(old);
        Ok(forward(Some(&reference), new)?)
    }

    fn required_capabilities(&self, side_info: &[u8]) -> Capabilities {
        Capabilities::required_by_side_info(side_info)
    }

    fn inverse(&self, normalized: NormalizedBytes<'_>, side_info: &[u8], emit: &mut Emit<'_>) -> Result<(), TransformStop> {
        match normalized {
            NormalizedBytes::InPlace(bytes) => inverse_to(bytes, side_info, emit),
            NormalizedBytes::Shared(bytes) => inverse_emit(bytes, side_info, emit),
            NormalizedBytes::Read { len, read } => inverse_read(len, read, side_info, emit),
        }
    }

    fn split_old_in_place(&self, old: &mut [u8], side_info: &[u8]) -> Result<(), TransformStop> {
        split_code_layout_in_place(old, side_info)?;
        Ok(())
    }

    fn split_old_read(&self, len: u64, read: &mut ReadAt<'_>, side_info: &[u8], write: &mut WriteAt<'_>) -> Result<(), TransformStop> {
        split_code_layout_read(len, read, side_info, write)
    }
}
