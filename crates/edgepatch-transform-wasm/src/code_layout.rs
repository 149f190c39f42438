//! The instruction walker over function bodies, written once for every
//! direction it runs in, and the field-split layout of a code section
//! (docs/FORMAT.md §2.8.7) built on it.
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

use super::leb::{read_signed, read_unsigned, LebError};
use super::module::{section_headers, Cursor, Immediate, ImmediateKind, ParseError, ParseResult, CODE_SECTION};
use super::window::Window;

/// The streams of a split code section, in layout order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Field {
    /// Opcodes; for the 0xFC, 0xFD and 0xFE prefixes, the sub-opcode too.
    Opcode,
    /// Block types (`block`, `loop`, `if`, `try`, `try_table`).
    BlockType,
    /// Branch depths (`br`, `br_if`, `br_table`, `br_on_null`, catch labels).
    Label,
    /// `local.get`, `local.set`, `local.tee` indices.
    Local,
    /// Globals, tables, memories, tags and other single indices.
    Index,
    /// Function indices of `call`, `return_call`, `ref.func`.
    Call,
    /// `i32.const` values.
    I32,
    /// `i64.const` values.
    I64,
    /// A memarg's alignment (and memory index).
    MemAlign,
    /// A memarg's offset.
    MemOffset,
    /// Fixed-size bytes: float and v128 constants, shuffle lanes.
    Bytes,
    /// Everything else: the function count, body sizes, local declarations,
    /// types of `call_indirect` and `select`, catch kinds, lane indices.
    Other,
}

/// Streams of a split code section.
pub(crate) const FIELDS: usize = 12;

/// How a LEB128 field is read: its type, which bounds its length.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Leb {
    U32,
    U64,
    S32,
    S33,
    S64,
}

fn read_leb(bytes: &[u8], pos: &mut usize, leb: Leb) -> ParseResult<i64> {
    let at = *pos;
    let r = match leb {
        Leb::U32 => read_unsigned(bytes, pos, 32).map(|v| v as i64),
        // Above 2^63 - 1 the value is negative as i64 (and never rewritten).
        Leb::U64 => read_unsigned(bytes, pos, 64).map(|v| v as i64),
        Leb::S32 => read_signed(bytes, pos, 32),
        Leb::S33 => read_signed(bytes, pos, 33),
        Leb::S64 => read_signed(bytes, pos, 64),
    };
    r.map_err(|e| ParseError {
        offset: at,
        what: match e {
            LebError::Truncated => "truncated LEB128",
            LebError::TooLong => "malformed LEB128",
        },
    })
}

/// Where the walker's fields come from. Every read consumes bytes of the
/// module in module order; `position` counts them.
pub(crate) trait Fields {
    fn byte(&mut self, field: Field) -> ParseResult<u8>;
    fn leb(&mut self, field: Field, leb: Leb) -> ParseResult<i64>;
    fn bytes(&mut self, field: Field, n: usize) -> ParseResult<()>;
    /// Bytes of the module read so far (an offset in the module for a module's own walk).
    fn position(&self) -> usize;
    fn err(&self, what: &'static str) -> ParseError;
    /// A `local.get`/`set`/`tee` index (a u32 of stream 3, or its move-to-front rank).
    fn local(&mut self) -> ParseResult<()> {
        self.leb(Field::Local, Leb::U32).map(|_| ())
    }
    /// A memarg's alignment field (a u32 of stream 8; with `aligns`, a one-byte one coded
    /// against the last of instruction `key`, [`LastAligns`]): the alignment's value.
    fn align(&mut self, key: usize) -> ParseResult<i64> {
        let _ = key;
        self.leb(Field::MemAlign, Leb::U32)
    }
    /// A body's instructions begin (the move-to-front list starts over).
    fn begin_body(&mut self) {}
}

/// How a split layout codes three of its fields (docs/FORMAT.md §2.8.7, the side info's layout).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Coding {
    /// One-byte local indices as move-to-front ranks.
    pub locals_mtf: bool,
    /// One-byte memarg alignments XOR the last one of the same instruction.
    pub aligns: bool,
    /// The data segments' addresses as gaps (outside the code section: `super::data_gaps`).
    pub gaps: bool,
}

