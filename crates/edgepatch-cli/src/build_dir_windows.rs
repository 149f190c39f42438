//! `build_dir.rs` for Windows: the same interface, resolving build paths beneath a
//! directory without following a link (a symlink or any other reparse point: junctions
//! too). Windows has no `openat`: each component of a path is checked with
//! `symlink_metadata` before use and the last one is opened as the reparse point itself
//! (`FILE_FLAG_OPEN_REPARSE_POINT`) and refused if it is one. Between the check and the
//! open another process could swap a component for a link; the Unix version has no such
//! window (descriptor-relative opens). Directories cannot be fsynced on Windows (NTFS
//! journals its metadata); files are.

use std::ffi::{OsStr, OsString};
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::windows::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const FILE_FLAG_OPEN_REPARSE_POINT: u32 = 0x0020_0000;
/// Needed to open a directory handle.
const FILE_FLAG_BACKUP_SEMANTICS: u32 = 0x0200_0000;

/// A file's place: a directory and a path beneath it.
#[derive(Clone)]
pub struct PathBeneath {
    pub dir: Arc<BuildDir>,
    pub rel: OsString,
}

impl PathBeneath {
    pub fn new(dir: &Arc<BuildDir>, rel: impl Into<OsString>) -> Self {
        PathBeneath { dir: Arc::clone(dir), rel: rel.into() }
    }

    /// For messages.
    pub fn full_path(&self) -> PathBuf {
        self.dir.display(&self.rel)
    }
}

pub struct BuildDir {
    path: PathBuf,
}

