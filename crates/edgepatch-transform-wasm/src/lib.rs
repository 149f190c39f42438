//! The wasm transform: a WebAssembly module's normalized form for diffing, and its inverse.
//!
//! A WebAssembly module is rewritten into a "normalized" form in which the
//! references that merely shift between two builds (function indices of
//! `call`/`return_call`/`ref.func`, and Go's code addresses in `i64.const`)
//! are expressed in the old build's numbering, so an unchanged function has
//! the same bytes in both normalized forms and a byte-granular diff of the
//! normalized forms finds it whole. [`inverse`] rebuilds the exact original
//! bytes from the normalized form and a small side info, for every input,
//! non-canonical LEB128s included. docs/WASM_TRANSFORM.md is the
//! specification.
//!
//! ```text
//! old ──forward(None)──────────► old'  ┐
//! new ──forward(Some(ref(old)))─► new' ├─ diff old' → new'   (+ side info)
//!                                       ┘
//! apply: old' = forward(None, old).normalized; new' = patch(old'); new = inverse(new', side)
//! ```

#![warn(missing_docs)]

mod addresses;
mod code_layout;
mod data_gaps;
mod dwarf;
mod index_sections;
mod leb;
mod matching;
mod module;
mod side_info;
mod window;

use addresses::{data_segments, every_data_segment, AddressMap, OldData, TailConstants};
use code_layout::{memory_inits, Coding, MemoryInit};
use leb::{unsigned_width, write_signed, write_unsigned, write_unsigned_padded};
use matching::{address_pairs, match_functions, FunctionShapes};
use module::{element_entries, parse_module, parse_module_with, parse_pc_table, walk_body, Immediate, ImmediateKind, Module, PcTable, CODE_SECTION};
use side_info::{DwarfAddresses, FunctionMap, SideInfo};

/// Why a transform step failed. `NotWasm` means "use the plain diff".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TransformError {
    /// The input is not a module the transform reads: diff it as plain bytes.
    #[error("not a WebAssembly module the transform reads: {what} at byte {offset}")]
    NotWasm {
        /// Where in the module.
        offset: usize,
        /// What could not be read.
        what: &'static str,
    },
    /// The patch's side info is malformed.
    #[error("wasm transform side info corrupt at byte {offset}: {what}")]
    SideInfo {
        /// Where in the side info.
        offset: usize,
        /// What is wrong.
        what: &'static str,
    },
    /// The normalized bytes do not fit the side info.
    #[error("normalized wasm corrupt at byte {offset}: {what}")]
    Normalized {
        /// Where in the normalized module.
        offset: usize,
        /// What is wrong.
        what: &'static str,
    },
}

/// What the forward transform of the new module needs from the old one.
#[derive(Debug, Clone)]
pub struct WasmReference {
    shapes: FunctionShapes,
    pc_table: Option<PcTable>,
    old_data: OldData,
    /// Constants in the old code that lie past its data (below its memory's
    /// initial size), sorted, once each: the evidence for mapping that tail.
    tail_constants: Vec<i64>,
    /// Where each body's contents start in the old code section's contents (the code
    /// addresses of DWARF), and how many functions it imports.
    code_bodies: Vec<u64>,
    imported_functions: u64,
}

/// The normalized bytes and what [`inverse`] needs besides them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Normalized {
    /// The normalized module.
    pub bytes: Vec<u8>,
    /// What the inverse needs to restore the module (encoded side info).
    pub side_info: Vec<u8>,
}

/// Counters of one forward run, for benchmarks and tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TransformStats {
    /// Functions in the new module.
    pub functions: u64,
    /// Of them, matched to a function of the old module.
    pub matched_functions: u64,
    /// Bodies left as they are (the transform could not normalize them).
    pub raw_bodies: u64,
    /// Function indexes rewritten.
    pub function_refs: u64,
    /// Code offsets rewritten.
    pub pc_refs: u64,
    /// Memory addresses in code rewritten (`i32.const`/`i64.const`).
    pub address_refs: u64,
    /// Memarg offsets rewritten (memory addresses folded into a load or store).
    pub offset_refs: u64,
    /// Pieces of the old-to-new address map.
    pub address_pieces: u64,
    /// Pointer-sized words in data segments rewritten.
    pub data_refs: u64,
    /// Values the inverse cannot derive, stored in the side info.
    pub exceptions: u64,
    /// DWARF's code addresses rewritten (line programs, ranges, locations).
    pub dwarf_refs: u64,
}

/// Parses `old` into the reference the new module's forward transform needs.
pub fn reference(old: &[u8]) -> Result<WasmReference, TransformError> {
    let module = parse(old)?;
    let data = layout(old, &module);
    let shapes = shapes(old, &module, &data);
    let old_data = OldData::new(old, &data);
    let mut tail_constants: Vec<i64> = tail_constants(old, &module, &data).into_iter().map(|(v, _)| v).collect();
    tail_constants.dedup();
    let code_bodies = code_offsets(&module).map(|(_, contents)| contents).collect();
    Ok(WasmReference { shapes, pc_table: module.pc_table, old_data, tail_constants, code_bodies, imported_functions: module.imported_functions.len() as u64 })
}

/// The normalized form of `bytes`. With `reference` = None, functions keep
/// their own numbers (the old side); with the old module's reference, the
/// new module's references are renumbered into the old numbering.
pub fn forward(reference: Option<&WasmReference>, bytes: &[u8]) -> Result<Normalized, TransformError> {
    forward_with_stats(reference, bytes).map(|(n, _)| n)
}

/// [`forward`], also returning counters.
pub fn forward_with_stats(reference: Option<&WasmReference>, bytes: &[u8]) -> Result<(Normalized, TransformStats), TransformError> {
    let module = parse(bytes)?;
    let data = layout(bytes, &module);
    let own_shapes = shapes(bytes, &module, &data);
    let mut stats = TransformStats { functions: own_shapes.count(), ..Default::default() };
    let (map, ref_pc, addresses, shared) = match reference {
        Some(r) => {
            let map = match_functions(&r.shapes, &own_shapes);
            stats.matched_functions = map.iter().filter(|&&m| m < r.shapes.count()).count() as u64;
            {
                let new_tail = tail_constants(bytes, &module, &data);
                let tail = TailConstants { new: &new_tail, old: &r.tail_constants };
                let pairs = address_pairs(&r.shapes, &own_shapes, &map, &|n, o| n >= 0 && o >= 0);
                let addresses = AddressMap::learn(&r.old_data, bytes, &data, &pairs, &tail);
                (map, r.pc_table, addresses, shared_numbers(pairs))
            }
        }
        None => {
            stats.matched_functions = own_shapes.count();
            ((0..own_shapes.count()).collect(), module.pc_table, AddressMap::default(), Vec::new())
        }
    };
    stats.address_pieces = addresses.pieces().len() as u64;
    let function_map = FunctionMap::from_forward(&map);
    let mut refs = References { map: &function_map, own_pc: module.pc_table, ref_pc, addresses: &addresses, offsets: false, shared: &shared };
    // Memarg offsets are immediates only if one of them moves (side info
    // version 2); otherwise the side info stays version 1, as before.
    refs.offsets = reference.is_some() && any_offset_moves(bytes, &module, &refs);

    let mut side = SideInfo {
        memarg_offsets: refs.offsets,
        ref_pc,
        runs: function_map.runs.clone(),
        address_pieces: addresses.pieces().to_vec(),
        address_end: addresses.new_end(),
        ..Default::default()
    };
    let elements = match reference {
        Some(_) => forward_elements(bytes, &module, &refs),
        None => None,
    };
    if let Some((_, listed)) = &elements {
        side.elements = true;
        side.element_exceptions = listed.clone();
    }
    let mut dwarf_map = None;
    if let Some(r) = reference {
        side.index_sections = forward_index_sections(bytes, &module, &refs);
        if let Some((dwarf, code_map)) = forward_dwarf_addresses(bytes, &module, r, &map) {
            side.dwarf = Some(dwarf);
            dwarf_map = Some(code_map);
        }
    }
    // (ordinal, next exception) of the line addresses and of the range addresses.
    let mut counters = [(0u64, 0usize); 2];
    let mut out = Vec::with_capacity(bytes.len() + bytes.len() / 16);
    out.extend_from_slice(&bytes[..8]);
    let mut ordinal = 0u64;
    let data_segments = segments(bytes, &module);
    for (index, section) in module.sections.iter().enumerate() {
        if let Some(rewritten) = elements.as_ref().and_then(|(sections, _)| sections.iter().find(|s| s.index == index)) {
            out.extend_from_slice(&rewritten.bytes);
            continue;
        }
        let kind = index_sections::kind_of(bytes, section);
        if kind & side.index_sections != 0 {
            let forward = |v: u64| refs.forward(ImmediateKind::Function, v as i64) as u64;
            index_sections::rewrite(bytes, section, kind, &forward, &mut |piece: &[u8]| {
                out.extend_from_slice(piece);
                Ok::<(), TransformError>(())
            })?;
            continue;
        }
        if Some(index) == module.data {
            let at = out.len();
            out.extend_from_slice(&bytes[section.start..section.end]);
            let rebased: Vec<(u64, usize, usize)> = data_segments.iter().map(|&(a, s, e)| (a, s - section.start + at, e - section.start + at)).collect();
            stats.data_refs = rewrite_data_words(&mut out, &rebased, &refs, Direction::Forward, &mut side.data_exceptions)?;
            continue;
        }
        if Some(index) != module.code {
            let at = out.len();
            out.extend_from_slice(&bytes[section.start..section.end]);
            if let (Some(map), Some(dwarf), Some((holds, contents))) = (&dwarf_map, &side.dwarf, dwarf_holds(bytes, section)) {
                if let Some(exceptions) = dwarf.exceptions(holds) {
                    let from = at + contents - section.start;
                    let (ordinal, next) = &mut counters[holds.kind()];
                    dwarf::rewrite(&mut out[from..at + section.end - section.start], holds, from, map, dwarf::Way::Forward, exceptions, ordinal, next)?;
                }
            }
            continue;
        }
        side.code_size_width = (section.contents - section.start - 1) as u8;
        // The contents go straight into `out` after a placeholder of the size
        // field's width, filled in (or, rarely, widened) once they are known:
        // no second copy of the code section.
        out.push(CODE_SECTION);
        let size_at = out.len();
        out.resize(size_at + side.code_size_width as usize, 0);
        let contents_at = out.len();
        let first_body = module.bodies.first().map_or(section.end, |b| b.size_field);
        out.extend_from_slice(&bytes[section.contents..first_body]);
        let mut body_out = Vec::new();
        for (body_index, body) in module.bodies.iter().enumerate() {
            let width = body.start - body.size_field;
            body_out.clear();
            if !normalize_body(bytes, body.start, body.end, &refs, &mut ordinal, &mut side.exceptions, &mut stats, &mut body_out) {
                side.raw_bodies.push(body_index as u64);
                stats.raw_bodies += 1;
                body_out.clear();
                body_out.extend_from_slice(&bytes[body.start..body.end]);
            }
            // The size field keeps its original width (Go pads every one to
            // 5 bytes), so an unchanged module is its own normalized form.
            if !write_size_like(&mut out, body_out.len() as u64, width) {
                side.size_widths.push((body_index as u64, width as u8));
            }
            out.extend_from_slice(&body_out);
        }
        let contents_len = out.len() - contents_at;
        if contents_len > u32::MAX as usize {
            return Err(TransformError::NotWasm { offset: section.start, what: "code section too large once normalized" });
        }
        let mut size = Vec::with_capacity(5);
        write_size_like(&mut size, contents_len as u64, side.code_size_width as usize);
        if size.len() == contents_at - size_at {
            out[size_at..contents_at].copy_from_slice(&size);
        } else {
            out.splice(size_at..contents_at, size);
        }
    }
    stats.exceptions = (side.exceptions.len() + side.data_exceptions.len()) as u64;
    stats.dwarf_refs = counters.iter().map(|&(ordinal, next)| ordinal - next as u64).sum();
    Ok((Normalized { bytes: out, side_info: side.encode() }, stats))
}