/// A walk's state for its [`Coding`].
struct CodingState {
    mtf: Option<MoveToFront>,
    aligns: Option<LastAligns>,
}

impl CodingState {
    fn new(coding: Coding) -> Self {
        CodingState { mtf: coding.locals_mtf.then(MoveToFront::new), aligns: coding.aligns.then_some(LastAligns([0; ALIGN_KEYS])) }
    }
}

/// Instructions with a memarg, as keys of [`LastAligns`]: 0x28..=0x3E as 0..=22, `FD` sub-opcode
/// s as 23 + s (s <= 93), `FE` sub-opcode s as 117 + s (s <= 0x4E).
const ALIGN_KEYS: usize = 117 + 0x4F;

/// Each instruction's last one-byte alignment, its low six bits (0 before the first): a
/// compiler gives an instruction its natural alignment, or one of its own, again and again
/// (esbuild's Go build: 649,138 bytes of alignments, whose delta an LZMA estimate puts at
/// 18,939 bytes as they are and 137 coded; its patch 1,060,792 -> 1,041,471 bytes;
/// BENCHMARKS.md, "wasm transform: alignments coded against the last").
struct LastAligns([u8; ALIGN_KEYS]);

impl LastAligns {
    /// The one-byte alignment `value` (below 0x80) XOR the last of instruction `key`, whose
    /// last becomes `real`'s low six bits: splitting passes the alignment and gets its code;
    /// joining passes the code, and the alignment it gets is `real`. Bit 6 (a memory index
    /// follows) and bit 7 are never changed.
    fn code(&mut self, key: usize, value: u8, joining: bool) -> u8 {
        let out = value ^ self.0[key];
        self.0[key] = if joining { out } else { value } & 0x3f;
        out
    }
}

/// The locals' move-to-front list of one body (docs/FORMAT.md §2.8.7): the
/// one-byte indices 0..=127, most recently used first.
struct MoveToFront([u8; 128]);

impl MoveToFront {
    fn new() -> Self {
        MoveToFront(std::array::from_fn(|i| i as u8))
    }
    /// The rank of `index`, which moves to the front.
    fn rank(&mut self, index: u8) -> u8 {
        let r = self.0.iter().position(|&x| x == index).expect("every index below 128 is listed");
        self.0.copy_within(0..r, 1);
        self.0[0] = index;
        r as u8
    }
    /// The index of `rank`, which moves to the front.
    fn index(&mut self, rank: u8) -> u8 {
        let index = self.0[rank as usize];
        self.0.copy_within(0..rank as usize, 1);
        self.0[0] = index;
        index
    }
}

fn value_type<F: Fields>(f: &mut F, field: Field) -> ParseResult<()> {
    let b = f.byte(field)?;
    if b == 0x63 || b == 0x64 {
        f.leb(field, Leb::S33)?;
    }
    Ok(())
}

fn block_type<F: Fields>(f: &mut F) -> ParseResult<()> {
    // 0x40, a value type (one byte, negative), a type index, or a reference
    // type: 0x63 or 0x64 (-29 and -28 as a one-byte S33), then its heap type.
    let b = f.leb(Field::BlockType, Leb::S33)?;
    if b == -29 || b == -28 {
        f.leb(Field::BlockType, Leb::S33)?;
    }
    Ok(())
}

fn memarg<F: Fields>(f: &mut F, key: usize) -> ParseResult<()> {
    let align = f.align(key)?;
    if align & 0x40 != 0 {
        f.leb(Field::MemAlign, Leb::U32)?; // memory index (multi-memory)
    }
    f.leb(Field::MemOffset, Leb::U64)?;
    Ok(())
}

