//! Splitting a code section into its field-split layout (docs/FORMAT.md §2.8.7), on the
//! instruction walker: in memory, in place, or read and written through callbacks.
//!
//! Compiled code interleaves fields of very different statistics: opcodes,
//! local indices, branch depths, constants, memory offsets. A toolchain change
//! re-emits most bodies, so most of a patch is new code, and a compressor
//! that sees the fields interleaved models them badly. The split layout puts
//! every field of every body into its own stream (all opcodes, then all
//! block types, ...), the same permutation for the old and the new module, so
//! a diff sees the old module's opcode stream where it looks for the new
//! one's. It is a permutation of the section's bytes: same length, and the
//! walker that reads a module's bodies in order is the one that writes them
//! back from the streams (the same field sequence either way).

use crate::module::{Cursor, ParseError, ParseResult};
use crate::walker::{code_contents, read_leb, read_or, walk_code, Coding, CodingState, Field, Fields, Leb, MoveToFront, FIELDS, STREAM_WINDOW};
use crate::window::Window;

/// Splitting: reads the module in order, copies each field to its stream. Two passes over
/// the same walk: the first (no `out`) only counts each stream's bytes, the second writes them
/// where the streams lie in the output, so the split holds nothing but its output (one
/// module-sized buffer: a Worker's heap is short).
struct Splitter<'a, 'o> {
    c: Cursor<'a>,
    /// Where each stream's next byte goes in `out` (in the counting pass: its length so far).
    at: [usize; FIELDS],
    out: Option<&'o mut [u8]>,
    /// Only this field is written (to `out` from its start: [`field_stream`]).
    only: Option<Field>,
    /// The coding's state (§2.8.7: locals as move-to-front ranks, alignments).
    coding: CodingState,
}

impl Splitter<'_, '_> {
    fn put(&mut self, field: Field, bytes: &[u8]) -> ParseResult<()> {
        let at = &mut self.at[field as usize];
        if let Some(out) = self.out.as_mut().filter(|_| self.only.is_none_or(|f| f == field)) {
            // The writing pass walks as the counting one did: every stream fits its place.
            let place = out.get_mut(*at..*at + bytes.len()).ok_or(ParseError { offset: self.c.pos, what: "a field stream outgrew its count" })?;
            place.copy_from_slice(bytes);
        }
        *at += bytes.len();
        Ok(())
    }
}

impl Fields for Splitter<'_, '_> {
    fn byte(&mut self, field: Field) -> ParseResult<u8> {
        let b = self.c.u8()?;
        self.put(field, &[b])?;
        Ok(b)
    }

    fn leb(&mut self, field: Field, leb: Leb) -> ParseResult<i64> {
        let start = self.c.pos;
        let value = read_leb(self.c.bytes, &mut self.c.pos, leb)?;
        let bytes = self.c.bytes;
        self.put(field, &bytes[start..self.c.pos])?;
        Ok(value)
    }

    fn bytes(&mut self, field: Field, n: usize) -> ParseResult<()> {
        let s = self.c.skip(n)?;
        self.put(field, s)
    }

    fn position(&self) -> usize {
        self.c.pos
    }

    fn err(&self, what: &'static str) -> ParseError {
        ParseError { offset: self.c.pos, what }
    }

    fn local(&mut self) -> ParseResult<()> {
        match (&mut self.coding.mtf, self.c.bytes.get(self.c.pos)) {
            (Some(mtf), Some(&b)) if b < 0x80 => {
                self.c.pos += 1;
                let rank = mtf.rank(b);
                self.put(Field::Local, &[rank])
            }
            _ => self.leb(Field::Local, Leb::U32).map(|_| ()),
        }
    }

    fn align(&mut self, key: usize) -> ParseResult<i64> {
        match (&mut self.coding.aligns, self.c.bytes.get(self.c.pos)) {
            (Some(last), Some(&b)) if b < 0x80 => {
                self.c.pos += 1;
                let code = last.code(key, b, false);
                self.put(Field::MemAlign, &[code])?;
                Ok(i64::from(b))
            }
            _ => self.leb(Field::MemAlign, Leb::U32),
        }
    }

    fn begin_body(&mut self) {
        if let Some(mtf) = &mut self.coding.mtf {
            *mtf = MoveToFront::new();
        }
    }
}

