//! Which delta files the diff stores as their content (the compressed-asset transform,
//! docs/FORMAT.md §2.8.8): a gzip, zlib or Brotli file whose old version (same path, the one old file
//! of a single-file patch, or the file it was renamed from) is one too, diffed as its content
//! against the old file's content, which the reference then holds in the old file's place.
//! A compressed wasm module's content is tried through the wasm transform as a wasm file is
//! (the smallest form kept), its side info then inside the compressed asset's.

use std::collections::HashMap;

use edgepatch_format::compressed_side_info::{container, CONTAINER_BROTLI};
use edgepatch_format::manifest::{self, coding_of_path};
use edgepatch_format::{Capabilities, Capability};
use edgepatch_transform_compressed::brotli::BrotliSideInfo;
use edgepatch_transform_compressed::container::Container;
use edgepatch_transform_compressed::deflate::{decode, inflate_whole, WHOLE_CONTENT};
use edgepatch_transform_compressed::side_info::SideInfo;

use crate::error::Result;
use crate::patch_format::{PatchTree, WasmTransformed, MAX_WASM_SIDE_INFO, MAX_WASM_TRANSFORM_BYTES};
use crate::window_plan::{AlignedPart, WasmChoice};

/// The diff's trial of the wasm transform's forms on an old and a new module (the last
/// argument: whether the field-split layout may be tried).
pub(crate) type TryWasm<'a> = dyn Fn(&[u8], &[u8], bool) -> Result<Option<WasmChoice>> + 'a;

/// What the choice reads of the diff's state.
pub(crate) struct CompressedPairs<'a> {
    pub single_file: bool,
    /// (entry index, content) of each delta file.
    pub delta_files: &'a [(usize, &'a [u8])],
    /// (path, content) of each old file, in `tree.old_files` order.
    pub old_files: &'a [(&'a str, &'a [u8])],
    /// New path -> the old path it was renamed from.
    pub renamed: &'a HashMap<&'a str, &'a str>,
    /// What the reader understands.
    pub reader: Capabilities,
    /// The wasm transform's trial, where the diff uses that transform.
    pub wasm_transform: Option<&'a TryWasm<'a>>,
}

/// What [`store_decoded`] chose.
pub(crate) struct Chosen {
    /// Files stored as their content.
    pub files: u64,
    /// The segments of a single-file patch's one file, where the wasm transform's trials
    /// made them already.
    pub single_file_segments: Option<Vec<Vec<u8>>>,
}

/// Adds a transform row for each compressed delta file the reader can apply so (not one
/// already transformed, nor one whose old file another row reads split), its content (or the
/// content's normalized form) to `normalized`, its old file's content (in the wasm layout
/// where the content's form is in it) to `old_split` and the layout's aligned parts to
/// `split_parts`; the rows stay sorted by entry.
pub(crate) fn store_decoded(
    p: CompressedPairs<'_>,
    tree: &mut PatchTree,
    normalized: &mut HashMap<usize, Vec<u8>>,
    old_split: &mut HashMap<String, Vec<u8>>,
    split_parts: &mut HashMap<usize, Vec<AlignedPart>>,
) -> Result<Chosen> {
    let reader = p.reader;
    let mut chosen = Chosen { files: 0, single_file_segments: None };
    let deflate = reader.contains(Capability::DeflateTransform);
    let brotli = cfg!(feature = "brotli-transform") && reader.contains(Capability::BrotliTransform);
    if !reader.contains(Capability::WasmTransform) || !(deflate || brotli) {
        return Ok(chosen);
    }
    for &(i, data) in p.delta_files {
        let path = tree.entries[i].path.as_str();
        // Brotli has no magic number: a tree's file by its name, a single file by trial decoding.
        let coding = if Container::detect(data).is_some() {
            Coding::Deflate
        } else if p.single_file || coding_of_path(path) == Some(manifest::Coding::Brotli) {
            Coding::Brotli
        } else {
            continue;
        };
        if normalized.contains_key(&i) || !(if coding == Coding::Brotli { brotli } else { deflate }) {
            continue;
        }
        let old_path = if p.single_file {
            p.old_files.first().map(|(o, _)| *o)
        } else if p.old_files.iter().any(|(o, _)| *o == path) {
            Some(path)
        } else {
            p.renamed.get(path).copied()
        };
        let Some(old_path) = old_path else { continue };
        // A row naming a renamed file's old file is a split reference (§2.8.1).
        let renamed = old_path != path && !p.single_file;
        if old_split.contains_key(old_path) || (renamed && !reader.contains(Capability::WasmSplitReference)) {
            continue;
        }
        let Some(k) = p.old_files.iter().position(|(o, _)| *o == old_path) else { continue };
        if !tree.old_files[k].in_reference {
            continue;
        }
        let forms = match coding {
            Coding::Deflate => compressed_forms(p.old_files[k].1, data),
            Coding::Brotli => brotli_forms(p.old_files[k].1, data),
        };
        let Some((mut old_content, mut content, mut side_info)) = forms else { continue };
        // A compressed wasm module: its content through the wasm transform, as a wasm file's.
        let is_wasm = |d: &[u8]| d.starts_with(b"\0asm");
        if let (Some(try_wasm), true) = (p.wasm_transform, is_wasm(&old_content) && is_wasm(&content)) {
            if let Some(choice) = try_wasm(&old_content, &content, reader.contains(Capability::WasmSplitLayout))? {
                if let Some((bytes, inner)) = choice.transformed {
                    let with_inner = with_inner(&side_info, &inner);
                    if with_inner.len() as u64 <= MAX_WASM_SIDE_INFO && bytes.len() as u64 <= MAX_WASM_TRANSFORM_BYTES {
                        (side_info, content) = (with_inner, bytes);
                        if let Some((split, parts)) = choice.old_split {
                            old_content = split;
                            split_parts.insert(i, parts);
                        }
                        if p.single_file {
                            chosen.single_file_segments = Some(choice.segments);
                        }
                    }
                } else if p.single_file {
                    chosen.single_file_segments = Some(choice.segments);
                }
            }
        }
        tree.transforms.push(WasmTransformed { entry: i, normalized_size: content.len() as u64, side_info, split_reference: renamed.then_some(k) });
        normalized.insert(i, content);
        old_split.insert(old_path.to_string(), old_content);
        chosen.files += 1;
    }
    tree.transforms.sort_unstable_by_key(|w| w.entry);
    Ok(chosen)
}

