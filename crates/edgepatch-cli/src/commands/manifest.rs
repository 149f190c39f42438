//! `edgepatch manifest`: a tree patch's binary manifest, its files' hashes from the new build.

use std::path::Path;

use serde_json::json;

use super::write_atomically;
use crate::build_files;
use crate::cli_error::{CliError, IoResultExt, Refusal};
use crate::platform;
use crate::Cli;

/// Write a tree patch's manifest, its files' hashes taken from NEW.
pub(crate) fn run(cli: &Cli, patch: &Path, manifest: &Path, old: &Path, new: &Path, from: &str, to: &str) -> Result<(), CliError> {
    let bytes = std::fs::read(patch).at_path(patch)?;
    let info = edgepatch_core::inspect::inspect_patch(bytes.as_slice()).map_err(|e| CliError::core_at(patch, e))?;
    if info.tree.single_file {
        return Err(CliError::bad_input("manifests describe trees; this patch is for a single file").at(patch));
    }
    let listing = build_files::old_listing(old)?;
    let tree = info.resolve_modes(listing, platform::MODES_KNOWN).map_err(|e| CliError::core_at(old, e))?;
    let mut hashes = vec![[0u8; 32]; tree.entries.len()];
    for (i, e) in tree.entries.iter().enumerate() {
        if let edgepatch_core::patch_format::TreeEntryKind::File { .. } = e.kind {
            let path = new.join(&e.path);
            let mut hasher = edgepatch_core::blake3::Hasher::new();
            hasher.update_reader(std::fs::File::open(&path).at_path(&path)?).at_path(&path)?;
            hashes[i] = *hasher.finalize().as_bytes();
        }
    }
    let m = edgepatch_core::inspect::patch_manifest(&tree, &info.layout, |i| hashes[i], *blake3_of(&bytes).as_bytes(), from, to).map_err(|_| {
        CliError::refused(Refusal::Digest, format!("{}: not the build this patch produces (its files do not match the patch's files digest)", new.display()))
            .at(new)
    })?;
    let encoded = m.encode()?;
    write_atomically(manifest, &encoded)?;
    if cli.json {
        println!("{}", json!({ "ok": true, "command": "manifest", "entries": m.entries.len(), "segments": m.segments.len(), "manifest_bytes": encoded.len() }));
    } else {
        println!("manifest: {} entries, {} segments, {} bytes", m.entries.len(), m.segments.len(), encoded.len());
    }
    Ok(())
}

fn blake3_of(bytes: &[u8]) -> edgepatch_core::blake3::Hash {
    edgepatch_core::blake3::hash(bytes)
}
