//! Raw LZMA in patches (docs/FORMAT.md §2.3 `M`, §2.6 `L`): an LZMA window segment's data,
//! whose dictionary starts as the segment's window, so its matches reach into the old spans
//! as a zstd frame's reach into its prefix, and an ops segment's LZMA streams (an empty
//! window). LZMA models what zstd does not (literals in the context of the byte before,
//! repeated match distances, a range coder in place of Huffman and FSE tables): on the field
//! streams of a split wasm module, and on ops streams, it is 5-9% smaller than zstd at level
//! 19 (BENCHMARKS.md, "LZMA segments").
//!
//! This goes through `liblzma-sys`'s FFI to the xz project's liblzma (bundled, compiled from
//! source natively and for wasm32): the crate's safe wrapper has no preset dictionary, which
//! is the whole point here. Every call below is on buffers this module owns for the call's
//! duration; the stream is ended on drop.

use std::mem::MaybeUninit;

use liblzma_sys as sys;

use crate::segment_codec::{WindowCodec, LZMA_STREAM_DICTIONARY, MAX_LZMA_DICTIONARY};

/// liblzma's `LZMA_FILTER_LZMA1EXT`: raw LZMA1 whose uncompressed size the decoder is told,
/// so no end marker is written or needed.
const FILTER_LZMA1EXT: sys::lzma_vli = 0x4000000000000002;
/// LZMA's smallest dictionary.
const DICTIONARY_MIN: u64 = 4096;

/// LZMA's literal and position parameters, as one properties byte `(pb * 5 + lp) * 9 + lc`
/// (the .lzma header's first byte), with lc, lp and pb each at most 4 and lc + lp at most 4.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LzmaProps {
    /// Literal context bits.
    pub lc: u32,
    /// Literal position bits.
    pub lp: u32,
    /// Position bits.
    pub pb: u32,
}

impl LzmaProps {
    /// The properties byte.
    pub fn byte(self) -> u8 {
        ((self.pb * 5 + self.lp) * 9 + self.lc) as u8
    }

    /// The parameters of a properties byte, if it is one this format allows.
    pub fn from_byte(b: u8) -> Option<LzmaProps> {
        let b = u32::from(b);
        let props = LzmaProps { lc: b % 9, lp: b / 9 % 5, pb: b / 45 };
        (props.pb <= 4 && props.lc + props.lp <= 4).then_some(props)
    }
}

/// The parameters a writer tries: literals in the context of one bit of the byte before, or
/// none (measured on split wasm modules' field streams, whose bytes are not 4-aligned words).
pub const TRIED_PROPS: [LzmaProps; 2] = [LzmaProps { lc: 1, lp: 0, pb: 0 }, LzmaProps { lc: 0, lp: 0, pb: 0 }];

/// A field-split part's window segment data (§2.8.7), by the one rule of both writers that try
/// LZMA there (the in-memory diff and `diff --bounded`): `frame`, zstd's of `data` against
/// `window`, or `data` as raw LZMA against the same window with each of [`TRIED_PROPS`],
/// whichever is smallest (the LZMA form pays one byte more for its properties). LZMA is tried
/// only where zstd leaves 1/64 or more of the data (less is mostly long copies, which LZMA
/// codes no better and searches slowly: tiktoken's 4.9 MB data section) and where window and
/// data fit `dictionary_limit` (at most `MAX_LZMA_DICTIONARY`; the encoder takes about 12 bytes
/// per byte of it).
pub fn smallest_window_form(data: &[u8], window: &[u8], frame: Vec<u8>, dictionary_limit: u64) -> (Vec<u8>, WindowCodec) {
    let mut best = (frame, WindowCodec::Zstd);
    if best.0.len() * 64 < data.len() || (window.len() + data.len()) as u64 > dictionary_limit.min(MAX_LZMA_DICTIONARY) {
        return best;
    }
    for props in TRIED_PROPS {
        if let Some(lzma) = compress(data, window, props).filter(|l| l.len() + 1 < best.0.len()) {
            best = (lzma, WindowCodec::Lzma { props: props.byte() });
        }
    }
    best
}

struct Stream(sys::lzma_stream);

impl Stream {
    fn new() -> Stream {
        // LZMA_STREAM_INIT is all zeros.
        Stream(unsafe { MaybeUninit::zeroed().assume_init() })
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        unsafe { sys::lzma_end(&mut self.0) }
    }
}

