//! The instruction walker over function bodies, written once for every direction it runs in
//! (a module's own bytes read in place, split into field streams, joined from them): the
//! fields of each instruction in module order, and the codings a split layout gives three of
//! them (docs/FORMAT.md §2.8.7).

use crate::leb::{read_signed, read_unsigned, LebError};
use crate::module::{section_headers, ParseError, ParseResult, CODE_SECTION};

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

pub(crate) fn read_leb(bytes: &[u8], pos: &mut usize, leb: Leb) -> ParseResult<i64> {
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
    /// The data segments' addresses as gaps (outside the code section: `crate::data_gaps`).
    pub gaps: bool,
}

/// A walk's state for its [`Coding`].
pub(crate) struct CodingState {
    pub(crate) mtf: Option<MoveToFront>,
    pub(crate) aligns: Option<LastAligns>,
}

impl CodingState {
    pub(crate) fn new(coding: Coding) -> Self {
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
pub(crate) struct LastAligns([u8; ALIGN_KEYS]);

impl LastAligns {
    /// The one-byte alignment `value` (below 0x80) XOR the last of instruction `key`, whose
    /// last becomes `real`'s low six bits: splitting passes the alignment and gets its code;
    /// joining passes the code, and the alignment it gets is `real`. Bit 6 (a memory index
    /// follows) and bit 7 are never changed.
    pub(crate) fn code(&mut self, key: usize, value: u8, joining: bool) -> u8 {
        let out = value ^ self.0[key];
        self.0[key] = if joining { out } else { value } & 0x3f;
        out
    }
}

/// The locals' move-to-front list of one body (docs/FORMAT.md §2.8.7): the
/// one-byte indices 0..=127, most recently used first.
pub(crate) struct MoveToFront([u8; 128]);

impl MoveToFront {
    pub(crate) fn new() -> Self {
        MoveToFront(std::array::from_fn(|i| i as u8))
    }
    /// The rank of `index`, which moves to the front.
    pub(crate) fn rank(&mut self, index: u8) -> u8 {
        let r = self.0.iter().position(|&x| x == index).expect("every index below 128 is listed");
        self.0.copy_within(0..r, 1);
        self.0[0] = index;
        r as u8
    }
    /// The index of `rank`, which moves to the front.
    pub(crate) fn index(&mut self, rank: u8) -> u8 {
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

/// Bytes a stream's window reads at once (12 windows: 768 KiB for a join), and a split's
/// buffer per stream holds before it hands them on.
pub(crate) const STREAM_WINDOW: usize = 64 << 10;

/// `read`'s bytes at `at` (false: the read failed, and the caller has its error), or `what`.
pub(crate) fn read_or(read: &mut dyn FnMut(usize, &mut [u8]) -> bool, at: usize, buf: &mut [u8], what: &'static str) -> ParseResult<()> {
    if read(at, buf) {
        Ok(())
    } else {
        Err(ParseError { offset: at, what })
    }
}

/// Reads a code section's contents (function count, then sized bodies) up to
/// `end`; positions are module offsets.
pub(crate) fn walk_code<F: Fields>(f: &mut F, end: usize) -> ParseResult<()> {
    walk_code_each(f, end, &mut |_, _| Ok(true))
}

/// [`walk_code`], calling `after` once the function count is read (with None) and after each
/// body (with the position where its instructions' locals start, after its size field):
/// false stops the walk there, with no error.
pub(crate) fn walk_code_each<F: Fields>(f: &mut F, end: usize, after: &mut dyn FnMut(&mut F, Option<usize>) -> ParseResult<bool>) -> ParseResult<()> {
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
pub(crate) fn code_contents(bytes: &[u8]) -> ParseResult<Option<(usize, usize)>> {
    Ok(section_headers(bytes)?.into_iter().find(|(id, _)| *id == CODE_SECTION).map(|(_, s)| (s.contents, s.end)))
}