/// Each body's size field's and contents' offsets in the code section's contents.
fn code_offsets(module: &Module) -> impl Iterator<Item = (u64, u64)> + '_ {
    let contents = module.code.map_or(0, |c| module.sections[c].contents);
    module.bodies.iter().map(move |b| ((b.size_field - contents) as u64, (b.start - contents) as u64))
}

/// At most this many DWARF addresses of a kind kept verbatim (then its sections are left as
/// they are).
const MAX_DWARF_EXCEPTIONS: usize = 1 << 16;

/// What DWARF section `section` is (`dwarf::Holds`), and where its contents after its name start.
fn dwarf_holds(bytes: &[u8], section: &module::Section) -> Option<(dwarf::Holds, usize)> {
    if bytes[section.start] != 0 {
        return None;
    }
    let (name, contents) = index_sections::custom_name(bytes, section)?;
    Some((dwarf::Holds::of(name)?, contents))
}

/// DWARF's code addresses (side info version 6), where the new module has a code section and
/// DWARF sections that walk, and some address moves: the code address map from each matched
/// body to its old one (`map`: new function index to normalized, the old numbering for a
/// matched one), and for the line programs and for the ranges and locations, the addresses it
/// does not give back; and the map.
fn forward_dwarf_addresses(bytes: &[u8], module: &Module, reference: &WasmReference, map: &[u64]) -> Option<(DwarfAddresses, AddressMap)> {
    let code = &module.sections[module.code?];
    let imported = module.imported_functions.len();
    let bodies = code_offsets(module).enumerate().map(|(b, (size_field, contents))| {
        let old = map.get(imported + b).and_then(|&n| n.checked_sub(reference.imported_functions)).and_then(|j| reference.code_bodies.get(j as usize));
        (size_field, contents, old.copied())
    });
    let code_map = dwarf::code_map(bodies, (code.end - code.contents) as u64)?;
    let kind = |kind: usize| {
        let sections = module
            .sections
            .iter()
            .filter_map(|s| dwarf_holds(bytes, s).filter(|(holds, _)| holds.kind() == kind).map(|(holds, contents)| (&bytes[contents..s.end], holds)));
        dwarf::plan(sections, &code_map, MAX_DWARF_EXCEPTIONS).and_then(|(changed, exceptions)| (changed > 0).then_some(exceptions))
    };
    let (line, ranges) = (kind(0), kind(1));
    (line.is_some() || ranges.is_some()).then(|| (DwarfAddresses { pieces: code_map.pieces().to_vec(), end: code_map.new_end(), line, ranges }, code_map))
}

