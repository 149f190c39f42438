//! The sink that writes a new build: into a staging path beside OUT, renamed
//! to OUT only when the whole build is written, verified and on stable
//! storage. Nothing is read or written through a link: every path is
//! resolved beneath the staging directory with no link followed
//! (`BuildDir`), and the build's own links are created last, after every
//! file and copy, so none exists while anything is written.

use std::ffi::OsString;
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use edgepatch_core::BuildSink;

use crate::build_dir::{BuildDir, PathBeneath};
use crate::build_files::reserve_descriptors;
use crate::large_file_writer::LargeFileWriter;
use crate::unchanged_copies::UnchangedCopies;

/// Files up to this size are gathered whole; larger ones are written in
/// pieces of this size as they arrive.
const WRITE_BUFFER: usize = 256 << 10;

/// Writes the new build into a staging path beside OUT; `commit` syncs it and
/// renames it to OUT, dropping it uncommitted removes it. OUT must not exist.
///
/// A file whose whole content fits in the write buffer is opened only once it
/// is complete, and written with one call. A larger file is written on a
/// second thread while the applier fills the next buffer (`LargeFileWriter`),
/// and unchanged files are copied on another (`UnchangedCopies`). (Small files are not handed over: session 3 measured
/// that slower, 128 ms against 74 ms on three-tree, largely because the
/// descriptor table grew while two threads shared it; see `reserve_descriptors`.)
pub struct StagedOutput {
    /// OUT's parent directory: the staging area is made, renamed and synced in it.
    parent: Arc<BuildDir>,
    staging_name: OsString,
    out_name: OsString,
    /// The staging directory of a tree, once its first entry arrived.
    tree: Option<Arc<BuildDir>>,
    single_file: Option<bool>,
    /// The file being written: its place and mode (it is opened when its
    /// content outgrows the buffer, by the writing thread, or when complete).
    current: Option<(PathBeneath, u32)>,
    /// One write buffer for all files (a buffer per file would cost an
    /// allocation and its page faults for every small file of a tree).
    buffer: Vec<u8>,
    /// The old build's root (a directory, or a single file) and, once a copy
    /// needs it, the directory its paths are resolved in.
    old_root: PathBuf,
    old_dir: Option<Arc<BuildDir>>,
    /// The build's links (path, target), created at `commit`.
    links: Vec<(String, String)>,
    copies: UnchangedCopies,
    /// The thread writing the current file, once it outgrew the buffer.
    writer: Option<LargeFileWriter>,
    /// The applier's scratch space (`BuildSink::write_scratch`): a nameless file beside the
    /// staging area, made at its first write, gone when it is closed.
    scratch: Option<File>,
    committed: bool,
    /// `BuildSink::trusts_side_infos`: `apply --trust-patch` (a patch the caller made).
    pub trust_side_infos: bool,
}

/// Creates the file at `at` (which must not exist) with exactly `mode`.
pub(crate) fn create_new_file(at: &PathBeneath, mode: u32) -> io::Result<File> {
    let f = at.dir.create_file(&at.rel, mode)?;
    // The umask must not change what the patch says; skip the call when it would not.
    if process_umask().is_none_or(|umask| umask & mode != 0) {
        crate::platform::set_mode(&f, mode)?;
    }
    Ok(f)
}

fn write_new_file(at: &PathBeneath, mode: u32, data: &[u8]) -> io::Result<()> {
    create_new_file(at, mode)?.write_all(data)
}

static UMASK: std::sync::OnceLock<u32> = std::sync::OnceLock::new();

/// The umask read by [`read_umask`] at start, if it was.
fn process_umask() -> Option<u32> {
    UMASK.get().copied()
}

/// Reads the process umask (setting and restoring it: call before any thread starts).
pub fn read_umask() {
    if let Some(mask) = crate::platform::umask() {
        let _ = UMASK.set(mask);
    }
}

