//! edgepatch-core: the signature format, the diff and the streaming apply, over the patch
//! and manifest formats of edgepatch-format (re-exported as [`patch_format`] and
//! [`manifest`]). It does no I/O of its own: old data comes through
//! [`apply::OldBuild`], output goes to [`apply::BuildSink`], builds are passed
//! in memory to the diff. Native files, OPFS, R2 and memory are adapters
//! elsewhere.

#![warn(missing_docs)]

pub mod apply;
pub mod build;
#[cfg(feature = "deflate-transform")]
mod compressed_assets;
pub mod diff;
pub mod error;
pub mod generate;
pub mod inspect;
pub mod manifest_binding;
pub mod matcher;
pub mod memory;
pub mod renamed_files;
pub mod signature;
pub mod signer;
pub mod trace;
pub mod transforms;
mod tree_plan;
pub mod trust;
mod window_plan;
mod zstd_frame;

/// The update protocol's JSON documents and the rules a client applies to them, defined by
/// edgepatch-format.
pub use edgepatch_format::{channel, descriptor, document_rules, key_rotations};
/// The patch and manifest formats, defined by edgepatch-format.
pub use edgepatch_format::{manifest, patch_format};
/// The wasm transform (its own crate): a compiled module's normalized form and its inverse,
/// reached through [`transforms`] where the core needs only what every transform does.
pub use edgepatch_transform_wasm as wasm_transform;
// The wire primitives and codecs the diff, the generator and the apply share with the formats.
pub(crate) use edgepatch_format::{lzma, segment_codec, wire};

#[doc(hidden)]
pub use edgepatch_format::lzma::stream_with_dictionary as lzma_stream_with_dictionary;

pub use apply::{apply_patch, check_patch_checksum, ApplyProgress, ApplySummary, BuildSink, OldBuild, PatchApplier, ResumePoint};
/// Re-exported so adapters hash exactly as the core does.
pub use blake3;
pub use build::{Build, BuildEntry, EntryContent};
pub use diff::{diff_builds, DiffOptions, DiffStats};
pub use edgepatch_format::{Capabilities, Capability};
pub use error::{Error, Input, Result};
pub use transforms::reader_capabilities;
