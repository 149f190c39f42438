//! An ops segment as the writers make it (docs/FORMAT.md §2.3): its three streams
//! compressed, the diff stream run-coded where that is smaller, and each stream tried as
//! raw LZMA where the patch may hold LZMA segments.

use super::run_coding::encode_run_coded;
use super::SegmentHeader;
use crate::error::Result;
use crate::lzma::{self, LzmaProps};

/// The three streams of an ops segment (§2.3), which a writer may compress with different
/// zstd parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpsStream {
    /// The control stream (§2.4).
    Ctrl,
    /// The diff stream, plain or run-coded.
    Diff,
    /// The extra (literal) stream.
    Extra,
}

/// A stream's zstd frame shorter than this is not tried as LZMA: a few bytes to gain.
const LZMA_STREAM_MIN: usize = 64;

/// The LZMA parameters an ops stream is tried with, one set per stream: the byte before
/// predicts a control stream's and a diff stream's next byte little and new bytes' (code,
/// text) well (measured on rive's and freedoom2-wad's streams: within 1-2% of the best of
/// five sets each; BENCHMARKS.md, "LZMA segments").
fn ops_stream_props(stream: OpsStream) -> LzmaProps {
    let lc = match stream {
        OpsStream::Ctrl => 1,
        OpsStream::Diff => 0,
        OpsStream::Extra => 3,
    };
    LzmaProps { lc, lp: 0, pb: 0 }
}

/// The smaller of `frame` (zstd's, of `data`) and `data` as raw LZMA: (bytes, the LZMA
/// properties byte if LZMA).
fn smaller_with_lzma(data: &[u8], frame: Vec<u8>, stream: OpsStream) -> (Vec<u8>, Option<u8>) {
    let props = ops_stream_props(stream);
    if frame.len() >= LZMA_STREAM_MIN {
        if let Some(l) = lzma::compress_stream(data, props).filter(|l| l.len() < frame.len()) {
            return (l, Some(props.byte()));
        }
    }
    (frame, None)
}

/// An ops segment as a writer made it (`encode_ops_streams`).
pub struct OpsEncoding {
    /// The segment's bytes: header and streams.
    pub bytes: Vec<u8>,
    /// The segment's header as written.
    pub header: SegmentHeader,
    /// The header, and the length in bytes, of the same segment with zstd streams only. The
    /// writers' rules for when a window form is worth trying were measured on these sizes,
    /// and read them still: LZMA's smaller streams would otherwise skip trials whose window
    /// wins (harfbuzz's Worker patch grew 1.4% that way).
    pub zstd_header: SegmentHeader,
    /// See `zstd_header`.
    pub zstd_len: u64,
}

/// Which optional forms an ops segment's streams may take (what the reader understands).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpsForms {
    /// Raw LZMA streams (tag `M`, flags bit 6).
    pub lzma: bool,
    /// A run-coded diff stream (flags bit 3).
    pub run_coded: bool,
}

/// An ops segment from its three raw streams, as both writers (the in-memory diff and the
/// generator) make it: each stream compressed by `compress` (which returns no frame for an
/// empty stream), the diff stream run-coded (tag `R`) where that frame is the smaller. With
/// `forms.lzma`, each stream is also tried as raw LZMA and the smaller kept (tag `M`, §2.3);
/// without `forms.run_coded`, the diff stream is never run-coded (a reader without flag bit 3).
pub fn encode_ops_streams(
    new_len: u64,
    ctrl: &[u8],
    diff: &[u8],
    extra: &[u8],
    forms: OpsForms,
    mut compress: impl FnMut(&[u8], OpsStream) -> Result<Vec<u8>>,
) -> Result<OpsEncoding> {
    let with_lzma = |data: &[u8], frame: Vec<u8>, stream: OpsStream| if forms.lzma { smaller_with_lzma(data, frame, stream) } else { (frame, None) };
    let c = compress(ctrl, OpsStream::Ctrl)?;
    let c_zstd = c.len() as u64;
    let (c, c_lzma) = with_lzma(ctrl, c, OpsStream::Ctrl);
    let mut d = compress(diff, OpsStream::Diff)?;
    let mut diff_coded = 0;
    // The diff stream as it is or run-coded, whichever zstd makes smaller, and then that one
    // as LZMA if smaller still (one LZMA search per stream).
    let mut d_zstd = d.len() as u64;
    let mut d_lzma = None;
    if forms.run_coded && !diff.is_empty() {
        let coded = encode_run_coded(diff);
        if coded.len() < diff.len() {
            let dc = compress(&coded, OpsStream::Diff)?;
            if dc.len() < d.len() {
                d_zstd = dc.len() as u64;
                (d, diff_coded) = (dc, coded.len() as u64);
                (d, d_lzma) = with_lzma(&coded, d, OpsStream::Diff);
            }
        }
        // `coded` is freed here, before the extra stream's compressor is allocated.
    }
    if diff_coded == 0 {
        (d, d_lzma) = with_lzma(diff, d, OpsStream::Diff);
    }
    let e = compress(extra, OpsStream::Extra)?;
    let e_zstd = e.len() as u64;
    let (e, e_lzma) = with_lzma(extra, e, OpsStream::Extra);
    let header = SegmentHeader {
        new_len,
        ctrl_raw: ctrl.len() as u64,
        ctrl_comp: c.len() as u64,
        diff_raw: diff.len() as u64,
        diff_coded,
        diff_comp: d.len() as u64,
        extra_raw: extra.len() as u64,
        extra_comp: e.len() as u64,
        lzma: [c_lzma, d_lzma, e_lzma],
    };
    let zstd_header = SegmentHeader { ctrl_comp: c_zstd, diff_comp: d_zstd, extra_comp: e_zstd, lzma: [None; 3], ..header };
    let mut out = Vec::with_capacity(32 + c.len() + d.len() + e.len());
    zstd_header.encode(&mut out);
    let zstd_len = out.len() as u64 + c_zstd + d_zstd + e_zstd;
    out.clear();
    header.encode(&mut out);
    out.extend_from_slice(&c);
    out.extend_from_slice(&d);
    out.extend_from_slice(&e);
    Ok(OpsEncoding { bytes: out, header, zstd_header, zstd_len })
}