impl StagedOutput {
    /// Stages OUT; unchanged files are copied from the old build at
    /// `old_root`. `descriptors`: how many files the process may hold open at
    /// once (the table is grown for them now, before any thread starts: see
    /// `reserve_descriptors`).
    pub fn new(out: &Path, old_root: &Path, descriptors: usize) -> io::Result<Self> {
        if fs::symlink_metadata(out).is_ok() {
            return Err(io::Error::new(io::ErrorKind::AlreadyExists, format!("{} already exists", out.display())));
        }
        let name = out.file_name().ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "output path has no file name"))?;
        let prefix = format!(".{}.edgepatch-staging-", name.to_string_lossy());
        remove_abandoned_staging(out, &prefix);
        let parent_path = match out.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let parent = Arc::new(BuildDir::open(parent_path).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", parent_path.display())))?);
        reserve_descriptors(descriptors);
        Ok(StagedOutput {
            parent,
            staging_name: format!("{prefix}{}", std::process::id()).into(),
            out_name: name.to_os_string(),
            tree: None,
            single_file: None,
            current: None,
            buffer: Vec::with_capacity(WRITE_BUFFER),
            old_root: old_root.to_path_buf(),
            old_dir: None,
            links: Vec::new(),
            copies: UnchangedCopies::new(),
            writer: None,
            scratch: None,
            committed: false,
            trust_side_infos: false,
        })
    }

    /// The staging directory of a tree, made at the first entry.
    fn tree(&mut self) -> io::Result<Arc<BuildDir>> {
        if let Some(tree) = &self.tree {
            return Ok(Arc::clone(tree));
        }
        if self.single_file.is_some() {
            return Err(io::Error::other("a single-file build has exactly one entry"));
        }
        self.parent.create_dir(&self.staging_name)?;
        self.single_file = Some(false);
        Ok(Arc::clone(self.tree.insert(Arc::new(self.parent.open_dir(&self.staging_name)?))))
    }

    /// Where the new entry `path` goes ("": the single file itself).
    fn target(&mut self, path: &str) -> io::Result<PathBeneath> {
        if path.is_empty() {
            if self.single_file.is_some() {
                return Err(io::Error::other("a single-file build has exactly one entry"));
            }
            self.single_file = Some(true);
            return Ok(PathBeneath::new(&self.parent, self.staging_name.clone()));
        }
        Ok(PathBeneath::new(&self.tree()?, path))
    }

    /// Where the old file `path` is ("": the old build is that one file).
    fn old_file(&mut self, path: &str) -> io::Result<PathBeneath> {
        if let Some(dir) = &self.old_dir {
            return Ok(PathBeneath::new(dir, if path.is_empty() { self.old_root.file_name().unwrap_or_default().to_os_string() } else { path.into() }));
        }
        if path.is_empty() {
            let root = fs::canonicalize(&self.old_root)?;
            let (Some(parent), Some(name)) = (root.parent(), root.file_name()) else {
                return Err(io::Error::new(io::ErrorKind::InvalidInput, "the old build is not a file"));
            };
            self.old_root = root.clone();
            let dir = self.old_dir.insert(Arc::new(BuildDir::open(parent)?));
            return Ok(PathBeneath::new(dir, name.to_os_string()));
        }
        let dir = self.old_dir.insert(Arc::new(BuildDir::open(&self.old_root)?));
        Ok(PathBeneath::new(dir, path))
    }

    /// Creates the links, syncs everything to stable storage, then renames the
    /// staging area to OUT and syncs OUT's directory, so that after a crash
    /// or power loss OUT is either absent or complete.
    pub fn commit(mut self) -> io::Result<()> {
        // The applier waited for the copies before it checked the files
        // digest; this only joins the thread.
        self.copies.finish()?;
        match self.single_file {
            Some(true) => self.parent.sync_file(&self.staging_name)?,
            _ => {
                // A build with no entries at all is an empty directory.
                let tree = self.tree()?;
                for (path, target) in std::mem::take(&mut self.links) {
                    tree.create_symlink(&path, &target).map_err(|e| io::Error::new(e.kind(), format!("{path}: {e}")))?;
                }
                tree.sync_everything_beneath()?;
            }
        }
        self.parent.rename_new(&self.staging_name, &self.out_name)?;
        self.committed = true;
        self.parent.sync().map_err(|e| io::Error::new(e.kind(), format!("renamed into place, but its directory could not be synced: {e}")))
    }
}

