//! The compressed-asset transform: a gzip or zlib file (a Unity build's `*.data.gz`, a
//! pre-compressed `*.wasm.gz`) as the content it decodes to, which diffs like the raw file,
//! and a small side info from which the exact compressed bytes are rebuilt.
//!
//! A compressed file changes almost everywhere when a few bytes of its content change, so a
//! byte diff of two of them saves little. Its content diffs well; the difficulty is getting
//! the very same compressed bytes back, which needs the encoder's choices. preflate predicts
//! them from the stream itself (hash chain, window, match policy) and records only where the
//! prediction is wrong (for GNU gzip -9 of 2 to 29 MB files, 84 to 1,455 bytes)
//! ([`deflate`]). The container's header and trailer are kept as they are
//! ([`container`]); [`side_info`] is the side info's layout.
//!
//! [`decoded`] is the simpler way, used by `site add --store-decoded`: a client that keeps the
//! decoded content never needs the compressed bytes back, so no side info is needed at all.
//!
//! The transform is not yet reachable from a patch, for two reasons:
//! - the diff must read the old file's content too, which the patch format does not yet
//!   describe (an old file read in a layout of another length than the file);
//! - preflate trusts its corrections: a one-bit change in the coded corrections of a 30 KB
//!   file's side info made it allocate 3.5 GB. [`deflate::rebuild`] bounds the encoder
//!   parameters and every length of the side info's own fields; a client bound to a signed
//!   manifest verifies the whole tree section (side infos included) before decoding it (the
//!   manifest's head BLAKE3), but an unsigned patch applied with `edgepatch apply` would need
//!   its checksum verified before any side info is used.

#![warn(missing_docs)]

pub mod container;
pub mod decoded;
pub mod deflate;
mod error;
pub mod side_info;
mod transform;

pub use error::CompressedError;
pub use transform::Deflate;