/// Whether `bytes` is its own normalized form as the old side
/// (`forward(None, bytes)?.bytes == bytes`), checked body by body without
/// building the normalized copy: the memory of one body, not of the module.
pub fn is_own_normalized_form(bytes: &[u8]) -> Result<bool, TransformError> {
    let module = parse(bytes)?;
    let count = module.imported_functions.len() as u64 + module.bodies.len() as u64;
    let identity: Vec<u64> = (0..count).collect();
    let function_map = FunctionMap::from_forward(&identity);
    drop(identity);
    let addresses = AddressMap::default();
    // As forward(None): the data section is left as it is (no address pieces,
    // an identity map); the other sections are copied; the code section and
    // every body keep their size fields' widths, so their sizes are written
    // as they were exactly when every body is.
    let refs = References { map: &function_map, own_pc: module.pc_table, ref_pc: module.pc_table, addresses: &addresses, offsets: false, shared: &[] };
    debug_assert!(refs.addresses.pieces().is_empty() && refs.map.is_identity());
    let (mut ordinal, mut exceptions, mut stats) = (0u64, Vec::new(), TransformStats::default());
    let mut body_out = Vec::new();
    for body in &module.bodies {
        body_out.clear();
        exceptions.clear();
        if normalize_body(bytes, body.start, body.end, &refs, &mut ordinal, &mut exceptions, &mut stats, &mut body_out)
            && body_out[..] != bytes[body.start..body.end]
        {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Rebuilds the original module from its normalized form and side info.
/// Hostile input gives an error, never a panic; the output is at most a few
/// bytes per immediate larger than `normalized`.
pub fn inverse(normalized: &[u8], side_info: &[u8]) -> Result<Vec<u8>, TransformError> {
    let mut out = Vec::with_capacity(normalized.len() + normalized.len() / 32);
    inverse_emit(normalized, side_info, &mut |bytes: &[u8]| {
        out.extend_from_slice(bytes);
        Ok::<(), TransformError>(())
    })?;
    Ok(out)
}

/// [`inverse`] without holding the output, as [`inverse_to`], from `normalized`
/// borrowed: no working copy of it, only its data section is copied to restore
/// its words in (a writer checking that its normalized form gives the module
/// back hashes the pieces instead of holding a second module).
pub fn inverse_emit<E: From<TransformError>>(normalized: &[u8], side_info: &[u8], emit: &mut dyn FnMut(&[u8]) -> Result<(), E>) -> Result<(), E> {
    inverse_from(Source::Shared(normalized), side_info, emit)
}

/// The normalized bytes an inverse reads: borrowed (the data section is
/// restored in a copy of it) or owned by the caller for the time of the
/// inverse (restored in place).
enum Source<'a> {
    Shared(&'a [u8]),
    InPlace(&'a mut [u8]),
}

impl Source<'_> {
    fn bytes(&self) -> &[u8] {
        match self {
            Source::Shared(b) => b,
            Source::InPlace(b) => b,
        }
    }
}

/// [`inverse`] without holding the output: the original module is handed to
/// `emit` front to back, in pieces (a section, or a body and its size
/// field), so the applier's memory is `normalized` plus one body
/// (docs/FORMAT.md §2.8). The data section's words are restored in place in
/// `normalized` (they keep their width), which is why it is taken mutably.
/// An error from `emit` stops the inverse and is returned as is.
pub fn inverse_to<E: From<TransformError>>(normalized: &mut [u8], side_info: &[u8], emit: &mut dyn FnMut(&[u8]) -> Result<(), E>) -> Result<(), E> {
    inverse_from(Source::InPlace(normalized), side_info, emit)
}

fn inverse_from<E: From<TransformError>>(source: Source, side_info: &[u8], emit: &mut dyn FnMut(&[u8]) -> Result<(), E>) -> Result<(), E> {
    let side = SideInfo::decode(side_info)?;
    inverse_decoded(source, &side, Code::InSource, emit)
}

/// [`inverse_to`] of a normalized form of `len` bytes that is not in memory: `read` fills a
/// buffer from an offset of it (an applier's scratch space). The inverse holds every section
/// but the code section, which it reads twice (sizing, then emitting) a body at a time, in
/// the field-split layout through one 64 KiB window per field stream: for compiled code a
/// fraction of the module (the data section is most of the rest). The same checks as
/// [`inverse_to`], and the same bytes out. An error from `read` or `emit` stops the inverse
/// and is returned as is.
pub fn inverse_read<E: From<TransformError>>(
    len: u64,
    read: &mut ReadAt<'_, E>,
    side_info: &[u8],
    emit: &mut dyn FnMut(&[u8]) -> Result<(), E>,
) -> Result<(), E> {
    let side = SideInfo::decode(side_info)?;
    let Image { mut bytes, code, copied } = image_without_code(len, read, side.dwarf.is_some())?;
    let (contents, end) = code.unwrap_or((0, 0));
    inverse_decoded(Source::InPlace(&mut bytes), &side, Code::Read { read, contents, end, copied }, emit)
}

/// Reads bytes of a module that is not in memory: fills the buffer from the offset.
pub type ReadAt<'a, E> = dyn FnMut(u64, &mut [u8]) -> Result<(), E> + 'a;

/// A byte range of a module: (start, end).
type Span = (usize, usize);

/// Takes bytes of a module at an offset.
pub type WriteAt<'a, E> = dyn FnMut(u64, &[u8]) -> Result<(), E> + 'a;

/// Where the inverse reads the code section's contents, and the sections it copies, from.
enum Code<'r, E> {
    /// The normalized bytes it was given.
    InSource,
    /// A normalized form that is not in memory, read through `read`: the code section's
    /// contents are its bytes `contents..end` (unused where the module has no code section),
    /// and each section of `copied` (by index: the inverse copies it as it is) is its bytes
    /// `start..end`, header included. In the bytes the inverse was given, the code section has
    /// no contents and each copied section none either.
    Read { read: &'r mut ReadAt<'r, E>, contents: usize, end: usize, copied: Vec<(usize, Span)> },
}

/// Bytes of a normalized form read at once where it is not in memory (section headers,
/// sections, bodies), outside the field streams' own windows.
const READ_WINDOW: usize = 64 << 10;

/// A window on a normalized form that is not in memory, moved forward as it is read.
#[derive(Default)]
struct ReadWindow(window::Window);

impl ReadWindow {
    /// Bytes `at..at + n` (within `..limit`), read with those after them up to a window.
    fn get<E>(&mut self, read: &mut ReadAt<'_, E>, limit: usize, at: usize, n: usize) -> Result<&[u8], E> {
        self.0.get(at, n, READ_WINDOW, limit, |at, buf| read(at as u64, buf))
    }
}

/// The sections of a module that is not in memory, one at a time: the checks of
/// `module::section_headers` (each section within the module, one code section), errors made
/// by `err`.
struct SectionWalk {
    pos: usize,
    len: usize,
    count: usize,
    code_seen: bool,
    err: fn(module::ParseError) -> TransformError,
}

impl SectionWalk {
    /// After the module's first 8 bytes (checked by the caller).
    fn new(len: usize, err: fn(module::ParseError) -> TransformError) -> Self {
        SectionWalk { pos: len.min(8), len, count: 0, code_seen: false, err }
    }

    /// The next section's (id, start, contents, end); None after the last.
    fn next<E: From<TransformError>>(&mut self, window: &mut ReadWindow, read: &mut ReadAt<'_, E>) -> Result<Option<(u8, usize, usize, usize)>, E> {
        let (pos, len) = (self.pos, self.len);
        if pos >= len {
            return Ok(None);
        }
        let bad = |what| (self.err)(module::ParseError { offset: pos, what });
        if self.count == module::MAX_SECTIONS {
            return Err(bad("more than 65,536 sections").into());
        }
        self.count += 1;
        let head = window.get(read, len, pos, (len - pos).min(6))?;
        let mut p = 1;
        let size = leb::read_unsigned(head, &mut p, 32).map_err(|_| bad("a section's size field ends early or is malformed"))? as usize;
        let end = (pos + p).checked_add(size).filter(|&e| e <= len).ok_or_else(|| bad("a section past the end of the module"))?;
        let id = head[0];
        if id == CODE_SECTION {
            if self.code_seen {
                return Err(bad("second code section").into());
            }
            self.code_seen = true;
        }
        self.pos = end;
        Ok(Some((id, pos, pos + p, end)))
    }
}

/// The normalized form of `len` bytes, read through `read`, with its code section's contents
/// left out (its header then says 0 bytes), and where those contents are in the form; likewise
/// the sections over 4 KiB that the inverse copies as they are and parses nowhere (types,
/// functions, tables, globals, the data count, tags, and custom sections but "name" and, with
/// `dwarf`, ".debug_line", ".debug_ranges" and ".debug_loc"), by index
/// with their place in the form: the module an inverse that reads those sections itself holds.
fn image_without_code<E: From<TransformError>>(len: u64, read: &mut ReadAt<'_, E>, dwarf: bool) -> Result<Image, E> {
    const COPIED_IN_PLACE: usize = 4 << 10;
    let len = usize::try_from(len).map_err(|_| TransformError::Normalized { offset: 0, what: "larger than this machine's memory" })?;
    let mut window = ReadWindow::default();
    let (mut image, mut code, mut copied) = (Vec::new(), None, Vec::new());
    image.extend_from_slice(window.get(read, len, 0, len.min(8))?);
    let mut sections = SectionWalk::new(len, corrupt);
    let mut index = 0;
    while let Some((id, start, contents, end)) = sections.next(&mut window, read)? {
        let copied_as_is = end - start > COPIED_IN_PLACE
            && match id {
                1 | 3 | 4 | 6 | 12 | 13 => true,
                0 => {
                    // Its name decides: "name" may be rewritten (§2.8.3); one that does not read stays in the image.
                    let head = window.get(read, len, contents, (end - contents).min(16))?;
                    let mut at = 0;
                    let read_name = leb::read_unsigned(head, &mut at, 32).ok().filter(|&n| n as usize <= end - contents - at);
                    let is = |n: u64, name: &[u8]| n as usize == name.len() && head.get(at..at + name.len()) == Some(name);
                    let rewritten =
                        |n| is(n, b"name") || dwarf && [dwarf::LINE_SECTION, dwarf::RANGES_SECTION, dwarf::LOC_SECTION].iter().any(|name| is(n, name));
                    read_name.is_some_and(|n| !rewritten(n))
                }
                _ => false,
            };
        if id == CODE_SECTION {
            code = Some((contents, end));
            image.extend_from_slice(&[CODE_SECTION, 0]);
        } else if copied_as_is {
            copied.push((index, (start, end)));
            image.extend_from_slice(&[id, 0]);
        } else if end - start <= READ_WINDOW {
            image.extend_from_slice(window.get(read, len, start, end - start)?);
        } else {
            let at = image.len();
            image.resize(at + end - start, 0);
            read(start as u64, &mut image[at..])?;
        }
        index += 1;
    }
    Ok(Image { bytes: image, code, copied })
}

/// What [`image_without_code`] holds of a module (`bytes`), and where the rest is.
struct Image {
    bytes: Vec<u8>,
    code: Option<Span>,
    copied: Vec<(usize, Span)>,
}

/// [`split_code_layout`] of a module of `len` bytes that is not in memory: read through
/// `read`, its split layout written through `write` (offset, bytes; every byte of the module
/// once: the other sections as they are, the code section's streams front to back in pieces
/// of about 64 KiB). Holds a window and a buffer per stream, not the module (an applier that
/// keeps the split old module in its scratch space); with data gaps also the data section,
/// as the inverse holds the new module's (§2.8.7). The same errors as
/// [`split_code_layout`]; one from `read` or `write` is returned as is.
pub fn split_code_layout_read<E: From<TransformError>>(len: u64, read: &mut ReadAt<'_, E>, side_info: &[u8], write: &mut WriteAt<'_, E>) -> Result<(), E> {
    let layout = split_layout(side_info)?;
    let len = usize::try_from(len).map_err(|_| TransformError::NotWasm { offset: 0, what: "larger than this machine's memory" })?;
    let mut window = ReadWindow::default();
    if window.get(read, len, 0, len.min(8))? != module::MAGIC {
        return Err(TransformError::NotWasm { offset: 0, what: "no wasm magic and version 1" }.into());
    }
    let mut sections = SectionWalk::new(len, not_wasm);
    let mut code = None;
    let mut copy = |window: &mut ReadWindow, read: &mut ReadAt<'_, E>, from: usize, to: usize| -> Result<(), E> {
        let mut at = from;
        while at < to {
            let n = (to - at).min(READ_WINDOW);
            write(at as u64, window.get(read, len, at, n)?)?;
            at += n;
        }
        Ok(())
    };
    copy(&mut window, read, 0, len.min(8))?;
    // The last data section, written once the walk knows it is the last: with data gaps, coded.
    let mut data: Option<module::Section> = None;
    while let Some((id, start, contents, end)) = sections.next(&mut window, read)? {
        if id == CODE_SECTION {
            copy(&mut window, read, start, contents)?;
            code = Some((contents, end));
        } else if id == module::DATA_SECTION {
            if let Some(d) = data.replace(module::Section { start, contents, end }) {
                copy(&mut window, read, d.start, d.end)?;
            }
        } else {
            copy(&mut window, read, start, end)?;
        }
    }
    if let Some(d) = data {
        if layout.coding.gaps {
            // Held whole: the inverse holds the new module's data section likewise.
            let mut bytes = vec![0u8; d.end - d.start];
            read(d.start as u64, &mut bytes)?;
            let local = module::Section { start: 0, contents: d.contents - d.start, end: bytes.len() };
            data_gaps::in_place(&mut bytes, &local, data_gaps::Way::Split).map_err(not_wasm)?;
            write(d.start as u64, &bytes)?;
        } else {
            copy(&mut window, read, d.start, d.end)?;
        }
    }
    let code = code.ok_or(TransformError::NotWasm { offset: 8, what: "no code section" })?;
    let (mut read_failed, mut write_failed) = (None, None);
    let split =
        code_layout::split_read(&mut |at, buf| read(at as u64, buf).map_err(|e| read_failed = Some(e)).is_ok(), code, layout.coding, &mut |at, bytes| {
            write(at as u64, bytes).map_err(|e| write_failed = Some(e)).is_ok()
        });
    if let Some(e) = read_failed.or(write_failed) {
        return Err(e);
    }
    split.map_err(not_wasm)?;
    Ok(())
}

/// The code section's field-split layout (docs/FORMAT.md §2.8.7) of a module
/// the transform reads, coded as `side_info` (version 3) says: the form in
/// which a patch with that side info reads the old module.
pub fn split_code_layout(module: &[u8], side_info: &[u8]) -> Result<Vec<u8>, TransformError> {
    let layout = split_layout(side_info)?;
    let (mut split, _) = code_layout::split(module, layout.coding).map_err(not_wasm)?;
    take_data_gaps(&mut split, layout.coding, data_gaps::Way::Split).map_err(not_wasm)?;
    Ok(split)
}

/// The last data section of `module`, if its sections read.
fn data_section(module: &[u8]) -> Option<module::Section> {
    module::section_headers(module).ok()?.into_iter().filter(|(id, _)| *id == module::DATA_SECTION).map(|(_, s)| s).next_back()
}

/// Takes `module`'s data gaps (§2.8.7) the way given, in place, if `coding` has them.
fn take_data_gaps(module: &mut [u8], coding: Coding, way: data_gaps::Way) -> Result<(), module::ParseError> {
    match data_section(module) {
        Some(section) if coding.gaps => data_gaps::in_place(module, &section, way),
        _ => Ok(()),
    }
}

/// Whether a writer codes `normalized`'s data gaps: where the join gives every address back.
fn codes_data_gaps(normalized: &[u8]) -> bool {
    data_section(normalized).is_some_and(|section| data_gaps::round_trips(normalized, &section))
}

/// What begins at a place [`layout_parts`] gives.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LayoutPart {
    /// A section: its id, and its name if it is a custom section.
    Section(u8, Vec<u8>),
    /// A field stream of the split code section (docs/FORMAT.md §2.8.7), by its place in the
    /// layout (0 for the opcodes).
    Stream(u8),
    /// What follows the code section's contents.
    AfterCode,
}

/// Each part [`layout_parts`] finds, with the offset where it begins (ascending).
pub type LayoutParts = Vec<(LayoutPart, u64)>;

/// Where the parts that differ in kind begin in `split`, a module in the field-split layout its
/// side info describes: each section, and in the code section each field stream. A diff cuts its
/// segments at the places both modules have, so that each part is matched against the old
/// module's same part. Reads the section headers only: the streams' lengths are in the side info.
pub fn layout_parts(split: &[u8], side_info: &[u8]) -> Result<LayoutParts, TransformError> {
    parts_of(split, &split_layout(side_info)?.lens)
}