/// Removes the staging areas that earlier applies to the same OUT left when
/// they were killed (SIGKILL, power loss): `.OUT.edgepatch-staging-PID` whose
/// process no longer runs. One still running (another apply to the same OUT)
/// is left alone. Best effort: what cannot be listed or removed stays.
fn remove_abandoned_staging(out: &Path, prefix: &str) {
    let dir = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let Ok(entries) = fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.strip_prefix(prefix)).and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if crate::platform::process_is_gone(pid) {
            let path = entry.path();
            let _ = fs::remove_dir_all(&path).or_else(|_| fs::remove_file(&path));
        }
    }
}

impl Drop for StagedOutput {
    fn drop(&mut self) {
        if !self.committed {
            self.writer = None;
            self.current = None;
            // Waits for the copy under way before the staging area goes.
            self.copies.stop();
            // remove_dir_all follows no link inside what it removes.
            let staging = self.parent.display(&self.staging_name);
            let _ = fs::remove_dir_all(&staging).or_else(|_| fs::remove_file(&staging));
        }
    }
}

impl BuildSink for StagedOutput {
    fn trusts_side_infos(&self) -> bool {
        self.trust_side_infos
    }

    fn create_directory(&mut self, path: &str) -> io::Result<()> {
        self.tree()?.create_dir(path)
    }

    fn create_symlink(&mut self, path: &str, target: &str) -> io::Result<()> {
        // Made at commit, after every file: no link exists while anything is
        // written, so none can redirect a write, whatever its target.
        self.tree()?;
        self.links.push((path.to_string(), target.to_string()));
        Ok(())
    }

    fn begin_file(&mut self, path: &str, executable: bool, _size: u64) -> io::Result<()> {
        // The delta files begin: every copy has been offered.
        self.copies.send()?;
        let at = self.target(path)?;
        self.current = Some((at, if executable { 0o755 } else { 0o644 }));
        self.buffer.clear();
        Ok(())
    }

    fn write_file(&mut self, mut data: &[u8]) -> io::Result<()> {
        let (at, mode) = self.current.as_ref().ok_or_else(|| io::Error::other("write outside a file"))?;
        // Full buffers go to the writing thread (started with the file's creation).
        while self.buffer.len() + data.len() > WRITE_BUFFER {
            let n = WRITE_BUFFER - self.buffer.len();
            self.buffer.extend_from_slice(&data[..n]);
            data = &data[n..];
            let writer = match &mut self.writer {
                Some(w) => w,
                None => self.writer.insert(LargeFileWriter::start(create_new_file(at, *mode)?, WRITE_BUFFER)?),
            };
            let full = std::mem::take(&mut self.buffer);
            self.buffer = writer.write(full)?;
        }
        self.buffer.extend_from_slice(data);
        Ok(())
    }

    fn copy_old_file(&mut self, from: &str, path: &str, executable: bool, size: u64) -> io::Result<bool> {
        let to = self.target(path)?;
        let from = self.old_file(from)?;
        self.copies.push(from, to, if executable { 0o755 } else { 0o644 }, size)?;
        Ok(true)
    }

    fn finish_copies(&mut self) -> io::Result<Vec<[u8; 32]>> {
        self.copies.finish()
    }

    fn write_scratch(&mut self, offset: u64, data: &[u8]) -> io::Result<bool> {
        let file = match &mut self.scratch {
            Some(file) => file,
            None => {
                let name = format!("{}.scratch", self.staging_name.to_string_lossy());
                let path = self.parent.display(name);
                let file = crate::platform::scratch_file(&path).map_err(|e| io::Error::new(e.kind(), format!("scratch file {}: {e}", path.display())))?;
                self.scratch.insert(file)
            }
        };
        crate::platform::write_all_at(file, data, offset)?;
        Ok(true)
    }

    fn read_scratch(&mut self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        match &self.scratch {
            Some(file) => crate::platform::read_exact_at(file, buf, offset),
            None => Err(io::Error::other("nothing was written to the scratch file")),
        }
    }

    fn finish_file(&mut self) -> io::Result<()> {
        let (at, mode) = self.current.take().ok_or_else(|| io::Error::other("finish outside a file"))?;
        if let Some(writer) = self.writer.take() {
            let last = std::mem::take(&mut self.buffer);
            self.buffer = writer.finish(last)?;
            return Ok(());
        }
        write_new_file(&at, mode, &self.buffer)?;
        self.buffer.clear();
        Ok(())
    }
}
