//! The sink that writes a new build: into a staging path beside OUT, renamed
//! to OUT only when the whole build is written and verified.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use edgepatch_core::BuildSink;

use crate::large_file_writer::LargeFileWriter;
use crate::unchanged_copies::UnchangedCopies;

/// Files up to this size are gathered whole; larger ones are written in
/// pieces of this size as they arrive.
const WRITE_BUFFER: usize = 256 << 10;

/// Writes the new build into a staging path beside OUT; `commit` renames it to
/// OUT, dropping it uncommitted removes it. OUT must not exist.
///
/// A file whose whole content fits in the write buffer is opened only once it
/// is complete, and written with one call. With `use_second_thread`, a larger
/// file is written on a second thread while the applier fills the next
/// buffer (`LargeFileWriter`), and unchanged files are copied on another
/// (`UnchangedCopies`). (Small files are not handed over: session 3 measured
/// that slower, 128 ms against 74 ms on three-tree, largely because the
/// descriptor table grew while two threads shared it; see `reserve_descriptors`.)
pub struct StagedOutput {
    staging: PathBuf,
    out: PathBuf,
    single_file: Option<bool>,
    /// The file being written: its path and mode, and its handle once its
    /// content outgrew the buffer (until then nothing is opened).
    current: Option<(PathBuf, u32, Option<File>)>,
    /// One write buffer for all files (a buffer per file would cost an
    /// allocation and its page faults for every small file of a tree).
    buffer: Vec<u8>,
    /// The old build's root and the thread copying its unchanged files.
    copies: Option<(PathBuf, UnchangedCopies)>,
    /// With `use_second_thread`: how many descriptors apply may hold (for
    /// `reserve_descriptors`), and the thread writing the current large file.
    descriptors: Option<usize>,
    writer: Option<LargeFileWriter>,
    committed: bool,
}

pub(crate) fn create_new_file(path: &Path, mode: u32) -> io::Result<File> {
    // create_new: never follows or replaces anything already there.
    let f = OpenOptions::new().write(true).create_new(true).mode(mode).open(path)?;
    // The umask must not change what the patch says; skip the call when it would not.
    if process_umask().is_none_or(|umask| umask & mode != 0) {
        f.set_permissions(fs::Permissions::from_mode(mode))?;
    }
    Ok(f)
}

fn write_new_file(path: &Path, mode: u32, data: &[u8]) -> io::Result<()> {
    create_new_file(path, mode)?.write_all(data)
}

static UMASK: std::sync::OnceLock<u32> = std::sync::OnceLock::new();

/// The umask read by [`read_umask`] at start, if it was.
fn process_umask() -> Option<u32> {
    UMASK.get().copied()
}

/// Reads the process umask (setting and restoring it: call before any thread starts).
pub fn read_umask() {
    // SAFETY: umask only swaps the process's file mode mask; restored at once.
    let mask = unsafe {
        let mask = libc::umask(0o022);
        libc::umask(mask);
        mask
    };
    let _ = UMASK.set(mask as u32);
}

impl StagedOutput {
    pub fn new(out: &Path) -> io::Result<Self> {
        if fs::symlink_metadata(out).is_ok() {
            return Err(io::Error::new(io::ErrorKind::AlreadyExists, format!("{} already exists", out.display())));
        }
        let name = out.file_name().ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "output path has no file name"))?;
        let prefix = format!(".{}.edgepatch-staging-", name.to_string_lossy());
        remove_abandoned_staging(out, &prefix);
        let staging = out.with_file_name(format!("{prefix}{}", std::process::id()));
        Ok(StagedOutput {
            staging,
            out: out.to_path_buf(),
            single_file: None,
            current: None,
            buffer: Vec::with_capacity(WRITE_BUFFER),
            copies: None,
            descriptors: None,
            writer: None,
            committed: false,
        })
    }

    /// Uses a second core: takes the copies of unchanged files from the old
    /// build at `old_root` (see `BuildSink::copy_old_file`), and writes large
    /// files from a second thread. `descriptors`: how many files the process
    /// may hold open at once.
    pub fn use_second_thread(&mut self, old_root: &Path, descriptors: usize) {
        self.copies = Some((old_root.to_path_buf(), UnchangedCopies::new(descriptors)));
        self.descriptors = Some(descriptors);
    }

    fn target(&mut self, path: &str) -> io::Result<PathBuf> {
        if path.is_empty() {
            self.single_file = Some(true);
            return Ok(self.staging.clone());
        }
        if self.single_file.is_none() {
            fs::create_dir(&self.staging)?;
            self.single_file = Some(false);
        }
        Ok(self.staging.join(path))
    }

    pub fn commit(mut self) -> io::Result<()> {
        // The applier waited for the copies before it checked the files
        // digest; dropping the thread's handle here only joins it.
        self.copies = None;
        if self.single_file.is_none() {
            // A build with no entries at all is an empty directory.
            fs::create_dir(&self.staging)?;
        }
        fs::rename(&self.staging, &self.out)?;
        self.committed = true;
        Ok(())
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
        let Some(pid) = name.to_str().and_then(|n| n.strip_prefix(prefix)).and_then(|p| p.parse::<libc::pid_t>().ok()) else {
            continue;
        };
        // SAFETY: kill with signal 0 only checks whether the process exists.
        let gone = pid > 0 && unsafe { libc::kill(pid, 0) } != 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        if gone {
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
            self.copies = None;
            let _ = fs::remove_dir_all(&self.staging).or_else(|_| fs::remove_file(&self.staging));
        }
    }
}

