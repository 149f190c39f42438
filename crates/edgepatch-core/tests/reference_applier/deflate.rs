//! The compressed-asset transform as docs/FORMAT.md §2.8.8 states it (no code shared with
//! edgepatch-transform-compressed): the side info read field by field, the old file inflated
//! (or Brotli-decoded) whole, and each chunk's deflate bytes recreated by preflate-rs from its
//! content and corrections, or a Brotli file encoded again by the brotli reference encoder at
//! the stated settings. Whole-file, in memory.

use std::io::Read;

use super::Outcome;

/// Whether a side info names the compressed-asset transform (its old file is read decoded).
pub fn is_compressed(side: &[u8]) -> bool {
    side.starts_with(b"EPDF")
}

struct Reader<'a>(&'a [u8], usize);

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Outcome<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *self.0.get(self.1).ok_or("side info truncated")?;
            self.1 += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("varint too long".into())
    }

    fn take(&mut self, n: u64) -> Outcome<&'a [u8]> {
        let n = usize::try_from(n).map_err(|_| "length")?;
        let end = self.1.checked_add(n).filter(|&e| e <= self.0.len()).ok_or("side info truncated")?;
        let out = &self.0[self.1..end];
        self.1 = end;
        Ok(out)
    }
}

const BROTLI: u8 = 2;

/// Magic, version 1, container (0 gzip, 1 zlib, 2 Brotli), the old content length, the inner
/// side info (a wasm transform's, or empty).
fn head(side: &[u8]) -> Outcome<(Reader<'_>, u8, u64, &[u8])> {
    let mut r = Reader(side, 0);
    if r.take(4)? != b"EPDF" || r.take(1)? != [1] {
        return Err("not a version 1 compressed-asset side info".into());
    }
    let container = r.take(1)?[0];
    if container > BROTLI {
        return Err("container".into());
    }
    let old_len = r.varint()?;
    if old_len > 64 << 20 {
        return Err("old content length over 64 MiB".into());
    }
    let inner_len = r.varint()?;
    if inner_len > 4 << 20 {
        return Err("inner side info over 4 MiB".into());
    }
    let inner = r.take(inner_len)?;
    Ok((r, container, old_len, inner))
}

/// The old file as the reference holds it: its content, which must have the stated length (in
/// the wasm split layout where the inner side info has it, §2.8.7).
pub fn decoded_old(old: &[u8], side: &[u8]) -> Outcome<Vec<u8>> {
    let (_, container, old_len, inner) = head(side)?;
    let mut content = Vec::new();
    let read = if container == BROTLI {
        brotlic::DecompressorReader::new(old).take(old_len + 1).read_to_end(&mut content)
    } else if old.starts_with(&[0x1f, 0x8b]) {
        flate2::read::GzDecoder::new(old).take(old_len + 1).read_to_end(&mut content)
    } else {
        flate2::read::ZlibDecoder::new(old).take(old_len + 1).read_to_end(&mut content)
    };
    read.map_err(|e| format!("old file does not inflate: {e}"))?;
    if content.len() as u64 != old_len {
        return Err(format!("old file decodes to {} bytes, the side info says {old_len}", content.len()));
    }
    if super::wasm::has_layout(inner) {
        return super::wasm::split_as(&content, inner).map_err(|e| format!("the old module does not split: {e}"));
    }
    Ok(content)
}

/// The file from its content (from the wasm transform's normalized form first, where the side
/// info has an inner one): header, each chunk recreated in order by one preflate recreator,
/// trailer.
pub fn inverse(normalized: &[u8], side: &[u8]) -> Outcome<Vec<u8>> {
    let (mut r, container, _, inner) = head(side)?;
    let module;
    let content = if inner.is_empty() {
        normalized
    } else {
        module = super::wasm::inverse(normalized, inner).map_err(|e| format!("inner wasm inverse: {e}"))?;
        &module[..]
    };
    if container == BROTLI {
        return brotli_inverse(content, r);
    }
    let trailer_len = if container == 0 { 8 } else { 4 };
    let header_len = r.varint()?;
    let header = r.take(header_len)?;
    let trailer = r.take(trailer_len as u64)?;
    let chunks = r.varint()?;
    let mut out = header.to_vec();
    let mut recreate = preflate_rs::RecreateStreamProcessor::new();
    let mut at = 0usize;
    for _ in 0..chunks {
        let content_len = usize::try_from(r.varint()?).map_err(|_| "chunk length")?;
        let deflate_len = r.varint()?;
        let corrections_len = r.varint()?;
        let corrections = r.take(corrections_len)?;
        let piece = content.get(at..at + content_len).ok_or("chunks hold more content than the file")?;
        at += content_len;
        let (bytes, _) = recreate.recompress(&mut std::io::Cursor::new(piece), corrections).map_err(|e| format!("preflate: {e:?}"))?;
        if bytes.len() as u64 != deflate_len {
            return Err("chunk's deflate length".into());
        }
        out.extend_from_slice(&bytes);
    }
    if at != content.len() || r.1 != side.len() {
        return Err("content or side info left over".into());
    }
    out.extend_from_slice(trailer);
    Ok(out)
}

/// A Brotli file: quality (0..=11), window bits (10..=24), mode (0 generic, 1 text, 2 font),
/// flags (bit 0: the content's length as the size hint), the content's length; the content
/// encoded at those settings.
fn brotli_inverse(content: &[u8], mut r: Reader<'_>) -> Outcome<Vec<u8>> {
    use brotlic::{BrotliEncoderOptions, CompressionMode, CompressorWriter, Quality, WindowSize};
    use std::io::Write;
    let s = r.take(4)?;
    let (quality, window, mode, flags) = (s[0], s[1], s[2], s[3]);
    if r.varint()? != content.len() as u64 || r.1 != r.0.len() {
        return Err("Brotli content length, or bytes after it".into());
    }
    let mode = match mode {
        0 => CompressionMode::Generic,
        1 => CompressionMode::Text,
        2 => CompressionMode::Font,
        _ => return Err("Brotli mode".into()),
    };
    if flags > 1 {
        return Err("Brotli flags".into());
    }
    let mut options = BrotliEncoderOptions::new();
    options.quality(Quality::new(quality).map_err(|e| e.to_string())?).window_size(WindowSize::new(window).map_err(|e| e.to_string())?).mode(mode);
    if flags == 1 {
        options.size_hint(content.len() as u32);
    }
    let mut w = CompressorWriter::with_encoder(options.build().map_err(|e| e.to_string())?, Vec::new());
    w.write_all(content).map_err(|e| e.to_string())?;
    w.into_inner().map_err(|e| e.to_string())
}
