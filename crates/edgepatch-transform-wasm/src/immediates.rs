//! A module's own bytes walked in place: the immediates the transform rewrites (function
//! indices, constants, memarg offsets), and the `memory.init`s that place passive data.

use crate::module::{Cursor, ParseError, ParseResult};
use crate::walker::{self, read_leb, Field, Fields, Leb};

/// The kind of a rewritten immediate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ImmediateKind {
    /// `call`, `return_call`, `ref.func`: a function index (u32).
    Function,
    /// `i64.const`: a PC, a data address or a plain number.
    I64Const,
    /// `i32.const`: a data address or a plain number.
    I32Const,
    /// A load's or store's memarg offset (u64): a data address when the
    /// base is `i32.const 0` (LLVM folds constant addresses into it), or a
    /// field offset. Reported only when the walk asks for offsets (side info
    /// version 2).
    MemOffset,
}

/// An immediate the transform may rewrite: `bytes[start..end]` holds its LEB128.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Immediate {
    pub start: usize,
    pub end: usize,
    pub kind: ImmediateKind,
    pub value: i64,
}

/// Walks the body `bytes[start..end]` (locals, then instructions) and calls
/// `on_immediate` for each rewritten immediate, in order (memarg offsets
/// too when `offsets`). Fails on any instruction it does not know; the
/// caller then keeps the body as it is.
pub(crate) fn walk_body(bytes: &[u8], start: usize, end: usize, offsets: bool, on_immediate: &mut dyn FnMut(Immediate)) -> ParseResult<()> {
    let mut walk = InPlace { c: Cursor::new(&bytes[..end], start), offsets, on_immediate };
    walker::walk_body(&mut walk, end)
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
    walker::walk_body(&mut scan, end)?;
    Ok(scan.found)
}
