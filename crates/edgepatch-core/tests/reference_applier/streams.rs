//! The byte streams of §1-§2.5: the byte reader and its varints, zstd frames,
//! raw LZMA, run-coded diffs and the ops of a control stream.

use super::*;

pub(super) struct Bytes<'a> {
    pub(super) data: &'a [u8],
    pub(super) at: usize,
}

impl<'a> Bytes<'a> {
    pub(super) fn new(data: &'a [u8]) -> Self {
        Bytes { data, at: 0 }
    }
    pub(super) fn take(&mut self, n: u64) -> Outcome<&'a [u8]> {
        let n = usize::try_from(n).map_err(|_| "length beyond memory".to_string())?;
        if self.data.len() - self.at < n {
            return Err(format!("truncated: {n} bytes wanted at {}", self.at));
        }
        self.at += n;
        Ok(&self.data[self.at - n..self.at])
    }
    pub(super) fn byte(&mut self) -> Outcome<u8> {
        Ok(self.take(1)?[0])
    }
    /// §1: unsigned LEB128, at most 10 bytes, the 10th at most 1.
    pub(super) fn varint(&mut self) -> Outcome<u64> {
        let mut value = 0u64;
        for i in 0..10 {
            let b = self.byte()?;
            if i == 9 && b > 1 {
                return Err("varint above 2^64-1".into());
            }
            value |= u64::from(b & 0x7f) << (7 * i);
            if b < 0x80 {
                return Ok(value);
            }
        }
        Err("varint longer than 10 bytes".into())
    }
    pub(super) fn at_most(&mut self, limit: u64, what: &str) -> Outcome<u64> {
        let v = self.varint()?;
        if v > limit {
            return Err(format!("{what} {v} above {limit}"));
        }
        Ok(v)
    }
    pub(super) fn text(&mut self, limit: usize) -> Outcome<String> {
        let n = self.at_most(limit as u64, "string length")?;
        String::from_utf8(self.take(n)?.to_vec()).map_err(|_| "string not UTF-8".to_string())
    }
    pub(super) fn left(&self) -> u64 {
        (self.data.len() - self.at) as u64
    }
    pub(super) fn done(&self) -> bool {
        self.at == self.data.len()
    }
}

/// Exactly one zstd frame decoding to exactly `size` bytes (§1, §2.3).
pub(super) fn one_frame(frame: &[u8], size: u64, prefix: Option<&[u8]>, window_log: u32) -> Outcome<Vec<u8>> {
    if frame.len() < 4 || frame[..4] != [0x28, 0xB5, 0x2F, 0xFD] {
        return Err("not a zstd frame".into());
    }
    match zstd::zstd_safe::find_frame_compressed_size(frame) {
        Ok(n) if n == frame.len() => {}
        _ => return Err("not exactly one zstd frame".into()),
    }
    let mut out = Vec::with_capacity(size as usize);
    let mut dctx = zstd::zstd_safe::DCtx::create();
    dctx.set_parameter(zstd::zstd_safe::DParameter::WindowLogMax(window_log)).map_err(|_| "zstd parameter".to_string())?;
    if let Some(p) = prefix {
        dctx.ref_prefix(p).map_err(|_| "zstd prefix".to_string())?;
    }
    let n = dctx.decompress(&mut out, frame).map_err(|c| format!("zstd error {}", zstd::zstd_safe::get_error_name(c)))?;
    if n as u64 != size {
        return Err(format!("frame decodes to {n} bytes, not {size}"));
    }
    Ok(out)
}

/// Raw LZMA (§2.6: liblzma's LZMA1 without an end marker, its size known) with properties
/// byte `props` and a dictionary of `dictionary` bytes (at least 4096) starting as `window`,
/// decoding to exactly `size` bytes with nothing left over: a window segment's dictionary is
/// its window and data, an ops stream's its raw size up to 1 MiB (§2.3).
pub(super) fn raw_lzma(data: &[u8], props: u8, window: &[u8], size: u64, dictionary: u64) -> Outcome<Vec<u8>> {
    use liblzma_sys as lz;
    let (lc, lp, pb) = (u32::from(props) % 9, u32::from(props) / 9 % 5, u32::from(props) / 45);
    if pb > 4 || lc + lp > 4 {
        return Err("LZMA properties byte".into());
    }
    let mut o: lz::lzma_options_lzma = unsafe { std::mem::zeroed() };
    o.dict_size = dictionary.max(4096) as u32;
    (o.lc, o.lp, o.pb) = (lc, lp, pb);
    o.preset_dict = if window.is_empty() { std::ptr::null() } else { window.as_ptr() };
    o.preset_dict_size = window.len() as u32;
    o.ext_size_low = size as u32;
    let filters = [
        lz::lzma_filter { id: 0x4000000000000002, options: &mut o as *mut lz::lzma_options_lzma as *mut _ },
        lz::lzma_filter { id: lz::LZMA_VLI_UNKNOWN, options: std::ptr::null_mut() },
    ];
    let mut strm: lz::lzma_stream = unsafe { std::mem::zeroed() };
    if unsafe { lz::lzma_raw_decoder(&mut strm, filters.as_ptr()) } != lz::LZMA_OK {
        return Err("LZMA decoder".into());
    }
    let mut out = vec![0u8; size as usize];
    strm.next_in = data.as_ptr();
    strm.avail_in = data.len();
    strm.next_out = out.as_mut_ptr();
    strm.avail_out = out.len();
    let r = unsafe { lz::lzma_code(&mut strm, lz::LZMA_FINISH) };
    let (left_in, left_out) = (strm.avail_in, strm.avail_out);
    unsafe { lz::lzma_end(&mut strm) };
    match r {
        lz::LZMA_STREAM_END if left_in == 0 && left_out == 0 => Ok(out),
        _ => Err(format!("LZMA data ({r}, {left_in} bytes in and {left_out} out left)")),
    }
}

