//! Just enough of a WebAssembly module parser for the transform: the section
//! layout, function imports, the function table's element segment and the
//! function bodies (walked by `walker` and `immediates`). Every read is
//! bounds-checked; hostile input gives an error, never a panic.

use super::leb::{read_signed, read_unsigned, LebError};

pub(crate) const MAGIC: &[u8; 8] = b"\0asm\x01\0\0\0";

/// The most sections, imported functions and function bodies a module the transform reads may
/// have (docs/FORMAT.md §2.8.2): each is a record in memory (a section or body 24 bytes, an
/// import its name), where the module spends as little as 1 to 3 bytes on it; without them a
/// 64 MiB normalized form of empty sections or imports made the applier allocate 0.7 to 1.2
/// GB. Real modules have tens of sections, at most thousands of imports and a few hundred
/// thousand functions.
pub(crate) const MAX_SECTIONS: usize = 1 << 16;
pub(crate) const MAX_IMPORTED_FUNCTIONS: usize = 1 << 18;
pub(crate) const MAX_FUNCTION_BODIES: u64 = 1 << 20;
pub(crate) const CODE_SECTION: u8 = 10;
const IMPORT_SECTION: u8 = 2;
const MEMORY_SECTION: u8 = 5;
const ELEM_SECTION: u8 = 9;
pub(crate) const DATA_SECTION: u8 = 11;

/// A parse failure: what was wrong, at which byte of the input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ParseError {
    pub offset: usize,
    pub what: &'static str,
}

pub(crate) type ParseResult<T> = Result<T, ParseError>;

/// A bounds-checked cursor over `bytes`; errors carry the absolute offset.
pub(crate) struct Cursor<'a> {
    pub bytes: &'a [u8],
    pub pos: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(bytes: &'a [u8], pos: usize) -> Self {
        Cursor { bytes, pos }
    }

    fn err(&self, what: &'static str) -> ParseError {
        ParseError { offset: self.pos, what }
    }

    fn leb_err(&self, e: LebError, what: &'static str) -> ParseError {
        match e {
            LebError::Truncated => self.err(what),
            LebError::TooLong => self.err("malformed LEB128"),
        }
    }

    pub fn u8(&mut self) -> ParseResult<u8> {
        let b = *self.bytes.get(self.pos).ok_or_else(|| self.err("truncated"))?;
        self.pos += 1;
        Ok(b)
    }

    pub fn u32(&mut self) -> ParseResult<u32> {
        read_unsigned(self.bytes, &mut self.pos, 32).map(|v| v as u32).map_err(|e| self.leb_err(e, "truncated LEB128"))
    }

    pub fn u64(&mut self) -> ParseResult<u64> {
        read_unsigned(self.bytes, &mut self.pos, 64).map_err(|e| self.leb_err(e, "truncated LEB128"))
    }

    pub fn s32(&mut self) -> ParseResult<i64> {
        read_signed(self.bytes, &mut self.pos, 32).map_err(|e| self.leb_err(e, "truncated LEB128"))
    }

    pub fn s33(&mut self) -> ParseResult<i64> {
        read_signed(self.bytes, &mut self.pos, 33).map_err(|e| self.leb_err(e, "truncated LEB128"))
    }

    pub fn skip(&mut self, n: usize) -> ParseResult<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.bytes.len()).ok_or_else(|| self.err("truncated"))?;
        let s = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn name(&mut self) -> ParseResult<&'a [u8]> {
        let n = self.u32()? as usize;
        self.skip(n)
    }
}

/// One section: where its id byte, size field and contents are.
#[derive(Debug, Clone)]
pub(crate) struct Section {
    /// Offset of the id byte.
    pub start: usize,
    /// Offset of the contents (after the size field).
    pub contents: usize,
    pub end: usize,
}

/// A function body inside the code section.
#[derive(Debug, Clone)]
pub(crate) struct Body {
    /// Offset of the body's size field.
    pub size_field: usize,
    /// Offset of the body (locals, then instructions).
    pub start: usize,
    pub end: usize,
}

/// Go's linker puts every defined function, in order, into one element segment
/// and uses `(table slot << 16) | resume point` as a code address ("PC"); such
/// PCs appear as `i64.const` in code. `slot = base + (function - first)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PcTable {
    pub base: u32,
    pub first: u32,
    pub len: u32,
}

