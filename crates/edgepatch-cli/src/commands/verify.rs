//! `edgepatch verify`: a build checked against its signature, the damage named.

use std::path::Path;

use serde_json::json;

use crate::build_files;
use crate::cli_error::{CliError, IoResultExt, Refusal};
use crate::Cli;

/// Check DIR against SIGNATURE: the damage found is printed, then refused.
pub(crate) fn run(cli: &Cli, dir: &Path, signature: &Path) -> Result<(), CliError> {
    let bytes = std::fs::read(signature).at_path(signature)?;
    let sig = edgepatch_core::signature::Signature::decode(&bytes).map_err(|e| CliError::core_at(signature, e))?;
    let problems = build_files::verify_path(dir, &sig)?;
    if cli.json {
        let list: Vec<_> = problems.iter().map(|(p, d)| json!({ "path": p, "problem": format!("{d:?}") })).collect();
        println!("{}", json!({ "ok": problems.is_empty(), "command": "verify", "entries": sig.entries.len(), "problems": list }));
    } else if problems.is_empty() {
        println!("verified: {} entries match the signature", sig.entries.len());
    } else {
        for (path, damage) in &problems {
            println!("{}: {}", if path.is_empty() { "(the file)" } else { path }, describe_damage(damage, sig.block_size));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(CliError::refused(Refusal::Damaged, format!("{} entries do not match the signature", problems.len())).at(dir))
    }
}

fn describe_damage(d: &edgepatch_core::signature::Damage, block_size: u32) -> String {
    use edgepatch_core::signature::Damage;
    match d {
        Damage::Missing => "missing".into(),
        Damage::WrongKind => "wrong kind (file, symlink or directory)".into(),
        Damage::WrongMode => "wrong executable bit".into(),
        Damage::WrongSize { expected, actual } => format!("size {actual}, expected {expected}"),
        Damage::DamagedBlocks(blocks) => {
            let shown: Vec<String> = blocks.iter().take(20).map(|b| b.to_string()).collect();
            format!("content damaged in {} block(s) of {block_size} bytes: {}{}", blocks.len(), shown.join(", "), if blocks.len() > 20 { ", ..." } else { "" })
        }
        Damage::WrongTarget => "symlink points elsewhere".into(),
        Damage::Unexpected => "not in the signature".into(),
    }
}
