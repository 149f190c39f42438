//! The code section's field-split layout (docs/FORMAT.md §2.8.7) as the patch uses it: a
//! normalized module put in it (its side info then says so), an old module read in it, in
//! memory or not, joined again, and the parts a diff aligns its segments on.

use crate::data_gaps;
use crate::error::{corrupt, not_wasm, TransformError};
use crate::field_join;
use crate::field_split;
use crate::forward::Normalized;
use crate::index_sections;
use crate::module::{self, CODE_SECTION};
use crate::read_at::{ReadAt, ReadWindow, SectionWalk, WriteAt, READ_WINDOW};
use crate::side_info::{self, SideInfo};
use crate::walker::{Coding, Field, FIELDS};

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
        field_split::split_read(&mut |at, buf| read(at as u64, buf).map_err(|e| read_failed = Some(e)).is_ok(), code, layout.coding, &mut |at, bytes| {
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
    let (mut split, _) = field_split::split(module, layout.coding).map_err(not_wasm)?;
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
    let (mut split, lens) = field_split::split(module, layout.coding).map_err(not_wasm)?;
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
fn parts_of(split: &[u8], lens: &[u64; FIELDS]) -> Result<LayoutParts, TransformError> {
    let (_, _, streams) = field_join::streams(split, lens).map_err(corrupt)?;
    let mut parts = Vec::new();
    for (id, section) in module::section_headers(split).map_err(not_wasm)? {
        parts.push(section_part(split, id, &section));
        if id == module::CODE_SECTION {
            parts.extend(streams.iter().enumerate().map(|(i, &(start, _))| (LayoutPart::Stream(i as u8), start as u64)));
            parts.push((LayoutPart::AfterCode, streams[FIELDS - 1].1 as u64));
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
        let stream = field_split::field_stream(normalized, Field::Local, coding).map_err(not_wasm)?;
        let old_stream = old.and_then(|old| field_split::field_stream(old, Field::Local, coding).ok()).unwrap_or_default();
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
    let lens = field_split::split_in_place(&mut normalized.bytes, coding).map_err(not_wasm)?;
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
    let lens = field_split::split_in_place(module, layout.coding).map_err(not_wasm)?;
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
    field_join::join_hash(split, &layout.lens, layout.coding, &data).map_err(corrupt)
}

/// The normalized module a split one (`split` with its version-3 side info) was made from:
/// its code section's bodies interleaved again (the inverse of [`with_code_layout`]'s bytes).
pub fn join_code_layout(split: &[u8], side_info: &[u8]) -> Result<Vec<u8>, TransformError> {
    let layout = split_layout(side_info)?;
    let mut joined = field_join::join(split, &layout.lens, layout.coding).map_err(corrupt)?;
    take_data_gaps(&mut joined, layout.coding, data_gaps::Way::Join).map_err(corrupt)?;
    Ok(joined)
}

/// [`with_code_layout`] with the locals' coding given: move-to-front ranks or not. One-byte
/// alignments are always coded against the last of their instruction (§2.8.7).
pub fn with_code_layout_as(normalized: &Normalized, locals_mtf: bool) -> Result<Normalized, TransformError> {
    let coding = Coding { locals_mtf, aligns: true, gaps: codes_data_gaps(&normalized.bytes) };
    let (mut split, lens) = field_split::split(&normalized.bytes, coding).map_err(not_wasm)?;
    take_data_gaps(&mut split, coding, data_gaps::Way::Split).map_err(not_wasm)?;
    with_split(normalized, coding, (split, lens))
}

/// `normalized` as `split` of it, with its side info saying so.
fn with_split(normalized: &Normalized, coding: Coding, (bytes, lens): (Vec<u8>, [u64; FIELDS])) -> Result<Normalized, TransformError> {
    let mut side = SideInfo::decode(&normalized.side_info)?;
    if side.code_layout.is_some() {
        return Err(TransformError::SideInfo { offset: 4, what: "already in the split layout" });
    }
    side.code_layout = Some(side_info::CodeLayout { coding, lens });
    Ok(Normalized { bytes, side_info: side.encode() })
}

/// The field-split layout a side info says its module is in (an error if it is in none).
pub(crate) fn split_layout(side_info: &[u8]) -> Result<side_info::CodeLayout, TransformError> {
    SideInfo::decode(side_info)?.code_layout.ok_or(TransformError::SideInfo { offset: 4, what: "not a split layout (version 3)" })
}