/// Splitting a module that is not in memory ([`split_read`]): the code section is read through
/// a window that moves forward; the first walk counts each stream's bytes, the second gathers
/// each stream's next bytes in a buffer of its own, handed to `write` at the stream's place
/// every `STREAM_WINDOW` bytes.
struct ReadSplitter<'r> {
    read: &'r mut dyn FnMut(usize, &mut [u8]) -> bool,
    /// The window on the module.
    window: Window,
    pos: usize,
    end: usize,
    /// Each stream's bytes so far (counting), or the module offset of its next byte (writing).
    at: [usize; FIELDS],
    /// Writing: each stream's end, and its bytes not yet handed to `write`.
    ends: Option<[usize; FIELDS]>,
    pending: [Vec<u8>; FIELDS],
    write: &'r mut dyn FnMut(usize, &[u8]) -> bool,
    coding: CodingState,
}

impl ReadSplitter<'_> {
    /// Reads `n` bytes at `self.pos` (within the section) and gives them to `field`'s stream
    /// (`coded`: one byte, given as this code: a move-to-front rank, a coded alignment).
    #[inline(always)]
    fn take(&mut self, field: Field, n: usize, coded: Option<u8>) -> ParseResult<()> {
        if self.end - self.pos < n {
            return Err(ParseError { offset: self.pos, what: "unexpected end" });
        }
        self.window_for(self.pos, n)?;
        let from = self.pos - self.window.start;
        let f = field as usize;
        if let Some(ends) = &self.ends {
            if ends[f] - self.at[f] < n {
                return Err(ParseError { offset: self.pos, what: "a field stream outgrew its count" });
            }
            let pending = &mut self.pending[f];
            match coded {
                Some(c) => pending.push(c),
                None if n == 1 => pending.push(self.window.bytes[from]),
                None => pending.extend_from_slice(&self.window.bytes[from..from + n]),
            }
            if pending.len() >= STREAM_WINDOW {
                if !(self.write)(self.at[f] + n - pending.len(), pending) {
                    return Err(ParseError { offset: self.pos, what: "the split module could not be written" });
                }
                pending.clear();
            }
        }
        self.pos += n;
        self.at[f] += n;
        Ok(())
    }

    /// Makes the window hold `at..at + n`.
    #[inline(always)]
    fn window_for(&mut self, at: usize, n: usize) -> ParseResult<()> {
        if self.window.holds(at, n) {
            return Ok(());
        }
        let read = &mut self.read;
        self.window.refill(at, n, SPLIT_WINDOW, self.end, |at, buf| read_or(read, at, buf, "the module could not be read"))
    }

    /// Hands every stream's last bytes to `write`.
    fn flush(&mut self) -> ParseResult<()> {
        for f in 0..FIELDS {
            let pending = &self.pending[f];
            if !pending.is_empty() && !(self.write)(self.at[f] - pending.len(), pending) {
                return Err(ParseError { offset: self.pos, what: "the split module could not be written" });
            }
        }
        Ok(())
    }
}

impl Fields for ReadSplitter<'_> {
    fn byte(&mut self, field: Field) -> ParseResult<u8> {
        if self.pos >= self.end {
            return Err(ParseError { offset: self.pos, what: "unexpected end" });
        }
        self.window_for(self.pos, 1)?;
        let b = self.window.bytes[self.pos - self.window.start];
        self.take(field, 1, None)?;
        Ok(b)
    }

    fn leb(&mut self, field: Field, leb: Leb) -> ParseResult<i64> {
        let n = (self.end - self.pos).min(10);
        self.window_for(self.pos, n)?;
        let from = self.pos - self.window.start;
        let mut len = 0;
        let value = read_leb(&self.window.bytes[from..from + n], &mut len, leb).map_err(|e| ParseError { offset: self.pos + e.offset, what: e.what })?;
        self.take(field, len, None)?;
        Ok(value)
    }

    fn bytes(&mut self, field: Field, n: usize) -> ParseResult<()> {
        self.take(field, n, None)
    }

    fn position(&self) -> usize {
        self.pos
    }

    fn err(&self, what: &'static str) -> ParseError {
        ParseError { offset: self.pos, what }
    }

    fn local(&mut self) -> ParseResult<()> {
        if self.coding.mtf.is_some() && self.pos < self.end {
            self.window_for(self.pos, 1)?;
            let b = self.window.bytes[self.pos - self.window.start];
            if let Some(mtf) = self.coding.mtf.as_mut().filter(|_| b < 0x80) {
                let rank = mtf.rank(b);
                return self.take(Field::Local, 1, Some(rank));
            }
        }
        self.leb(Field::Local, Leb::U32).map(|_| ())
    }

    fn align(&mut self, key: usize) -> ParseResult<i64> {
        if self.coding.aligns.is_some() && self.pos < self.end {
            self.window_for(self.pos, 1)?;
            let b = self.window.bytes[self.pos - self.window.start];
            if let Some(last) = self.coding.aligns.as_mut().filter(|_| b < 0x80) {
                let code = last.code(key, b, false);
                self.take(Field::MemAlign, 1, Some(code))?;
                return Ok(i64::from(b));
            }
        }
        self.leb(Field::MemAlign, Leb::U32)
    }

    fn begin_body(&mut self) {
        if let Some(mtf) = &mut self.coding.mtf {
            *mtf = MoveToFront::new();
        }
    }
}

