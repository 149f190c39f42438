//! A whole patch from two builds read by range: the generator's call sequence driven over
//! the caller's readers.

use super::{invalid, ByteRange, FileForm, PatchGenerator, WasmTransform};
use crate::error::Result;
use crate::signature::Signature;

/// Reads `buf.len()` bytes of the build's file `path` from `offset`.
pub type ReadRange<'a> = dyn FnMut(&str, u64, &mut [u8]) -> Result<()> + 'a;

/// Drives a [`PatchGenerator`] over two builds whose files are read by range
/// through `read_old`/`read_new(path, offset, buf)` (memory, disk, object
/// storage); the patch goes to `out` as it is made. Returns the generator
/// (for `manifest` and `stats`).
pub fn generate_patch(
    old: Option<&Signature>,
    new: &Signature,
    level: i32,
    read_old: &mut ReadRange,
    read_new: &mut ReadRange,
    out: &mut dyn FnMut(&[u8]) -> Result<()>,
) -> Result<PatchGenerator> {
    generate_patch_transformed(old, new, level, Vec::new(), BuildReaders::builds(read_old, read_new), out)
}

/// How [`drive`] reads: the two builds' files, and the forms a patch's wasm transforms keep
/// (the normalized new modules, the split old ones) by the module's path.
pub struct BuildReaders<'a, 'b> {
    /// Files of the old build, as they are.
    pub old: &'a mut ReadRange<'b>,
    /// Files of the new build, as they are.
    pub new: &'a mut ReadRange<'b>,
    /// Normalized forms of new modules ([`FileForm::Normalized`]); none without transforms.
    pub normalized: Option<&'a mut ReadRange<'b>>,
    /// Split old modules ([`FileForm::OldSplit`]); none without split transforms.
    pub old_split: Option<&'a mut ReadRange<'b>>,
}

impl<'a, 'b> BuildReaders<'a, 'b> {
    /// The two builds only (a patch without wasm transforms).
    pub fn builds(old: &'a mut ReadRange<'b>, new: &'a mut ReadRange<'b>) -> Self {
        BuildReaders { old, new, normalized: None, old_split: None }
    }
}

/// [`generate_patch`] storing the new modules of `transforms` normalized (and their old
/// modules split where a transform says so), read as `readers` says.
pub fn generate_patch_transformed(
    old: Option<&Signature>,
    new: &Signature,
    level: i32,
    transforms: Vec<WasmTransform>,
    readers: BuildReaders,
    out: &mut dyn FnMut(&[u8]) -> Result<()>,
) -> Result<PatchGenerator> {
    let mut g = PatchGenerator::new(old, new, level)?;
    for t in transforms {
        g.add_wasm_transform(t)?;
    }
    drive(g, readers, out)
}

/// Makes the whole patch with `g`, set up but not begun (its transforms added, its old
/// budget set), reading as [`generate_patch_transformed`] does.
pub fn drive(mut g: PatchGenerator, readers: BuildReaders, out: &mut dyn FnMut(&[u8]) -> Result<()>) -> Result<PatchGenerator> {
    out(&g.header()?)?;
    let BuildReaders { old, new, mut normalized, mut old_split } = readers;
    let read_all = |ranges: &[ByteRange], build: &mut ReadRange, form: &mut Option<&mut ReadRange>, form_read: FileForm| -> Result<Vec<u8>> {
        let mut buf = vec![0u8; ranges.iter().map(|r| r.len as usize).sum()];
        let mut at = 0;
        for r in ranges {
            let read: &mut ReadRange = match (r.form, form.as_deref_mut()) {
                (FileForm::AsIs, _) => build,
                (f, Some(form)) if f == form_read => form,
                (f, _) => return Err(invalid(format!("a range of {f:?} of {:?}, which this generation has no reader for", r.path))),
            };
            read(&r.path, r.offset, &mut buf[at..at + r.len as usize])?;
            at += r.len as usize;
        }
        Ok(buf)
    };
    for i in 0..g.segment_count() {
        let new_bytes = read_all(&g.new_ranges(i)?, new, &mut normalized, FileForm::Normalized)?;
        let old_ranges = g.plan_segment(i, &new_bytes)?;
        let old_bytes = read_all(&old_ranges, old, &mut old_split, FileForm::OldSplit)?;
        out(&g.encode_segment(i, &new_bytes, old_bytes)?)?;
    }
    out(&g.finish()?)?;
    Ok(g)
}
