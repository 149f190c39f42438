//! Brotli files in patches (docs/FORMAT.md §2.8.8, container 2): a `.br` file is diffed as its
//! content, and the exact file is rebuilt by encoding that content again with the brotli
//! project's reference encoder (C, vendored by brotlic-sys) at the settings that made it.
//!
//! Brotli leaves an encoder more freedom than deflate, and no tool describes an arbitrary
//! Brotli stream as preflate describes a deflate one, so nothing is corrected: the writer
//! finds the settings by encoding the content with each candidate and comparing the output
//! with the file as it is produced (a trial stops at the first byte that differs), and a file
//! no candidate reproduces (another encoder, or a version that encodes otherwise) is diffed
//! as it is. The candidates: every quality (0 to 11), the window the stream's header states
//! (RFC 7932 §9.1), generic mode (what the `brotli` tool, web servers' modules, Node's zlib
//! and Python's brotli use unless told otherwise), with and without the content's length as
//! the encoder's size hint (the `brotli` tool gives it; libraries do not unless asked).
//!
//! The side info, after the format's head (edgepatch_format::compressed_side_info):
//!
//! ```text
//! u8     quality                  0..=11
//! u8     window_bits              10..=24
//! u8     mode                     0 generic, 1 text, 2 font
//! u8     flags                    bit 0: the encoder was told the content's length; others 0
//! varint content_len              <= 64 MiB
//! ```
//! Nothing may follow.
//!
//! The side info codec and the search's order are here in every build; the encoder only where
//! the `brotli` feature is on (native builds: C compiled by cc), which is what
//! `brotli-transform` in a reader's capabilities says.

use edgepatch_format::compressed_side_info::{CONTAINER_BROTLI, VERSION};
use edgepatch_format::error::{Error, Input};
use edgepatch_format::wire::{put_varint, SliceReader};

use crate::side_info::{read_head, MAGIC};

/// The most content a Brotli file may have to be rebuilt: what an applier holds at once.
pub const MAX_CONTENT: u64 = 64 << 20;

/// An encoder setting that reproduces a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// 0..=11.
    pub quality: u8,
    /// The window, 10..=24 bits.
    pub window_bits: u8,
    /// 0 generic, 1 text, 2 font.
    pub mode: u8,
    /// Whether the encoder was told the content's length.
    pub size_hint: bool,
}

/// A decoded Brotli side info.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrotliSideInfo<'a> {
    /// The decoded length of the old file the delta reads.
    pub old_content_len: u64,
    /// The content's own transform's side info (a compressed wasm module's), or empty.
    pub inner: &'a [u8],
    /// The settings that rebuild the file.
    pub settings: Settings,
    /// The content's length.
    pub content_len: u64,
}

impl<'a> BrotliSideInfo<'a> {
    /// The encoded side info.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&[VERSION, CONTAINER_BROTLI]);
        put_varint(&mut out, self.old_content_len);
        put_varint(&mut out, self.inner.len() as u64);
        out.extend_from_slice(self.inner);
        let s = self.settings;
        out.extend_from_slice(&[s.quality, s.window_bits, s.mode, u8::from(s.size_hint)]);
        put_varint(&mut out, self.content_len);
        out
    }

    /// Reads an encoded side info; every field within its bounds.
    pub fn decode(bytes: &'a [u8]) -> Result<BrotliSideInfo<'a>, Error> {
        let mut r = SliceReader::new(bytes, 0, Input::Patch);
        let (code, old_content_len, inner) = read_head(&mut r)?;
        if code != CONTAINER_BROTLI {
            return Err(r.corrupt("not a Brotli side info"));
        }
        let quality = r.u8("quality")?;
        let window_bits = r.u8("window bits")?;
        let mode = r.u8("mode")?;
        let flags = r.u8("flags")?;
        if quality > 11 || !(10..=24).contains(&window_bits) || mode > 2 || flags > 1 {
            return Err(r.corrupt(format!("Brotli settings out of range: quality {quality}, window {window_bits}, mode {mode}, flags {flags}")));
        }
        let content_len = r.varint_max(MAX_CONTENT, "content length")?;
        if !r.is_empty() {
            return Err(r.corrupt("bytes after the Brotli settings"));
        }
        Ok(BrotliSideInfo { old_content_len, inner, settings: Settings { quality, window_bits, mode, size_hint: flags == 1 }, content_len })
    }
}