/// [`split_code_layout`] of `module` and the [`layout_parts`] of the result, in one walk of its
/// code (the old module of a patch, which the new module's side info does not measure).
pub fn split_code_layout_parts(module: &[u8], side_info: &[u8]) -> Result<(Vec<u8>, LayoutParts), TransformError> {
    let layout = split_layout(side_info)?;
    let (mut split, lens) = code_layout::split(module, layout.coding).map_err(not_wasm)?;
    take_data_gaps(&mut split, layout.coding, data_gaps::Way::Split).map_err(not_wasm)?;
    let parts = parts_of(&split, &lens)?;
    Ok((split, parts))
}

/// Each section of `module` with the offset where it begins: the [`layout_parts`] of a module
/// not in the split layout.
pub fn section_parts(module: &[u8]) -> Result<LayoutParts, TransformError> {
    Ok(module::section_headers(module).map_err(not_wasm)?.into_iter().map(|(id, section)| section_part(module, id, &section)).collect())
}

fn section_part(module: &[u8], id: u8, section: &module::Section) -> (LayoutPart, u64) {
    let name = if id == 0 { index_sections::custom_name(module, section).map_or(Vec::new(), |(n, _)| n.to_vec()) } else { Vec::new() };
    (LayoutPart::Section(id, name), section.start as u64)
}

/// [`layout_parts`] given the split module's stream lengths.
fn parts_of(split: &[u8], lens: &[u64; code_layout::FIELDS]) -> Result<LayoutParts, TransformError> {
    let (_, _, streams) = code_layout::streams(split, lens).map_err(corrupt)?;
    let mut parts = Vec::new();
    for (id, section) in module::section_headers(split).map_err(not_wasm)? {
        parts.push(section_part(split, id, &section));
        if id == module::CODE_SECTION {
            parts.extend(streams.iter().enumerate().map(|(i, &(start, _))| (LayoutPart::Stream(i as u8), start as u64)));
            parts.push((LayoutPart::AfterCode, streams[code_layout::FIELDS - 1].1 as u64));
        }
    }
    Ok(parts)
}

/// `normalized` with its code section in the field-split layout, and its side
/// info saying so (version 3). Local indices are coded as move-to-front ranks
/// where that makes the locals' stream compress smaller (zstd level 3: Rust's
/// and C's register-like locals gain, Go's few fixed-purpose ones lose).
pub fn with_code_layout(normalized: &Normalized) -> Result<Normalized, TransformError> {
    with_code_layout_as(normalized, ranks_locals(&normalized.bytes, None)?)
}

/// [`with_code_layout`] for a patch against `old` (a module the transform reads, its own
/// normalized form): the locals are ranked if that makes their stream's delta from `old`'s
/// smaller, which is what the patch pays (wasm-vips: ranks make the stream 1.5% larger
/// compressed alone and its delta 19% smaller; BENCHMARKS.md, "wasm transform: stream-aligned
/// segments").
pub fn with_code_layout_against(normalized: &Normalized, old: &[u8]) -> Result<Normalized, TransformError> {
    with_code_layout_as(normalized, ranks_locals(&normalized.bytes, Some(old))?)
}

/// Whether [`with_code_layout`] codes `normalized`'s locals as move-to-front ranks: the
/// locals' stream both ways, compressed at zstd level 3 (against `old`'s same stream, if
/// given), ranked if smaller (only that stream is made, not the split module).
fn ranks_locals(normalized: &[u8], old: Option<&[u8]>) -> Result<bool, TransformError> {
    let locals = |locals_mtf| {
        let coding = Coding { locals_mtf, aligns: true, gaps: false };
        let stream = code_layout::field_stream(normalized, code_layout::Field::Local, coding).map_err(not_wasm)?;
        let old_stream = old.and_then(|old| code_layout::field_stream(old, code_layout::Field::Local, coding).ok()).unwrap_or_default();
        Ok::<usize, TransformError>(compressed_len_level_3(&stream, &old_stream).unwrap_or(usize::MAX))
    };
    Ok(locals(true)? < locals(false)?)
}

/// The size of `data` as one zstd frame at level 3 whose matches may reach into `prefix` (empty:
/// none), its window log just covering both (10 to 25): the estimate [`ranks_locals`] compares,
/// set up as the patch writer's own frames are, so that its choice is the same. Written into a
/// buffer of a quarter of `data`'s size first (the frame's worst-case bound is more than
/// `data`, and a generator is short of memory), and only if that is too small into one of the
/// bound.
fn compressed_len_level_3(data: &[u8], prefix: &[u8]) -> Result<usize, usize> {
    use zstd::zstd_safe::{compress_bound, CCtx, CParameter};
    let compress_into = |frame: &mut Vec<u8>| {
        let mut cctx = CCtx::create();
        let window_log = (prefix.len() + data.len()).next_power_of_two().trailing_zeros().clamp(10, 25);
        cctx.set_parameter(CParameter::CompressionLevel(3))?;
        cctx.set_parameter(CParameter::WindowLog(window_log))?;
        if !prefix.is_empty() {
            cctx.ref_prefix(prefix)?;
        }
        cctx.compress2(frame, data)
    };
    let mut frame = Vec::with_capacity((data.len() / 4).max(64 << 10));
    if compress_into(&mut frame).is_ok() {
        return Ok(frame.len());
    }
    drop(frame);
    let mut frame = Vec::with_capacity(compress_bound(data.len()));
    compress_into(&mut frame).map(|_| frame.len())
}

/// [`with_code_layout`] in place: `normalized` becomes its split layout, holding besides it
/// about half its code section, not a second module (a Worker's generator is short of
/// memory). An error leaves it as it was.
/// `old`: the module the patch is made against, as for [`with_code_layout_against`].
pub fn into_code_layout(normalized: &mut Normalized, old: Option<&[u8]>) -> Result<(), TransformError> {
    let mut side = SideInfo::decode(&normalized.side_info)?;
    if side.code_layout.is_some() {
        return Err(TransformError::SideInfo { offset: 4, what: "already in the split layout" });
    }
    let coding = Coding { locals_mtf: ranks_locals(&normalized.bytes, old)?, aligns: true, gaps: codes_data_gaps(&normalized.bytes) };
    let lens = code_layout::split_in_place(&mut normalized.bytes, coding).map_err(not_wasm)?;
    // The section walked in the split: this cannot fail.
    take_data_gaps(&mut normalized.bytes, coding, data_gaps::Way::Split).map_err(not_wasm)?;
    side.code_layout = Some(side_info::CodeLayout { coding, lens });
    normalized.side_info = side.encode();
    Ok(())
}

/// [`split_code_layout`] in place (an error leaves `module` as it was); returns the
/// [`layout_parts`] of the result.
pub fn split_code_layout_in_place(module: &mut [u8], side_info: &[u8]) -> Result<LayoutParts, TransformError> {
    let layout = split_layout(side_info)?;
    let lens = code_layout::split_in_place(module, layout.coding).map_err(not_wasm)?;
    take_data_gaps(module, layout.coding, data_gaps::Way::Split).map_err(not_wasm)?;
    parts_of(module, &lens)
}

/// The BLAKE3 of [`join_code_layout`]'s module, without holding it.
pub fn join_code_layout_hash(split: &[u8], side_info: &[u8]) -> Result<blake3::Hash, TransformError> {
    let layout = split_layout(side_info)?;
    let data = match data_section(split) {
        Some(section) if layout.coding.gaps => data_gaps::replacements(split, &section, data_gaps::Way::Join).map_err(corrupt)?,
        _ => Vec::new(),
    };
    code_layout::join_hash(split, &layout.lens, layout.coding, &data).map_err(corrupt)
}

/// The normalized module a split one (`split` with its version-3 side info) was made from:
/// its code section's bodies interleaved again (the inverse of [`with_code_layout`]'s bytes).
pub fn join_code_layout(split: &[u8], side_info: &[u8]) -> Result<Vec<u8>, TransformError> {
    let layout = split_layout(side_info)?;
    let mut joined = code_layout::join(split, &layout.lens, layout.coding).map_err(corrupt)?;
    take_data_gaps(&mut joined, layout.coding, data_gaps::Way::Join).map_err(corrupt)?;
    Ok(joined)
}

/// [`with_code_layout`] with the locals' coding given: move-to-front ranks or not. One-byte
/// alignments are always coded against the last of their instruction (§2.8.7).
pub fn with_code_layout_as(normalized: &Normalized, locals_mtf: bool) -> Result<Normalized, TransformError> {
    let coding = Coding { locals_mtf, aligns: true, gaps: codes_data_gaps(&normalized.bytes) };
    let (mut split, lens) = code_layout::split(&normalized.bytes, coding).map_err(not_wasm)?;
    take_data_gaps(&mut split, coding, data_gaps::Way::Split).map_err(not_wasm)?;
    with_split(normalized, coding, (split, lens))
}

/// `normalized` as `split` of it, with its side info saying so.
fn with_split(normalized: &Normalized, coding: Coding, (bytes, lens): (Vec<u8>, [u64; code_layout::FIELDS])) -> Result<Normalized, TransformError> {
    let mut side = SideInfo::decode(&normalized.side_info)?;
    if side.code_layout.is_some() {
        return Err(TransformError::SideInfo { offset: 4, what: "already in the split layout" });
    }
    side.code_layout = Some(side_info::CodeLayout { coding, lens });
    Ok(Normalized { bytes, side_info: side.encode() })
}

/// The field-split layout a side info says its module is in (an error if it is in none).
fn split_layout(side_info: &[u8]) -> Result<side_info::CodeLayout, TransformError> {
    SideInfo::decode(side_info)?.code_layout.ok_or(TransformError::SideInfo { offset: 4, what: "not a split layout (version 3)" })
}

/// A normalized module that does not read as one: corrupt.
fn corrupt(e: module::ParseError) -> TransformError {
    TransformError::Normalized { offset: e.offset, what: e.what }
}

fn not_wasm(e: module::ParseError) -> TransformError {
    TransformError::NotWasm { offset: e.offset, what: e.what }
}

/// Whether a side info (valid or not) says the normalized module and the old
/// module it is diffed against are in the field-split layout: the applier
/// must then read the old module in that layout.
pub fn side_info_has_code_layout(side_info: &[u8]) -> bool {
    match side_info.get(4) {
        Some(&side_info::VERSION_CODE_LAYOUT) => true,
        Some(&side_info::VERSION_ELEMENTS | &side_info::VERSION_INDEX_SECTIONS | &side_info::VERSION_DWARF_ADDRESSES) => {
            side_info.get(6).is_some_and(|&layout| layout != 0)
        }
        _ => false,
    }
}

