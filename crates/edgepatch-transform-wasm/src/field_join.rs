//! Joining a split code section (docs/FORMAT.md §2.8.7): the walker reads each field from its
//! stream and writes the bodies in module order again, the whole section or a body at a time,
//! from a module in memory or one read through a window per stream.

use crate::data_gaps;
use crate::module::{ParseError, ParseResult};
use crate::walker::{code_contents, read_leb, read_or, walk_code, walk_code_each, Coding, CodingState, Field, Fields, Leb, MoveToFront, FIELDS, STREAM_WINDOW};
use crate::window::Window;

/// Where a joiner reads the field streams: `n` bytes at module offset `at` of stream `field`
/// (the joiner checks they lie within it). A module in memory is its own; one that is not is
/// read through a window per stream ([`StreamWindows`]).
pub(crate) trait StreamBytes {
    fn get(&mut self, field: Field, at: usize, n: usize) -> ParseResult<&[u8]>;
}

impl StreamBytes for &[u8] {
    #[inline(always)]
    fn get(&mut self, _: Field, at: usize, n: usize) -> ParseResult<&[u8]> {
        Ok(&self[at..at + n])
    }
}

/// The field streams of a module that is not in memory, read through `read` (module offset,
/// buffer to fill; false: the read failed, and the caller has its error), each through a
/// window of its own that moves forward as the join reads it.
pub(crate) struct StreamWindows<'r> {
    read: &'r mut dyn FnMut(usize, &mut [u8]) -> bool,
    /// Each stream's window.
    windows: [Window; FIELDS],
    /// Each stream's end: no window reads past it.
    ends: [usize; FIELDS],
}

impl StreamBytes for StreamWindows<'_> {
    #[inline(always)]
    fn get(&mut self, field: Field, at: usize, n: usize) -> ParseResult<&[u8]> {
        let read = &mut self.read;
        let f = field as usize;
        self.windows[f].get(at, n, STREAM_WINDOW, self.ends[f], |at, buf| read_or(read, at, buf, "the normalized form could not be read"))
    }
}

/// Joining: reads each field from its stream, writes the module in order.
/// Errors give the offset in the split section.
struct Joiner<S> {
    split: S,
    /// Each stream's next byte and end, in `split`.
    at: StreamBounds,
    out: Vec<u8>,
    /// The module offset of `out`'s first byte (bytes before it were handed on).
    base: usize,
    /// The coding's state (§2.8.7: locals as move-to-front ranks, alignments).
    coding: CodingState,
}

impl<S: StreamBytes> Joiner<S> {
    /// The next `n` bytes of stream `field`, consumed.
    #[inline(always)]
    fn take(&mut self, field: Field, n: usize) -> ParseResult<&[u8]> {
        let (at, end) = self.at[field as usize];
        if end - at < n {
            return Err(ParseError { offset: at, what: "a field stream ends early" });
        }
        self.at[field as usize].0 = at + n;
        self.split.get(field, at, n)
    }
}

impl<S: StreamBytes> Fields for Joiner<S> {
    #[inline(always)]
    fn byte(&mut self, field: Field) -> ParseResult<u8> {
        let b = self.take(field, 1)?[0];
        self.out.push(b);
        Ok(b)
    }

    #[inline(always)]
    fn leb(&mut self, field: Field, leb: Leb) -> ParseResult<i64> {
        let (at, end) = self.at[field as usize];
        // A LEB128 of any of these types takes at most 10 bytes.
        let bytes = self.split.get(field, at, (end - at).min(10))?;
        let mut pos = 0;
        let value =
            read_leb(bytes, &mut pos, leb).map_err(|e| ParseError { offset: at + e.offset, what: "a field stream ends early or holds a malformed LEB128" })?;
        self.out.extend_from_slice(&bytes[..pos]);
        self.at[field as usize].0 = at + pos;
        Ok(value)
    }

    #[inline(always)]
    fn bytes(&mut self, field: Field, n: usize) -> ParseResult<()> {
        let (at, end) = self.at[field as usize];
        if end - at < n {
            return Err(ParseError { offset: at, what: "a field stream ends early" });
        }
        self.at[field as usize].0 = at + n;
        let bytes = self.split.get(field, at, n)?;
        self.out.extend_from_slice(bytes);
        Ok(())
    }

    fn position(&self) -> usize {
        self.base + self.out.len()
    }

    fn err(&self, what: &'static str) -> ParseError {
        ParseError { offset: self.position(), what }
    }

    fn local(&mut self) -> ParseResult<()> {
        let (at, end) = self.at[Field::Local as usize];
        if let Some(mtf) = &mut self.coding.mtf {
            if at < end {
                let b = self.split.get(Field::Local, at, 1)?[0];
                if b < 0x80 {
                    let index = mtf.index(b);
                    self.at[Field::Local as usize].0 = at + 1;
                    self.out.push(index);
                    return Ok(());
                }
            }
        }
        self.leb(Field::Local, Leb::U32).map(|_| ())
    }