/// §2.3's run-coded diff: a count, the zero runs, the literal runs (each >= 1),
/// the literal bytes; zeros fill the rest up to `diff_len`.
pub(super) fn expand_runs(coded: &[u8], diff_len: u64) -> Outcome<Vec<u8>> {
    let mut r = Bytes::new(coded);
    let count = r.varint()?;
    if count > coded.len() as u64 / 2 {
        return Err("run count".into());
    }
    let zeros: Vec<u64> = (0..count).map(|_| r.varint()).collect::<Outcome<_>>()?;
    let lens: Vec<u64> = (0..count).map(|_| r.varint()).collect::<Outcome<_>>()?;
    let mut out = Vec::new();
    for (z, l) in zeros.into_iter().zip(lens) {
        if l == 0 {
            return Err("empty literal run".into());
        }
        let total = (out.len() as u64).checked_add(z).and_then(|t| t.checked_add(l));
        if total.is_none_or(|t| t > diff_len) {
            return Err("runs past the diff size".into());
        }
        out.resize(out.len() + z as usize, 0);
        out.extend_from_slice(r.take(l)?);
    }
    if !r.done() {
        return Err("run-coded bytes left over".into());
    }
    out.resize(diff_len as usize, 0);
    Ok(out)
}

/// §2.4-§2.5: decodes a control stream and runs its ops over the reference.
pub(super) fn run_ops(ctrl: &[u8], diff: &[u8], extra: &[u8], new_len: u64, reference: &[u8]) -> Outcome<Vec<u8>> {
    let mut c = Bytes::new(ctrl);
    let n = c.varint()?;
    if n > new_len || n > ctrl.len() as u64 / 3 {
        return Err("op count".into());
    }
    let mut codes = Vec::new();
    for _ in 0..n {
        codes.push(c.varint()?);
    }
    let mut copies = Vec::new();
    for _ in 0..n {
        copies.push(c.varint()?);
    }
    let mut extras = Vec::new();
    for _ in 0..n {
        extras.push(c.varint()?);
    }
    if !c.done() {
        return Err("bytes after the ops".into());
    }
    let (mut h0, mut h1, mut h2) = (0i64, 0i64, 0i64);
    let mut out: Vec<u8> = Vec::new();
    let (mut d, mut x) = (0usize, 0usize);
    for i in 0..n as usize {
        let diagonal = match codes[i] {
            0 => h1,
            1 => h2,
            code => {
                let v = code - 2;
                let delta = ((v >> 1) as i64) ^ -((v & 1) as i64);
                h0.checked_add(delta).ok_or("diagonal overflows")?
            }
        };
        // The history follows d alone, whatever code named it.
        if diagonal == h0 {
        } else if diagonal == h1 {
            (h0, h1) = (h1, h0);
        } else if diagonal == h2 {
            (h0, h1, h2) = (h2, h0, h1);
        } else {
            (h0, h1, h2) = (diagonal, h0, h1);
        }
        let (copy, add) = (copies[i], extras[i]);
        let produced = copy.checked_add(add).ok_or("op lengths overflow")?;
        if produced == 0 || produced > new_len - out.len() as u64 {
            return Err("op produces nothing or beyond the segment".into());
        }
        let start = (out.len() as i128) + i128::from(diagonal);
        if start < 0 || start + i128::from(copy) > reference.len() as i128 {
            return Err("copy outside the reference".into());
        }
        if copy > (diff.len() - d) as u64 || add > (extra.len() - x) as u64 {
            return Err("op beyond the diff or extra stream".into());
        }
        for k in 0..copy as usize {
            out.push(reference[start as usize + k].wrapping_add(diff[d + k]));
        }
        d += copy as usize;
        out.extend_from_slice(&extra[x..x + add as usize]);
        x += add as usize;
    }
    if out.len() as u64 != new_len || d != diff.len() || x != extra.len() {
        return Err("segment not used up exactly".into());
    }
    Ok(out)
}
