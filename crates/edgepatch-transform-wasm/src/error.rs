//! The transform's error, and how a parse failure becomes one: of the input module (not a
//! module the transform reads) or of a normalized one (corrupt).

use crate::module::ParseError;

/// Why a transform step failed. `NotWasm` means "use the plain diff".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TransformError {
    /// The input is not a module the transform reads: diff it as plain bytes.
    #[error("not a WebAssembly module the transform reads: {what} at byte {offset}")]
    NotWasm {
        /// Where in the module.
        offset: usize,
        /// What could not be read.
        what: &'static str,
    },
    /// The patch's side info is malformed.
    #[error("wasm transform side info corrupt at byte {offset}: {what}")]
    SideInfo {
        /// Where in the side info.
        offset: usize,
        /// What is wrong.
        what: &'static str,
    },
    /// The normalized bytes do not fit the side info.
    #[error("normalized wasm corrupt at byte {offset}: {what}")]
    Normalized {
        /// Where in the normalized module.
        offset: usize,
        /// What is wrong.
        what: &'static str,
    },
}

/// A normalized module that does not read as one: corrupt.
pub(crate) fn corrupt(e: ParseError) -> TransformError {
    TransformError::Normalized { offset: e.offset, what: e.what }
}

pub(crate) fn not_wasm(e: ParseError) -> TransformError {
    TransformError::NotWasm { offset: e.offset, what: e.what }
}
