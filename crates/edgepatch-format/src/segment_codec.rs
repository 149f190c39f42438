//! How a segment's bytes are compressed (docs/FORMAT.md §2.3, §2.6): the codecs a window
//! segment may use and the limits the format sets on zstd frames and LZMA dictionaries, which
//! the zstd and LZMA coders check without the rest of the patch format.

/// zstd frames in a patch may not ask for a window above 2^24.
pub const MAX_WINDOW_LOG: u32 = 24;
/// An LZMA window segment's window plus its new bytes may not exceed this: the dictionary
/// its decoder holds (a zstd frame refers to its window in place; LZMA's decoder copies it).
pub const MAX_LZMA_DICTIONARY: u64 = 32 << 20;
/// An LZMA ops stream's dictionary: its raw size, but at most this (§2.3). A match reaches
/// back at most this far, so its decoder holds at most this much beside its output, and its
/// encoder's match finder (about 12 bytes per dictionary byte) at most 12 MiB or so.
pub const LZMA_STREAM_DICTIONARY: u64 = 1 << 20;

/// How a window segment's data is compressed against its window (§2.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WindowCodec {
    /// One zstd frame with the window as its prefix (tag `W`).
    #[default]
    Zstd,
    /// Raw LZMA with this properties byte, whose dictionary starts as the window (tag `L`,
    /// `FLAG_LZMA_SEGMENTS`).
    Lzma {
        /// `(pb * 5 + lp) * 9 + lc`, each at most 4 and lc + lp at most 4.
        props: u8,
    },
}