/// A window segment's dictionary (§2.6): its window and its data.
fn window_dictionary(window: &[u8], data_len: usize) -> u64 {
    window.len() as u64 + data_len as u64
}

/// An ops stream's dictionary (§2.3): its raw size, at most `LZMA_STREAM_DICTIONARY`.
fn stream_dictionary(data_len: usize) -> u64 {
    (data_len as u64).min(LZMA_STREAM_DICTIONARY)
}

/// LZMA options for `data_len` bytes after `window` with a dictionary of `dictionary` bytes
/// (at least LZMA's 4096), or None where they do not fit its 32-bit sizes. The options point
/// into `window`: they live no longer than the call using them.
fn options(window: &[u8], data_len: usize, props: LzmaProps, dictionary: u64) -> Option<sys::lzma_options_lzma> {
    let dictionary = u32::try_from(dictionary.max(DICTIONARY_MIN)).ok()?;
    let mut o: sys::lzma_options_lzma = unsafe { MaybeUninit::zeroed().assume_init() };
    if unsafe { sys::lzma_lzma_preset(&mut o, 9 | sys::LZMA_PRESET_EXTREME) } != 0 {
        return None;
    }
    o.dict_size = dictionary;
    (o.lc, o.lp, o.pb) = (props.lc, props.lp, props.pb);
    o.nice_len = 273;
    o.mf = sys::LZMA_MF_BT4;
    o.preset_dict = if window.is_empty() { std::ptr::null() } else { window.as_ptr() };
    o.preset_dict_size = u32::try_from(window.len()).ok()?;
    o.ext_flags = 0;
    o.ext_size_low = data_len as u32;
    o.ext_size_high = ((data_len as u64) >> 32) as u32;
    Some(o)
}

fn filters(o: &mut sys::lzma_options_lzma) -> [sys::lzma_filter; 2] {
    [
        sys::lzma_filter { id: FILTER_LZMA1EXT, options: o as *mut sys::lzma_options_lzma as *mut _ },
        sys::lzma_filter { id: sys::LZMA_VLI_UNKNOWN, options: std::ptr::null_mut() },
    ]
}

/// A window segment's `data` as raw LZMA with `props`, its dictionary primed with `window`;
/// None where liblzma refuses (sizes over 4 GiB, out of memory).
pub fn compress(data: &[u8], window: &[u8], props: LzmaProps) -> Option<Vec<u8>> {
    encode(data, window, props, window_dictionary(window, data.len()))
}

/// An ops stream's `data` as raw LZMA with `props` (no window, §2.3's dictionary).
pub fn compress_stream(data: &[u8], props: LzmaProps) -> Option<Vec<u8>> {
    encode(data, &[], props, stream_dictionary(data.len()))
}

/// Raw LZMA of `data` with the properties byte `props` and a dictionary of `dictionary` bytes,
/// whatever §2.3 allows: for the hostile vectors (tests/hostile_vectors.rs), which need a
/// stream that reaches further back than an applier's dictionary. Not part of the API.
#[doc(hidden)]
pub fn stream_with_dictionary(data: &[u8], props: u8, dictionary: u64) -> Option<Vec<u8>> {
    encode(data, &[], LzmaProps::from_byte(props)?, dictionary)
}

fn encode(data: &[u8], window: &[u8], props: LzmaProps, dictionary: u64) -> Option<Vec<u8>> {
    let mut o = options(window, data.len(), props, dictionary)?;
    let f = filters(&mut o);
    let mut s = Stream::new();
    if unsafe { sys::lzma_raw_encoder(&mut s.0, f.as_ptr()) } != sys::LZMA_OK {
        return None;
    }
    let mut out: Vec<u8> = Vec::with_capacity(data.len() / 4 + 64);
    s.0.next_in = data.as_ptr();
    s.0.avail_in = data.len();
    loop {
        if out.len() == out.capacity() {
            out.reserve(out.capacity().max(4096));
        }
        let spare = out.capacity() - out.len();
        s.0.next_out = unsafe { out.as_mut_ptr().add(out.len()) };
        s.0.avail_out = spare;
        let r = unsafe { sys::lzma_code(&mut s.0, sys::LZMA_FINISH) };
        let written = spare - s.0.avail_out;
        // liblzma wrote `written` bytes into the spare capacity.
        unsafe { out.set_len(out.len() + written) };
        match r {
            sys::LZMA_OK => continue,
            sys::LZMA_STREAM_END => return Some(out),
            _ => return None,
        }
    }
}

