//! Wire primitives shared by the patch and signature formats: LEB128 varints,
//! length-prefixed strings and a bounds-checked slice reader whose errors carry
//! the absolute byte offset in the input.

use crate::error::{Error, Input, Result};

/// Appends `v` as an LEB128 varint (7 bits a byte, low bits first).
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A signed value as an unsigned one, small magnitudes small: 0, -1, 1, -2, ... as 0, 1, 2, 3, ...
pub fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// The inverse of [`zigzag`].
pub fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Appends `s` as a varint length and its UTF-8 bytes.
pub fn put_str(out: &mut Vec<u8>, s: &str) {
    put_varint(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

/// Reads from a byte slice that sits at `base` in some larger input.
pub struct SliceReader<'a> {
    bytes: &'a [u8],
    pos: usize,
    base: u64,
    input: Input,
}

impl<'a> SliceReader<'a> {
    /// A reader of `bytes`, which start at byte `base` of `input`.
    pub fn new(bytes: &'a [u8], base: u64, input: Input) -> Self {
        SliceReader { bytes, pos: 0, base, input }
    }

    /// The absolute offset of the next byte in the input.
    pub fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// Whether every byte has been read.
    pub fn is_empty(&self) -> bool {
        self.pos >= self.bytes.len()
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.bytes.len().saturating_sub(self.pos)
    }

    /// An [`Error::Truncated`] at the current offset, reading `what`.
    pub fn truncated(&self, what: &str) -> Error {
        Error::Truncated { input: self.input, offset: self.offset(), what: what.to_string() }
    }

    /// An [`Error::Corrupt`] at the current offset.
    pub fn corrupt(&self, what: impl Into<String>) -> Error {
        Error::Corrupt { input: self.input, offset: self.offset(), what: what.into() }
    }

    /// The next byte.
    pub fn u8(&mut self, what: &str) -> Result<u8> {
        let b = *self.bytes.get(self.pos).ok_or_else(|| self.truncated(what))?;
        self.pos += 1;
        Ok(b)
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.bytes.len());
        let end = end.ok_or_else(|| self.truncated(what))?;
        let s = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    /// The next `N` bytes, as an array.
    pub fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        let s = self.take(N, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    /// The next varint: at most 10 bytes, and no bits beyond 64.
    pub fn varint(&mut self, what: &str) -> Result<u64> {
        let mut v: u64 = 0;
        for shift in (0..64).step_by(7) {
            let b = self.u8(what)?;
            if shift == 63 && b > 1 {
                return Err(self.corrupt(format!("{what}: varint overflows 64 bits")));
            }
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(self.corrupt(format!("{what}: varint longer than 10 bytes")))
    }

    /// The next varint, an [`Error::Limit`] if above `max`.
    pub fn varint_max(&mut self, max: u64, what: &str) -> Result<u64> {
        let at = self.offset();
        let v = self.varint(what)?;
        if v > max {
            return Err(Error::Limit { input: self.input, offset: at, what: format!("{what} is {v}, above the limit {max}") });
        }
        Ok(v)
    }

    /// The next length-prefixed UTF-8 string of at most `max_len` bytes.
    pub fn string(&mut self, max_len: usize, what: &str) -> Result<&'a str> {
        let len = self.varint_max(max_len as u64, what)? as usize;
        let at = self.offset();
        let bytes = self.take(len, what)?;
        std::str::from_utf8(bytes).map_err(|_| Error::Corrupt { input: self.input, offset: at, what: format!("{what} is not valid UTF-8") })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_and_reject_overflow() {
        let values = [0u64, 1, 127, 128, 300, u32::MAX as u64, u64::MAX];
        let mut out = Vec::new();
        for v in values {
            put_varint(&mut out, v);
        }
        put_varint(&mut out, zigzag(-5));
        put_varint(&mut out, zigzag(i64::MIN));
        let mut r = SliceReader::new(&out, 0, Input::Patch);
        for v in values {
            assert_eq!(r.varint("v").unwrap(), v);
        }
        assert_eq!(unzigzag(r.varint("z").unwrap()), -5);
        assert_eq!(unzigzag(r.varint("z").unwrap()), i64::MIN);
        assert!(r.is_empty());
        let bad = [0xffu8; 11];
        assert!(SliceReader::new(&bad, 0, Input::Patch).varint("v").is_err());
        let over = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02];
        assert!(SliceReader::new(&over, 0, Input::Patch).varint("v").is_err());
    }
}