/// Reads one body whose instructions end at `end` (a `position`): its local
/// declarations, then instructions. Fails on any instruction it does not know.
pub(crate) fn walk_body<F: Fields>(f: &mut F, end: usize) -> ParseResult<()> {
    let groups = f.leb(Field::Other, Leb::U32)?;
    for _ in 0..groups {
        f.leb(Field::Other, Leb::U32)?;
        value_type(f, Field::Other)?;
    }
    f.begin_body();
    while f.position() < end {
        instruction(f)?;
    }
    if f.position() != end {
        return Err(f.err("instruction past the end of its body"));
    }
    Ok(())
}

fn instruction<F: Fields>(f: &mut F) -> ParseResult<()> {
    use Field::*;
    let op = f.byte(Opcode)?;
    match op {
        0x00 | 0x01 | 0x05 | 0x0a | 0x0b | 0x0f | 0x19 | 0x1a | 0x1b | 0x45..=0xc4 | 0xd1 | 0xd3 | 0xd4 => {}
        0x02..=0x04 | 0x06 => block_type(f)?,
        0x0c | 0x0d | 0xd5 | 0xd6 => {
            f.leb(Label, Leb::U32)?;
        }
        0x20..=0x22 => f.local()?,
        0x07..=0x09 | 0x14 | 0x15 | 0x18 | 0x23..=0x26 | 0x3f | 0x40 => {
            f.leb(Index, Leb::U32)?;
        }
        0x0e => {
            let n = f.leb(Label, Leb::U32)?;
            for _ in 0..=n {
                f.leb(Label, Leb::U32)?;
            }
        }
        0x10 | 0x12 | 0xd2 => {
            f.leb(Call, Leb::U32)?;
        }
        0x11 | 0x13 => {
            f.leb(Other, Leb::U32)?;
            f.leb(Other, Leb::U32)?;
        }
        0x1c => {
            let n = f.leb(Other, Leb::U32)?;
            for _ in 0..n {
                value_type(f, Other)?;
            }
        }
        0x1f => {
            block_type(f)?;
            let n = f.leb(Other, Leb::U32)?;
            for _ in 0..n {
                match f.byte(Other)? {
                    0 | 1 => {
                        f.leb(Index, Leb::U32)?;
                        f.leb(Label, Leb::U32)?;
                    }
                    2 | 3 => {
                        f.leb(Label, Leb::U32)?;
                    }
                    _ => return Err(f.err("unknown catch kind")),
                }
            }
        }
        0x28..=0x3e => memarg(f, usize::from(op - 0x28))?,
        0x41 => {
            f.leb(I32, Leb::S32)?;
        }
        0x42 => {
            f.leb(I64, Leb::S64)?;
        }
        0x43 => f.bytes(Bytes, 4)?,
        0x44 => f.bytes(Bytes, 8)?,
        0xd0 => {
            f.leb(Other, Leb::S33)?;
        }
        0xfc => match f.leb(Opcode, Leb::U32)? {
            0..=7 => {}
            8 | 10 | 12 | 14 => {
                f.leb(Index, Leb::U32)?;
                f.leb(Index, Leb::U32)?;
            }
            9 | 11 | 13 | 15 | 16 | 17 => {
                f.leb(Index, Leb::U32)?;
            }
            _ => return Err(f.err("unknown 0xfc instruction")),
        },
        0xfd => match f.leb(Opcode, Leb::U32)? {
            sub @ (0..=11 | 92 | 93) => memarg(f, 23 + sub as usize)?,
            12 | 13 => f.bytes(Bytes, 16)?,
            21..=34 => {
                f.byte(Other)?;
            }
            sub @ 84..=91 => {
                memarg(f, 23 + sub as usize)?;
                f.byte(Other)?;
            }
            14..=20 | 35..=83 | 94..=275 => {}
            _ => return Err(f.err("unknown SIMD instruction")),
        },
        0xfe => match f.leb(Opcode, Leb::U32)? {
            3 => {
                f.byte(Other)?;
            }
            sub @ (0..=2 | 0x10..=0x4e) => memarg(f, 117 + sub as usize)?,
            _ => return Err(f.err("unknown atomic instruction")),
        },
        _ => return Err(f.err("unknown opcode")),
    }
    Ok(())
}

