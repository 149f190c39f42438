//! `edgepatch diff`: a patch from two builds, in memory or in bounded memory.

use std::time::Instant;

use serde_json::json;

use edgepatch_core::{diff_builds, DiffOptions};

use super::write_atomically;
use crate::build_files::{self, read_build};
use crate::cli_error::{CliError, Refusal, ResultExt};
use crate::progress::Progress;
use crate::{bounded_diff, portable_names, timing, Cli, DiffArgs};

/// Make PATCH from OLD and NEW: in memory, or in bounded memory (`--bounded`, or OLD over 1 GiB).
pub(crate) fn run(cli: &Cli, args: &DiffArgs) -> Result<(), CliError> {
    let DiffArgs { old, new, patch, level, threads, strict_portable, bounded, old_budget, worker_text_windows, no_wasm_transform, reader } = args;
    let started = Instant::now();
    let automatic = !*bounded && bounded_diff::wanted(old).context("old")?;
    let stats = if *bounded || automatic {
        if automatic {
            eprintln!("edgepatch: old build over 1 GiB: diffing in bounded memory (as --bounded)");
        }
        let paths = build_files::list_paths(new).context("new")?;
        check_portable(paths.iter().map(String::as_str), *strict_portable)?;
        let bar = Progress::new(cli, 0, "diff (patch bytes)");
        let opts = bounded_diff::BoundedOptions {
            level: *level,
            wasm_transform: !*no_wasm_transform,
            old_budget: *old_budget << 20,
            deep_text_windows: !*worker_text_windows,
            // As the in-memory diff: at level 19 or above. The Worker tries LZMA at
            // its level, in window segments only up to what its isolate affords.
            lzma_windows: if *worker_text_windows {
                edgepatch_core::generate::ISOLATE_LZMA_WINDOW_LIMIT
            } else if *level >= 19 {
                edgepatch_core::patch_format::MAX_LZMA_DICTIONARY
            } else {
                0
            },
            lzma_streams: *worker_text_windows || *level >= 19,
            threads: threads.unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)),
            trace: timing::from_env(),
            reader: *reader,
        };
        let stats = bounded_diff::diff_bounded(old, new, patch, &opts, &|n| bar.set_position(n))?;
        bar.finish();
        stats
    } else {
        let old_build = read_build(old).context("old")?;
        let new_build = read_build(new).context("new")?;
        for (path, target) in new_build.links_leaving_build() {
            eprintln!("edgepatch: warning: new: link {path} -> {target} points outside the build (kept as a link; what it points at is not in the patch)");
        }
        check_portable(new_build.entries.iter().map(|e| e.path.as_str()), *strict_portable)?;
        let threads = threads.unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1));
        let opts =
            DiffOptions { level: *level, threads, wasm_transform: !*no_wasm_transform, trace: timing::from_env(), reader: *reader, ..DiffOptions::default() };
        let bar = Progress::new(cli, new_build.total_file_bytes(), "diff");
        let (bytes, stats) = diff_builds(&old_build, &new_build, &opts, &|done, total| {
            bar.set_length(total);
            bar.set_position(done)
        })?;
        bar.finish();
        write_atomically(patch, &bytes)?;
        stats
    };
    let secs = started.elapsed().as_secs_f64();
    let pct = 100.0 * stats.patch_bytes as f64 / stats.new_bytes.max(1) as f64;
    if cli.json {
        println!(
            "{}",
            json!({ "ok": true, "command": "diff", "patch_bytes": stats.patch_bytes, "new_bytes": stats.new_bytes,
                "patch_percent_of_new": pct, "files": stats.new_files, "unchanged": stats.unchanged, "renamed": stats.renamed,
                "delta_files": stats.delta_files, "removed": stats.removed, "delta_bytes": stats.delta_bytes,
                "segments": stats.segments, "wasm_transformed": stats.wasm_transformed, "seconds": secs })
        );
    } else {
        println!(
            "patch {} bytes = {pct:.3}% of {} new bytes (saved {:.1}%); {} file{}: {} unchanged, {} renamed, {} diffed, {} removed; {secs:.2}s",
            stats.patch_bytes,
            stats.new_bytes,
            100.0 - pct,
            stats.new_files,
            if stats.new_files == 1 { "" } else { "s" },
            stats.unchanged,
            stats.renamed,
            stats.delta_files,
            stats.removed
        );
    }
    Ok(())
}

/// Reports the new build's paths that are not portable (portable_names.rs): warnings, or
/// with `strict` errors and a refusal.
fn check_portable<'a>(paths: impl Iterator<Item = &'a str>, strict: bool) -> Result<(), CliError> {
    let problems = portable_names::portability_problems(paths.filter(|p| !p.is_empty()));
    for p in &problems {
        eprintln!("edgepatch: {}: new: {p}", if strict { "error" } else { "warning" });
    }
    if strict && !problems.is_empty() {
        return Err(CliError::refused(
            Refusal::NotPortable,
            format!("new: {} path(s) are not portable (see above); rename them or drop --strict-portable", problems.len()),
        ));
    }
    Ok(())
}
