//! The reference applier: small and obviously correct, for testing the fast
//! streaming applier against. It holds the whole patch, the whole old build and
//! the whole new build in memory, and executes the delta program literally.

use std::collections::HashMap;

use crate::apply::{decompress_with_window, read_header_and_tree, read_segment_header, PatchInput};
use crate::build::{Build, BuildEntry, EntryContent};
use crate::error::{Error, Result};
use crate::patch_format::{decode_control, FileSource, Segment, TreeEntryKind};

pub fn reference_apply(patch: &[u8], old: &Build) -> Result<Build> {
    let old_files: HashMap<&str, &[u8]> = old.files().collect();
    let mut input = PatchInput::new(patch);
    let (encoded, tree_at) = read_header_and_tree(&mut input)?;
    let tree = encoded.resolve(crate::diff::build_listing(old), tree_at)?;
    let old_data = |path: &str| old_files.get(path).copied().ok_or_else(|| Error::Invalid(format!("old file {path:?} missing")));

    let mut reference = Vec::new();
    for f in tree.old_files.iter().filter(|f| f.in_reference) {
        reference.extend_from_slice(old_data(&f.path)?);
    }

    let mut new_stream = Vec::new();
    let mut segments = 0;
    let (mut comp, mut ctrl, mut diff, mut extra) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    while let Some(segment) = read_segment_header(&mut input, segments, new_stream.len() as u64, reference.len() as u64)? {
        segments += 1;
        let h = match segment {
            Segment::Ops(h) => h,
            Segment::Window(w) => {
                let mut window: Vec<u8> = w.spans.iter().flat_map(|&(s, l)| reference[s as usize..(s + l) as usize].iter().copied()).collect();
                window.extend_from_slice(&new_stream[new_stream.len() - w.back_len as usize..]);
                let mut frame = vec![0u8; w.comp_len as usize];
                input.exact(&mut frame, "window frame")?;
                let mut out = Vec::new();
                decompress_with_window(&frame, &window, w.new_len, &mut out, 0)?;
                new_stream.extend_from_slice(&out);
                continue;
            }
        };
        input.frame(h.ctrl_comp, h.ctrl_raw, &mut comp, &mut ctrl, "control")?;
        input.frame(h.diff_comp, h.diff_raw, &mut comp, &mut diff, "diff")?;
        input.frame(h.extra_comp, h.extra_raw, &mut comp, &mut extra, "extra")?;
        let (mut d, mut x) = (0usize, 0usize);
        let start = new_stream.len();
        for op in decode_control(&ctrl, h.new_len, h.diff_raw, h.extra_raw, 0)? {
            let first = (new_stream.len() - start) as i64 + op.diagonal;
            let (copy, add) = (op.copy_len as usize, op.extra_len as usize);
            for i in 0..copy as i64 {
                let at = usize::try_from(first + i).map_err(|_| Error::Invalid("copy outside old data".into()))?;
                let o = *reference.get(at).ok_or_else(|| Error::Invalid("copy outside old data".into()))?;
                let delta = *diff.get(d).ok_or_else(|| Error::Invalid("diff stream too short".into()))?;
                new_stream.push(o.wrapping_add(delta));
                d += 1;
            }
            new_stream.extend_from_slice(extra.get(x..x + add).ok_or_else(|| Error::Invalid("extra stream too short".into()))?);
            x += add;
        }
        if new_stream.len() - start != h.new_len as usize || d != diff.len() || x != extra.len() {
            return Err(Error::Invalid("segment sizes inconsistent".into()));
        }
    }
    input.finish()?;

    let mut entries = Vec::new();
    let mut at = 0usize;
    for e in &tree.entries {
        let content = match &e.kind {
            TreeEntryKind::Directory => EntryContent::Directory,
            TreeEntryKind::Symlink { target } => EntryContent::Symlink { target: target.clone() },
            TreeEntryKind::File { executable, size, source } => {
                let data = match source {
                    FileSource::Copy { old_index } => old_data(&tree.old_files[*old_index].path)?.to_vec(),
                    FileSource::Delta => {
                        let end = at + *size as usize;
                        let bytes = new_stream.get(at..end).ok_or_else(|| Error::Invalid("delta stream too short".into()))?;
                        at = end;
                        bytes.to_vec()
                    }
                };
                EntryContent::File { executable: *executable, data }
            }
        };
        entries.push(BuildEntry { path: e.path.clone(), content });
    }
    if at != new_stream.len() {
        return Err(Error::Invalid("delta stream longer than the files".into()));
    }
    let digest = tree.digest_of(|i| match &entries[i].content {
        EntryContent::File { data, .. } => *blake3::hash(data).as_bytes(),
        _ => unreachable!("the digest hashes files only"),
    });
    if digest != tree.files_digest {
        return Err(Error::Invalid("the new files do not match the files digest".into()));
    }
    Ok(Build { entries })
}
