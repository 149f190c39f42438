//! LEB128 as WebAssembly uses it, decoded strictly (no more bytes than the
//! type allows, unused bits of the last byte zero or sign extension) so that a
//! decoded (value, width) pair determines the bytes exactly.

/// Why a LEB128 could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LebError {
    Truncated,
    TooLong,
}

/// Reads an unsigned LEB128 of at most `bits` bits at `bytes[*pos..]`.
pub(crate) fn read_unsigned(bytes: &[u8], pos: &mut usize, bits: u32) -> Result<u64, LebError> {
    let max_len = bits.div_ceil(7) as usize;
    let mut value = 0u64;
    for i in 0..max_len {
        let b = *bytes.get(*pos + i).ok_or(LebError::Truncated)?;
        let shift = 7 * i as u32;
        value |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            if i + 1 == max_len && shift + 7 > bits && (b & 0x7f) >> (bits - shift) != 0 {
                return Err(LebError::TooLong);
            }
            *pos += i + 1;
            return Ok(value);
        }
    }
    Err(LebError::TooLong)
}

/// Reads a signed LEB128 of at most `bits` bits (33 for block types).
pub(crate) fn read_signed(bytes: &[u8], pos: &mut usize, bits: u32) -> Result<i64, LebError> {
    let max_len = bits.div_ceil(7) as usize;
    let mut value = 0i64;
    for i in 0..max_len {
        let b = *bytes.get(*pos + i).ok_or(LebError::Truncated)?;
        let shift = 7 * i as u32;
        if shift < 64 {
            value |= i64::from(b & 0x7f) << shift;
        }
        if b & 0x80 == 0 {
            let used = shift + 7;
            if i + 1 == max_len && used > bits {
                // The bits beyond `bits` must repeat the sign bit.
                let spare = used - bits; // 1..=7
                let top = (b & 0x7f) >> (7 - spare - 1); // sign bit and the spare bits
                let all_ones = (1u8 << (spare + 1)) - 1;
                if top != 0 && top != all_ones {
                    return Err(LebError::TooLong);
                }
            }
            if used < 64 && b & 0x40 != 0 {
                value |= -1i64 << used;
            }
            *pos += i + 1;
            return Ok(value);
        }
    }
    Err(LebError::TooLong)
}

/// Canonical (shortest) unsigned LEB128.
pub(crate) fn write_unsigned(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Unsigned LEB128 padded to exactly `width` bytes (`width` at least the
/// canonical width).
pub(crate) fn write_unsigned_padded(out: &mut Vec<u8>, mut v: u64, width: usize) {
    for i in 0..width {
        let last = i + 1 == width;
        out.push((v as u8 & 0x7f) | if last { 0 } else { 0x80 });
        v >>= 7;
    }
}

/// Canonical (shortest) signed LEB128.
pub(crate) fn write_signed(out: &mut Vec<u8>, mut v: i64) {
    loop {
        let b = (v as u8) & 0x7f;
        v >>= 7;
        let done = (v == 0 && b & 0x40 == 0) || (v == -1 && b & 0x40 != 0);
        out.push(if done { b } else { b | 0x80 });
        if done {
            return;
        }
    }
}

/// Signed LEB128 padded to exactly `width` bytes, if `v` fits in them (a strict reader of
/// `7 * width` bits or more reads it back).
pub(crate) fn write_signed_padded(out: &mut Vec<u8>, mut v: i64, width: usize) -> bool {
    let mut canonical = Vec::with_capacity(10);
    write_signed(&mut canonical, v);
    if canonical.len() > width {
        return false;
    }
    for i in 0..width {
        let last = i + 1 == width;
        out.push((v as u8 & 0x7f) | if last { 0 } else { 0x80 });
        v >>= 7;
    }
    true
}

pub(crate) fn unsigned_width(v: u64) -> usize {
    let mut n = 1;
    let mut v = v >> 7;
    while v != 0 {
        n += 1;
        v >>= 7;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signed_round_trip_and_strictness() {
        for v in [0i64, 1, -1, 63, 64, -64, -65, 1 << 40, i64::MIN, i64::MAX, i32::MIN as i64, i32::MAX as i64] {
            let mut out = Vec::new();
            write_signed(&mut out, v);
            let mut pos = 0;
            assert_eq!(read_signed(&out, &mut pos, 64), Ok(v));
            assert_eq!(pos, out.len());
        }
        // 5-byte s32 whose last byte's spare bits are not sign extension.
        let mut pos = 0;
        assert_eq!(read_signed(&[0x80, 0x80, 0x80, 0x80, 0x70], &mut pos, 32), Err(LebError::TooLong));
        let mut pos = 0;
        assert_eq!(read_signed(&[0xff, 0xff, 0xff, 0xff, 0x7f], &mut pos, 32), Ok(-1));
        let mut pos = 0;
        assert_eq!(read_unsigned(&[0xff, 0xff, 0xff, 0xff, 0x1f], &mut pos, 32), Err(LebError::TooLong));
        let mut pos = 0;
        assert_eq!(read_unsigned(&[0x80, 0x80, 0x00], &mut pos, 32), Ok(0));
        for (v, width) in [(5i64, 3usize), (-5, 3), (i32::MIN as i64, 5), (i32::MAX as i64, 5), (0x13f43, 3), (-64, 1)] {
            let mut out = Vec::new();
            assert!(write_signed_padded(&mut out, v, width));
            assert_eq!(out.len(), width);
            let mut pos = 0;
            assert_eq!(read_signed(&out, &mut pos, 32), Ok(v), "{v} in {width}");
            assert_eq!(pos, width);
        }
        assert!(!write_signed_padded(&mut Vec::new(), 64, 1));
        assert!(!write_signed_padded(&mut Vec::new(), 0x10_0000, 3));
    }
}
