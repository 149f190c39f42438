//! The control stream of an ops segment (docs/FORMAT.md §2.4): the ops, in columns, with
//! their diagonals coded against the two used before. [`encode_control`] writes it,
//! [`OpCursor`] checks it whole and then reads one op at a time.

use crate::error::{Input, Result};
use crate::wire::{put_varint, unzigzag, zigzag, SliceReader};

/// One step of the delta program, starting at new position `at` (in the
/// segment): `copy_len` bytes of old data from `at + diagonal` plus the diff
/// bytes, then `extra_len` literal bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Op {
    /// Old position minus new position of the copy.
    pub diagonal: i64,
    /// Bytes copied from old data (plus the diff stream's bytes).
    pub copy_len: u64,
    /// Literal bytes after the copy (from the extra stream).
    pub extra_len: u64,
}

/// The control stream of a segment: the op count, then every op's diagonal
/// code, then every copy length, then every extra length (columns compress
/// better than interleaved fields). A diagonal is old position minus new
/// position; code 0 names the diagonal used before the current one, code 1 the
/// one before that, and code `2 + zigzag(delta)` a diagonal `delta` away from
/// the current one. The current diagonal starts at 0 in every segment.
pub fn encode_control(ops: &[Op]) -> Vec<u8> {
    let mut out = Vec::with_capacity(ops.len() * 6 + 10);
    put_varint(&mut out, ops.len() as u64);
    let mut history = DiagonalHistory::default();
    for op in ops {
        match history.code_for(op.diagonal) {
            DiagonalCode::Repeat(k) => out.push(k),
            DiagonalCode::Delta(delta) => put_varint(&mut out, zigzag(delta).wrapping_add(2)),
        }
        history.use_diagonal(op.diagonal);
    }
    for op in ops {
        put_varint(&mut out, op.copy_len);
    }
    for op in ops {
        put_varint(&mut out, op.extra_len);
    }
    out
}

enum DiagonalCode {
    Repeat(u8),
    Delta(i64),
}

/// The current diagonal and the two used before it.
#[derive(Debug, Default, Clone, Copy)]
struct DiagonalHistory([i64; 3]);

impl DiagonalHistory {
    /// The diagonal a code names (§2.4), or None if it overflows.
    fn decode(&self, code: u64) -> Option<i64> {
        match code {
            0 => Some(self.0[1]),
            1 => Some(self.0[2]),
            c => self.0[0].checked_add(unzigzag(c - 2)),
        }
    }

    fn code_for(&self, diagonal: i64) -> DiagonalCode {
        if diagonal != self.0[0] {
            if diagonal == self.0[1] {
                return DiagonalCode::Repeat(0);
            }
            if diagonal == self.0[2] {
                return DiagonalCode::Repeat(1);
            }
        }
        DiagonalCode::Delta(diagonal.wrapping_sub(self.0[0]))
    }

    fn use_diagonal(&mut self, diagonal: i64) {
        let h = &mut self.0;
        if diagonal == h[0] {
        } else if diagonal == h[1] {
            h.swap(0, 1);
        } else if diagonal == h[2] {
            *h = [h[2], h[0], h[1]];
        } else {
            *h = [diagonal, h[0], h[1]];
        }
    }
}

/// An ops segment's control stream, checked whole and then read one op at a
/// time: the ops are never collected, so a segment costs its control bytes
/// and nothing per op (a 32 MiB control stream holds up to 11M ops, which as a
/// `Vec<Op>` would take 256 MiB).
#[derive(Debug, Clone, Default)]
pub struct OpCursor {
    left: u64,
    /// Read positions in the diagonal, copy and extra columns.
    pos: [usize; 3],
    history: DiagonalHistory,
}

impl OpCursor {
    /// Checks the whole control stream of a segment producing `new_len`
    /// bytes, `diff_len` of them from the diff stream and `extra_len` from
    /// the extra stream (§2.4, §2.5): varints and columns, no bytes after the
    /// last column, each op producing 1.. bytes (sums checked, never
    /// wrapped), and the ops together using exactly the segment's diff and
    /// extra bytes. Only the bounds of the old data are left to the applier.
    pub fn new(ctrl: &[u8], new_len: u64, diff_len: u64, extra_len: u64, offset: u64) -> Result<OpCursor> {
        let mut r = SliceReader::new(ctrl, offset, Input::Patch);
        // Each op takes at least 3 bytes and produces at least 1.
        let count = r.varint_max(new_len.min(ctrl.len() as u64 / 3), "op count")?;
        let diag_at = ctrl.len() - r.remaining();
        let mut history = DiagonalHistory::default();
        for _ in 0..count {
            let code = r.varint("diagonal code")?;
            let diagonal = history.decode(code).ok_or_else(|| r.corrupt("diagonal overflows"))?;
            history.use_diagonal(diagonal);
        }
        let copy_at = ctrl.len() - r.remaining();
        for _ in 0..count {
            r.varint("copy length")?;
        }
        let extra_at = ctrl.len() - r.remaining();
        let mut copies = SliceReader::new(&ctrl[copy_at..], offset + copy_at as u64, Input::Patch);
        let (mut copied, mut added) = (0u64, 0u64);
        for _ in 0..count {
            let copy = copies.varint("copy length")?;
            let extra = r.varint("extra length")?;
            if copy.checked_add(extra).is_none_or(|n| n == 0) {
                return Err(r.corrupt(format!("an op of copy length {copy} and extra length {extra} produces nothing or overflows")));
            }
            copied = copied
                .checked_add(copy)
                .filter(|&n| n <= diff_len)
                .ok_or_else(|| r.corrupt(format!("ops copy more than the segment's {diff_len} diff bytes")))?;
            added = added
                .checked_add(extra)
                .filter(|&n| n <= extra_len)
                .ok_or_else(|| r.corrupt(format!("ops add more than the segment's {extra_len} extra bytes")))?;
        }
        if !r.is_empty() {
            return Err(r.corrupt("bytes after the last control op"));
        }
        if copied != diff_len || added != extra_len {
            return Err(r.corrupt(format!("ops use {copied} diff and {added} extra bytes, the segment has {diff_len} and {extra_len}")));
        }
        Ok(OpCursor { left: count, pos: [diag_at, copy_at, extra_at], history: DiagonalHistory::default() })
    }

