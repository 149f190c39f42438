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
//! A Brotli file has no such description; where the brotli reference encoder reproduces it
//! at a setting the writer finds by trial, its side info is that setting and the file is
//! encoded again on apply ([`brotli`], the `brotli` feature: C, native builds only).
//!
//! [`decoded`] is the simpler way, used by `site add --store-decoded`: a client that keeps the
//! decoded content never needs the compressed bytes back, so no side info is needed at all.
//!
//! In patches (docs/FORMAT.md §2.8.8) the transform is [`Deflate`], behind the interface every
//! transform implements: the delta reads the old file decoded (its length in the side info's
//! head, which the format reads), and a compressed wasm module's content may go through the
//! wasm transform too (an inner side info). preflate trusts its corrections (one flipped bit
//! kept it recreating blocks until it held 5.6 GB), so [`deflate::rebuild`] bounds the encoder
//! parameters and every length of the side info's own fields and catches preflate's panics, and
//! the applier hands it side infos only where a signed manifest vouched for the patch's head or
//! the caller trusts the patch (edgepatch-core's `BuildSink::trusts_side_infos`).

#![warn(missing_docs)]

pub mod brotli;
pub mod container;
pub mod decoded;
pub mod deflate;
mod error;
pub mod side_info;
mod transform;

pub use error::CompressedError;
pub use transform::Deflate;
