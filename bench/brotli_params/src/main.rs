//! `brotli-params CONTENT FILE.br`: prints, as one JSON line, the reference encoder's settings
//! that rebuild FILE.br from CONTENT byte for byte (or none), how many settings were tried and
//! how long the search took, and whether the Rust `brotli` crate's encoder gives the same
//! bytes at the settings found.
//!
//! The window is read from the stream's header (RFC 7932 §9.1); the search tries every
//! quality, with and without the content's length as the size hint, in generic mode (what
//! edgepatch's diff tries), then in text and font mode. Each trial compares the output with
//! the file as it is produced and stops at the first byte that differs.

use std::io::{self, Write};
use std::time::Instant;

use brotlic::{BrotliEncoderOptions, CompressionMode, CompressorWriter, Quality, WindowSize};

/// WBITS of a brotli stream (RFC 7932 §9.1), or None for a large-window or unreadable header.
fn window_bits(stream: &[u8]) -> Option<u8> {
    let bit = |i: usize| stream.get(i / 8).map(|b| (b >> (i % 8)) & 1);
    if bit(0)? == 0 {
        return Some(16);
    }
    let n = bit(1)? | bit(2)? << 1 | bit(3)? << 2;
    if n != 0 {
        return Some(17 + n);
    }
    let m = bit(4)? | bit(5)? << 1 | bit(6)? << 2;
    match m {
        0 => Some(17),
        1 => None, // large window
        m => Some(8 + m),
    }
}

/// A sink that compares what it is given with `want` and fails at the first difference.
struct Compare<'a> {
    want: &'a [u8],
    at: usize,
}

impl Write for Compare<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let end = self.at + buf.len();
        if end > self.want.len() || self.want[self.at..end] != *buf {
            return Err(io::Error::other("differs"));
        }
        self.at = end;
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn reproduces(content: &[u8], file: &[u8], quality: u8, lgwin: u8, mode: CompressionMode, size_hint: bool) -> bool {
    let mut options = BrotliEncoderOptions::new();
    options.quality(Quality::new(quality).expect("0..=11")).window_size(WindowSize::new(lgwin).expect("10..=24")).mode(mode);
    if size_hint {
        options.size_hint(content.len().min(u32::MAX as usize) as u32);
    }
    let encoder = options.build().expect("valid settings");
    // The content in one piece, as edgepatch's encoder gives it.
    let mut w = CompressorWriter::with_encoder(encoder, Compare { want: file, at: 0 });
    if w.write_all(content).is_err() {
        return false;
    }
    match w.into_inner() {
        Ok(c) => c.at == file.len(),
        Err(_) => false,
    }
}

fn rust_brotli(content: &[u8], quality: u8, lgwin: u8, mode: CompressionMode, size_hint: bool) -> Vec<u8> {
    let mut params = brotli::enc::BrotliEncoderParams::default();
    params.quality = i32::from(quality);
    params.lgwin = i32::from(lgwin);
    params.size_hint = if size_hint { content.len() } else { 0 };
    params.mode = match mode {
        CompressionMode::Text => brotli::enc::backward_references::BrotliEncoderMode::BROTLI_MODE_TEXT,
        CompressionMode::Font => brotli::enc::backward_references::BrotliEncoderMode::BROTLI_MODE_FONT,
        _ => brotli::enc::backward_references::BrotliEncoderMode::BROTLI_MODE_GENERIC,
    };
    let mut out = Vec::new();
    brotli::BrotliCompress(&mut &content[..], &mut out, &params).expect("in memory");
    out
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 3 {
        eprintln!("usage: brotli-params CONTENT FILE.br");
        std::process::exit(2);
    }
    let content = std::fs::read(&args[1]).expect("CONTENT");
    let file = std::fs::read(&args[2]).expect("FILE.br");
    let started = Instant::now();
    let mut tried = 0;
    let mut found = None;
    if let Some(lgwin) = window_bits(&file).filter(|w| (10..=24).contains(w)) {
        // edgepatch's order (edgepatch-transform-compressed's brotli::candidates): qualities
        // 0 to 9 with and without the size hint (cheap to rule out), then 11 and 10; generic
        // mode, then the same in text and font mode, which edgepatch does not try.
        let mut order: Vec<(u8, bool)> = Vec::new();
        for size_hint in [true, false] {
            order.extend([5u8, 4, 6, 9, 7, 8, 3, 2, 1, 0].map(|q| (q, size_hint)));
        }
        order.extend([(11, true), (11, false), (10, true), (10, false)]);
        'search: for mode in [CompressionMode::Generic, CompressionMode::Text, CompressionMode::Font] {
            for &(quality, size_hint) in &order {
                tried += 1;
                if reproduces(&content, &file, quality, lgwin, mode, size_hint) {
                    found = Some((quality, lgwin, mode, size_hint));
                    break 'search;
                }
            }
        }
    }
    let search_seconds = started.elapsed().as_secs_f64();
    let mut line = serde_json::json!({
        "content_bytes": content.len(), "file_bytes": file.len(), "window_bits": window_bits(&file),
        "found": found.is_some(), "tried": tried, "search_seconds": search_seconds,
    });
    if let Some((quality, lgwin, mode, size_hint)) = found {
        // What an applier would spend: one encode at the settings found.
        let t = Instant::now();
        assert!(reproduces(&content, &file, quality, lgwin, mode, size_hint));
        line["rebuild_seconds"] = t.elapsed().as_secs_f64().into();
        let t = Instant::now();
        let rust = rust_brotli(&content, quality, lgwin, mode, size_hint);
        line["quality"] = quality.into();
        line["mode"] = format!("{mode:?}").into();
        line["size_hint"] = size_hint.into();
        line["rust_brotli_same"] = (rust == file).into();
        line["rust_brotli_bytes"] = rust.len().into();
        line["rust_brotli_seconds"] = t.elapsed().as_secs_f64().into();
    }
    println!("{line}");
}
