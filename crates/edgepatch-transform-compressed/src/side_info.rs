//! The side info of a compressed file: its container's header and trailer as they were, and
//! the deflate stream as chunks, each the length of its content, of its compressed bytes and
//! preflate's corrections that rebuild those bytes from the content.
//!
//! ```text
//! [4]    "EPDF"
//! u8     version, 1
//! u8     container: 0 gzip, 1 zlib
//! varint old_content_len          the old file's decoded length
//! varint inner_len                <= 4 MiB
//! inner_len bytes                 the content's wasm transform side info, or none (the format
//!                                 reads this head: edgepatch_format::compressed_side_info)
//! varint header_len               1..=1 MiB
//! header_len bytes                the header, as it was
//! trailer bytes                   8 (gzip) or 4 (zlib), as they were
//! varint chunk_count              1..=2^20
//! chunk_count x {
//!   varint content_len            <= 64 MiB
//!   varint deflate_len            1..=2^40
//!   varint corrections_len        <= 64 MiB
//!   corrections_len bytes         preflate-rs 0.7.6's corrections (the first chunk's carry
//!                                 the parameters preflate found)
//! }
//! ```
//! Nothing may follow the last chunk.

use edgepatch_format::compressed_side_info::{MAX_INNER, MAX_OLD_CONTENT, VERSION};
use edgepatch_format::error::{Error, Input};
use edgepatch_format::wire::{put_varint, SliceReader};

use crate::container::Container;

/// The four bytes this transform's side infos start with.
pub use edgepatch_format::compressed_side_info::MAGIC;
const MAX_HEADER: u64 = 1 << 20;
const MAX_CHUNKS: u64 = 1 << 20;
/// The most content one chunk may have: what an applier holds at once.
pub const MAX_CHUNK_CONTENT: u64 = 64 << 20;
const MAX_CHUNK_DEFLATE: u64 = 1 << 40;

/// One chunk of the deflate stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk<'a> {
    /// Bytes of content it holds.
    pub content_len: u64,
    /// Bytes of the deflate stream it is.
    pub deflate_len: u64,
    /// preflate's corrections.
    pub corrections: &'a [u8],
}

/// A decoded side info.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SideInfo<'a> {
    /// The container.
    pub container: Container,
    /// The decoded length of the old file the delta reads.
    pub old_content_len: u64,
    /// The content's own transform's side info (a compressed wasm module's), or empty: the
    /// delta then holds that transform's normalized form of the content.
    pub inner: &'a [u8],
    /// Its header.
    pub header: &'a [u8],
    /// Its trailer.
    pub trailer: &'a [u8],
    /// The deflate stream's chunks, in order.
    pub chunks: Vec<Chunk<'a>>,
}

/// Reads the head every compressed-asset side info starts with, deflate's and Brotli's alike
/// (the part the format reads: edgepatch_format::compressed_side_info): magic, version, the
/// container code, the old content length and the inner side info.
pub(crate) fn read_head<'a>(r: &mut SliceReader<'a>) -> Result<(u8, u64, &'a [u8]), Error> {
    if r.array::<4>("side info magic")? != *MAGIC {
        return Err(r.corrupt("side info is not a compressed asset's (magic)"));
    }
    let version = r.u8("side info version")?;
    if version != VERSION {
        return Err(r.corrupt(format!("compressed-asset side info version {version} unknown")));
    }
    let code = r.u8("container")?;
    let old_content_len = r.varint_max(MAX_OLD_CONTENT, "old content length")?;
    let inner_len = r.varint_max(MAX_INNER, "inner side info length")?;
    let inner = r.take(inner_len as usize, "inner side info")?;
    Ok((code, old_content_len, inner))
}