/// A module's own bytes, walked in place; reports the immediates the
/// transform rewrites (memarg offsets only when `offsets`).
pub(crate) struct InPlace<'a, 'b> {
    pub c: Cursor<'a>,
    pub offsets: bool,
    pub on_immediate: &'b mut dyn FnMut(Immediate),
}

impl Fields for InPlace<'_, '_> {
    fn byte(&mut self, _: Field) -> ParseResult<u8> {
        self.c.u8()
    }

    fn leb(&mut self, field: Field, leb: Leb) -> ParseResult<i64> {
        let start = self.c.pos;
        let value = read_leb(self.c.bytes, &mut self.c.pos, leb)?;
        let kind = match field {
            Field::Call => Some(ImmediateKind::Function),
            Field::I32 => Some(ImmediateKind::I32Const),
            Field::I64 => Some(ImmediateKind::I64Const),
            Field::MemOffset if self.offsets => Some(ImmediateKind::MemOffset),
            _ => None,
        };
        if let Some(kind) = kind {
            (self.on_immediate)(Immediate { start, end: self.c.pos, kind, value });
        }
        Ok(value)
    }

    fn bytes(&mut self, _: Field, n: usize) -> ParseResult<()> {
        self.c.skip(n).map(|_| ())
    }

    fn position(&self) -> usize {
        self.c.pos
    }

    fn err(&self, what: &'static str) -> ParseError {
        ParseError { offset: self.c.pos, what }
    }
}

/// `i32.const address; i32.const offset; i32.const len; memory.init segment 0`:
/// where a module puts a passive data segment (wasm-ld's `__wasm_init_memory`
/// in every module with shared memory, so Emscripten's and Rust's threaded
/// builds hold all their data in passive segments).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct MemoryInit {
    pub segment: u64,
    pub address: u32,
    pub offset: u32,
    pub len: u32,
}

/// Finds the `memory.init`s of memory 0 with constant operands in one body:
/// the in-place walk, watching the opcodes and constants go by.
struct InitScan<'a, 'b> {
    walk: InPlace<'a, 'b>,
    /// The three instructions before the current one: the value of each that is an `i32.const`.
    recent: [Option<i64>; 3],
    /// The current instruction's value, if it is an `i32.const`.
    current: Option<i64>,
    /// The current instruction's opcode (for a prefix, the prefix).
    op: u8,
    /// The immediates of a `memory.init` read so far.
    init: Option<Vec<i64>>,
    found: Vec<MemoryInit>,
}

impl Fields for InitScan<'_, '_> {
    fn byte(&mut self, field: Field) -> ParseResult<u8> {
        let b = self.walk.byte(field)?;
        if field == Field::Opcode {
            self.recent = [self.recent[1], self.recent[2], self.current];
            self.current = None;
            self.init = None;
            self.op = b;
        }
        Ok(b)
    }

    fn leb(&mut self, field: Field, leb: Leb) -> ParseResult<i64> {
        let value = self.walk.leb(field, leb)?;
        match field {
            Field::Opcode if self.op == 0xfc && value == 8 => self.init = Some(Vec::with_capacity(2)),
            Field::I32 if self.op == 0x41 => self.current = Some(value),
            Field::Index => {
                if let Some(init) = &mut self.init {
                    init.push(value);
                    if let ([segment, 0], [Some(address), Some(offset), Some(len)]) = (init.as_slice(), self.recent) {
                        let u = |v: i64| v as u32;
                        self.found.push(MemoryInit { segment: *segment as u64, address: u(address), offset: u(offset), len: u(len) });
                    }
                }
            }
            _ => {}
        }
        Ok(value)
    }