/// Decodes a window segment's `comp`, raw LZMA with the properties byte `props` and its
/// dictionary primed with `window`, into `out`, which must come out exactly `out.len()` bytes
/// with every byte of `comp` used. The decoder holds a dictionary of `window.len() +
/// out.len()` bytes, which the caller bounds (`MAX_LZMA_DICTIONARY`).
pub fn decompress_into(comp: &[u8], window: &[u8], props: u8, out: &mut [u8]) -> std::result::Result<(), String> {
    decode(comp, window, props, window_dictionary(window, out.len()), out)
}

/// Decodes an ops stream's `comp` into `out` as [`decompress_into`] does, with no window and
/// §2.3's dictionary (at most `LZMA_STREAM_DICTIONARY`): a match reaching further back is
/// corrupt data.
pub fn decompress_stream_into(comp: &[u8], props: u8, out: &mut [u8]) -> std::result::Result<(), String> {
    decode(comp, &[], props, stream_dictionary(out.len()), out)
}

fn decode(comp: &[u8], window: &[u8], props: u8, dictionary: u64, out: &mut [u8]) -> std::result::Result<(), String> {
    let props = LzmaProps::from_byte(props).ok_or_else(|| format!("LZMA properties byte {props:#04x} out of range"))?;
    let mut o = options(window, out.len(), props, dictionary).ok_or("LZMA window and data over 4 GiB")?;
    let f = filters(&mut o);
    let mut s = Stream::new();
    match unsafe { sys::lzma_raw_decoder(&mut s.0, f.as_ptr()) } {
        sys::LZMA_OK => {}
        sys::LZMA_MEM_ERROR => return Err("out of memory for the LZMA dictionary".into()),
        r => return Err(format!("LZMA decoder refused its options ({r})")),
    }
    s.0.next_in = comp.as_ptr();
    s.0.avail_in = comp.len();
    s.0.next_out = out.as_mut_ptr();
    s.0.avail_out = out.len();
    // All input and all output are given at once: LZMA_OK means no progress is possible, and
    // liblzma answers a second such call with LZMA_BUF_ERROR.
    for _ in 0..4 {
        match unsafe { sys::lzma_code(&mut s.0, sys::LZMA_FINISH) } {
            sys::LZMA_STREAM_END if s.0.avail_out != 0 => return Err("LZMA data ended early".into()),
            sys::LZMA_STREAM_END if s.0.avail_in != 0 => return Err(format!("{} bytes after the LZMA data", s.0.avail_in)),
            sys::LZMA_STREAM_END => return Ok(()),
            sys::LZMA_OK => continue,
            sys::LZMA_BUF_ERROR => return Err("LZMA data truncated".into()),
            sys::LZMA_DATA_ERROR => return Err("LZMA data corrupt".into()),
            sys::LZMA_MEM_ERROR => return Err("out of memory for the LZMA dictionary".into()),
            r => return Err(format!("LZMA decoder failed ({r})")),
        }
    }
    Err("LZMA decoder made no progress".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(n: usize, seed: u32) -> Vec<u8> {
        let mut x = seed;
        (0..n)
            .map(|i| {
                x = x.wrapping_mul(1103515245).wrapping_add(12345);
                if i % 7 < 4 {
                    b"abcdefgh"[(i / 7) % 8]
                } else {
                    (x >> 24) as u8
                }
            })
            .collect()
    }

    fn decode_window(comp: &[u8], window: &[u8], props: LzmaProps, len: usize) -> std::result::Result<Vec<u8>, String> {
        let mut out = vec![0; len];
        decompress_into(comp, window, props.byte(), &mut out).map(|()| out)
    }

    #[test]
    fn round_trips_and_reaches_into_the_window() {
        let window = sample(50_000, 1);
        let mut data = window[10_000..30_000].to_vec();
        data.extend(sample(5_000, 2));
        for props in TRIED_PROPS {
            let comp = compress(&data, &window, props).unwrap();
            assert_eq!(decode_window(&comp, &window, props, data.len()).unwrap(), data);
            let alone = compress(&data, &[], props).unwrap();
            assert!(comp.len() * 2 < alone.len(), "{} against {} without the window", comp.len(), alone.len());
            assert_ne!(decode_window(&comp, &[], props, data.len()).ok().as_ref(), Some(&data));
        }
    }

    #[test]
    fn edge_sizes_round_trip() {
        let props = TRIED_PROPS[0];
        for (w, n) in [(0usize, 1usize), (5, 1), (100, 3), (4096, 4096), (0, 70_000)] {
            let (window, data) = (sample(w, 3), sample(n, 4));
            let comp = compress(&data, &window, props).unwrap();
            assert_eq!(decode_window(&comp, &window, props, n).unwrap(), data, "window {w}, data {n}");
        }
    }

    #[test]
    fn truncated_corrupt_or_missized_data_is_an_error() {
        let props = TRIED_PROPS[0];
        let window = sample(20_000, 5);
        let mut data = window[1_000..9_000].to_vec();
        data.extend(sample(3_000, 6));
        let comp = compress(&data, &window, props).unwrap();
        for cut in [0, 1, 5, comp.len() / 2, comp.len() - 1] {
            assert!(decode_window(&comp[..cut], &window, props, data.len()).is_err(), "cut at {cut}");
        }
        assert!(decode_window(&comp, &window, props, data.len() + 1).is_err());
        assert!(decode_window(&comp, &window, props, data.len() - 1).is_err());
        let mut trailing = comp.clone();
        trailing.push(0);
        assert!(decode_window(&trailing, &window, props, data.len()).is_err());
        for i in 0..comp.len() {
            let mut flipped = comp.clone();
            flipped[i] ^= 0x10;
            // An error or other bytes of the right length, never a panic or a hang.
            if let Ok(out) = decode_window(&flipped, &window, props, data.len()) {
                assert_eq!(out.len(), data.len());
            }
        }
        let mut out = vec![0; 10];
        assert!(decompress_into(&comp, &window, 225, &mut out).unwrap_err().contains("properties"));
    }

    #[test]
    fn an_ops_stream_reaches_back_at_most_its_capped_dictionary() {
        // 1.5 MiB of noise twice: the repeat is 1.5 MiB back, beyond the 1 MiB dictionary.
        let half = sample(3 << 19, 7).iter().map(|b| b.wrapping_mul(31)).collect::<Vec<u8>>();
        let data = [half.as_slice(), half.as_slice()].concat();
        let props = LzmaProps { lc: 0, lp: 0, pb: 0 };
        let capped = compress_stream(&data, props).unwrap();
        let mut out = vec![0; data.len()];
        decompress_stream_into(&capped, props.byte(), &mut out).unwrap();
        assert_eq!(out, data);
        // A writer using the whole stream as its dictionary finds the repeat: its data is
        // refused, not decoded with a dictionary the format does not allow.
        let uncapped = encode(&data, &[], props, data.len() as u64).unwrap();
        assert!(uncapped.len() * 3 < capped.len() * 2, "{} against {}", uncapped.len(), capped.len());
        assert!(decompress_stream_into(&uncapped, props.byte(), &mut out).is_err());
        assert!(decode(&uncapped, &[], props.byte(), data.len() as u64, &mut out).is_ok());
    }

    #[test]
    fn a_window_form_is_tried_within_its_dictionary_limit_only() {
        let window = sample(40_000, 3);
        let data = [&window[5_000..15_000], sample(10_000, 4).as_slice()].concat();
        let frame = vec![0; data.len() / 2];
        let (lzma, codec) = smallest_window_form(&data, &window, frame.clone(), 60_000);
        assert!(matches!(codec, WindowCodec::Lzma { .. }) && lzma.len() < frame.len());
        // Window and data take 60,000 bytes: a limit one byte lower keeps zstd's frame.
        assert_eq!(smallest_window_form(&data, &window, frame.clone(), 59_999), (frame, WindowCodec::Zstd));
    }

    #[test]
    fn props_bytes_in_range_only() {
        assert_eq!(LzmaProps::from_byte(TRIED_PROPS[0].byte()), Some(TRIED_PROPS[0]));
        assert_eq!(LzmaProps { lc: 3, lp: 0, pb: 2 }.byte(), 0x5D);
        assert!(LzmaProps::from_byte(0x5D).is_some());
        assert!(LzmaProps::from_byte(9 * 5 * 5).is_none());
        assert!(LzmaProps::from_byte(4 + 9).is_none()); // lc 4 + lp 1
    }
}
