//! Describes a patch without applying it: reads it front to back, checks its
//! structure and checksum, and reports the tree and the segment sizes.

use std::io::Read;

use crate::apply::{read_header_and_tree, read_segment_header, PatchInput};
use crate::error::Result;
use crate::patch_format::{PatchTree, SegmentHeader, PATCH_VERSION};

#[derive(Debug, Clone)]
pub struct PatchInfo {
    pub version: u16,
    pub tree: PatchTree,
    pub segments: Vec<SegmentHeader>,
    pub patch_bytes: u64,
}

pub fn inspect_patch<R: Read>(patch: R) -> Result<PatchInfo> {
    let mut input = PatchInput::new(patch);
    let tree = read_header_and_tree(&mut input)?;
    let mut segments = Vec::new();
    let mut produced = 0;
    let mut scratch = (Vec::new(), Vec::new());
    while let Some(h) = read_segment_header(&mut input, segments.len() as u64, produced)? {
        // Decompress to check the frames; nothing is kept.
        input.frame(h.ctrl_comp, h.ctrl_raw, &mut scratch.0, &mut scratch.1, "segment control")?;
        input.frame(h.diff_comp, h.diff_raw, &mut scratch.0, &mut scratch.1, "segment diff")?;
        input.frame(h.extra_comp, h.extra_raw, &mut scratch.0, &mut scratch.1, "segment extra")?;
        produced += h.new_len;
        segments.push(h);
    }
    let patch_bytes = input.finish()?;
    Ok(PatchInfo { version: PATCH_VERSION, tree, segments, patch_bytes })
}
