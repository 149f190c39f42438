//! `edgepatch inspect`: what a patch holds, without applying it.

use std::fs::File;
use std::io::BufReader;
use std::path::Path;

use serde_json::json;

use crate::cli_error::{CliError, IoResultExt};
use crate::Cli;

/// Describe a patch without applying it.
pub(crate) fn run(cli: &Cli, patch: &Path) -> Result<(), CliError> {
    let f = File::open(patch).at_path(patch)?;
    let info = edgepatch_core::inspect::inspect_patch(BufReader::new(f)).map_err(|e| CliError::core_at(patch, e))?;
    print_patch_info(cli, &info);
    Ok(())
}

/// The names of an ops segment's streams stored as raw LZMA (docs/FORMAT.md §2.3).
fn lzma_streams(s: &edgepatch_core::patch_format::SegmentHeader) -> Vec<&'static str> {
    ["control", "diff", "extra"].into_iter().zip(s.lzma).filter(|(_, p)| p.is_some()).map(|(n, _)| n).collect()
}

fn print_patch_info(cli: &Cli, info: &edgepatch_core::inspect::PatchInfo) {
    use edgepatch_core::patch_format::{FileSource, Segment, SegmentHeader, TreeEntryKind, WindowCodec};
    use edgepatch_core::Capability;
    let (mut files, mut copies, mut deltas, mut links, mut dirs) = (0, 0, 0, 0, 0);
    for e in &info.tree.named {
        match &e.kind {
            TreeEntryKind::File { source: FileSource::Copy { .. }, .. } => {
                files += 1;
                copies += 1
            }
            TreeEntryKind::File { .. } => {
                files += 1;
                deltas += 1
            }
            TreeEntryKind::Symlink { .. } => links += 1,
            TreeEntryKind::Directory => dirs += 1,
        }
    }
    let ops_sum = |f: fn(&SegmentHeader) -> u64| info.layout.segments.iter().map(|s| if let Segment::Ops(h) = s { f(h) } else { 0 }).sum::<u64>();
    let (ctrl, diff, extra) = (ops_sum(|s| s.ctrl_comp), ops_sum(|s| s.diff_comp), ops_sum(|s| s.extra_comp));
    let window: u64 = info.layout.segments.iter().map(|s| if let Segment::Window(w) = s { w.comp_len } else { 0 }).sum();
    let lzma_windows = info.layout.segments.iter().filter(|s| matches!(s, Segment::Window(w) if w.codec != WindowCodec::Zstd)).count();
    let lzma_ops = info.layout.segments.iter().filter(|s| matches!(s, Segment::Ops(h) if h.lzma.iter().any(Option::is_some))).count();
    let needs = info.required_capabilities();
    if cli.json {
        let segments: Vec<_> = info
            .layout
            .segments
            .iter()
            .map(|s| match s {
                Segment::Ops(s) => json!({ "kind": "ops", "new_bytes": s.new_len, "control": [s.ctrl_raw, s.ctrl_comp],
                "diff": [s.diff_raw, s.diff_comp], "extra": [s.extra_raw, s.extra_comp],
                "lzma": lzma_streams(s) }),
                Segment::Window(w) => json!({ "kind": "window", "new_bytes": w.new_len, "window_bytes": w.window_len(),
                "spans": w.spans.len(), "compressed": w.comp_len, "codec": if w.codec == WindowCodec::Zstd { "zstd" } else { "lzma" } }),
            })
            .collect();
        println!(
            "{}",
            json!({ "ok": true, "format_version": info.version, "single_file": info.tree.single_file, "patch_bytes": info.layout.patch_bytes,
            "kept": info.tree.kept(), "files": files, "copied": copies, "delta_files": deltas, "symlinks": links, "directories": dirs,
            "old_files": info.tree.old_table.len(), "reference_files": info.tree.old_table.iter().filter(|f| f.1).count(), "delta_bytes": info.tree.delta_bytes(),
            "wasm_transformed": info.tree.transforms.len(), "wasm_side_info_bytes": info.tree.transforms.iter().map(|t| t.side_info.len()).sum::<usize>(),
            "window_reach": info.tree.window_back(), "window_reach_declared": info.tree.window_reach.is_some(),
            "reader_needs": needs.to_string(), "reader_needs_hex": needs.to_hex(),
            "compressed": { "control": ctrl, "diff": diff, "extra": extra, "window": window }, "segments": segments })
        );
    } else {
        println!("edgepatch patch, format version {}, {} bytes, checksum OK", info.version, info.layout.patch_bytes);
        println!("a reader needs: {needs} (docs/FORMAT.md §5)");
        if !info.tree.single_file {
            println!("tree: {} entries of the old build kept as they are (not named)", info.tree.kept());
        }
        println!(
            "{}: {files} files ({copies} copied from old, {deltas} from the delta stream), {links} symlinks, {dirs} directories",
            if info.tree.single_file { "single file" } else { "named" }
        );
        println!(
            "reads {} old files, {} of them as reference data for the delta",
            info.tree.old_table.len(),
            info.tree.old_table.iter().filter(|f| f.1).count()
        );
        println!(
            "delta stream: {} bytes in {} segments; compressed control {ctrl}, diff {diff}, extra {extra}, window segments {window} bytes",
            info.tree.delta_bytes(),
            info.layout.segments.len()
        );
        if lzma_windows + lzma_ops > 0 {
            println!("LZMA segments (docs/FORMAT.md §2.3, §2.6): {lzma_windows} window segments, {lzma_ops} ops segments with LZMA streams");
        }
        // What an applier keeps of the produced delta bytes (docs/FORMAT.md §2.6).
        match info.tree.window_reach {
            Some(reach) => println!("window segments reach back {reach} bytes (declared; an applier keeps that much of the delta stream)"),
            None => println!("window segments reach back at most {} bytes (the base reach)", info.tree.window_back()),
        }
        if !info.tree.transforms.is_empty() {
            // What each file's side info needs a reader to understand says how it is stored.
            let needing =
                |c: Capability| info.tree.transforms.iter().filter(|t| edgepatch_core::transforms::required_by_side_info(&t.side_info).contains(c)).count();
            println!(
                "wasm modules stored normalized: {}, {} of them in the field-split layout, {} with DWARF addresses rewritten (side info {} bytes before compression; docs/FORMAT.md §2.8)",
                info.tree.transforms.len(),
                needing(Capability::WasmSplitLayout),
                needing(Capability::WasmDwarfAddresses),
                info.tree.transforms.iter().map(|t| t.side_info.len()).sum::<usize>()
            );
        }
    }
}
