//! The element sections' function indices (side info version 4, docs/FORMAT.md §2.8.3):
//! renumbered by the writer, restored by the inverse, each section rebuilt in memory.

use crate::error::TransformError;
use crate::immediates::ImmediateKind;
use crate::leb::{unsigned_width, write_unsigned};
use crate::module::{self, element_entries, parse_pc_table, Module};
use crate::references::References;

/// An element section rebuilt.
pub(crate) struct RebuiltSection {
    /// Its index in the module's sections.
    pub(crate) index: usize,
    /// The whole section: id, canonical size, contents.
    pub(crate) bytes: Vec<u8>,
    /// Where its contents start in `bytes`.
    pub(crate) contents_at: usize,
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

/// The element sections with their function indices renumbered, and the
/// ordinals of the entries kept verbatim; None where that changes nothing, or
/// is not done: a module with a PC table (Go's table is read from its element
/// section as it is), a section not in the form or whose size field is not
/// canonical (the inverse writes it canonically), or a normalized last section
/// that would read as a PC table, or sections over [`MAX_ELEMENT_BYTES`].
pub(crate) fn forward_elements(bytes: &[u8], module: &Module, refs: &References) -> Option<(Vec<RebuiltSection>, Vec<u64>)> {
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
pub(crate) fn inverse_elements(bytes: &[u8], module: &Module, refs: &References, listed: &[u64]) -> Result<Vec<RebuiltSection>, TransformError> {
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
