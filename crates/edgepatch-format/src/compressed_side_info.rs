//! What the patch format reads in a compressed-asset transform's side info without decoding
//! it (docs/FORMAT.md §2.8.8): that the file's delta reads its old file decoded, and how many
//! bytes that decoded old file takes in the reference. The side info's codec belongs to the
//! compressed-asset transform (edgepatch-transform-compressed); these head bytes are the
//! format's.
//!
//! ```text
//! [4]    "EPDF"
//! u8     version, 1
//! u8     container                0 gzip, 1 zlib (deflate), 2 Brotli
//! varint old_content_len          the old file's decoded length, <= MAX_OLD_CONTENT
//! varint inner_len                <= MAX_INNER
//! inner_len bytes                 the content's own transform: a wasm transform side info
//!                                 (`EPWT`) of a compressed wasm module, or none
//! ...                             the transform's own fields
//! ```

use crate::wire::SliceReader;
use crate::Input;

/// The four bytes a compressed-asset side info starts with.
pub const MAGIC: &[u8; 4] = b"EPDF";
/// The side info version this build reads and writes.
pub const VERSION: u8 = 1;
/// The container code of a Brotli stream (rebuilt by the reference encoder, capability
/// `brotli-transform`); the other codes are deflate's containers (`deflate-transform`).
pub const CONTAINER_BROTLI: u8 = 2;

/// The container code of a compressed-asset side info, if it is one and long enough to say.
pub fn container(side_info: &[u8]) -> Option<u8> {
    if !is_compressed(side_info) {
        return None;
    }
    side_info.get(5).copied()
}

/// The most bytes an old file read decoded may take: what an applier holds for it at once
/// (64 MiB, the transform table's limit on any file, `patch_format::MAX_WASM_TRANSFORM_BYTES`).
pub const MAX_OLD_CONTENT: u64 = 64 << 20;

/// The side info of the content's own transform (a compressed wasm module's, whose content is
/// then the module's normalized form and whose old file reads decoded in that transform's
/// layout), if the head says so; None where there is none or the head does not read.
pub fn inner_side_info(side_info: &[u8]) -> Option<&[u8]> {
    let mut r = head(side_info)?;
    let len = r.varint_max(MAX_INNER, "inner side info length").ok()?;
    let inner = r.take(len as usize, "inner side info").ok()?;
    (!inner.is_empty()).then_some(inner)
}

/// A reader past the head's fixed fields and the old content length.
fn head(side_info: &[u8]) -> Option<SliceReader<'_>> {
    if !is_compressed(side_info) {
        return None;
    }
    let mut r = SliceReader::new(side_info, 0, Input::Patch);
    r.take(6, "side info head").ok()?;
    r.varint_max(MAX_OLD_CONTENT, "old content length").ok()?;
    Some(r)
}

/// The longest inner side info: a transform table row's limit (4 MiB,
/// `patch_format::MAX_WASM_SIDE_INFO`).
pub const MAX_INNER: u64 = 4 << 20;

/// Whether a side info (valid or not) names the compressed-asset transform.
pub fn is_compressed(side_info: &[u8]) -> bool {
    side_info.starts_with(MAGIC)
}

/// The decoded length of the old file a compressed-asset side info's delta reads, from its
/// head; None where the side info is not one, or its head does not read (the transform
/// refuses it with its own error before anything is read).
pub fn old_content_len(side_info: &[u8]) -> Option<u64> {
    if !is_compressed(side_info) {
        return None;
    }
    let mut r = SliceReader::new(side_info, 0, Input::Patch);
    r.take(6, "side info head").ok()?;
    r.varint_max(MAX_OLD_CONTENT, "old content length").ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_head_gives_the_old_files_decoded_length_and_the_inner_side_info() {
        let mut side = b"EPDF\x01\x00".to_vec();
        crate::wire::put_varint(&mut side, 300);
        assert_eq!(old_content_len(&side), Some(300));
        assert_eq!(old_content_len(&side[..6]), None, "truncated");
        assert_eq!(old_content_len(b"EPWT\x01\x00\x05"), None, "another transform's");
        let mut huge = b"EPDF\x01\x00".to_vec();
        crate::wire::put_varint(&mut huge, MAX_OLD_CONTENT + 1);
        assert_eq!(old_content_len(&huge), None, "over the limit");
        let mut nested = side.clone();
        nested.extend_from_slice(&[3, b'E', b'P', b'W']);
        assert_eq!(inner_side_info(&nested), Some(&b"EPW"[..]));
        assert_eq!(inner_side_info(&nested[..nested.len() - 1]), None, "truncated");
        side.push(0);
        assert_eq!(inner_side_info(&side), None, "none");
    }
}