#[derive(Debug, Clone)]
pub(crate) struct Module {
    pub sections: Vec<Section>,
    /// (module, field) of each imported function, in index order.
    pub imported_functions: Vec<Vec<u8>>,
    pub pc_table: Option<PcTable>,
    /// Index into `sections` of the code section.
    pub code: Option<usize>,
    /// Index into `sections` of the data section.
    pub data: Option<usize>,
    /// Indices into `sections` of the element sections, in order.
    pub elements: Vec<usize>,
    pub bodies: Vec<Body>,
    /// Initial size in bytes of memory 0 (defined or imported), if the module has one.
    pub memory_bytes: Option<u64>,
}

/// The module's sections, (id, where), read from their headers alone.
pub(crate) fn section_headers(bytes: &[u8]) -> ParseResult<Vec<(u8, Section)>> {
    if bytes.len() < 8 || &bytes[..8] != MAGIC {
        return Err(ParseError { offset: 0, what: "no wasm magic and version 1" });
    }
    let mut c = Cursor::new(bytes, 8);
    let mut sections = Vec::new();
    while c.pos < bytes.len() {
        let start = c.pos;
        if sections.len() == MAX_SECTIONS {
            return Err(ParseError { offset: start, what: "more than 65,536 sections" });
        }
        let id = c.u8()?;
        let size = c.u32()? as usize;
        let contents = c.pos;
        c.skip(size)?;
        if id == CODE_SECTION && sections.iter().any(|(id, _)| *id == CODE_SECTION) {
            return Err(ParseError { offset: start, what: "second code section" });
        }
        sections.push((id, Section { start, contents, end: c.pos }));
    }
    Ok(sections)
}

/// Parses the section layout. Errors mean "not a module this transform reads".
pub(crate) fn parse_module(bytes: &[u8]) -> ParseResult<Module> {
    parse_module_with(bytes, true)
}

/// [`parse_module`]; without `bodies`, the code section is not read (`bodies` stays empty):
/// a module whose code section is in the field-split layout.
pub(crate) fn parse_module_with(bytes: &[u8], bodies: bool) -> ParseResult<Module> {
    let mut module = Module {
        sections: Vec::new(),
        imported_functions: Vec::new(),
        pc_table: None,
        code: None,
        data: None,
        elements: Vec::new(),
        bodies: Vec::new(),
        memory_bytes: None,
    };
    for (id, section) in section_headers(bytes)? {
        let contents = section.contents;
        match id {
            IMPORT_SECTION if module.imported_functions.is_empty() => {
                let (functions, memory) = parse_imports(&bytes[..section.end], contents)?;
                module.imported_functions = functions;
                module.memory_bytes = memory;
            }
            // Memory 0 is the first imported memory, else the first defined one.
            MEMORY_SECTION if module.memory_bytes.is_none() => {
                let mut c = Cursor::new(&bytes[..section.end], contents);
                if c.u32()? > 0 {
                    module.memory_bytes = read_limits(&mut c)?;
                }
            }
            ELEM_SECTION => {
                module.pc_table = parse_pc_table(&bytes[..section.end], contents);
                module.elements.push(module.sections.len());
            }
            CODE_SECTION => {
                module.code = Some(module.sections.len());
                if bodies {
                    module.bodies = parse_bodies(&bytes[..section.end], contents)?;
                }
            }
            DATA_SECTION => module.data = Some(module.sections.len()),
            _ => {}
        }
        module.sections.push(section);
    }
    Ok(module)
}

/// Reads limits; for a memory, its initial size in bytes (None if that overflows).
fn read_limits(c: &mut Cursor) -> ParseResult<Option<u64>> {
    let flags = c.u8()?;
    if flags > 0x0f {
        return Err(c.err("unknown limits flags"));
    }
    let min = c.u64()?;
    if flags & 1 != 0 {
        c.u64()?;
    }
    // The custom-page-sizes proposal gives log2 of the page size; else 64 KiB pages.
    let page_log = if flags & 0x08 != 0 { c.u32()? } else { 16 };
    Ok(1u64.checked_shl(page_log).and_then(|page| min.checked_mul(page)))
}

fn skip_value_type(c: &mut Cursor) -> ParseResult<()> {
    let b = c.u8()?;
    if b == 0x63 || b == 0x64 {
        c.s33()?;
    }
    Ok(())
}