impl BuildSink for StagedOutput {
    fn create_directory(&mut self, path: &str) -> io::Result<()> {
        let p = self.target(path)?;
        fs::create_dir(p)
    }

    fn create_symlink(&mut self, path: &str, target: &str) -> io::Result<()> {
        let p = self.target(path)?;
        std::os::unix::fs::symlink(target, p)
    }

    fn begin_file(&mut self, path: &str, executable: bool, _size: u64) -> io::Result<()> {
        if let Some((_, copies)) = &mut self.copies {
            // The delta files begin: every copy has been offered.
            copies.send()?;
        }
        let p = self.target(path)?;
        self.current = Some((p, if executable { 0o755 } else { 0o644 }, None));
        self.buffer.clear();
        Ok(())
    }

    fn write_file(&mut self, mut data: &[u8]) -> io::Result<()> {
        let (path, mode, file) = self.current.as_mut().ok_or_else(|| io::Error::other("write outside a file"))?;
        if self.buffer.len() + data.len() <= WRITE_BUFFER {
            self.buffer.extend_from_slice(data);
            return Ok(());
        }
        let Some(descriptors) = self.descriptors else {
            let file = match file {
                Some(f) => f,
                None => file.insert(create_new_file(path, *mode)?),
            };
            file.write_all(&self.buffer)?;
            self.buffer.clear();
            if data.len() >= WRITE_BUFFER {
                return file.write_all(data);
            }
            self.buffer.extend_from_slice(data);
            return Ok(());
        };
        // Full buffers go to the writing thread (its first one, created with the file).
        while self.buffer.len() + data.len() > WRITE_BUFFER {
            let n = WRITE_BUFFER - self.buffer.len();
            self.buffer.extend_from_slice(&data[..n]);
            data = &data[n..];
            let writer = match &mut self.writer {
                Some(w) => w,
                None => self.writer.insert(LargeFileWriter::start(create_new_file(path, *mode)?, WRITE_BUFFER, descriptors)?),
            };
            let full = std::mem::take(&mut self.buffer);
            self.buffer = writer.write(full)?;
        }
        self.buffer.extend_from_slice(data);
        Ok(())
    }

    fn copy_old_file(&mut self, from: &str, path: &str, executable: bool, size: u64) -> io::Result<bool> {
        if self.copies.is_none() {
            return Ok(false);
        }
        let to = self.target(path)?;
        let (old_root, copies) = self.copies.as_mut().expect("checked above");
        let from = if from.is_empty() { old_root.clone() } else { old_root.join(from) };
        copies.push(from, to, if executable { 0o755 } else { 0o644 }, size)?;
        Ok(true)
    }

    fn finish_copies(&mut self) -> io::Result<Vec<[u8; 32]>> {
        match &mut self.copies {
            Some((_, copies)) => copies.finish(),
            None => Ok(Vec::new()),
        }
    }

    fn finish_file(&mut self) -> io::Result<()> {
        let (path, mode, file) = self.current.take().ok_or_else(|| io::Error::other("finish outside a file"))?;
        if let Some(writer) = self.writer.take() {
            let last = std::mem::take(&mut self.buffer);
            self.buffer = writer.finish(last)?;
            return Ok(());
        }
        match file {
            Some(mut f) => f.write_all(&self.buffer)?,
            None => write_new_file(&path, mode, &self.buffer)?,
        }
        self.buffer.clear();
        Ok(())
    }
}