    fn align(&mut self, key: usize) -> ParseResult<i64> {
        let (at, end) = self.at[Field::MemAlign as usize];
        if let Some(last) = &mut self.coding.aligns {
            if at < end {
                let c = self.split.get(Field::MemAlign, at, 1)?[0];
                if c < 0x80 {
                    let b = last.code(key, c, true);
                    self.at[Field::MemAlign as usize].0 = at + 1;
                    self.out.push(b);
                    return Ok(i64::from(b));
                }
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

/// The BLAKE3 of [`join`]'s module, joined a body at a time ([`join_each`]) instead of held,
/// with `replaced`'s bytes (module offset, bytes; ascending, outside the code section) in
/// place of those there.
pub(crate) fn join_hash(split: &[u8], lens: &[u64; FIELDS], coding: Coding, replaced: &[(usize, data_gaps::Field)]) -> ParseResult<blake3::Hash> {
    let (start, end, _) = streams(split, lens)?;
    let mut hasher = blake3::Hasher::new();
    let hash_replaced = |hasher: &mut blake3::Hasher, from: usize, to: usize| {
        let mut at = from;
        for (r, field) in replaced.iter().filter(|(r, _)| (from..to).contains(r)) {
            hasher.update(&split[at..*r]);
            hasher.update(field.bytes());
            at = r + field.bytes().len();
        }
        hasher.update(&split[at..to]);
    };
    hash_replaced(&mut hasher, 0, start);
    join_each(split, lens, coding, &mut |piece| {
        hasher.update(match piece {
            Joined::Count(bytes) | Joined::Body { bytes, .. } => bytes,
        });
        true
    })?;
    hash_replaced(&mut hasher, end, split.len());
    Ok(hasher.finalize())
}

/// The inverse of [`split`](crate::field_split::split): the module with its code section interleaved
/// again, from the split form and the streams' lengths.
pub(crate) fn join(split: &[u8], lens: &[u64; FIELDS], coding: Coding) -> ParseResult<Vec<u8>> {
    let (start, end, at) = streams(split, lens)?;
    let mut j = Joiner { split: &split[..end], at, out: Vec::with_capacity(split.len()), base: 0, coding: CodingState::new(coding) };
    j.out.extend_from_slice(&split[..start]);
    // The output starts with the bytes before the section: positions are module offsets.
    walk_code(&mut j, end)?;
    j.all_used(start)?;
    j.out.extend_from_slice(&split[end..]);
    Ok(j.out)
}

/// A piece of a code section joined again ([`join_each`]).
pub(crate) enum Joined<'a> {
    /// The function count's bytes.
    Count(&'a [u8]),
    /// A body with its size field, which is the first `size_width` bytes.
    Body { bytes: &'a [u8], size_width: usize },
}

/// [`join`] a body at a time, holding nothing but that body: `each` gets the function count,
/// then every body with its size field, in order; false from it stops the join there (no
/// error: the caller keeps its own). The checks are [`join`]'s, the last one (every stream
/// used up) once the last body is handed over.
pub(crate) fn join_each(split: &[u8], lens: &[u64; FIELDS], coding: Coding, each: &mut dyn FnMut(Joined) -> bool) -> ParseResult<()> {
    let (start, end, at) = streams(split, lens)?;
    join_each_from(&split[..end], start, end, at, coding, each)
}

/// [`join_each`] of a split module that is not in memory: its code section's contents are
/// `start..end` (module offsets), read through `read` (module offset, buffer to fill; false:
/// the read failed) one window per stream.
pub(crate) fn join_each_read(
    read: &mut dyn FnMut(usize, &mut [u8]) -> bool,
    (start, end): (usize, usize),
    lens: &[u64; FIELDS],
    coding: Coding,
    each: &mut dyn FnMut(Joined) -> bool,
) -> ParseResult<()> {
    let at = stream_bounds(start, end, lens)?;
    let windows = StreamWindows { read, windows: std::array::from_fn(|_| Window::default()), ends: at.map(|(_, e)| e) };
    join_each_from(windows, start, end, at, coding, each)
}

fn join_each_from<S: StreamBytes>(
    split: S,
    start: usize,
    end: usize,
    at: StreamBounds,
    coding: Coding,
    each: &mut dyn FnMut(Joined) -> bool,
) -> ParseResult<()> {
    let mut j = Joiner { split, at, out: Vec::new(), base: start, coding: CodingState::new(coding) };
    let mut stopped = false;
    walk_code_each(&mut j, end, &mut |j, body_start| {
        let piece = match body_start {
            None => Joined::Count(&j.out),
            Some(b) => Joined::Body { bytes: &j.out, size_width: b - j.base },
        };
        stopped = !each(piece);
        j.base += j.out.len();
        j.out.clear();
        Ok(!stopped)
    })?;
    if !stopped {
        j.all_used(start)?;
    }
    Ok(())
}

/// Each field stream's (next byte, end) in a split module.
pub(crate) type StreamBounds = [(usize, usize); FIELDS];

/// The code section of a split module (start, end) and each field stream's (start, end),
/// checked to cover the section exactly.
pub(crate) fn streams(split: &[u8], lens: &[u64; FIELDS]) -> ParseResult<(usize, usize, StreamBounds)> {
    let Some((start, end)) = code_contents(split)? else { return Err(ParseError { offset: 8, what: "no code section" }) };
    Ok((start, end, stream_bounds(start, end, lens)?))
}

/// Each field stream's (start, end) in a code section whose contents are `start..end`, checked
/// to cover it exactly.
fn stream_bounds(start: usize, end: usize, lens: &[u64; FIELDS]) -> ParseResult<StreamBounds> {
    let mut at = [(0usize, 0usize); FIELDS];
    let mut next = start as u64;
    for (a, &len) in at.iter_mut().zip(lens) {
        let e = next.checked_add(len).filter(|&e| e <= end as u64).ok_or(ParseError { offset: start, what: "field streams longer than the code section" })?;
        *a = (next as usize, e as usize);
        next = e;
    }
    if next != end as u64 {
        return Err(ParseError { offset: start, what: "field streams shorter than the code section" });
    }
    Ok(at)
}

impl<S> Joiner<S> {
    fn all_used(&self, start: usize) -> ParseResult<()> {
        if self.at.iter().any(|&(a, e)| a != e) {
            return Err(ParseError { offset: start, what: "a field stream has bytes the bodies do not use" });
        }
        Ok(())
    }
}
