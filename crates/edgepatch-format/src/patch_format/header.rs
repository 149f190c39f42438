//! The patch's fixed header (docs/FORMAT.md §2): the magic, the version, the flags and the
//! tree section's sizes, with what each flag announces.

use super::unit_source::UnitSource;
use super::TreeBudget;
use crate::error::{Error, Input, Result};
use crate::wire::put_varint;

/// First bytes of every patch.
pub const PATCH_MAGIC: [u8; 8] = *b"EDGEPTCH";
/// The patch format version this build writes and reads.
pub const PATCH_VERSION: u16 = 2;
/// Header flag: the patch turns one file into one file (no tree).
pub const FLAG_SINGLE_FILE: u16 = 1;
/// The tree section ends with a wasm transform table (§2.8): some delta files
/// are stored in a normalized form that the applier turns back into the file.
/// A patch without transformed files leaves it clear, so it is byte for byte
/// what a writer without the transform makes, and older appliers (which
/// refuse unknown flags) refuse a patch that has them instead of misapplying it.
pub const FLAG_WASM_TRANSFORM: u16 = 2;
/// The tree section ends with the patch's window reach (§2.6): some window
/// segment reaches more than `BASE_WINDOW_BACK` bytes back into the delta
/// stream. Older appliers keep only 4 MiB of it and refuse unknown flags, so
/// they refuse such a patch instead of misapplying it; a patch whose windows
/// stay within 4 MiB leaves it clear and is byte for byte what it was before.
pub const FLAG_WINDOW_REACH: u16 = 4;
/// The patch may hold ops segments whose diff stream is run-coded (tag
/// `RUN_CODED_SEGMENT_TAG`, §2.3). Older appliers refuse unknown flags, so they
/// refuse such a patch at its header; a patch without one leaves it clear and
/// is byte for byte what it was before.
pub const FLAG_RUN_CODED_DIFF: u16 = 8;
/// The tree section ends with the old listing's mode-blind digest (§2.1): the digest of
/// the old listing with no file executable. Set exactly when some old file is executable,
/// so that an applier on a system without executable bits (Windows) can still recognize
/// the old build; a patch whose old build has no executable file leaves it clear and is
/// byte for byte what it was before. Older appliers refuse unknown flags.
pub const FLAG_MODE_BLIND_DIGEST: u16 = 16;
/// Each row of the wasm transform table names the old file a field-split file reads split
/// (§2.8.1): a renamed module (content-hashed names) is split against the old file it
/// replaced, at another path. Set only when some row names one, so a patch whose split files
/// all read the old file at their own path is byte for byte what it was before. Older
/// appliers refuse unknown flags.
pub const FLAG_SPLIT_REFERENCE: u16 = 32;
/// The patch may hold LZMA segments: window segments whose data is raw LZMA primed with the
/// window (tag `LZMA_WINDOW_SEGMENT_TAG`, §2.6), and ops segments some of whose streams are
/// raw LZMA (tag `LZMA_OPS_SEGMENT_TAG`, §2.3), where those are smaller than zstd's frames
/// (5-9% on split wasm modules' field streams and on ops streams). Set only when one occurs
/// (by the in-memory diff; a writer that writes the tree first sets it where it may write
/// one), so a patch without one is byte for byte what it was before. Older appliers refuse
/// unknown flags.
pub const FLAG_LZMA_SEGMENTS: u16 = 64;

/// Every flag this build reads; a patch with any other is refused at its header.
const KNOWN_FLAGS: u16 =
    FLAG_SINGLE_FILE | FLAG_WASM_TRANSFORM | FLAG_WINDOW_REACH | FLAG_RUN_CODED_DIFF | FLAG_MODE_BLIND_DIGEST | FLAG_SPLIT_REFERENCE | FLAG_LZMA_SEGMENTS;

/// The fixed header: what comes before the tree section's zstd frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixedHeader {
    /// The header flags (`FLAG_*`).
    pub flags: u16,
    /// The tree section's size, decoded.
    pub tree_len: u64,
    /// The tree section's zstd frame's size, which follows the header.
    pub tree_comp_len: u64,
}

impl FixedHeader {
    /// Appends the header (magic, version, flags, the tree section's sizes) to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&PATCH_MAGIC);
        out.extend_from_slice(&PATCH_VERSION.to_le_bytes());
        out.extend_from_slice(&self.flags.to_le_bytes());
        put_varint(out, self.tree_len);
        put_varint(out, self.tree_comp_len);
    }

    /// Reads the header: magic, version, flags and the tree section's sizes, all checked.
    pub fn read<S: UnitSource + ?Sized>(input: &mut S) -> Result<FixedHeader> {
        let mut magic = [0u8; 8];
        input.exact(&mut magic, "magic")?;
        if magic != PATCH_MAGIC {
            return Err(Error::BadMagic { input: Input::Patch });
        }
        let mut v = [0u8; 2];
        input.exact(&mut v, "version")?;
        let version = u16::from_le_bytes(v);
        if version != PATCH_VERSION {
            return Err(Error::UnsupportedVersion { input: Input::Patch, found: version, supported: PATCH_VERSION });
        }
        input.exact(&mut v, "flags")?;
        let flags = u16::from_le_bytes(v);
        if flags & !KNOWN_FLAGS != 0 {
            return Err(Error::Corrupt { input: Input::Patch, offset: 10, what: format!("unknown flags {flags:#x}") });
        }
        let at = input.offset();
        let raw = input.varint("tree size")?;
        let comp = input.varint("tree compressed size")?;
        TreeBudget::check_section(raw).map_err(|what| Error::Limit { input: Input::Patch, offset: at, what })?;
        if raw == 0 || comp == 0 || comp > raw + raw / 64 + 1024 {
            return Err(Error::Corrupt { input: Input::Patch, offset: at, what: format!("tree sizes {raw}/{comp} out of range") });
        }
        Ok(FixedHeader { flags, tree_len: raw, tree_comp_len: comp })
    }
}