    fn bytes(&mut self, field: Field, n: usize) -> ParseResult<()> {
        self.walk.bytes(field, n)
    }

    fn position(&self) -> usize {
        self.walk.position()
    }

    fn err(&self, what: &'static str) -> ParseError {
        self.walk.err(what)
    }
}

/// The `memory.init`s with constant operands of the body `bytes[start..end]`.
pub(crate) fn memory_inits(bytes: &[u8], start: usize, end: usize) -> ParseResult<Vec<MemoryInit>> {
    let walk = InPlace { c: Cursor::new(&bytes[..end], start), offsets: false, on_immediate: &mut |_| {} };
    let mut scan = InitScan { walk, recent: [None; 3], current: None, op: 0, init: None, found: Vec::new() };
    walk_body(&mut scan, end)?;
    Ok(scan.found)
}

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

/// Bytes a stream's window reads at once (12 windows: 768 KiB for a join), and a split's
/// buffer per stream holds before it hands them on.
const STREAM_WINDOW: usize = 64 << 10;

/// `read`'s bytes at `at` (false: the read failed, and the caller has its error), or `what`.
fn read_or(read: &mut dyn FnMut(usize, &mut [u8]) -> bool, at: usize, buf: &mut [u8], what: &'static str) -> ParseResult<()> {
    if read(at, buf) {
        Ok(())
    } else {
        Err(ParseError { offset: at, what })
    }
}

/// Bytes of the module a split that is not in memory reads at once.
const SPLIT_WINDOW: usize = 1 << 20;

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

/// Reads a code section's contents (function count, then sized bodies) up to
/// `end`; positions are module offsets.
fn walk_code<F: Fields>(f: &mut F, end: usize) -> ParseResult<()> {
    walk_code_each(f, end, &mut |_, _| Ok(true))
}

/// [`walk_code`], calling `after` once the function count is read (with None) and after each
/// body (with the position where its instructions' locals start, after its size field):
/// false stops the walk there, with no error.
fn walk_code_each<F: Fields>(f: &mut F, end: usize, after: &mut dyn FnMut(&mut F, Option<usize>) -> ParseResult<bool>) -> ParseResult<()> {
    let count = f.leb(Field::Other, Leb::U32)?;
    if !after(f, None)? {
        return Ok(());
    }
    for _ in 0..count {
        let size = f.leb(Field::Other, Leb::U32)? as usize;
        let body_start = f.position();
        let body_end = body_start.checked_add(size).filter(|&e| e <= end).ok_or_else(|| f.err("a body past the end of the code section"))?;
        walk_body(f, body_end)?;
        if !after(f, Some(body_start))? {
            return Ok(());
        }
    }
    if f.position() != end {
        return Err(f.err("bytes after the last function body"));
    }
    Ok(())
}

/// The contents of the module's code section: (start, end), None without one.
/// Reads section headers only (the code section may be split).
fn code_contents(bytes: &[u8]) -> ParseResult<Option<(usize, usize)>> {
    Ok(section_headers(bytes)?.into_iter().find(|(id, _)| *id == CODE_SECTION).map(|(_, s)| (s.contents, s.end)))
}

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

/// The BLAKE3 of [`join`]'s module, joined a body at a time ([`join_each`]) instead of held,
/// with `replaced`'s bytes (module offset, bytes; ascending, outside the code section) in
/// place of those there.
pub(crate) fn join_hash(split: &[u8], lens: &[u64; FIELDS], coding: Coding, replaced: &[(usize, super::data_gaps::Field)]) -> ParseResult<blake3::Hash> {
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

/// The inverse of [`split`]: the module with its code section interleaved
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
