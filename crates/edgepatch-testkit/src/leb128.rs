//! LEB128, as wasm and the patch format's varints write it: the writers make
//! the shortest form unless a width is asked for (non-canonical padding, which
//! wasm allows); [`read_u64`] reads well-formed input, for tests that walk
//! bytes they made themselves.

/// Appends `v` as unsigned LEB128 in the fewest bytes.
pub fn write_u64(out: &mut Vec<u8>, v: u64) {
    write_u64_padded(out, v, 0);
}

/// Appends `v` as unsigned LEB128 in the fewest bytes.
pub fn write_u32(out: &mut Vec<u8>, v: u32) {
    write_u64(out, u64::from(v));
}

/// Appends `v` as unsigned LEB128 in at least `width` bytes (continuation
/// bits set on zero groups up to the width).
pub fn write_u64_padded(out: &mut Vec<u8>, mut v: u64, width: usize) {
    let start = out.len();
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 && out.len() + 1 - start >= width {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

/// Appends `v` as signed LEB128 in the fewest bytes.
pub fn write_i64(out: &mut Vec<u8>, mut v: i64) {
    loop {
        let b = (v as u8) & 0x7f;
        v >>= 7;
        if (v == 0 && b & 0x40 == 0) || (v == -1 && b & 0x40 != 0) {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

/// Appends `v` as signed LEB128 in the fewest bytes.
pub fn write_i32(out: &mut Vec<u8>, v: i32) {
    write_i64(out, i64::from(v));
}

/// `v` as unsigned LEB128 in the fewest bytes.
pub fn u64(v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    write_u64(&mut out, v);
    out
}

/// `v` as unsigned LEB128 in at least `width` bytes.
pub fn u64_padded(v: u64, width: usize) -> Vec<u8> {
    let mut out = Vec::new();
    write_u64_padded(&mut out, v, width);
    out
}

/// `v` as signed LEB128 in the fewest bytes.
pub fn i64(v: i64) -> Vec<u8> {
    let mut out = Vec::new();
    write_i64(&mut out, v);
    out
}

/// Reads an unsigned LEB128 at `*at` and moves `*at` past it. Panics on
/// truncated input; bits beyond 64 are dropped (test data only).
pub fn read_u64(bytes: &[u8], at: &mut usize) -> u64 {
    let (mut v, mut shift) = (0u64, 0);
    loop {
        let b = bytes[*at];
        *at += 1;
        if shift < 64 {
            v |= u64::from(b & 0x7f) << shift;
        }
        shift += 7;
        if b & 0x80 == 0 {
            return v;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsigned() {
        assert_eq!(u64(0), [0]);
        assert_eq!(u64(127), [0x7f]);
        assert_eq!(u64(128), [0x80, 0x01]);
        assert_eq!(u64(u64::MAX).len(), 10);
        assert_eq!(u64_padded(1, 3), [0x81, 0x80, 0x00]);
        assert_eq!(u64_padded(300, 1), u64(300));
        let mut out = vec![9];
        write_u32(&mut out, 624_485);
        assert_eq!(out, [9, 0xe5, 0x8e, 0x26]);
    }

    #[test]
    fn signed() {
        assert_eq!(i64(0), [0]);
        assert_eq!(i64(-1), [0x7f]);
        assert_eq!(i64(63), [0x3f]);
        assert_eq!(i64(64), [0xc0, 0x00]);
        assert_eq!(i64(-123_456), [0xc0, 0xbb, 0x78]);
        let mut out = Vec::new();
        write_i32(&mut out, i32::MIN);
        assert_eq!(out, i64(i64::from(i32::MIN)));
    }

    #[test]
    fn reads_back() {
        for v in [0, 1, 127, 128, 300, 1 << 35, u64::MAX] {
            let mut bytes = u64_padded(v, 6);
            bytes.push(0xaa);
            let mut at = 0;
            assert_eq!(read_u64(&bytes, &mut at), v);
            assert_eq!(bytes[at], 0xaa);
        }
    }
}