/// The window a Brotli stream's header states (RFC 7932 §9.1), or None for a large-window
/// stream or too few bytes.
pub fn window_bits(stream: &[u8]) -> Option<u8> {
    let bit = |i: usize| stream.get(i / 8).map(|b| (b >> (i % 8)) & 1);
    if bit(0)? == 0 {
        return Some(16);
    }
    let n = bit(1)? | bit(2)? << 1 | bit(3)? << 2;
    if n != 0 {
        return Some(17 + n);
    }
    match bit(4)? | bit(5)? << 1 | bit(6)? << 2 {
        0 => Some(17),
        1 => None,
        m => Some(8 + m),
    }
}

/// The settings a search tries, in order, for a stream whose header states `window_bits`:
/// qualities 0 to 9 first, with the size hint and without, as they are cheap to rule out (they
/// emit output every 64 to 256 KiB of content, so a wrong one stops at its first block), then
/// 11 and 10, which hold their output until the window is full (a wrong one costs an encode
/// of up to a window of content).
pub fn candidates(window_bits: u8) -> Vec<Settings> {
    let at = |quality, size_hint| Settings { quality, window_bits, mode: 0, size_hint };
    let mut out = Vec::new();
    for size_hint in [true, false] {
        out.extend([5, 4, 6, 9, 7, 8, 3, 2, 1, 0].map(|q| at(q, size_hint)));
    }
    out.extend([at(11, true), at(11, false), at(10, true), at(10, false)]);
    out
}

#[cfg(feature = "brotli")]
mod encoder {
    use std::io::{self, Write};

    use brotlic::{BrotliEncoderOptions, CompressionMode, CompressorWriter, Quality, WindowSize};

    use super::{candidates, window_bits, Settings};

    /// Encodes `content` at `s`, handing the output to `sink` as it is produced.
    pub(super) fn encode<W: Write>(content: &[u8], s: Settings, sink: W) -> io::Result<W> {
        let mode = match s.mode {
            1 => CompressionMode::Text,
            2 => CompressionMode::Font,
            _ => CompressionMode::Generic,
        };
        let mut options = BrotliEncoderOptions::new();
        options.quality(Quality::new(s.quality).map_err(io::Error::other)?).window_size(WindowSize::new(s.window_bits).map_err(io::Error::other)?).mode(mode);
        if s.size_hint {
            options.size_hint(u32::try_from(content.len()).unwrap_or(u32::MAX));
        }
        let encoder = options.build().map_err(io::Error::other)?;
        // In one piece: qualities 0 and 1 compress each piece they are given on its own (in
        // blocks of at most 128 KiB), so pieces smaller than that would give other bytes than
        // the `brotli` tool (which reads 512 KiB at a time).
        let mut w = CompressorWriter::with_encoder(encoder, sink);
        w.write_all(content)?;
        w.into_inner().map_err(|e| io::Error::other(e.to_string()))
    }

    /// A sink comparing what it is given with `want`, failing at the first difference.
    struct Compare<'a> {
        want: &'a [u8],
        at: usize,
    }

    impl Write for Compare<'_> {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let end = self.at + buf.len();
            if self.want.get(self.at..end) != Some(buf) {
                return Err(io::Error::other("differs"));
            }
            self.at = end;
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// The first candidate that encodes `content` to exactly `file`, if any.
    pub fn find_settings(content: &[u8], file: &[u8]) -> Option<Settings> {
        let w = window_bits(file).filter(|w| (10..=24).contains(w))?;
        candidates(w).into_iter().find(|&s| encode(content, s, Compare { want: file, at: 0 }).is_ok_and(|c| c.at == file.len()))
    }
}

#[cfg(feature = "brotli")]
pub use encoder::find_settings;

