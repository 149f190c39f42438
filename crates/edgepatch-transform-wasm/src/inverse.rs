//! The inverse: the original module from its normalized form and side info, emitted front to
//! back in pieces, from the form in memory or read through a callback in bounded memory.
//! Hostile input gives an error, never a panic.

use crate::addresses::{data_segments, AddressMap};
use crate::data_gaps;
use crate::dwarf::{self, dwarf_holds};
use crate::elements::inverse_elements;
use crate::error::{corrupt, TransformError};
use crate::field_join::{self, Joined};
use crate::immediates::{walk_body, ImmediateKind};
use crate::index_sections;
use crate::leb::{self, unsigned_width, write_unsigned_padded};
use crate::module::{self, parse_module_with, Module, CODE_SECTION};
use crate::read_at::{image_without_code, Image, ReadAt, ReadWindow, Span, READ_WINDOW};
use crate::references::{rewrite_data_words, write_immediate, Direction, References};
use crate::side_info::{DwarfAddresses, FunctionMap, SideInfo};

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
    let mut each = |piece: Joined| {
        let done = match piece {
            Joined::Count(bytes) => restore(bytes, 0, bytes.len(), None),
            Joined::Body { bytes, size_width } => restore(bytes, size_width, bytes.len(), Some(size_width)),
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
            let joined = field_join::join_each(normalized, &layout.lens, layout.coding, &mut each);
            if let Some(e) = failed {
                return Err(e);
            }
            joined.map_err(corrupt)?;
        }
        (Some(layout), Code::Read { read, contents, end, .. }) => {
            let mut read_failed = None;
            let joined = {
                let mut stream_read = |at: usize, buf: &mut [u8]| read(at as u64, buf).map_err(|e| read_failed = Some(e)).is_ok();
                field_join::join_each_read(&mut stream_read, (*contents, *end), &layout.lens, layout.coding, &mut each)
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
