//! The forward transform: a module's normalized form and the side info its inverse needs
//! (docs/FORMAT.md §2.8), written against the old module's [`WasmReference`] or, for the old
//! module itself, against none.

use crate::addresses::{AddressMap, OldData, TailConstants};
use crate::dwarf::{self, dwarf_holds};
use crate::elements::forward_elements;
use crate::error::TransformError;
use crate::immediates::{walk_body, Immediate, ImmediateKind};
use crate::index_sections;
use crate::leb::{unsigned_width, write_unsigned, write_unsigned_padded};
use crate::matching::{address_pairs, match_functions, FunctionShapes};
use crate::module::{parse_module, Module, PcTable, CODE_SECTION};
use crate::references::{pc_slot, rewrite_data_words, write_immediate, Direction, References};
use crate::side_info::{DwarfAddresses, FunctionMap, SideInfo};
use crate::survey::{layout, segments, shapes, shared_numbers, tail_constants};

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

/// The normalized bytes and what [`inverse`](fn@crate::inverse) needs besides them: the form
/// every transform makes (edgepatch-format's `transform`).
pub use edgepatch_format::transform::Normalized;

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

pub(crate) fn parse(bytes: &[u8]) -> Result<Module, TransformError> {
    parse_module(bytes).map_err(|e| TransformError::NotWasm { offset: e.offset, what: e.what })
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