    /// The ops not yet read.
    pub fn remaining(&self) -> u64 {
        self.left
    }

    /// The next op of `ctrl` (the stream this cursor was made for), or None
    /// after the last.
    pub fn next_op(&mut self, ctrl: &[u8]) -> Option<Op> {
        if self.left == 0 {
            return None;
        }
        let mut read = |column: usize| -> Option<u64> {
            let mut r = SliceReader::new(ctrl.get(self.pos[column]..)?, 0, Input::Patch);
            let v = r.varint("control op").ok()?;
            self.pos[column] = ctrl.len() - r.remaining();
            Some(v)
        };
        let (code, copy_len, extra_len) = (read(0)?, read(1)?, read(2)?);
        let diagonal = self.history.decode(code)?;
        self.history.use_diagonal(diagonal);
        self.left -= 1;
        Some(Op { diagonal, copy_len, extra_len })
    }
}

/// Decodes a whole control stream into ops (for tools and tests; the
/// applier reads them one at a time through [`OpCursor`]).
pub fn decode_control(ctrl: &[u8], new_len: u64, diff_len: u64, extra_len: u64, offset: u64) -> Result<Vec<Op>> {
    let mut cursor = OpCursor::new(ctrl, new_len, diff_len, extra_len, offset)?;
    let mut ops = Vec::new();
    while let Some(op) = cursor.next_op(ctrl) {
        ops.push(op);
    }
    Ok(ops)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    fn ctrl(codes: &[u64], copies: &[u64], extras: &[u64]) -> Vec<u8> {
        let mut c = Vec::new();
        put_varint(&mut c, codes.len() as u64);
        for v in codes.iter().chain(copies).chain(extras) {
            put_varint(&mut c, *v);
        }
        c
    }

    #[test]
    fn diagonal_history_follows_the_diagonal_alone() {
        // -3 explicitly (code 2 + zigzag(-3) = 7), back to 0 (code 0), then code 1
        // names h2 = 0 = h0: the history stays (0, -3, 0), so code 0 names -3 (FORMAT.md §2.4).
        let c = ctrl(&[7, 0, 1, 0], &[0; 4], &[1; 4]);
        let ops = decode_control(&c, 4, 0, 4, 0).unwrap();
        assert_eq!(ops.iter().map(|o| o.diagonal).collect::<Vec<_>>(), [-3, 0, 0, -3]);
    }

    #[test]
    fn op_sums_are_checked_before_any_output() {
        let err = |c: &[u8], new_len, diff, extra| decode_control(c, new_len, diff, extra, 100).unwrap_err();
        // copy_len + extra_len overflows.
        assert!(matches!(err(&ctrl(&[2], &[u64::MAX], &[1]), 1, 0, 1), Error::Corrupt { .. }));
        // An op producing nothing.
        assert!(matches!(err(&ctrl(&[2, 2], &[0, 0], &[1, 0]), 2, 0, 1), Error::Corrupt { .. }));
        // Ops using more extra bytes than the segment has, or fewer.
        assert!(matches!(err(&ctrl(&[2], &[0], &[5]), 4, 0, 4), Error::Corrupt { .. }));
        assert!(matches!(err(&ctrl(&[2], &[0], &[3]), 4, 0, 4), Error::Corrupt { .. }));
        // More ops than 3 bytes each can hold: a limit, before anything is read.
        let mut c = Vec::new();
        put_varint(&mut c, 1000);
        assert!(matches!(err(&c, 4096, 0, 4096), Error::Limit { .. }));
        // The diagonal overflows: i64::MAX - 1, then as much again.
        assert!(matches!(err(&ctrl(&[u64::MAX - 1, u64::MAX - 1], &[0, 0], &[1, 1]), 2, 0, 2), Error::Corrupt { .. }));
    }
}
