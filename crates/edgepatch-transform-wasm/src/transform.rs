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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inverse::inverse;
    use crate::split_layout::{split_code_layout, with_code_layout};

    /// One type, one function whose body is `call 0`.
    fn module() -> Vec<u8> {
        let mut m = MAGIC.to_vec();
        m.extend_from_slice(&[1, 4, 1, 0x60, 0, 0, 3, 2, 1, 0, 10, 6, 1, 4, 0, 0x10, 0, 0x0b]);
        m
    }

    fn inverse_of(t: &dyn Transform, normalized: NormalizedBytes<'_>, side_info: &[u8]) -> Result<Vec<u8>, TransformStop> {
        let mut out = Vec::new();
        t.inverse(normalized, side_info, &mut |piece: &[u8]| {
            out.extend_from_slice(piece);
            Ok(())
        })?;
        Ok(out)
    }

    #[test]
    fn the_interface_gives_what_the_functions_give() {
        let t: &dyn Transform = &Wasm;
        let m = module();
        assert!(t.detect(&m, &m) && !t.detect(&m, b"PK\x03\x04") && side_info::MAGIC == &t.id());
        let n = t.forward(Cow::Borrowed(&m), &m).unwrap();
        assert!(n.side_info.starts_with(&t.id()));
        assert_eq!(inverse_of(t, NormalizedBytes::Shared(&n.bytes), &n.side_info).unwrap(), m);
        assert_eq!(inverse_of(t, NormalizedBytes::InPlace(&mut n.bytes.clone()), &n.side_info).unwrap(), m);
        let mut read = |at: u64, buf: &mut [u8]| {
            buf.copy_from_slice(&n.bytes[at as usize..][..buf.len()]);
            Ok(())
        };
        assert_eq!(inverse_of(t, NormalizedBytes::Read { len: n.bytes.len() as u64, read: &mut read }, &n.side_info).unwrap(), m);
        assert_eq!(t.required_capabilities(&n.side_info), Capabilities::required_by_side_info(&n.side_info));

        // A corrupt side info is refused with the transform's own error.
        let mut bad = n.side_info.clone();
        bad[4] = 99;
        let Err(TransformStop::Corrupt(e)) = inverse_of(t, NormalizedBytes::Shared(&n.bytes), &bad) else { panic!("a corrupt side info") };
        assert_eq!(e.to_string(), inverse(&n.bytes, &bad).unwrap_err().to_string());

        // The old module split as the field-split layout's side info says; a file that is no
        // module is not the old module.
        let split = with_code_layout(&n).unwrap();
        let mut old = m.clone();
        t.split_old_in_place(&mut old, &split.side_info).unwrap();
        assert_eq!(old, split_code_layout(&m, &split.side_info).unwrap());
        let mut written = vec![0; m.len()];
        let mut read = |at: u64, buf: &mut [u8]| {
            buf.copy_from_slice(&m[at as usize..][..buf.len()]);
            Ok(())
        };
        let mut write = |at: u64, bytes: &[u8]| {
            written[at as usize..][..bytes.len()].copy_from_slice(bytes);
            Ok(())
        };
        t.split_old_read(m.len() as u64, &mut read, &split.side_info, &mut write).unwrap();
        assert_eq!(written, old);
        assert!(matches!(t.split_old_in_place(&mut b"not a module".to_vec(), &split.side_info), Err(TransformStop::NotInput(_))));
    }
}