/// Rebuilds the file of `side_info` from its `content`, handing the bytes to `emit` as the
/// encoder produces them; an error where this build has no encoder (no `brotli` feature).
pub fn rebuild<E: From<crate::CompressedError>>(content: &[u8], side_info: &[u8], emit: &mut dyn FnMut(&[u8]) -> Result<(), E>) -> Result<(), E> {
    use crate::CompressedError;
    let info = BrotliSideInfo::decode(side_info).map_err(CompressedError::from)?;
    if info.content_len != content.len() as u64 {
        return Err(CompressedError::Rebuild(format!("{} bytes of content where the side info has {}", content.len(), info.content_len)).into());
    }
    #[cfg(feature = "brotli")]
    {
        /// Hands the encoder's output to `emit`, keeping its error.
        struct Emit<'e, E> {
            emit: &'e mut dyn FnMut(&[u8]) -> Result<(), E>,
            failed: Option<E>,
        }
        impl<E> std::io::Write for Emit<'_, E> {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                (self.emit)(buf).map_err(|e| {
                    self.failed = Some(e);
                    std::io::Error::other("the output refused the bytes")
                })?;
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut sink = Emit { emit, failed: None };
        match encoder::encode(content, info.settings, &mut sink) {
            Ok(_) => Ok(()),
            Err(e) => Err(sink.failed.take().unwrap_or_else(|| CompressedError::Rebuild(format!("Brotli encoder: {e}")).into())),
        }
    }
    #[cfg(not(feature = "brotli"))]
    {
        let _ = emit;
        Err(CompressedError::Rebuild("this build has no Brotli encoder (it does not read brotli-transform)".into()).into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn side_infos_round_trip_and_refuse_what_is_out_of_range() {
        let info = BrotliSideInfo {
            old_content_len: 1000,
            inner: b"EPWT\x01",
            settings: Settings { quality: 11, window_bits: 22, mode: 0, size_hint: true },
            content_len: 1234,
        };
        let bytes = info.encode();
        assert_eq!(BrotliSideInfo::decode(&bytes).unwrap(), info);
        assert_eq!(edgepatch_format::compressed_side_info::old_content_len(&bytes), Some(1000), "the format reads the head");
        assert_eq!(edgepatch_format::compressed_side_info::inner_side_info(&bytes), Some(&b"EPWT\x01"[..]));
        let settings_at = bytes.len() - 6;
        for (k, bad) in [(0, 12u8), (1, 9), (1, 25), (2, 3), (3, 2)] {
            let mut b = bytes.clone();
            b[settings_at + k] = bad;
            assert!(BrotliSideInfo::decode(&b).is_err(), "field {k} = {bad}");
        }
        assert!(BrotliSideInfo::decode(&[&bytes[..], b"x"].concat()).is_err(), "trailing bytes");
        for len in 0..bytes.len() {
            assert!(BrotliSideInfo::decode(&bytes[..len]).is_err(), "cut at {len}");
        }
    }

    #[test]
    fn the_window_is_read_from_the_stream_header() {
        assert_eq!(window_bits(&[]), None, "too few bits");
        // `brotli -q 11` of 1,000 bytes (Debian's brotli 1.0.9): the smallest window.
        assert_eq!(window_bits(&[0xa1]), Some(10));
        assert_eq!(window_bits(&[0x00]), Some(16));
        assert_eq!(window_bits(&[0x0b]), Some(22));
        assert_eq!(window_bits(&[0x0f]), Some(24));
        assert_eq!(window_bits(&[0x21]), Some(10));
        assert_eq!(window_bits(&[0x01]), Some(17));
        assert_eq!(window_bits(&[0x11]), None, "large window");
        let c = candidates(22);
        assert_eq!(c[20], Settings { quality: 11, window_bits: 22, mode: 0, size_hint: true });
        assert_eq!(c.len(), 24);
        for q in 0..=11 {
            for size_hint in [true, false] {
                assert_eq!(c.iter().filter(|s| s.quality == q && s.size_hint == size_hint && s.mode == 0 && s.window_bits == 22).count(), 1);
            }
        }
    }
}
