//! One zstd frame of a segment's data, optionally against a prefix (a window segment's old
//! spans and recent new data, docs/FORMAT.md §2.6): the compressor set-up that the in-memory
//! diff and the bounded generator share. Each caller chooses how zstd searches
//! ([`FrameSearch`]); the window log always covers prefix and data, within the format's limit.

use zstd::zstd_safe::{CCtx, CParameter};

use crate::error::{zstd_error, Error, Result};
use crate::segment_codec::MAX_WINDOW_LOG;

/// How zstd searches one frame; `None` leaves the level's own parameter.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FrameSearch {
    pub level: i32,
    /// Cap of the hash table's log (never above the window's log).
    pub hash_log: Option<u32>,
    /// Cap of the chain table's (or binary tree's) log (never above the window's log + 1).
    pub chain_log: Option<u32>,
    /// Long-distance matching, with its parameters.
    pub long_distance: Option<LongDistance>,
}

/// Parameters of zstd's long-distance matcher; `None` leaves zstd's default.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct LongDistance {
    pub min_match: Option<u32>,
    pub hash_rate_log: Option<u32>,
}

impl FrameSearch {
    /// The level's own search.
    pub fn level(level: i32) -> FrameSearch {
        FrameSearch { level, hash_log: None, chain_log: None, long_distance: None }
    }
}

/// The window log of a frame of `len` bytes of prefix and data (at most one above the
/// format's limit: the prefix's last byte and the data's first may be that far apart).
pub(crate) fn window_log(len: usize) -> u32 {
    len.next_power_of_two().trailing_zeros().clamp(10, MAX_WINDOW_LOG + 1)
}

/// One zstd frame of `data`, whose matches may reach into `prefix` (empty: none).
pub(crate) fn compress_frame(data: &[u8], prefix: &[u8], search: FrameSearch) -> Result<Vec<u8>> {
    let mut frame = Vec::with_capacity(zstd::zstd_safe::compress_bound(data.len()));
    compress_into(&mut frame, data, prefix, search).map_err(zerr)?;
    Ok(frame)
}

/// The size of [`compress_frame`]'s frame, written into a buffer of a quarter of `data`'s size
/// first (a trial where memory is short: the frame's worst-case bound is more than `data`),
/// and only if that is too small into one of the bound.
pub(crate) fn compressed_len(data: &[u8], prefix: &[u8], search: FrameSearch) -> Result<usize> {
    let mut frame = Vec::with_capacity((data.len() / 4).max(64 << 10));
    if compress_into(&mut frame, data, prefix, search).is_ok() {
        return Ok(frame.len());
    }
    drop(frame);
    compress_frame(data, prefix, search).map(|f| f.len())
}

fn zerr(code: usize) -> Error {
    Error::Invalid(zstd_error(code))
}

/// Compresses `data` into `frame` (up to its capacity) as [`compress_frame`] says.
fn compress_into(frame: &mut Vec<u8>, data: &[u8], prefix: &[u8], search: FrameSearch) -> std::result::Result<usize, usize> {
    let mut cctx = CCtx::create();
    let window_log = window_log(prefix.len() + data.len());
    cctx.set_parameter(CParameter::CompressionLevel(search.level))?;
    cctx.set_parameter(CParameter::WindowLog(window_log))?;
    if let Some(h) = search.hash_log {
        cctx.set_parameter(CParameter::HashLog(h.min(window_log)))?;
    }
    if let Some(c) = search.chain_log {
        cctx.set_parameter(CParameter::ChainLog(c.min(window_log + 1)))?;
    }
    if let Some(ldm) = search.long_distance {
        cctx.set_parameter(CParameter::EnableLongDistanceMatching(true))?;
        if let Some(m) = ldm.min_match {
            cctx.set_parameter(CParameter::LdmMinMatch(m))?;
        }
        if let Some(r) = ldm.hash_rate_log {
            cctx.set_parameter(CParameter::LdmHashRateLog(r))?;
        }
    }
    if !prefix.is_empty() {
        cctx.ref_prefix(prefix)?;
    }
    cctx.compress2(frame, data)
}

/// `data` as one zstd frame at `level`, its window just large enough (within the format's
/// limit); empty for empty data.
pub(crate) fn compress(data: &[u8], level: i32) -> Result<Vec<u8>> {
    if data.is_empty() {
        return Ok(Vec::new());
    }
    let mut c = zstd::bulk::Compressor::new(level).map_err(|e| Error::Invalid(format!("zstd: {e}")))?;
    c.set_parameter(zstd::zstd_safe::CParameter::WindowLog(data.len().next_power_of_two().trailing_zeros().clamp(10, MAX_WINDOW_LOG)))
        .map_err(|e| Error::Invalid(format!("zstd: {e}")))?;
    c.compress(data).map_err(|e| Error::Invalid(format!("zstd: {e}")))
}
