//! `edgepatch apply`: a patch applied to an old build into a new directory or file.

use std::fs::File;
use std::path::Path;
use std::time::Instant;

use serde_json::json;

use edgepatch_core::{apply_patch, check_patch_checksum};

use crate::build_files::OldBuildFiles;
use crate::cli_error::{CliError, IoResultExt};
use crate::platform;
use crate::progress::Progress;
use crate::staged_output::StagedOutput;
use crate::Cli;

/// Apply PATCH to OLD into OUT, which appears only once every file verified.
pub(crate) fn run(cli: &Cli, old: &Path, patch: &Path, out: &Path, trust_patch: bool) -> Result<(), CliError> {
    let started = Instant::now();
    if trust_patch {
        // Side infos go to decoders that trust them (preflate) only once the whole patch is
        // checked: a patch damaged on disk is refused before anything is written.
        check_patch_checksum(File::open(patch).at_path(patch)?).map_err(|e| apply_failed(e, old, patch, out))?;
    }
    let patch_file = File::open(patch).at_path(patch)?;
    let patch_len = patch_file.metadata().map(|m| m.len()).unwrap_or(0);
    let mut old_files = OldBuildFiles::new(old);
    let mut staged = StagedOutput::new(out, old_files.root(), old_files.descriptors_needed()).map_err(|e| CliError::from(e).at(out))?;
    staged.trust_side_infos = trust_patch;
    let bar = Progress::new(cli, patch_len, "apply");
    let summary =
        apply_patch(patch_file, &mut old_files, &mut staged, &mut |p| bar.set_position(p.patch_bytes_read)).map_err(|e| apply_failed(e, old, patch, out))?;
    staged.commit().at_path(out)?;
    bar.finish();
    let secs = started.elapsed().as_secs_f64();
    if cli.json {
        println!(
            "{}",
            json!({ "ok": true, "command": "apply", "entries": summary.entries, "files": summary.files,
            "bytes_written": summary.bytes_written, "patch_bytes": summary.patch_bytes, "seconds": secs })
        );
    } else {
        println!("applied: {} entries, {} files, {} bytes written, all verified; {secs:.2}s", summary.entries, summary.files, summary.bytes_written);
    }
    Ok(())
}

/// An apply's error, naming the file it is about: the old build (OLD), the output (OUT) or
/// the patch.
fn apply_failed(e: edgepatch_core::Error, old: &Path, patch: &Path, out: &Path) -> CliError {
    use edgepatch_core::error::ErrorKind as K;
    let kind = e.kind();
    let e = platform::apply_error(e, old);
    match kind {
        K::Output => e.at(out),
        K::OldBuild | K::Digest | K::Unvouched | K::Invalid => e,
        _ => e.at(patch),
    }
}
