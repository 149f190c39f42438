//! Describes a patch without applying it: reads it front to back, checks its
//! structure and checksum, and reports the tree and the segment sizes.

use std::io::Read;

use crate::apply::{read_header_and_tree, read_segment_header, PatchInput};
use crate::error::Result;
use crate::patch_format::{PatchTree, Segment, PATCH_VERSION};

#[derive(Debug, Clone)]
pub struct PatchInfo {
    pub version: u16,
    pub tree: PatchTree,
    pub segments: Vec<Segment>,
    pub patch_bytes: u64,
}

pub fn inspect_patch<R: Read>(patch: R) -> Result<PatchInfo> {
    let mut input = PatchInput::new(patch);
    let tree = read_header_and_tree(&mut input)?;
    let mut segments = Vec::new();
    let mut produced = 0;
    let mut scratch = (Vec::new(), Vec::new());
    let reference_len = tree.reference_bytes();
    while let Some(segment) = read_segment_header(&mut input, segments.len() as u64, produced, reference_len)? {
        match &segment {
            Segment::Ops(h) => {
                // Decompress to check the frames; nothing is kept.
                input.frame(h.ctrl_comp, h.ctrl_raw, &mut scratch.0, &mut scratch.1, "segment control")?;
                input.frame(h.diff_comp, h.diff_raw, &mut scratch.0, &mut scratch.1, "segment diff")?;
                input.frame(h.extra_comp, h.extra_raw, &mut scratch.0, &mut scratch.1, "segment extra")?;
            }
            // Its frame needs the old data to decompress: only skipped here.
            Segment::Window(w) => {
                scratch.0.resize(w.comp_len as usize, 0);
                input.exact(&mut scratch.0, "window segment frame")?;
            }
        }
        produced += segment.new_len();
        segments.push(segment);
    }
    let patch_bytes = input.finish()?;
    Ok(PatchInfo { version: PATCH_VERSION, tree, segments, patch_bytes })
}
