//! `edgepatch sign`: a build's signature (hashes per file and per block).

use std::path::Path;

use serde_json::json;

use super::write_atomically;
use crate::build_files;
use crate::cli_error::CliError;
use crate::Cli;

/// Write DIR's signature.
pub(crate) fn run(cli: &Cli, dir: &Path, signature: &Path, block_size: u32) -> Result<(), CliError> {
    if !(edgepatch_core::signature::MIN_BLOCK_SIZE..=edgepatch_core::signature::MAX_BLOCK_SIZE).contains(&block_size) {
        return Err(CliError::usage(format!("block size {block_size} is not in 512..=16777216")));
    }
    let sig = build_files::sign_path(dir, block_size)?;
    let bytes = sig.encode();
    write_atomically(signature, &bytes)?;
    if cli.json {
        println!("{}", json!({ "ok": true, "command": "sign", "entries": sig.entries.len(), "signature_bytes": bytes.len(), "block_size": block_size }));
    } else {
        println!("signed {} entries, signature {} bytes", sig.entries.len(), bytes.len());
    }
    Ok(())
}