/// Which transform of the two a file goes through.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Coding {
    Deflate,
    Brotli,
}

/// The writer's own side info with `inner` (the content's wasm transform side info) in it.
fn with_inner(side_info: &[u8], inner: &[u8]) -> Vec<u8> {
    if container(side_info) == Some(CONTAINER_BROTLI) {
        let mut info = BrotliSideInfo::decode(side_info).expect("the writer's own side info");
        info.inner = inner;
        return info.encode();
    }
    let mut info = SideInfo::decode(side_info).expect("the writer's own side info");
    info.inner = inner;
    info.encode()
}

/// The old file's content, and the new file's content and side info, where both are one whole
/// Brotli stream and the reference encoder reproduces the new one at a setting it tries
/// (edgepatch_transform_compressed::brotli); else the file is diffed as it is.
#[cfg(feature = "brotli-transform")]
fn brotli_forms(old: &[u8], new: &[u8]) -> Option<(Vec<u8>, Vec<u8>, Vec<u8>)> {
    use edgepatch_transform_compressed::brotli::{find_settings, MAX_CONTENT};
    use edgepatch_transform_compressed::decoded::unbrotli;
    let content = unbrotli(new, MAX_CONTENT).ok().filter(|c| c.len() >= 8)?;
    let old_content = unbrotli(old, MAX_CONTENT).ok().filter(|c| !c.is_empty())?;
    let settings = find_settings(&content, new)?;
    let side_info = BrotliSideInfo { old_content_len: old_content.len() as u64, inner: &[], settings, content_len: content.len() as u64 }.encode();
    Some((old_content, content, side_info))
}

#[cfg(not(feature = "brotli-transform"))]
fn brotli_forms(_old: &[u8], _new: &[u8]) -> Option<(Vec<u8>, Vec<u8>, Vec<u8>)> {
    None
}

/// The old file's content, and the new file's content and side info, where both are gzip or
/// zlib files the transform reads and the side info is small beside the file (an encoder
/// preflate predicts poorly, such as zopfli, costs corrections near the file's size: such a
/// file is diffed as it is).
fn compressed_forms(old: &[u8], new: &[u8]) -> Option<(Vec<u8>, Vec<u8>, Vec<u8>)> {
    let old_content = inflate_whole(old, WHOLE_CONTENT as u64).ok()?;
    let d = decode(new, old_content.len() as u64).ok()?;
    let fits = (8..=MAX_WASM_TRANSFORM_BYTES).contains(&(d.content.len() as u64)) && (d.side_info.len() as u64) <= MAX_WASM_SIDE_INFO;
    (fits && !old_content.is_empty() && d.side_info.len() < new.len() / 4).then_some((old_content, d.content, d.side_info))
}