/// [`split`]'s code section of a module that is not in memory: its contents are `start..end`
/// (module offsets), read through `read` (false: the read failed, and the caller has its
/// error), and the split section's bytes go to `write` at their module offsets (false
/// likewise), each stream front to back in pieces of about 64 KiB. Holds a window and a
/// buffer per stream, not the module. Returns the streams' lengths.
pub(crate) fn split_read(
    read: &mut dyn FnMut(usize, &mut [u8]) -> bool,
    (start, end): (usize, usize),
    coding: Coding,
    write: &mut dyn FnMut(usize, &[u8]) -> bool,
) -> ParseResult<[u64; FIELDS]> {
    let mut s = ReadSplitter {
        read,
        window: Window::default(),
        pos: start,
        end,
        at: [0; FIELDS],
        ends: None,
        pending: std::array::from_fn(|_| Vec::new()),
        write,
        coding: CodingState::new(coding),
    };
    walk_code(&mut s, end)?;
    let counted = s.at;
    if counted.iter().sum::<usize>() != end - start {
        return Err(ParseError { offset: start, what: "the bodies do not cover the code section" });
    }
    let mut next = start;
    for (a, &n) in s.at.iter_mut().zip(&counted) {
        *a = next;
        next += n;
    }
    s.ends = Some(std::array::from_fn(|f| s.at[f] + counted[f]));
    (s.pos, s.coding) = (start, CodingState::new(coding));
    // The same walk as the count's.
    walk_code(&mut s, end)?;
    s.flush()?;
    Ok(counted.map(|n| n as u64))
}

/// Splitting in place ([`split_in_place`]): the opcodes (stream 0) are moved down in the module
/// itself as the walk passes them, every other field goes to `rest` (the later streams, one
/// after another). An opcode's place in its stream is never after where it is read, and the
/// walk reads only ahead of itself, so no byte is overwritten before it is read.
struct InPlaceSplitter<'a> {
    /// The module up to the code section's end.
    buf: &'a mut [u8],
    pos: usize,
    /// Where stream 0's next byte goes in `buf`, and each later stream's in `rest`.
    at: [usize; FIELDS],
    rest: &'a mut [u8],
    coding: CodingState,
}

impl InPlaceSplitter<'_> {
    /// The `n` bytes read just before `self.pos`, to their stream.
    fn put_read(&mut self, field: Field, n: usize) -> ParseResult<()> {
        let from = self.pos - n;
        let at = self.at[field as usize];
        if field == Field::Opcode {
            debug_assert!(at <= from, "an opcode moves down");
            self.buf.copy_within(from..self.pos, at);
        } else {
            let place = self.rest.get_mut(at..at + n).ok_or(ParseError { offset: from, what: "a field stream outgrew its count" })?;
            place.copy_from_slice(&self.buf[from..from + n]);
        }
        self.at[field as usize] += n;
        Ok(())
    }
}

