//! Errors of the core: the formats' error type (`edgepatch_format::error`), which the apply
//! reports with too, re-exported so that `edgepatch_core::error::...` names it. Every decoder
//! error names the input and the byte position where it went wrong.

pub use edgepatch_format::error::*;

/// A zstd error code as text.
pub(crate) fn zstd_error(code: usize) -> String {
    format!("zstd: {}", zstd::zstd_safe::get_error_name(code))
}
