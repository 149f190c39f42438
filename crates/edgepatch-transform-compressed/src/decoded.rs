//! Files stored decoded: a build's `.gz` or `.br` file kept as the content it decodes to,
//! which is what a browser hands a game after `Content-Encoding`, and what diffs like a raw
//! file. A portal that stores builds this way never needs an encoder: its Service Worker
//! answers the `.gz`/`.br` URL with the decoded bytes (docs/FORMAT.md §4.7, record flags bit 1).
//!
//! The rule is deterministic, so the same build decodes to the same files on every machine: a
//! file is stored decoded when its name ends in `.gz` or `.br`
//! ([`edgepatch_format::manifest::coding_of_path`]) and all of it is one well-formed stream of
//! that coding (gzip: one member, CRC-32 and size checked; Brotli: one stream, nothing after
//! it) decoding to at most [`MAX_DECODED_BYTES`]. Any other file is stored as it is.

use std::io::Read;

use brotli_decompressor::{BrotliDecompressStream, BrotliResult, BrotliState, StandardAlloc};
use edgepatch_format::manifest::{coding_of_path, Coding};

/// The largest content a file is stored decoded with (2 GiB): a bigger one, or a stream that
/// claims more (a decompression bomb), is stored as it is.
pub const MAX_DECODED_BYTES: u64 = 2 << 30;

/// Bytes decoded at a time.
const CHUNK: usize = 1 << 16;

/// The content `bytes`, the file at `path`, is stored as: `Ok` its decoded content, or `Err`
/// why it is stored as it is (no coding by its name, or not one whole stream of it within
/// `max` bytes decoded).
pub fn decode_for_storage(path: &str, bytes: &[u8], max: u64) -> Result<Vec<u8>, String> {
    match coding_of_path(path) {
        None => Err("its name ends in neither .gz nor .br".into()),
        Some(Coding::Gzip) => gunzip_one_member(bytes, max),
        Some(Coding::Brotli) => unbrotli(bytes, max),
    }
}

fn gunzip_one_member(bytes: &[u8], max: u64) -> Result<Vec<u8>, String> {
    let mut rest = bytes;
    let mut out = Vec::new();
    {
        let mut d = flate2::bufread::GzDecoder::new(&mut rest).take(max + 1);
        d.read_to_end(&mut out).map_err(|e| format!("not one gzip member: {e}"))?;
    }
    if out.len() as u64 > max {
        return Err(format!("decodes to more than {max} bytes"));
    }
    if !rest.is_empty() {
        return Err(format!("{} bytes after its first gzip member", rest.len()));
    }
    Ok(out)
}

/// The content of `bytes`, one whole Brotli stream decoding to at most `max` bytes.
pub fn unbrotli(bytes: &[u8], max: u64) -> Result<Vec<u8>, String> {
    let mut state = BrotliState::new(StandardAlloc::default(), StandardAlloc::default(), StandardAlloc::default());
    let (mut available_in, mut input_offset) = (bytes.len(), 0usize);
    let mut out = Vec::new();
    let mut buf = vec![0u8; CHUNK];
    loop {
        let (mut available_out, mut output_offset, mut written) = (buf.len(), 0usize, 0usize);
        let result =
            BrotliDecompressStream(&mut available_in, &mut input_offset, bytes, &mut available_out, &mut output_offset, &mut buf, &mut written, &mut state);
        if out.len() as u64 + output_offset as u64 > max {
            return Err(format!("decodes to more than {max} bytes"));
        }
        out.extend_from_slice(&buf[..output_offset]);
        match result {
            BrotliResult::NeedsMoreOutput => {}
            BrotliResult::ResultSuccess if available_in == 0 => return Ok(out),
            BrotliResult::ResultSuccess => return Err(format!("{available_in} bytes after its Brotli stream")),
            BrotliResult::NeedsMoreInput => return Err("a Brotli stream cut short".into()),
            BrotliResult::ResultFailure => return Err("not a Brotli stream".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(9));
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn gzip_one_member_decodes_and_anything_else_is_kept() {
        let content: Vec<u8> = (0..200_000u32).flat_map(|i| (i % 251).to_le_bytes()).collect();
        let gz = gzip(&content);
        assert_eq!(decode_for_storage("Build/game.data.gz", &gz, MAX_DECODED_BYTES).unwrap(), content);
        // Kept: another name, two members, trailing bytes, a cut, a flipped CRC, over the bound.
        assert!(decode_for_storage("Build/game.data", &gz, MAX_DECODED_BYTES).is_err());
        assert!(decode_for_storage("a.gz", &[gz.clone(), gz.clone()].concat(), MAX_DECODED_BYTES).unwrap_err().contains("after its first gzip member"));
        assert!(decode_for_storage("a.gz", &[&gz[..], b"x"].concat(), MAX_DECODED_BYTES).is_err());
        assert!(decode_for_storage("a.gz", &gz[..gz.len() - 1], MAX_DECODED_BYTES).is_err());
        let mut bad_crc = gz.clone();
        let at = bad_crc.len() - 8;
        bad_crc[at] ^= 1;
        assert!(decode_for_storage("a.gz", &bad_crc, MAX_DECODED_BYTES).is_err());
        assert!(decode_for_storage("a.gz", &gz, content.len() as u64 - 1).unwrap_err().contains("more than"));
        assert_eq!(decode_for_storage("a.gz", &gz, content.len() as u64).unwrap().len(), content.len());
    }

    /// `brotli -q 11` of `edgepatch ` written 100 times (Debian's brotli 1.0.9).
    const BROTLI_REPEAT: &[u8] = &[0xa1, 0x38, 0x1f, 0xc0, 0x2f, 0x59, 0x46, 0x76, 0x56, 0xa3, 0x14, 0x56, 0x0a, 0x8c, 0x43, 0x7b, 0xc4, 0x0c];

    #[test]
    fn brotli_one_stream_decodes_and_anything_else_is_kept() {
        let content = b"edgepatch ".repeat(100);
        let got = decode_for_storage("x.br", BROTLI_REPEAT, MAX_DECODED_BYTES);
        assert_eq!(got.as_deref().map(<[u8]>::len), Ok(content.len()), "{got:?}");
        assert_eq!(got.unwrap(), content);
        assert!(decode_for_storage("x.br", &[BROTLI_REPEAT, b"x"].concat(), MAX_DECODED_BYTES).unwrap_err().contains("after its Brotli stream"));
        assert!(decode_for_storage("x.br", &BROTLI_REPEAT[..BROTLI_REPEAT.len() - 2], MAX_DECODED_BYTES).is_err());
        assert!(decode_for_storage("x.br", b"plain text, not brotli at all", MAX_DECODED_BYTES).is_err());
        assert!(decode_for_storage("x.br", BROTLI_REPEAT, 999).unwrap_err().contains("more than"));
    }
}