/// Whether `side_info` (encoded) says the module's DWARF line programs' addresses are in the
/// old module's code (version 6, docs/FORMAT.md §2.8.3 "Line addresses").
pub fn side_info_has_dwarf_addresses(side_info: &[u8]) -> bool {
    side_info.get(4) == Some(&side_info::VERSION_DWARF_ADDRESSES)
}

fn inverse_decoded<E: From<TransformError>>(
    mut source: Source,
    side: &SideInfo,
    mut code: Code<E>,
    emit: &mut dyn FnMut(&[u8]) -> Result<(), E>,
) -> Result<(), E> {
    // In the field-split layout the bodies are interleaved again one at a time as they are
    // restored (`restore_code`), not into a second module-sized buffer.
    let bodies_in_source = side.code_layout.is_none() && matches!(code, Code::InSource);
    let module = parse_module_with(source.bytes(), bodies_in_source).map_err(corrupt)?;
    let function_map = FunctionMap::from_runs(side.runs.clone()).map_err(|what| TransformError::SideInfo { offset: 0, what })?;
    let addresses = AddressMap::from_pieces(side.address_pieces.clone(), side.address_end).map_err(|what| TransformError::SideInfo { offset: 0, what })?;
    let refs =
        References { map: &function_map, own_pc: module.pc_table, ref_pc: side.ref_pc, addresses: &addresses, offsets: side.memarg_offsets, shared: &[] };
    // The code section's size field comes before its bodies: a first pass
    // over the bodies sizes them (and checks the side info against them all
    // before anything is emitted), the second emits them.
    let code_len = match module.code {
        Some(c) => Some(restore_code(source.bytes(), &module, &module.sections[c], side, &refs, &mut code, &mut |_| Ok::<(), E>(()))?),
        None => None,
    };
    if code_len.is_none() && (!side.raw_bodies.is_empty() || !side.size_widths.is_empty() || !side.exceptions.is_empty()) {
        return Err(TransformError::SideInfo { offset: 0, what: "entries beyond the module's functions" }.into());
    }
    if module.data.is_none() && !side.data_exceptions.is_empty() {
        return Err(TransformError::SideInfo { offset: 0, what: "data exceptions without a data section" }.into());
    }
    let elements = if side.elements { Some(inverse_elements(source.bytes(), &module, &refs, &side.element_exceptions)?) } else { None };
    let inverse = |v: u64| refs.inverse(ImmediateKind::Function, v as i64) as u64;
    let kinds: Vec<u8> = module.sections.iter().map(|s| index_sections::kind_of(source.bytes(), s) & side.index_sections).collect();
    // The sections that name functions are checked before anything is emitted, like the code.
    for (section, &kind) in module.sections.iter().zip(&kinds).filter(|(_, &k)| k != 0) {
        index_sections::contents_len(source.bytes(), section, kind, &inverse)?;
    }
    // And so are the line programs' addresses, restored before anything is emitted.
    let line_copies = match &side.dwarf {
        Some(dwarf) => inverse_dwarf_addresses(&mut source, &module, dwarf)?,
        None => Vec::new(),
    };
    emit(&source.bytes()[..8])?;
    for (index, section) in module.sections.iter().enumerate() {
        if let Some(rewritten) = elements.as_ref().and_then(|sections| sections.iter().find(|s| s.index == index)) {
            emit(&rewritten.bytes)?;
        } else if let Some((_, copy)) = line_copies.iter().find(|c| c.0 == index) {
            emit(copy)?;
        } else if kinds[index] != 0 {
            index_sections::rewrite(source.bytes(), section, kinds[index], &inverse, emit)?;
        } else if Some(index) == module.data {
            match &mut source {
                Source::InPlace(normalized) => {
                    let data = &mut normalized[section.start..section.end];
                    restore_data(data, side, &refs)?;
                    emit(data)?;
                }
                Source::Shared(normalized) => {
                    let mut data = normalized[section.start..section.end].to_vec();
                    restore_data(&mut data, side, &refs)?;
                    emit(&data)?;
                }
            }
        } else if Some(index) == module.code {
            let mut head = vec![CODE_SECTION];
            write_size(&mut head, code_len.expect("sized above"), side.code_size_width as usize, section.start)?;
            emit(&head)?;
            restore_code(source.bytes(), &module, section, side, &refs, &mut code, emit)?;
        } else if let Some(&(_, (start, end))) = match &code {
            // In section order: found by index.
            Code::Read { copied, .. } => copied.binary_search_by_key(&index, |c| c.0).ok().map(|k| &copied[k]),
            Code::InSource => None,
        } {
            let Code::Read { read, .. } = &mut code else { unreachable!("copied sections are read") };
            let mut window = ReadWindow::default();
            for at in (start..end).step_by(READ_WINDOW) {
                emit(window.get(*read, end, at, (end - at).min(READ_WINDOW))?)?;
            }
        } else {
            emit(&source.bytes()[section.start..section.end])?;
        }
    }
    Ok(())
}

/// Restores a data section (`data`, from its id byte) in place: in the split layout with data
/// gaps its segments' addresses (§2.8.7), then the data words, which lie where the addresses say.
fn restore_data(data: &mut [u8], side: &SideInfo, refs: &References) -> Result<(), TransformError> {
    let mut pos = 1;
    leb::read_unsigned(data, &mut pos, 32).map_err(|_| TransformError::Normalized { offset: 0, what: "a data section's size field does not read" })?;
    let section = module::Section { start: 0, contents: pos, end: data.len() };
    if side.code_layout.is_some_and(|l| l.coding.gaps) {
        data_gaps::in_place(data, &section, data_gaps::Way::Join).map_err(corrupt)?;
    }
    let segments = data_segments(data, &section);
    rewrite_data_words(data, &segments, refs, Direction::Inverse, &mut side.data_exceptions.clone())?;
    Ok(())
}

/// Restores DWARF's addresses (side info version 6): in place in an owned source, else in
/// copies of those sections, returned with their indices.
fn inverse_dwarf_addresses(source: &mut Source, module: &Module, dwarf: &DwarfAddresses) -> Result<Vec<(usize, Vec<u8>)>, TransformError> {
    let map = AddressMap::from_pieces(dwarf.pieces.clone(), dwarf.end).map_err(|what| TransformError::SideInfo { offset: 0, what })?;
    let found: Vec<(usize, dwarf::Holds, usize)> =
        module.sections.iter().enumerate().filter_map(|(index, s)| dwarf_holds(source.bytes(), s).map(|(holds, contents)| (index, holds, contents))).collect();
    // (ordinal, next exception) of the line addresses and of the range addresses.
    let mut counters = [(0u64, 0usize); 2];
    let mut copies = Vec::new();
    for (index, holds, contents) in found {
        let Some(exceptions) = dwarf.exceptions(holds) else { continue };
        let (ordinal, next) = &mut counters[holds.kind()];
        let section = &module.sections[index];
        match source {
            Source::InPlace(bytes) => {
                dwarf::rewrite(&mut bytes[contents..section.end], holds, contents, &map, dwarf::Way::Inverse, exceptions, ordinal, next)?;
            }
            Source::Shared(bytes) => {
                let mut copy = bytes[section.start..section.end].to_vec();
                let from = contents - section.start;
                dwarf::rewrite(&mut copy[from..], holds, contents, &map, dwarf::Way::Inverse, exceptions, ordinal, next)?;
                copies.push((index, copy));
            }
        }
    }
    for (exceptions, (_, next)) in [&dwarf.line, &dwarf.ranges].into_iter().zip(counters) {
        if exceptions.as_ref().is_some_and(|e| next != e.len()) {
            return Err(TransformError::SideInfo { offset: 0, what: "DWARF exceptions beyond the module's DWARF addresses" });
        }
    }
    Ok(copies)
}

