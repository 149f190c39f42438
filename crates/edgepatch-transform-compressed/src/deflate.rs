//! A gzip or zlib file as its content and a side info ([`decode`]), and the exact file
//! rebuilt from them, chunk by chunk ([`rebuild`]).
//!
//! A stream is handed to preflate whole (which describes it in one chunk, or several where it
//! stops between blocks on its own), up to [`WHOLE_CONTENT`] of content; a longer one is
//! stored as it is. The side info allows a stream in chunks of whole deflate blocks,
//! rebuilt in order through one recreating predictor that keeps only deflate's 32 KiB window
//! between chunks (memory: one chunk, whatever the stream's length), but preflate's chunked
//! description is not reliable yet: measured, it fails where the whole stream succeeds
//! (a 28 MB game archive's gzip -9 in 1 MiB slices, a 2 MB module's gzip -9 in slices up to
//! 64 KiB, miniz level 6 streams) and costs more corrections where it works (a 14 MB module's
//! gzip -9: 532 bytes whole, 8.8 KB in 1 MiB slices).

use std::io::{Cursor, Read};

use preflate_rs::{HashAlgorithm, PreflateConfig, PreflateStreamProcessor, RecreateStreamProcessor, TokenPredictorParameters};

use edgepatch_format::transform::ReadAt;

use crate::container::Framing;
use crate::error::CompressedError;
use crate::side_info::{Chunk, SideInfo};

/// The most content of a stream the writer describes: at most what an applier holds at once
/// for it (below the format's limit, [`crate::side_info::MAX_CHUNK_CONTENT`]).
pub const WHOLE_CONTENT: usize = 32 << 20;

/// The hash chain length preflate may assume of the encoder (its default: zlib's level 9
/// uses 4096); a stream that needs more is stored as it is.
const MAX_CHAIN: u32 = 4096;

/// A compressed file as the writer stores it: its content, and the side info that rebuilds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    /// The file's content (what the deflate stream decodes to).
    pub content: Vec<u8>,
    /// The encoded side info.
    pub side_info: Vec<u8>,
}

/// The content and side info of `file`, a gzip member or zlib stream, whose delta reads an old
/// file of `old_content_len` bytes decoded; `NotInput` where the file is neither, or preflate
/// cannot describe its stream within the bounds above. Every chunk is rebuilt and compared as
/// it is described, so a side info this returns rebuilds the file.
pub fn decode(file: &[u8], old_content_len: u64) -> Result<Decoded, CompressedError> {
    let not_input = CompressedError::NotInput;
    let framing = Framing::of(file).map_err(|e| not_input(e.to_string()))?;
    let deflate = framing.deflate(file);
    let config = PreflateConfig { max_chain_length: MAX_CHAIN, plain_text_limit: WHOLE_CONTENT, verify_compression: true };
    let mut stream = PreflateStreamProcessor::new(&config);
    let mut content = Vec::new();
    let mut chunks: Vec<(u64, u64, Vec<u8>)> = Vec::new();
    let mut start = 0;
    // Handed the rest of the stream each time; preflate may stop between blocks on its own.
    while !stream.is_done() {
        match stream.decompress(&deflate[start..]) {
            Ok(chunk) if chunk.compressed_size > 0 => {
                let text = stream.plain_text().text();
                content.extend_from_slice(text);
                if content.len() > WHOLE_CONTENT {
                    return Err(not_input(format!("more than {WHOLE_CONTENT} bytes of content")));
                }
                chunks.push((text.len() as u64, chunk.compressed_size as u64, chunk.corrections));
                start += chunk.compressed_size;
                stream.shrink_to_dictionary();
            }
            Ok(_) => return Err(not_input("preflate made no progress".into())),
            Err(e) => return Err(not_input(format!("preflate: {:?}: {}", e.exit_code(), e.message().lines().next().unwrap_or("")))),
        }
    }
    if start != deflate.len() {
        return Err(not_input(format!("{} bytes between the deflate stream's end and the trailer", deflate.len() - start)));
    }
    // What an applier refuses, the writer does not write: such a file is diffed as it is.
    check_parameters(chunks.first().map_or(&[][..], |c| &c.2)).map_err(|what| not_input(format!("encoder parameters an applier refuses: {what}")))?;
    let trailer_at = file.len() - framing.container.trailer_len();
    let chunks = chunks.iter().map(|(content_len, deflate_len, c)| Chunk { content_len: *content_len, deflate_len: *deflate_len, corrections: c }).collect();
    let info =
        SideInfo { container: framing.container, old_content_len, inner: &[], header: &file[..framing.header_len], trailer: &file[trailer_at..], chunks };
    Ok(Decoded { side_info: info.encode(), content })
}

/// The content of `file`, a gzip member or zlib stream read whole (nothing after its deflate
/// stream but the trailer), of at most `max` bytes: an old file as the delta reads it. No
/// side info is needed to decode; `NotInput` where the file is no such stream.
pub fn inflate_whole(file: &[u8], max: u64) -> Result<Vec<u8>, CompressedError> {
    let not_input = CompressedError::NotInput;
    let framing = Framing::of(file).map_err(|e| not_input(e.to_string()))?;
    let mut stream = framing.deflate(file);
    let mut content = Vec::new();
    {
        let mut d = flate2::bufread::DeflateDecoder::new(&mut stream).take(max + 1);
        d.read_to_end(&mut content).map_err(|e| not_input(format!("deflate stream: {e}")))?;
    }
    if content.len() as u64 > max {
        return Err(not_input(format!("decodes to more than {max} bytes")));
    }
    if !stream.is_empty() {
        return Err(not_input(format!("{} bytes between the deflate stream's end and the trailer", stream.len())));
    }
    Ok(content)
}

