//! The subcommands, one file each (`edgepatch diff` in diff.rs...), and what their output
//! shares: files written whole or not at all (progress is in progress.rs).

pub(crate) mod apply;
pub(crate) mod channel;
pub(crate) mod diff;
pub(crate) mod heal;
pub(crate) mod inspect;
pub(crate) mod key;
pub(crate) mod keygen;
pub(crate) mod manifest;
pub(crate) mod publish;
pub(crate) mod sign;
pub(crate) mod site;
pub(crate) mod update;
pub(crate) mod verify;

use std::path::Path;

use crate::cli_error::CliError;

/// Writes via a temporary file and rename, so PATCH appears whole or not at all.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), CliError> {
    let name = path.file_name().ok_or_else(|| CliError::usage("patch path has no file name"))?;
    let tmp = path.with_file_name(format!(".{}.edgepatch-tmp-{}", name.to_string_lossy(), std::process::id()));
    std::fs::write(&tmp, bytes).and_then(|_| std::fs::rename(&tmp, path)).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        CliError::io(path, e)
    })
}