/// Emits the original code section's contents (after its size field) and
/// returns their length. In the field-split layout, each body is joined again
/// as it is restored. From `normalized` (`module`'s `section`), or read where
/// `code` says so.
#[allow(clippy::too_many_arguments)]
fn restore_code<E: From<TransformError>>(
    normalized: &[u8],
    module: &Module,
    section: &module::Section,
    side: &SideInfo,
    refs: &References,
    code: &mut Code<E>,
    emit: &mut dyn FnMut(&[u8]) -> Result<(), E>,
) -> Result<u64, E> {
    let mut raw = side.raw_bodies.iter().peekable();
    let mut widths = side.size_widths.iter().peekable();
    let mut exceptions = side.exceptions.iter().peekable();
    let mut ordinal = 0u64;
    let mut total = 0u64;
    let mut body_index = 0u64;
    let mut body_out = Vec::new();
    // One body (`bytes[start..end]`, its size field `size_width` bytes before `start`),
    // restored and emitted with its size field; or, without `size_width`, the function
    // count, emitted as it is.
    let mut restore = |bytes: &[u8], start: usize, end: usize, size_width: Option<usize>| -> Result<(), E> {
        let Some(size_width) = size_width else {
            emit(&bytes[start..end])?;
            total += (end - start) as u64;
            return Ok(());
        };
        body_out.clear();
        // The size field first, patched in once the body is known.
        body_out.extend_from_slice(&[0; 5]);
        if raw.next_if(|&&r| r == body_index).is_some() {
            body_out.extend_from_slice(&bytes[start..end]);
        } else {
            restore_body(bytes, start, end, refs, &mut ordinal, &mut exceptions, &mut body_out)?;
        }
        let width = widths.next_if(|w| w.0 == body_index).map_or(size_width, |w| w.1 as usize);
        let len = (body_out.len() - 5) as u64;
        let mut size = Vec::with_capacity(5);
        write_size(&mut size, len, width, start - size_width)?;
        let from = 5 - size.len();
        body_out[from..5].copy_from_slice(&size);
        emit(&body_out[from..])?;
        total += body_out[from..].len() as u64;
        body_index += 1;
        Ok(())
    };
    let mut failed = None;
    let mut each = |piece: code_layout::Joined| {
        let done = match piece {
            code_layout::Joined::Count(bytes) => restore(bytes, 0, bytes.len(), None),
            code_layout::Joined::Body { bytes, size_width } => restore(bytes, size_width, bytes.len(), Some(size_width)),
        };
        done.map_err(|e| failed = Some(e)).is_ok()
    };
    match (&side.code_layout, code) {
        (None, Code::InSource) => {
            let first_body = module.bodies.first().map_or(section.end, |b| b.size_field);
            restore(normalized, section.contents, first_body, None)?;
            for body in &module.bodies {
                restore(normalized, body.start, body.end, Some(body.start - body.size_field))?;
            }
        }
        (None, Code::Read { read, contents, end, .. }) => {
            // `module::parse_bodies`'s walk and checks, a body at a time.
            let (mut pos, end) = (*contents, *end);
            let bad = |offset: usize, what| TransformError::Normalized { offset, what };
            let mut window = ReadWindow::default();
            let head = window.get(*read, end, pos, (end - pos).min(5))?;
            let mut width = 0;
            let count = leb::read_unsigned(head, &mut width, 32).map_err(|_| bad(pos, "the function count ends early or is malformed"))?;
            if count > (end - pos - width) as u64 {
                return Err(bad(pos, "function count larger than the code section").into());
            }
            if count > module::MAX_FUNCTION_BODIES {
                return Err(bad(pos, "more than 1,048,576 function bodies").into());
            }
            restore(head, 0, width, None)?;
            pos += width;
            for _ in 0..count {
                let head = window.get(*read, end, pos, (end - pos).min(5))?;
                let mut width = 0;
                let size = leb::read_unsigned(head, &mut width, 32).map_err(|_| bad(pos, "a body's size field ends early or is malformed"))? as usize;
                let body_end = (pos + width).checked_add(size).filter(|&e| e <= end).ok_or(bad(pos, "a body past the end of the code section"))?;
                let bytes = window.get(*read, end, pos, body_end - pos)?;
                restore(bytes, width, bytes.len(), Some(width))?;
                pos = body_end;
            }
            if pos != end {
                return Err(bad(pos, "bytes after the last function body").into());
            }
        }
        (Some(layout), Code::InSource) => {
            let joined = code_layout::join_each(normalized, &layout.lens, layout.coding, &mut each);
            if let Some(e) = failed {
                return Err(e);
            }
            joined.map_err(corrupt)?;
        }
        (Some(layout), Code::Read { read, contents, end, .. }) => {
            let mut read_failed = None;
            let joined = {
                let mut stream_read = |at: usize, buf: &mut [u8]| read(at as u64, buf).map_err(|e| read_failed = Some(e)).is_ok();
                code_layout::join_each_read(&mut stream_read, (*contents, *end), &layout.lens, layout.coding, &mut each)
            };
            if let Some(e) = read_failed.or(failed) {
                return Err(e);
            }
            joined.map_err(corrupt)?;
        }
    }
    if raw.peek().is_some() || widths.peek().is_some() || exceptions.peek().is_some() {
        return Err(TransformError::SideInfo { offset: 0, what: "entries beyond the module's functions" }.into());
    }
    Ok(total)
}

/// Writes `len` padded to `width` bytes if it fits (true), else canonically.
fn write_size_like(out: &mut Vec<u8>, len: u64, width: usize) -> bool {
    if unsigned_width(len) <= width {
        write_unsigned_padded(out, len, width);
        true
    } else {
        write_unsigned(out, len);
        false
    }
}

fn write_size(out: &mut Vec<u8>, len: u64, width: usize, at: usize) -> Result<(), TransformError> {
    if len > u64::from(u32::MAX) {
        return Err(TransformError::Normalized { offset: at, what: "size over 4 GiB" });
    }
    if width >= unsigned_width(len) && width <= 5 {
        write_unsigned_padded(out, len, width);
    } else {
        return Err(TransformError::SideInfo { offset: 0, what: "size field width does not fit the size" });
    }
    Ok(())
}

/// The active data segments: the format's data words lie in these (§2.8.3).
fn segments(bytes: &[u8], module: &Module) -> Vec<(u64, usize, usize)> {
    module.data.map_or_else(Vec::new, |d| data_segments(bytes, &module.sections[d]))
}

/// The data where memory holds it once the module has started, as the
/// writer learns the address map from it (address, byte range in the
/// module): the active segments, and each passive segment that one
/// `memory.init` with constant operands places (`__wasm_init_memory`: a
/// module with shared memory, such as Emscripten's and Rust's threaded
/// builds, keeps all its data passive, so without these its constants had
/// no data to point into). The writer's view only: data words are still
/// those of active segments, and nothing here reaches the side info but the
/// pieces it learns.
fn layout(bytes: &[u8], module: &Module) -> Vec<(u64, usize, usize)> {
    let Some(d) = module.data else {
        return Vec::new();
    };
    let every = every_data_segment(bytes, &module.sections[d]);
    let active = || every.iter().filter_map(|&(a, s, e)| a.map(|a| (a, s, e)));
    if every.iter().all(|s| s.0.is_some()) {
        return active().collect();
    }
    let mut inits: Vec<MemoryInit> = module.bodies.iter().filter_map(|b| memory_inits(bytes, b.start, b.end).ok()).flatten().collect();
    inits.sort_unstable();
    inits.dedup();
    // (address, start, end, passive)
    let mut placed: Vec<(u64, usize, usize, bool)> = active().map(|(a, s, e)| (a, s, e, false)).collect();
    for (i, init) in inits.iter().enumerate() {
        // A segment placed at two places is left out: which one would the constants mean?
        let twice = |j: usize| inits.get(j).is_some_and(|o| o.segment == init.segment);
        if twice(i + 1) || i.checked_sub(1).is_some_and(twice) || init.len == 0 {
            continue;
        }
        let Some(&(None, s, e)) = usize::try_from(init.segment).ok().and_then(|k| every.get(k)) else {
            continue;
        };
        let (offset, len) = (init.offset as usize, init.len as usize);
        if offset.checked_add(len).is_some_and(|end| end <= e - s) {
            placed.push((u64::from(init.address), s + offset, s + offset + len, true));
        }
    }
    // A passive segment placed over another segment is left out (an active one is kept as it is).
    placed.sort_unstable_by_key(|p| (p.0, p.3));
    let mut out: Vec<(u64, usize, usize, bool)> = Vec::with_capacity(placed.len());
    let mut end = 0u64;
    for p in placed {
        let p_end = p.0 + (p.2 - p.1) as u64;
        if p.0 < end {
            if p.3 {
                continue;
            }
            if out.last().is_some_and(|l| l.3) {
                out.pop();
            }
        }
        end = end.max(p_end);
        out.push(p);
    }
    out.into_iter().map(|(a, s, e, _)| (a, s, e)).collect()
}

fn parse(bytes: &[u8]) -> Result<Module, TransformError> {
    parse_module(bytes).map_err(|e| TransformError::NotWasm { offset: e.offset, what: e.what })
}

/// The addresses a constant may point to: from the lowest data segment to the
/// end of the data or, past it, of the memory's initial size (zero-initialized
/// variables lie after the data segments and move with them).
fn address_range(module: &Module, data: &[(u64, usize, usize)]) -> std::ops::Range<i64> {
    let lowest = data.iter().map(|s| s.0).min().unwrap_or(0);
    let data_end = data.iter().map(|s| s.0 + (s.2 - s.1) as u64).max().unwrap_or(0);
    let end = if data.is_empty() { 0 } else { data_end.max(module.memory_bytes.unwrap_or(0)).min(i64::MAX as u64) };
    lowest as i64..end as i64
}

/// The values that address pairs show unchanged (most pairs of the value are (v, v)): numbers
/// both builds share (a character code, a mask, a size that falls in the data's range), or
/// variables that did not move; sorted.
fn shared_numbers(mut pairs: Vec<(u64, u64)>) -> Vec<i64> {
    pairs.sort_unstable();
    pairs.chunk_by(|a, b| a.0 == b.0).filter(|c| 2 * c.iter().filter(|p| p.0 == p.1).count() > c.len()).map(|c| c[0].0 as i64).collect()
}

/// The `i32.const`/`i64.const` values in the code that lie past the data and
/// below the memory's initial size (where zero-initialized variables live),
/// sorted, with how often each occurs.
fn tail_constants(bytes: &[u8], module: &Module, data: &[(u64, usize, usize)]) -> Vec<(i64, u64)> {
    let data_end = data.iter().map(|s| s.0 + (s.2 - s.1) as u64).max().unwrap_or(0) as i64;
    let range = data_end..address_range(module, data).end;
    let mut values = Vec::new();
    if range.is_empty() {
        return Vec::new();
    }
    for body in &module.bodies {
        // A body that does not walk is kept raw: its constants are not rewritten.
        let mut found = Vec::new();
        let walked = walk_body(bytes, body.start, body.end, true, &mut |imm: Immediate| {
            if imm.kind != ImmediateKind::Function && range.contains(&imm.value) {
                found.push(imm.value);
            }
        });
        if walked.is_ok() {
            values.extend(found);
        }
    }
    values.sort_unstable();
    let mut counted: Vec<(i64, u64)> = Vec::new();
    for v in values {
        match counted.last_mut() {
            Some((last, n)) if *last == v => *n += 1,
            _ => counted.push((v, 1)),
        }
    }
    counted
}

/// Whether some memarg offset of a walkable body would be rewritten by
/// `refs`' address map (then the side info is version 2).
fn any_offset_moves(bytes: &[u8], module: &Module, refs: &References) -> bool {
    if refs.addresses.pieces().is_empty() {
        return false;
    }
    module.bodies.iter().any(|body| {
        let mut moves = false;
        let walked = walk_body(bytes, body.start, body.end, true, &mut |imm: Immediate| {
            moves |= imm.kind == ImmediateKind::MemOffset && refs.forward(imm.kind, imm.value) != imm.value;
        });
        walked.is_ok() && moves
    })
}