impl BuildDir {
    /// Opens the directory at `path` (which may itself be reached through a link: it is
    /// the user's choice; nothing beneath it is).
    pub fn open(path: &Path) -> io::Result<BuildDir> {
        if !fs::metadata(path)?.is_dir() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a directory"));
        }
        Ok(BuildDir { path: path.to_path_buf() })
    }

    /// `rel` as a path, for messages.
    pub fn display(&self, rel: impl AsRef<OsStr>) -> PathBuf {
        self.path.join(rel.as_ref())
    }

    /// Opens the directory `rel` beneath this one.
    pub fn open_dir(&self, rel: impl AsRef<OsStr>) -> io::Result<BuildDir> {
        let path = self.beneath(rel.as_ref(), true)?;
        if !fs::symlink_metadata(&path)?.is_dir() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a directory"));
        }
        Ok(BuildDir { path })
    }

    /// Opens the file `rel` for reading; the caller checks it is a regular file.
    pub fn open_file(&self, rel: impl AsRef<OsStr>) -> io::Result<File> {
        self.open_beneath(rel.as_ref(), OpenOptions::new().read(true))
    }

    /// Opens the existing file `rel` with `options`, the link itself if it is one
    /// (never followed), which is then refused.
    fn open_beneath(&self, rel: &OsStr, options: &mut OpenOptions) -> io::Result<File> {
        let path = self.beneath(rel, false)?;
        let f = options.custom_flags(FILE_FLAG_OPEN_REPARSE_POINT).open(path)?;
        if f.metadata()?.file_type().is_symlink() {
            return Err(link_in_the_way());
        }
        Ok(f)
    }

    /// Creates the file `rel`, which must not exist (nothing there is followed or
    /// replaced). `mode` is Unix's; Windows records no permission bits.
    pub fn create_file(&self, rel: impl AsRef<OsStr>, _mode: u32) -> io::Result<File> {
        let path = self.beneath(rel.as_ref(), false)?;
        OpenOptions::new().write(true).create_new(true).custom_flags(FILE_FLAG_OPEN_REPARSE_POINT).open(path)
    }

    pub fn create_dir(&self, rel: impl AsRef<OsStr>) -> io::Result<()> {
        fs::create_dir(self.beneath(rel.as_ref(), false)?)
    }

    /// Creates the link `rel` -> `target` (stored, never resolved). Windows needs the
    /// "create symbolic links" privilege (Developer Mode or an administrator) for it.
    pub fn create_symlink(&self, rel: impl AsRef<OsStr>, target: &str) -> io::Result<()> {
        let path = self.beneath(rel.as_ref(), false)?;
        let target = target.replace('/', "\\");
        std::os::windows::fs::symlink_file(&target, &path).map_err(|e| {
            if e.raw_os_error() == Some(1314) {
                // ERROR_PRIVILEGE_NOT_HELD
                io::Error::new(io::ErrorKind::PermissionDenied, "creating a symlink needs Windows Developer Mode or an administrator")
            } else {
                e
            }
        })
    }

    /// Renames `from` to `to`, both directly in this directory, failing if `to` exists
    /// (checked just before: Windows' rename would replace it).
    pub fn rename_new(&self, from: &OsStr, to: &OsStr) -> io::Result<()> {
        let (from, to) = (self.single(from)?, self.single(to)?);
        if fs::symlink_metadata(&to).is_ok() {
            return Err(io::Error::new(io::ErrorKind::AlreadyExists, "the destination exists"));
        }
        fs::rename(from, to)
    }

    /// Flushes the file `rel`'s data to stable storage. FlushFileBuffers needs a handle with
    /// write access: on a read-only one Windows answers "Access denied" (found running the
    /// tests under Wine, scripts/test-other-systems.sh).
    pub fn sync_file(&self, rel: impl AsRef<OsStr>) -> io::Result<()> {
        self.open_beneath(rel.as_ref(), OpenOptions::new().write(true))?.sync_all()
    }

    /// Directories cannot be flushed on Windows (NTFS journals their entries).
    pub fn sync(&self) -> io::Result<()> {
        Ok(())
    }

    /// Flushes every file beneath this directory to stable storage.
    pub fn sync_everything_beneath(&self) -> io::Result<()> {
        self.sync_each_beneath()
    }

    /// Flushes every regular file beneath this one.
    pub fn sync_each_beneath(&self) -> io::Result<()> {
        for entry in fs::read_dir(&self.path)? {
            let entry = entry?;
            let kind = entry.file_type()?;
            if kind.is_dir() {
                BuildDir { path: entry.path() }.sync_each_beneath()?;
            } else if kind.is_file() {
                OpenOptions::new().write(true).custom_flags(FILE_FLAG_OPEN_REPARSE_POINT | FILE_FLAG_BACKUP_SEMANTICS).open(entry.path())?.sync_all()?;
            }
        }
        Ok(())
    }

    fn single(&self, name: &OsStr) -> io::Result<PathBuf> {
        let s = name.to_str().ok_or_else(|| invalid("name is not UTF-8"))?;
        if s.contains('/') || s.contains('\\') {
            return Err(invalid("a name in one directory contains a separator"));
        }
        self.beneath(name, false)
    }

    /// `rel` joined beneath this directory, after checking that no component on the way
    /// (and, with `last_too`, the last one) is a link or other reparse point.
    fn beneath(&self, rel: &OsStr, last_too: bool) -> io::Result<PathBuf> {
        let rel = rel.to_str().ok_or_else(|| invalid("path is not UTF-8"))?;
        let parts: Vec<&str> = rel.split('/').collect();
        if rel.is_empty() || parts.iter().any(|c| c.is_empty() || *c == "." || *c == ".." || c.contains('\\') || c.contains(':') || c.contains('\0')) {
            return Err(invalid("not a relative path without '.', '..', '\\' or ':' components"));
        }
        let mut path = self.path.clone();
        for (i, part) in parts.iter().enumerate() {
            path.push(part);
            if i + 1 < parts.len() || last_too {
                match fs::symlink_metadata(&path) {
                    Ok(m) if m.file_type().is_symlink() => return Err(link_in_the_way()),
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::NotFound && i + 1 == parts.len() => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(path)
    }
}

fn invalid(why: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, why.to_string())
}

fn link_in_the_way() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, "a symlink is in the way (links are never followed)")
}