/// The imported functions' (module, field) keys and the first imported memory's initial bytes.
fn parse_imports(bytes: &[u8], at: usize) -> ParseResult<(Vec<Vec<u8>>, Option<u64>)> {
    let mut c = Cursor::new(bytes, at);
    let count = c.u32()?;
    let mut functions = Vec::new();
    let mut memory = None;
    for _ in 0..count {
        let module = c.name()?;
        let field = c.name()?;
        match c.u8()? {
            0x00 => {
                c.u32()?;
                if functions.len() == MAX_IMPORTED_FUNCTIONS {
                    return Err(c.err("more than 262,144 imported functions"));
                }
                let mut key = Vec::with_capacity(module.len() + field.len() + 1);
                key.extend_from_slice(module);
                key.push(0);
                key.extend_from_slice(field);
                functions.push(key);
            }
            0x01 => {
                skip_value_type(&mut c)?;
                read_limits(&mut c)?;
            }
            0x02 => {
                let bytes = read_limits(&mut c)?;
                memory = memory.or(Some(bytes));
            }
            0x03 => {
                skip_value_type(&mut c)?;
                c.u8()?;
            }
            0x04 => {
                c.u8()?;
                c.u32()?;
            }
            _ => return Err(c.err("unknown import kind")),
        }
    }
    Ok((functions, memory.flatten()))
}

/// Recognises Go's layout: one active segment `(i32.const base)` listing
/// consecutive function indices. Anything else: no PC table.
pub(crate) fn parse_pc_table(bytes: &[u8], at: usize) -> Option<PcTable> {
    let mut c = Cursor::new(bytes, at);
    if c.u32().ok()? != 1 || c.u32().ok()? != 0 || c.u8().ok()? != 0x41 {
        return None;
    }
    let base = u32::try_from(c.s32().ok()?).ok()?;
    if c.u8().ok()? != 0x0b {
        return None;
    }
    let len = c.u32().ok()?;
    let first = c.u32().ok()?;
    for i in 1..len {
        if c.u32().ok()? != first.checked_add(i)? {
            return None;
        }
    }
    (len > 0 && c.pos == bytes.len()).then_some(PcTable { base, first, len })
}

/// The function indices an element section lists (docs/FORMAT.md §2.8.3,
/// element entries): `(start, end, value)` of each index's LEB128 in `bytes`,
/// in order. None unless every segment has one of the forms with a vector of
/// function indices (flags 0 to 3; an offset `41 s32 0B` or `23 u32 0B`; an
/// element kind 0) and they end exactly at the section's end.
pub(crate) fn element_entries(bytes: &[u8], contents: usize, end: usize) -> Option<Vec<(usize, usize, u64)>> {
    let mut c = Cursor::new(&bytes[..end], contents);
    let count = c.u32().ok()?;
    let mut entries = Vec::new();
    for _ in 0..count {
        let flags = c.u32().ok()?;
        if flags == 2 {
            c.u32().ok()?; // table index
        }
        if flags == 0 || flags == 2 {
            match c.u8().ok()? {
                0x41 => {
                    c.s32().ok()?;
                }
                0x23 => {
                    c.u32().ok()?;
                }
                _ => return None,
            }
            if c.u8().ok()? != 0x0b {
                return None;
            }
        }
        match flags {
            0 => {}
            1..=3 => {
                if c.u8().ok()? != 0x00 {
                    return None;
                }
            }
            _ => return None,
        }
        let n = c.u32().ok()?;
        // Each index takes at least a byte: a hostile count cannot make this allocate.
        if n as usize > end - c.pos {
            return None;
        }
        for _ in 0..n {
            let start = c.pos;
            let value = c.u32().ok()?;
            entries.push((start, c.pos, u64::from(value)));
        }
    }
    (c.pos == end).then_some(entries)
}

fn parse_bodies(bytes: &[u8], at: usize) -> ParseResult<Vec<Body>> {
    let mut c = Cursor::new(bytes, at);
    let count = c.u32()?;
    // Each body takes at least one byte: a count larger than the section is a lie.
    if count as usize > bytes.len() - c.pos {
        return Err(c.err("function count larger than the code section"));
    }
    if u64::from(count) > MAX_FUNCTION_BODIES {
        return Err(c.err("more than 1,048,576 function bodies"));
    }
    let mut bodies = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let size_field = c.pos;
        let size = c.u32()? as usize;
        let start = c.pos;
        c.skip(size)?;
        bodies.push(Body { size_field, start, end: c.pos });
    }
    if c.pos != bytes.len() {
        return Err(c.err("bytes after the last function body"));
    }
    Ok(bodies)
}