/// The hash of each body with its references blanked, for matching, and the
/// blanked constants themselves (the address pairs of matched bodies).
fn shapes(bytes: &[u8], module: &Module, data: &[(u64, usize, usize)]) -> FunctionShapes {
    let pc = module.pc_table;
    // Constants pointing into the data move when data grows: blank them so
    // that the function still matches.
    let data_range = address_range(module, data);
    let mut constants = Vec::new();
    let mut constant_ends = Vec::with_capacity(module.bodies.len());
    let (mut calls, mut call_ends) = (Vec::new(), Vec::with_capacity(module.bodies.len()));
    let bodies = module
        .bodies
        .iter()
        .map(|body| {
            let mut hasher = xxhash_rust::xxh3::Xxh3::new();
            let mut at = body.start;
            let (first_constant, first_call) = (constants.len(), calls.len());
            let walked = walk_body(bytes, body.start, body.end, true, &mut |imm: Immediate| {
                let blank = match imm.kind {
                    ImmediateKind::Function => true,
                    ImmediateKind::I64Const => pc.is_some_and(|t| pc_slot(imm.value, t).is_some()) || data_range.contains(&imm.value),
                    ImmediateKind::I32Const | ImmediateKind::MemOffset => data_range.contains(&imm.value),
                };
                if blank {
                    hasher.update(&bytes[at..imm.start]);
                    hasher.update(&[0xff]);
                    at = imm.end;
                    if imm.kind != ImmediateKind::Function {
                        constants.push(imm.value);
                    } else {
                        calls.push(u32::try_from(imm.value).unwrap_or(u32::MAX));
                    }
                }
            });
            let hash = if walked.is_err() {
                constants.truncate(first_constant);
                calls.truncate(first_call);
                let mut raw = xxhash_rust::xxh3::Xxh3::new();
                raw.update(&bytes[body.start..body.end]);
                raw.digest()
            } else {
                hasher.update(&bytes[at..body.end]);
                hasher.digest()
            };
            constant_ends.push(u32::try_from(constants.len()).unwrap_or(u32::MAX));
            call_ends.push(u32::try_from(calls.len()).unwrap_or(u32::MAX));
            hash
        })
        .collect();
    if constants.len() > u32::MAX as usize {
        // No address pairs rather than wrong ones.
        constants.clear();
        constant_ends.clear();
    }
    if calls.len() > u32::MAX as usize {
        calls.clear();
        call_ends.clear();
    }
    let names = index_sections::function_names(bytes, &module.sections, MAX_NAMES);
    FunctionShapes { imports: module.imported_functions.clone(), bodies, constants, constant_ends, calls, call_ends, names }
}

/// At most this many function names are read for matching (4 MiB of them; duckdb-wasm, the
/// most measured, has 75,111), so that a hostile module of tiny exports cannot make the writer
/// hold more.
const MAX_NAMES: usize = 1 << 18;

/// The function index a Go PC refers to, if it lies in the PC table.
fn pc_slot(value: i64, table: PcTable) -> Option<u64> {
    if value < 0 {
        return None;
    }
    let slot = (value as u64) >> 16;
    let offset = slot.checked_sub(u64::from(table.base))?;
    (offset < u64::from(table.len)).then(|| u64::from(table.first) + offset)
}

/// How references are renumbered in one direction or the other.
struct References<'a> {
    map: &'a FunctionMap,
    /// The PC table of the module being transformed (new side).
    own_pc: Option<PcTable>,
    /// The PC table of the reference (old side) numbering.
    ref_pc: Option<PcTable>,
    addresses: &'a AddressMap,
    /// Whether memarg offsets are rewritten (side info version 2).
    offsets: bool,
    /// The writer's: values that bodies of unchanged shape show the same in both builds,
    /// sorted (empty for the applier, which keeps what the side info lists).
    shared: &'a [i64],
}

impl References<'_> {
    /// Whether the writer keeps `value`, which it would normalize to `normalized`, as it is (an
    /// exception): a value that unchanged bodies show the same in both builds is a number both
    /// share more likely than an address that moved (a character code that falls in data that
    /// grew would get the grown bytes' fresh address; in a changed body it should not).
    fn keeps(&self, kind: ImmediateKind, value: i64, normalized: i64) -> bool {
        let address = match kind {
            ImmediateKind::Function => false,
            ImmediateKind::I64Const => self.own_pc.is_none_or(|t| pc_slot(value, t).is_none()),
            ImmediateKind::I32Const | ImmediateKind::MemOffset => true,
        };
        address && normalized != value && self.shared.binary_search(&value).is_ok()
    }

    fn forward(&self, kind: ImmediateKind, value: i64) -> i64 {
        match kind {
            ImmediateKind::Function => match self.map.forward(value as u64) {
                Some(n) if n <= u64::from(u32::MAX) => n as i64,
                _ => value,
            },
            ImmediateKind::I32Const => self.address_forward(value, i64::from(i32::MAX)),
            ImmediateKind::MemOffset => self.address_forward(value, i64::from(u32::MAX)),
            ImmediateKind::I64Const => {
                let (Some(own), Some(theirs)) = (self.own_pc, self.ref_pc) else {
                    return self.address_forward(value, i64::MAX);
                };
                let Some(function) = pc_slot(value, own) else {
                    return self.address_forward(value, i64::MAX);
                };
                let Some(normalized) = self.map.forward(function) else {
                    return value;
                };
                let Some(slot) = normalized.checked_sub(u64::from(theirs.first)).and_then(|o| o.checked_add(u64::from(theirs.base))) else {
                    return value;
                };
                if slot >= 1 << 47 {
                    return value;
                }
                ((slot << 16) | (value as u64 & 0xffff)) as i64
            }
        }
    }

    fn inverse(&self, kind: ImmediateKind, value: i64) -> i64 {
        match kind {
            ImmediateKind::Function => match self.map.inverse(value as u64) {
                Some(n) if n <= u64::from(u32::MAX) && value >= 0 => n as i64,
                _ => value,
            },
            ImmediateKind::I32Const => self.address_inverse(value, i64::from(i32::MAX)),
            ImmediateKind::MemOffset => self.address_inverse(value, i64::from(u32::MAX)),
            ImmediateKind::I64Const => {
                let pc = |(own, theirs): (PcTable, PcTable)| {
                    let normalized = pc_slot(value, PcTable { len: u32::MAX, ..theirs })?;
                    let function = self.map.inverse(normalized)?;
                    let offset = function.checked_sub(u64::from(own.first)).filter(|&o| o < u64::from(own.len))?;
                    Some((((u64::from(own.base) + offset) << 16) | (value as u64 & 0xffff)) as i64)
                };
                match self.own_pc.zip(self.ref_pc).and_then(pc) {
                    Some(v) => v,
                    None => self.address_inverse(value, i64::MAX),
                }
            }
        }
    }

    fn address_forward(&self, value: i64, max: i64) -> i64 {
        if value < 0 {
            return value;
        }
        match self.addresses.forward(value as u64) {
            Some(n) if n <= max as u64 => n as i64,
            _ => value,
        }
    }

    fn address_inverse(&self, value: i64, max: i64) -> i64 {
        if value < 0 {
            return value;
        }
        match self.addresses.inverse(value as u64) {
            Some(n) if n <= max as u64 => n as i64,
            _ => value,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Forward,
    Inverse,
}

/// An element section rebuilt.
struct RebuiltSection {
    /// Its index in the module's sections.
    index: usize,
    /// The whole section: id, canonical size, contents.
    bytes: Vec<u8>,
    /// Where its contents start in `bytes`.
    contents_at: usize,
}

/// The most bytes the element sections of a version-4 module may hold, before
/// and after they are rebuilt (docs/FORMAT.md §2.7): the rebuilt sections are
/// held in memory. The largest measured table, duckdb-wasm's, is 108 KB.
pub const MAX_ELEMENT_BYTES: usize = 4 << 20;

/// Each element section rebuilt with `entry(ordinal, its LEB128, its value,
/// out)` writing each function index it lists (element entries, docs/FORMAT.md
/// §2.8.3). An error if some element section does not list its indices in the
/// form read, or the sections hold more than [`MAX_ELEMENT_BYTES`] before or
/// after.
fn rebuild_elements(bytes: &[u8], module: &Module, mut entry: impl FnMut(u64, &[u8], u64, &mut Vec<u8>)) -> Result<Vec<RebuiltSection>, &'static str> {
    const OVER: &str = "element sections over 4 MiB";
    let total: usize = module.elements.iter().map(|&i| module.sections[i].end - module.sections[i].contents).sum();
    if total > MAX_ELEMENT_BYTES {
        return Err(OVER);
    }
    let (mut ordinal, mut rebuilt) = (0u64, 0usize);
    let mut sections = Vec::with_capacity(module.elements.len());
    for &index in &module.elements {
        let section = &module.sections[index];
        let entries = element_entries(bytes, section.contents, section.end).ok_or("an element section does not list function indices")?;
        let mut contents = Vec::with_capacity(section.end - section.contents + 16);
        let mut at = section.contents;
        for (start, end, value) in entries {
            contents.extend_from_slice(&bytes[at..start]);
            entry(ordinal, &bytes[start..end], value, &mut contents);
            ordinal += 1;
            at = end;
            if rebuilt + contents.len() > MAX_ELEMENT_BYTES {
                return Err(OVER);
            }
        }
        contents.extend_from_slice(&bytes[at..section.end]);
        rebuilt += contents.len();
        if rebuilt > MAX_ELEMENT_BYTES {
            return Err(OVER);
        }
        let mut whole = vec![bytes[section.start]];
        write_unsigned(&mut whole, contents.len() as u64);
        let contents_at = whole.len();
        whole.extend_from_slice(&contents);
        sections.push(RebuiltSection { index, bytes: whole, contents_at });
    }
    Ok(sections)
}

/// Which kinds of sections outside the code and elements (exports, start, names:
/// [`index_sections`]) the writer renumbers: those where some function index changes and every
/// section of the kind gives its bytes back (canonical LEB128 throughout). Go's modules are
/// left as they are, as for elements.
fn forward_index_sections(bytes: &[u8], module: &Module, refs: &References) -> u8 {
    if module.pc_table.is_some() || refs.map.is_identity() {
        return 0;
    }
    let forward = |v: u64| refs.forward(ImmediateKind::Function, v as i64) as u64;
    let inverse = |v: u64| refs.inverse(ImmediateKind::Function, v as i64) as u64;
    index_sections::KINDS
        .into_iter()
        .filter(|&kind| {
            let mut of_kind = module.sections.iter().filter(|s| index_sections::kind_of(bytes, s) == kind).peekable();
            of_kind.peek().is_some()
                && of_kind.map(|s| index_sections::round_trips(bytes, s, kind, &forward, &inverse)).try_fold(false, |changed, r| r.map(|c| changed | c))
                    == Some(true)
        })
        .fold(0, |bits, kind| bits | kind)
}

