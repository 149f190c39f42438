//! `edgepatch diff --bounded`: a diff whose memory does not grow with the builds. Both
//! builds are signed by streaming their files (per-file BLAKE3 and 16 KiB block hashes),
//! then the core's `PatchGenerator` (the Worker's generator) makes the patch one 4 MiB
//! segment at a time, reading only the byte ranges it plans from disk: at most 8 MiB of
//! old data, the segment, 4 MiB of recent new data, one suffix array over the old spans
//! and one zstd context. The patch streams to a temporary file renamed into place.
//! Used for builds too large for the in-memory diff (which holds both builds and a suffix
//! array over all old data: about 7x the old build's size, at most 2 GiB of old data).

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use edgepatch_core::diff::DiffStats;
use edgepatch_core::generate::generate_patch;
use edgepatch_core::signature::DEFAULT_BLOCK_SIZE;
use edgepatch_core::{Error, Input};

use crate::build_files::{sign_path, total_file_bytes};
use crate::platform;

/// Old data (file bytes) above which `diff` uses the bounded diff without being asked.
pub const AUTOMATIC_ABOVE_BYTES: u64 = 1 << 30;

/// Whether `diff` should be bounded for this old build (its files' total size).
pub fn wanted(old: &Path) -> io::Result<bool> {
    Ok(total_file_bytes(old)? > AUTOMATIC_ABOVE_BYTES)
}

/// Opens a build's files as the generator asks for their ranges, keeping a few open.
struct RangeReader {
    root: PathBuf,
    /// Input::OldBuild or Input::NewBuild: which build a read error is about.
    input: Input,
    open: HashMap<String, File>,
}

impl RangeReader {
    fn new(root: &Path, input: Input) -> Self {
        RangeReader { root: root.to_path_buf(), input, open: HashMap::new() }
    }

    fn error(&self, full: &Path, e: io::Error) -> Error {
        let path = full.display().to_string();
        match self.input {
            Input::OldBuild => Error::OldRead { path, source: e },
            input => Error::Io { input, source: io::Error::new(e.kind(), format!("{path}: {e}")) },
        }
    }

    fn read(&mut self, path: &str, offset: u64, buf: &mut [u8]) -> edgepatch_core::Result<()> {
        let full = if path.is_empty() { self.root.clone() } else { self.root.join(path) };
        if !self.open.contains_key(path) {
            if self.open.len() >= 64 {
                self.open.clear();
            }
            // No link followed at the file itself (the signature listed it as a regular file).
            let f = platform::open_no_follow(&full).map_err(|e| self.error(&full, e))?;
            self.open.insert(path.to_string(), f);
        }
        platform::read_exact_at(&self.open[path], buf, offset)
            .map_err(|e| self.error(&full, io::Error::new(e.kind(), format!("{e} (did the build change during the diff?)"))))
    }
}

/// Makes PATCH from OLD to NEW in bounded memory; returns what the patch does.
pub fn diff_bounded(old: &Path, new: &Path, patch: &Path, level: i32, progress: &dyn Fn(u64)) -> Result<DiffStats, String> {
    let old_sig = sign_path(old, DEFAULT_BLOCK_SIZE).map_err(|e| format!("old: {e}"))?;
    let new_sig = sign_path(new, DEFAULT_BLOCK_SIZE).map_err(|e| format!("new: {e}"))?;
    let name = patch.file_name().ok_or("patch path has no file name")?;
    let tmp = patch.with_file_name(format!(".{}.edgepatch-tmp-{}", name.to_string_lossy(), std::process::id()));
    let result = (|| {
        let mut out = io::BufWriter::with_capacity(1 << 20, File::create(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?);
        let (mut old_files, mut new_files) = (RangeReader::new(old, Input::OldBuild), RangeReader::new(new, Input::NewBuild));
        let mut written = 0u64;
        let g = generate_patch(Some(&old_sig), &new_sig, level, &mut |p, o, b| old_files.read(p, o, b), &mut |p, o, b| new_files.read(p, o, b), &mut |bytes| {
            written += bytes.len() as u64;
            progress(written);
            out.write_all(bytes).map_err(|e| Error::Output { path: tmp.display().to_string(), source: e })
        })
        .map_err(|e| e.to_string())?;
        let file = out.into_inner().map_err(|e| format!("{}: {e}", tmp.display()))?;
        file.sync_all().map_err(|e| format!("{}: {e}", tmp.display()))?;
        std::fs::rename(&tmp, patch).map_err(|e| format!("{}: {e}", patch.display()))?;
        Ok(g.stats().clone())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}