impl Fields for InPlaceSplitter<'_> {
    fn byte(&mut self, field: Field) -> ParseResult<u8> {
        let b = *self.buf.get(self.pos).ok_or(ParseError { offset: self.pos, what: "unexpected end" })?;
        self.pos += 1;
        self.put_read(field, 1)?;
        Ok(b)
    }

    fn leb(&mut self, field: Field, leb: Leb) -> ParseResult<i64> {
        let start = self.pos;
        let value = read_leb(self.buf, &mut self.pos, leb)?;
        self.put_read(field, self.pos - start)?;
        Ok(value)
    }

    fn bytes(&mut self, field: Field, n: usize) -> ParseResult<()> {
        if self.buf.len() - self.pos < n {
            return Err(ParseError { offset: self.pos, what: "unexpected end" });
        }
        self.pos += n;
        self.put_read(field, n)
    }

    fn position(&self) -> usize {
        self.pos
    }

    fn err(&self, what: &'static str) -> ParseError {
        ParseError { offset: self.pos, what }
    }

    fn local(&mut self) -> ParseResult<()> {
        match (&mut self.coding.mtf, self.buf.get(self.pos)) {
            (Some(mtf), Some(&b)) if b < 0x80 => {
                let rank = mtf.rank(b);
                let at = self.at[Field::Local as usize];
                *self.rest.get_mut(at).ok_or(ParseError { offset: self.pos, what: "a field stream outgrew its count" })? = rank;
                self.at[Field::Local as usize] += 1;
                self.pos += 1;
                Ok(())
            }
            _ => self.leb(Field::Local, Leb::U32).map(|_| ()),
        }
    }

    fn align(&mut self, key: usize) -> ParseResult<i64> {
        match (&mut self.coding.aligns, self.buf.get(self.pos)) {
            (Some(last), Some(&b)) if b < 0x80 => {
                let code = last.code(key, b, false);
                let at = self.at[Field::MemAlign as usize];
                *self.rest.get_mut(at).ok_or(ParseError { offset: self.pos, what: "a field stream outgrew its count" })? = code;
                self.at[Field::MemAlign as usize] += 1;
                self.pos += 1;
                Ok(i64::from(b))
            }
            _ => self.leb(Field::MemAlign, Leb::U32),
        }
    }

    fn begin_body(&mut self) {
        if let Some(mtf) = &mut self.coding.mtf {
            *mtf = MoveToFront::new();
        }
    }
}

/// Bytes of the module a split that is not in memory reads at once.
const SPLIT_WINDOW: usize = 1 << 20;

/// The code section's contents (start, end) and each stream's length in its split layout: a
/// walk that writes nothing. Errors: not a module whose every body the walker reads, or bodies
/// that do not cover the section.
fn count_streams(module: &[u8], coding: Coding) -> ParseResult<(usize, usize, [usize; FIELDS])> {
    let Some((start, end)) = code_contents(module)? else { return Err(ParseError { offset: 8, what: "no code section" }) };
    let mut count = Splitter { c: Cursor::new(&module[..end], start), at: [0; FIELDS], out: None, only: None, coding: CodingState::new(coding) };
    walk_code(&mut count, end)?;
    if count.at.iter().sum::<usize>() != end - start {
        return Err(ParseError { offset: start, what: "the bodies do not cover the code section" });
    }
    Ok((start, end, count.at))
}

/// The module with its code section in the split layout, and each stream's
/// length. Errors: not a module whose every body the walker reads.
pub(crate) fn split(module: &[u8], coding: Coding) -> ParseResult<(Vec<u8>, [u64; FIELDS])> {
    let (start, end, counted) = count_streams(module, coding)?;
    let lens = counted.map(|n| n as u64);
    // Each stream's place in the output, one after another from the section's start.
    let mut at = [0usize; FIELDS];
    let mut next = start;
    for (a, &n) in at.iter_mut().zip(&counted) {
        *a = next;
        next += n;
    }
    let mut out = module.to_vec();
    let mut write = Splitter { c: Cursor::new(&module[..end], start), at, out: Some(&mut out), only: None, coding: CodingState::new(coding) };
    walk_code(&mut write, end)?;
    Ok((out, lens))
}

/// [`split`] of `module` in place, holding besides it only the streams after the opcodes
/// (about half the code section). The walk is made once without writing first: an error
/// leaves `module` as it was.
pub(crate) fn split_in_place(module: &mut [u8], coding: Coding) -> ParseResult<[u64; FIELDS]> {
    let (start, end, lens) = count_streams(module, coding)?;
    let ops = lens[Field::Opcode as usize];
    let mut rest = vec![0u8; end - start - ops];
    let mut at = [0usize; FIELDS];
    at[Field::Opcode as usize] = start;
    let mut next = 0;
    for (a, &n) in at.iter_mut().zip(&lens).skip(1) {
        *a = next;
        next += n;
    }
    let mut write = InPlaceSplitter { buf: &mut module[..end], pos: start, at, rest: &mut rest, coding: CodingState::new(coding) };
    // The same walk as the count's: it cannot fail where that one did not.
    walk_code(&mut write, end)?;
    module[start + ops..end].copy_from_slice(&rest);
    Ok(lens.map(|n| n as u64))
}

/// Stream `field` of `module`'s split layout, without splitting the rest.
pub(crate) fn field_stream(module: &[u8], field: Field, coding: Coding) -> ParseResult<Vec<u8>> {
    let (start, end, lens) = count_streams(module, coding)?;
    let mut out = vec![0u8; lens[field as usize]];
    let mut collect =
        Splitter { c: Cursor::new(&module[..end], start), at: [0; FIELDS], out: Some(&mut out), only: Some(field), coding: CodingState::new(coding) };
    walk_code(&mut collect, end)?;
    Ok(out)
}
