//! The compressed-asset transform behind the interface every transform implements
//! ([`Transform`], docs/FORMAT.md §2.8.8): a new gzip or zlib file is diffed as its content
//! against the old file's content, and rebuilt byte for byte from it and the side info.
//!
//! The old file is read decoded: its reference layout is its content (the side info states
//! its length, which the format reads), got by inflating it, which needs no side info. The
//! new file's side info holds preflate's corrections ([`crate::deflate`]).
//!
//! A compressed wasm module (`*.wasm.gz`) may carry the wasm transform's side info too (the
//! inner side info): the delta then holds the module's normalized form, the inverse runs the
//! wasm transform's inverse before the rebuild, and the old file's content is read in that
//! transform's layout.

use std::borrow::Cow;

use edgepatch_format::compressed_side_info::{container, inner_side_info, old_content_len, CONTAINER_BROTLI, MAX_OLD_CONTENT};
use edgepatch_format::transform::{Emit, Normalized, NormalizedBytes, ReadAt, Transform, TransformStop, WriteAt};
use edgepatch_format::Capabilities;

use crate::brotli;
use crate::container::Container;
use crate::decoded::unbrotli;
use crate::deflate::{decode, inflate_whole, rebuild, rebuild_slice, WHOLE_CONTENT};
use crate::side_info::MAGIC;
use crate::CompressedError;

/// The compressed-asset transform (module doc).
pub struct Deflate;

impl From<CompressedError> for TransformStop {
    fn from(e: CompressedError) -> TransformStop {
        match e {
            CompressedError::NotInput(_) => TransformStop::NotInput(Box::new(e)),
            _ => TransformStop::Corrupt(Box::new(e)),
        }
    }
}

impl Transform for Deflate {
    fn id(&self) -> [u8; 4] {
        *MAGIC
    }

    fn detect(&self, old: &[u8], new: &[u8]) -> bool {
        Container::detect(old).is_some() && Container::detect(new).is_some()
    }

    fn forward(&self, old: Cow<'_, [u8]>, new: &[u8]) -> Result<Normalized, TransformStop> {
        let old_len = inflate_whole(&old, WHOLE_CONTENT as u64)?.len() as u64;
        drop(old);
        let d = decode(new, old_len)?;
        Ok(Normalized { bytes: d.content, side_info: d.side_info })
    }

    fn required_capabilities(&self, side_info: &[u8]) -> Capabilities {
        Capabilities::required_by_side_info(side_info)
    }

    fn inverse(&self, normalized: NormalizedBytes<'_>, side_info: &[u8], emit: &mut Emit<'_>) -> Result<(), TransformStop> {
        if container(side_info) == Some(CONTAINER_BROTLI) {
            // The encoder reads the content whole.
            let mut content = Vec::new();
            match (inner_side_info(side_info), normalized) {
                (Some(inner), normalized) => edgepatch_transform_wasm::Wasm.inverse(normalized, inner, &mut |piece| {
                    content.extend_from_slice(piece);
                    Ok(())
                })?,
                (None, NormalizedBytes::InPlace(bytes)) => return brotli::rebuild(bytes, side_info, emit),
                (None, NormalizedBytes::Shared(bytes)) => return brotli::rebuild(bytes, side_info, emit),
                (None, NormalizedBytes::Read { len, read }) => {
                    if len > brotli::MAX_CONTENT {
                        return Err(TransformStop::Corrupt(format!("{len} bytes of Brotli content, above {}", brotli::MAX_CONTENT).into()));
                    }
                    content.resize(len as usize, 0);
                    read(0, &mut content)?;
                }
            }
            return brotli::rebuild(&content, side_info, emit);
        }
        if let Some(inner) = inner_side_info(side_info) {
            // The module's content, whole (a chunk's content is held whole anyway).
            let mut content = Vec::new();
            edgepatch_transform_wasm::Wasm.inverse(normalized, inner, &mut |piece| {
                content.extend_from_slice(piece);
                Ok(())
            })?;
            return rebuild_slice(&content, side_info, emit);
        }
        match normalized {
            NormalizedBytes::InPlace(bytes) => rebuild_slice(bytes, side_info, emit),
            NormalizedBytes::Shared(bytes) => rebuild_slice(bytes, side_info, emit),
            NormalizedBytes::Read { len, read } => rebuild(len, read, side_info, emit),
        }
    }

    /// The old file cannot be decoded in its own buffer (its content is another length): an
    /// applier reads it through [`Transform::split_old_read`].
    fn split_old_in_place(&self, _old: &mut [u8], _side_info: &[u8]) -> Result<(), TransformStop> {
        Err(TransformStop::Corrupt("a compressed asset's old file is read decoded, not in place".into()))
    }

    /// Inflates the old file (read whole: a compressed file is decoded front to back, and
    /// the old files read decoded are bounded by the side info's limit) and writes its content,
    /// which must be the length the side info states, or the old file is not the one the
    /// patch was made from.
    fn split_old_read(&self, len: u64, read: &mut ReadAt<'_>, side_info: &[u8], write: &mut WriteAt<'_>) -> Result<(), TransformStop> {
        let stated = old_content_len(side_info).ok_or_else(|| TransformStop::Corrupt("unreadable compressed-asset side info head".into()))?;
        // Deflate adds at most a few bytes per 64 KiB it cannot compress: an old file above
        // the content limit cannot be one that decodes within it.
        if len > MAX_OLD_CONTENT {
            return Err(TransformStop::NotInput(format!("old file of {len} bytes, above {MAX_OLD_CONTENT}").into()));
        }
        let mut file = vec![0u8; len as usize];
        read(0, &mut file)?;
        let mut content = if container(side_info) == Some(CONTAINER_BROTLI) {
            // Another length than stated is the wrong old build, below.
            unbrotli(&file, stated).map_err(|why| TransformStop::NotInput(format!("old file: {why}").into()))?
        } else {
            inflate_whole(&file, stated)?
        };
        drop(file);
        if content.len() as u64 != stated {
            return Err(TransformStop::NotInput(format!("old file decodes to {} bytes, the patch was made from {stated}", content.len()).into()));
        }
        if let Some(inner) = inner_side_info(side_info) {
            edgepatch_transform_wasm::Wasm.split_old_in_place(&mut content, inner)?;
        }
        write(0, &content)
    }
}