/// The element sections with their function indices renumbered, and the
/// ordinals of the entries kept verbatim; None where that changes nothing, or
/// is not done: a module with a PC table (Go's table is read from its element
/// section as it is), a section not in the form or whose size field is not
/// canonical (the inverse writes it canonically), or a normalized last section
/// that would read as a PC table, or sections over [`MAX_ELEMENT_BYTES`].
fn forward_elements(bytes: &[u8], module: &Module, refs: &References) -> Option<(Vec<RebuiltSection>, Vec<u64>)> {
    if module.pc_table.is_some() || module.elements.is_empty() || refs.map.is_identity() {
        return None;
    }
    let canonical_size = |s: &module::Section| s.contents - s.start - 1 == unsigned_width((s.end - s.contents) as u64);
    if !module.elements.iter().all(|&i| canonical_size(&module.sections[i])) {
        return None;
    }
    let (mut listed, mut changed) = (Vec::new(), false);
    let sections = rebuild_elements(bytes, module, |ordinal, leb, value, out| {
        let n = refs.forward(ImmediateKind::Function, value as i64);
        if leb.len() == unsigned_width(value) && refs.inverse(ImmediateKind::Function, n) == value as i64 {
            changed |= n as u64 != value;
            write_unsigned(out, n as u64);
        } else {
            listed.push(ordinal);
            out.extend_from_slice(leb);
        }
    })
    .ok()?;
    // The PC table is read from the last element section.
    let last = sections.last()?;
    (changed && parse_pc_table(&last.bytes, last.contents_at).is_none()).then_some((sections, listed))
}

/// The original element sections from the normalized ones, `listed` naming
/// the entries kept verbatim.
fn inverse_elements(bytes: &[u8], module: &Module, refs: &References, listed: &[u64]) -> Result<Vec<RebuiltSection>, TransformError> {
    let mut listed = listed.iter().peekable();
    let sections = rebuild_elements(bytes, module, |ordinal, leb, value, out| {
        if listed.next_if(|&&o| o == ordinal).is_some() {
            out.extend_from_slice(leb);
        } else {
            write_unsigned(out, refs.inverse(ImmediateKind::Function, value as i64) as u64);
        }
    })
    .map_err(|what| TransformError::Normalized { offset: 0, what })?;
    if listed.peek().is_some() {
        return Err(TransformError::SideInfo { offset: 0, what: "element exceptions beyond the element entries" });
    }
    Ok(sections)
}

/// Rewrites the pointer-sized words of the data segments (8 bytes in Go,
/// whose pointers and PCs are 64-bit; 4 bytes otherwise), aligned by address,
/// in place: the section keeps its size. Forward fills `exceptions` with the
/// ordinals of words kept verbatim; inverse reads them from it. Returns how
/// many words changed.
fn rewrite_data_words(
    out: &mut [u8],
    segments: &[(u64, usize, usize)],
    refs: &References,
    direction: Direction,
    exceptions: &mut Vec<u64>,
) -> Result<u64, TransformError> {
    if refs.addresses.pieces().is_empty() && refs.map.is_identity() {
        if direction == Direction::Inverse && !exceptions.is_empty() {
            return Err(TransformError::SideInfo { offset: 0, what: "data exceptions without a mapping" });
        }
        return Ok(0);
    }
    let (width, kind) = if refs.own_pc.is_some() { (8usize, ImmediateKind::I64Const) } else { (4, ImmediateKind::I32Const) };
    let mut ordinal = 0u64;
    let mut changed = 0u64;
    let mut listed = std::mem::take(exceptions);
    let mut next_listed = 0usize;
    for &(address, start, stop) in segments {
        let skip = ((width as u64 - address % width as u64) % width as u64) as usize;
        let mut p = start + skip;
        while p + width <= stop {
            let word = &mut out[p..p + width];
            let value = if width == 8 {
                i64::from_le_bytes(word.try_into().expect("8 bytes"))
            } else {
                i64::from(u32::from_le_bytes(word.try_into().expect("4 bytes")))
            };
            match direction {
                Direction::Forward => {
                    let n = refs.forward(kind, value);
                    if n != value {
                        if refs.inverse(kind, n) == value {
                            write_word(word, n);
                            changed += 1;
                        } else {
                            listed.push(ordinal);
                        }
                    } else if refs.inverse(kind, n) != value {
                        listed.push(ordinal);
                    }
                }
                Direction::Inverse => {
                    if listed.get(next_listed) == Some(&ordinal) {
                        next_listed += 1;
                    } else {
                        let v = refs.inverse(kind, value);
                        if v != value {
                            write_word(word, v);
                            changed += 1;
                        }
                    }
                }
            }
            ordinal += 1;
            p += width;
        }
    }
    if direction == Direction::Inverse && next_listed != listed.len() {
        return Err(TransformError::SideInfo { offset: 0, what: "data exceptions beyond the data words" });
    }
    *exceptions = listed;
    Ok(changed)
}

fn write_word(word: &mut [u8], value: i64) {
    let bytes = value.to_le_bytes();
    let n = word.len();
    word.copy_from_slice(&bytes[..n]);
}

fn write_immediate(out: &mut Vec<u8>, kind: ImmediateKind, value: i64) {
    match kind {
        ImmediateKind::Function | ImmediateKind::MemOffset => write_unsigned(out, value as u64),
        ImmediateKind::I64Const | ImmediateKind::I32Const => write_signed(out, value),
    }
}

/// Appends the normalized body to `out`; false if the body does not parse
/// (it is then kept raw).
#[allow(clippy::too_many_arguments)]
fn normalize_body(
    bytes: &[u8],
    start: usize,
    end: usize,
    refs: &References,
    ordinal: &mut u64,
    exceptions: &mut Vec<u64>,
    stats: &mut TransformStats,
    out: &mut Vec<u8>,
) -> bool {
    // Each immediate is rewritten as the walk meets it: no list of a body's immediates (a
    // 1.5 MB body has about 250,000, 8 MB as a list). A body that does not walk to its end
    // takes back what it wrote and counted.
    let (out_len, exceptions_len, ordinal_at, stats_at) = (out.len(), exceptions.len(), *ordinal, stats.clone());
    let mut at = start;
    let mut canonical = Vec::with_capacity(10);
    let walked = walk_body(bytes, start, end, refs.offsets, &mut |imm| {
        out.extend_from_slice(&bytes[at..imm.start]);
        at = imm.end;
        let original = &bytes[imm.start..imm.end];
        let normalized = refs.forward(imm.kind, imm.value);
        canonical.clear();
        write_immediate(&mut canonical, imm.kind, imm.value);
        if canonical == original && refs.inverse(imm.kind, normalized) == imm.value && !refs.keeps(imm.kind, imm.value, normalized) {
            if normalized != imm.value {
                match imm.kind {
                    ImmediateKind::Function => stats.function_refs += 1,
                    ImmediateKind::I64Const if refs.own_pc.is_some_and(|t| pc_slot(imm.value, t).is_some()) => stats.pc_refs += 1,
                    ImmediateKind::I64Const | ImmediateKind::I32Const => stats.address_refs += 1,
                    ImmediateKind::MemOffset => stats.offset_refs += 1,
                }
            }
            write_immediate(out, imm.kind, normalized);
        } else {
            // Kept verbatim: a non-canonical LEB, or a value the mapping cannot
            // give back.
            exceptions.push(*ordinal);
            out.extend_from_slice(original);
        }
        *ordinal += 1;
    });
    if walked.is_err() {
        out.truncate(out_len);
        exceptions.truncate(exceptions_len);
        (*ordinal, *stats) = (ordinal_at, stats_at);
        return false;
    }
    out.extend_from_slice(&bytes[at..end]);
    true
}

fn restore_body(
    normalized: &[u8],
    start: usize,
    end: usize,
    refs: &References,
    ordinal: &mut u64,
    exceptions: &mut std::iter::Peekable<std::slice::Iter<u64>>,
    out: &mut Vec<u8>,
) -> Result<(), TransformError> {
    // As `normalize_body`: each immediate restored as the walk meets it (an applier's memory
    // holds no list of a body's immediates). On an error the caller drops the whole output.
    let mut at = start;
    walk_body(normalized, start, end, refs.offsets, &mut |imm| {
        out.extend_from_slice(&normalized[at..imm.start]);
        at = imm.end;
        if exceptions.next_if(|&&e| e == *ordinal).is_some() {
            out.extend_from_slice(&normalized[imm.start..imm.end]);
        } else {
            write_immediate(out, imm.kind, refs.inverse(imm.kind, imm.value));
        }
        *ordinal += 1;
    })
    .map_err(corrupt)?;
    out.extend_from_slice(&normalized[at..end]);
    Ok(())
}

/// The longest subsequence of `items` strictly ascending in `key` (patience
/// sorting, O(n log n)).
fn longest_ascending<T: Copy, K: Ord>(items: &[T], key: impl Fn(&T) -> K) -> Vec<T> {
    let mut tails: Vec<usize> = Vec::new(); // per length, the index of the smallest tail
    let mut parent = vec![usize::MAX; items.len()];
    for (i, item) in items.iter().enumerate() {
        let k = key(item);
        let len = tails.partition_point(|&t| key(&items[t]) < k);
        if len > 0 {
            parent[i] = tails[len - 1];
        }
        if len == tails.len() {
            tails.push(i);
        } else {
            tails[len] = i;
        }
    }
    let mut out = Vec::with_capacity(tails.len());
    let mut at = tails.last().copied().unwrap_or(usize::MAX);
    while at != usize::MAX {
        out.push(items[at]);
        at = parent[at];
    }
    out.reverse();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One type, one function whose body is `call 0`, its size field `size` bytes.
    fn module(size: &[u8]) -> Vec<u8> {
        let mut m = MAGIC_FOR_TESTS.to_vec();
        m.extend_from_slice(&[1, 4, 1, 0x60, 0, 0, 3, 2, 1, 0]);
        m.extend_from_slice(&[10, 5 + size.len() as u8, 1]);
        m.extend_from_slice(size);
        m.extend_from_slice(&[0, 0x10, 0, 0x0b]);
        m
    }

    const MAGIC_FOR_TESTS: &[u8; 8] = b"\0asm\x01\0\0\0";

    #[test]
    fn own_normalized_form_agrees_with_forward() {
        for m in [module(&[4]), module(&[0x84, 0x80, 0x80, 0x80, 0])] {
            assert_eq!(is_own_normalized_form(&m), Ok(forward(None, &m).unwrap().bytes == m));
            assert_eq!(is_own_normalized_form(&m), Ok(true));
            let cut = &m[..m.len() - 1];
            assert!(matches!(is_own_normalized_form(cut), Err(TransformError::NotWasm { .. })));
            assert!(forward(None, cut).is_err());
        }
        assert!(is_own_normalized_form(b"not wasm").is_err());
    }
}
