//! edgepatch-core: the patch, signature and manifest formats, the diff and the
//! streaming apply. It does no I/O of its own: old data comes through
//! [`apply::OldBuild`], output goes to [`apply::BuildSink`], builds are passed
//! in memory to the diff. Native files, OPFS, R2 and memory are adapters
//! elsewhere.

#![warn(missing_docs)]

pub mod apply;
pub mod build;
pub mod diff;
pub mod error;
pub mod generate;
pub mod inspect;
mod lzma;
pub mod manifest;
pub mod manifest_binding;
pub mod matcher;
pub mod memory;
pub mod patch_format;
mod perfect_hash;
pub mod renamed_files;
mod segment_codec;
pub mod signature;
pub mod signer;
pub mod trace;
mod tree_plan;
pub mod trust;
mod window_plan;
mod wire;
mod zstd_frame;

/// The wasm transform (its own crate): a compiled module's normalized form and its inverse.
pub use edgepatch_transform_wasm as wasm_transform;

#[doc(hidden)]
pub use lzma::stream_with_dictionary as lzma_stream_with_dictionary;

pub use apply::{apply_patch, ApplyProgress, ApplySummary, BuildSink, OldBuild, PatchApplier, ResumePoint};
/// Re-exported so adapters hash exactly as the core does.
pub use blake3;
pub use build::{Build, BuildEntry, EntryContent};
pub use diff::{diff_builds, DiffOptions, DiffStats};
pub use edgepatch_format::{Capabilities, Capability};
pub use error::{Error, Input, Result};