/// Rebuilds the file whose side info is `side_info` from its content, `content_len` bytes
/// read through `read(offset, buf)`, handing it to `emit` front to back. The content's length
/// and every chunk's output length must be the side info's, or the patch is corrupt. An error
/// of `read` or `emit` stops the rebuild and is returned as it is.
pub fn rebuild<E: From<CompressedError>>(
    content_len: u64,
    read: &mut ReadAt<'_, E>,
    side_info: &[u8],
    emit: &mut dyn FnMut(&[u8]) -> Result<(), E>,
) -> Result<(), E> {
    let info = SideInfo::decode(side_info).map_err(CompressedError::from)?;
    if info.content_len() != content_len {
        return Err(CompressedError::Rebuild(format!("{content_len} bytes of content where the side info has {}", info.content_len())).into());
    }
    let first = info.chunks.first().map_or(&[][..], |c| c.corrections);
    check_parameters(first).map_err(|what| CompressedError::Rebuild(format!("encoder parameters: {what}")))?;
    emit(info.header)?;
    let mut recreate = RecreateStreamProcessor::new();
    let mut chunk_content = Vec::new();
    let mut at = 0;
    for (k, chunk) in info.chunks.iter().enumerate() {
        chunk_content.resize(chunk.content_len as usize, 0);
        read(at, &mut chunk_content)?;
        at += chunk.content_len;
        // preflate trusts its corrections: what they make it do wrong (an arithmetic overflow,
        // an index out of bounds) is a panic, caught here as a corrupt side info (overflow
        // checks stay on for preflate-rs in release builds: Cargo.toml).
        let recreated = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| recreate.recompress(&mut Cursor::new(&chunk_content[..]), chunk.corrections)));
        let (out, _) = recreated
            .map_err(|_| CompressedError::Rebuild(format!("chunk {k}: preflate stopped on corrections it cannot follow")))?
            .map_err(|e| CompressedError::Rebuild(format!("chunk {k}: preflate: {e:?}")))?;
        if out.len() as u64 != chunk.deflate_len {
            return Err(CompressedError::Rebuild(format!("chunk {k} rebuilt {} deflate bytes where the side info has {}", out.len(), chunk.deflate_len)).into());
        }
        emit(&out)?;
    }
    emit(info.trailer)
}

/// [`rebuild`] from content in memory.
pub fn rebuild_slice<E: From<CompressedError>>(content: &[u8], side_info: &[u8], emit: &mut dyn FnMut(&[u8]) -> Result<(), E>) -> Result<(), E> {
    rebuild(
        content.len() as u64,
        &mut |at, buf| {
            buf.copy_from_slice(&content[at as usize..at as usize + buf.len()]);
            Ok(())
        },
        side_info,
        emit,
    )
}

/// [`rebuild`] from content in memory, into a new vector (tests and writers checking their
/// own output).
pub fn rebuild_to_vec(content: &[u8], side_info: &[u8]) -> Result<Vec<u8>, CompressedError> {
    let mut out = Vec::new();
    rebuild_slice::<CompressedError>(content, side_info, &mut |piece| {
        out.extend_from_slice(piece);
        Ok(())
    })?;
    Ok(out)
}

/// The head of a stream's first corrections as preflate-rs 0.7.6 writes it (bitcode of its
/// private `ReconstructionData`: the encoder parameters, then the coded corrections).
#[derive(bitcode::Decode)]
struct Reconstruction {
    parameters: TokenPredictorParameters,
    #[allow(dead_code)]
    corrections: Vec<u8>,
}

/// Refuses encoder parameters outside what deflate encoders use, before preflate runs with
/// them: preflate trusts its own writer, so a window of 2^40 bytes panics and a hash chain of
/// 2^32 links runs for hours. (Its coded corrections are read with bounds checks; parameters
/// are the part it does not check.)
fn check_parameters(first_corrections: &[u8]) -> Result<(), String> {
    let p = bitcode::decode::<Reconstruction>(first_corrections).map_err(|e| format!("unreadable: {e}"))?.parameters;
    let within =
        |what: &str, v: u32, range: std::ops::RangeInclusive<u32>| if range.contains(&v) { Ok(()) } else { Err(format!("{what} {v} outside {range:?}")) };
    // Deflate's windows are 2^9..2^15 bytes; preflate states 0 for a stream that uses none
    // (stored or Huffman-only blocks: its strategy, a type preflate-rs does not export, read
    // by name), and its match finder subtracts 262 from any other.
    let no_window = matches!(format!("{:?}", p.strategy).as_str(), "Store" | "HuffOnly");
    if !(no_window && p.window_bits == 0) {
        within("window bits", p.window_bits, 9..=15)?;
    }
    within("nice length", p.nice_length, 0..=258)?;
    // A match finder with a window walks at least one link (it counts them down from here).
    within("hash chain", p.max_chain, if no_window { 0 } else { 1 }..=MAX_CHAIN)?;
    within("tokens per block", u32::from(p.max_token_count), 1..=u32::from(u16::MAX))?;
    within("minimum match", p.min_len, 0..=258)?;
    within("distance of 3-byte matches", p.max_dist_3_matches, 0..=32768)?;
    if let HashAlgorithm::Zlib { hash_shift, .. } = p.hash_algorithm {
        within("hash shift", hash_shift, 0..=15)?;
    }
    Ok(())
}