impl<'a> SideInfo<'a> {
    /// The encoded side info.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&[VERSION, self.container.code()]);
        put_varint(&mut out, self.old_content_len);
        put_varint(&mut out, self.inner.len() as u64);
        out.extend_from_slice(self.inner);
        put_varint(&mut out, self.header.len() as u64);
        out.extend_from_slice(self.header);
        out.extend_from_slice(self.trailer);
        put_varint(&mut out, self.chunks.len() as u64);
        for c in &self.chunks {
            put_varint(&mut out, c.content_len);
            put_varint(&mut out, c.deflate_len);
            put_varint(&mut out, c.corrections.len() as u64);
            out.extend_from_slice(c.corrections);
        }
        out
    }

    /// Reads an encoded side info; every field within its bounds.
    pub fn decode(bytes: &'a [u8]) -> Result<SideInfo<'a>, Error> {
        let mut r = SliceReader::new(bytes, 0, Input::Patch);
        let (code, old_content_len, inner) = read_head(&mut r)?;
        let container = Container::from_code(code).ok_or_else(|| r.corrupt("unknown container"))?;
        let header_len = r.varint_max(MAX_HEADER, "header length")?;
        if header_len == 0 {
            return Err(r.corrupt("empty header"));
        }
        let header = r.take(header_len as usize, "header")?;
        let trailer = r.take(container.trailer_len(), "trailer")?;
        let count = r.varint_max(MAX_CHUNKS, "chunk count")?;
        // Each chunk takes at least 3 bytes: a count above a third of what is left is a lie.
        if count == 0 || count > r.remaining() as u64 / 3 {
            return Err(r.corrupt(format!("chunk count {count} does not fit the side info")));
        }
        let mut chunks = Vec::with_capacity(count as usize);
        for _ in 0..count {
            let content_len = r.varint_max(MAX_CHUNK_CONTENT, "chunk content length")?;
            let deflate_len = r.varint_max(MAX_CHUNK_DEFLATE, "chunk deflate length")?;
            if deflate_len == 0 {
                return Err(r.corrupt("a chunk of no deflate bytes"));
            }
            let corrections_len = r.varint_max(MAX_CHUNK_CONTENT, "corrections length")?;
            let corrections = r.take(corrections_len as usize, "corrections")?;
            chunks.push(Chunk { content_len, deflate_len, corrections });
        }
        if !r.is_empty() {
            return Err(r.corrupt("bytes after the last chunk"));
        }
        Ok(SideInfo { container, old_content_len, inner, header, trailer, chunks })
    }

    /// Bytes of content of every chunk.
    pub fn content_len(&self) -> u64 {
        self.chunks.iter().map(|c| c.content_len).sum()
    }

    /// Bytes of the file it rebuilds.
    pub fn file_len(&self) -> u64 {
        (self.header.len() + self.trailer.len()) as u64 + self.chunks.iter().map(|c| c.deflate_len).sum::<u64>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        let chunks = vec![Chunk { content_len: 10, deflate_len: 4, corrections: b"abc" }, Chunk { content_len: 0, deflate_len: 2, corrections: b"" }];
        SideInfo { container: Container::Gzip, old_content_len: 7, inner: b"", header: &[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 2, 3], trailer: &[1; 8], chunks }
            .encode()
    }

    #[test]
    fn side_infos_round_trip() {
        let bytes = sample();
        let info = SideInfo::decode(&bytes).unwrap();
        assert_eq!(info.encode(), bytes);
        assert_eq!((info.content_len(), info.file_len()), (10, 24));
    }

    #[test]
    fn every_truncation_and_trailing_byte_is_refused() {
        let bytes = sample();
        for n in 0..bytes.len() {
            assert!(SideInfo::decode(&bytes[..n]).is_err(), "truncated at {n}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(SideInfo::decode(&longer).is_err());
        let mut version = bytes.clone();
        version[4] = 2;
        assert_eq!(edgepatch_format::compressed_side_info::old_content_len(&bytes), Some(7), "the format reads the head");
        assert!(SideInfo::decode(&version).is_err());
        let mut container = bytes;
        container[5] = 9;
        assert!(SideInfo::decode(&container).is_err());
    }
}
