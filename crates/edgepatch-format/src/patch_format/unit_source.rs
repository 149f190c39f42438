//! Where the streaming decoders of a patch's units (the fixed header, segment headers) read
//! their bytes: any source that says its offset and hands out exact runs of bytes (the
//! applier's reader counts and hashes every byte as it goes, and ends with the checksum).

use crate::error::{Error, Input, Result};

/// A patch read front to back, one unit at a time.
pub trait UnitSource {
    /// The absolute offset in the patch of the next byte.
    fn offset(&self) -> u64;

    /// Fills `buf` with the next bytes: an [`Error::Truncated`] naming `what` where the patch
    /// ends first, an [`Error::Io`] where reading fails.
    fn exact(&mut self, buf: &mut [u8], what: &str) -> Result<()>;

    /// The next byte.
    fn u8(&mut self, what: &str) -> Result<u8> {
        let mut b = [0u8; 1];
        self.exact(&mut b, what)?;
        Ok(b[0])
    }

    /// The next varint (§1): at most 10 bytes, no bits beyond 64.
    fn varint(&mut self, what: &str) -> Result<u64> {
        let start = self.offset();
        let mut v: u64 = 0;
        for shift in (0..64).step_by(7) {
            let b = self.u8(what)?;
            if shift == 63 && b > 1 {
                break;
            }
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(Error::Corrupt { input: Input::Patch, offset: start, what: format!("{what}: varint overflows 64 bits") })
    }
}
