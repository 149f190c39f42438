//! A directory opened once, in which build paths are resolved without ever
//! following a symlink. Links are data in a build: one may point anywhere
//! (`fonts/sans.ttf -> ../../fonts/...`), and a chain (`x -> .`,
//! `s -> x/..`) can point above its build although each step looks inside.
//! So apply never reads or writes through one: every path is resolved
//! beneath this directory's descriptor with no link in any component,
//! by `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` where the kernel has it
//! (Linux 5.6+), else component by component with `O_NOFOLLOW | O_DIRECTORY`.
//! A link in the way is an error, never followed.

use std::ffi::{CString, OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

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
    fd: OwnedFd,
    /// For messages only: paths are resolved from `fd`.
    path: PathBuf,
}

impl BuildDir {
    /// Opens the directory at `path` (which may itself be reached through a
    /// link: it is the user's choice; nothing beneath it is).
    pub fn open(path: &Path) -> io::Result<BuildDir> {
        let c = CString::new(path.as_os_str().as_bytes()).map_err(|_| invalid("path contains a NUL byte"))?;
        // SAFETY: `c` is a valid C string; the descriptor returned is owned below.
        let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC) };
        Ok(BuildDir { fd: owned(fd)?, path: path.to_path_buf() })
    }

    /// `rel` as a path, for messages.
    pub fn display(&self, rel: impl AsRef<OsStr>) -> PathBuf {
        self.path.join(rel.as_ref())
    }

    /// Opens the directory `rel` beneath this one.
    pub fn open_dir(&self, rel: impl AsRef<OsStr>) -> io::Result<BuildDir> {
        let rel = rel.as_ref();
        let fd = open_beneath(self.fd.as_fd(), rel, libc::O_RDONLY | libc::O_DIRECTORY, 0)?;
        Ok(BuildDir { fd, path: self.display(rel) })
    }

    /// Opens the file `rel` for reading; never blocks (a FIFO fails its read
    /// instead of waiting for a writer). The caller checks it is a regular file.
    pub fn open_file(&self, rel: impl AsRef<OsStr>) -> io::Result<File> {
        open_beneath(self.fd.as_fd(), rel.as_ref(), libc::O_RDONLY | libc::O_NONBLOCK, 0).map(File::from)
    }

    /// Creates the file `rel`, which must not exist (O_EXCL: nothing there is
    /// followed or replaced), with `mode` before the umask.
    pub fn create_file(&self, rel: impl AsRef<OsStr>, mode: u32) -> io::Result<File> {
        open_beneath(self.fd.as_fd(), rel.as_ref(), libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL, mode).map(File::from)
    }

    pub fn create_dir(&self, rel: impl AsRef<OsStr>) -> io::Result<()> {
        let (parent, name) = self.parent_of(rel.as_ref())?;
        let parent = parent.as_ref().map_or(self.fd.as_fd(), |p| p.as_fd());
        // SAFETY: a valid descriptor and C string.
        check(unsafe { libc::mkdirat(parent.as_raw_fd(), name.as_ptr(), 0o777) })
    }

    /// Creates the link `rel` -> `target`; the target is stored, never resolved.
    pub fn create_symlink(&self, rel: impl AsRef<OsStr>, target: &str) -> io::Result<()> {
        let (parent, name) = self.parent_of(rel.as_ref())?;
        let parent = parent.as_ref().map_or(self.fd.as_fd(), |p| p.as_fd());
        let target = CString::new(target).map_err(|_| invalid("symlink target contains a NUL byte"))?;
        // SAFETY: a valid descriptor and C strings.
        check(unsafe { libc::symlinkat(target.as_ptr(), parent.as_raw_fd(), name.as_ptr()) })
    }

    /// Renames `from` to `to`, both directly in this directory, failing if
    /// `to` exists (where the system can tell atomically: Linux's
    /// RENAME_NOREPLACE; elsewhere the caller checked just before).
    pub fn rename_new(&self, from: &OsStr, to: &OsStr) -> io::Result<()> {
        let (from, to) = (single_name(from)?, single_name(to)?);
        let fd = self.fd.as_raw_fd();
        #[cfg(target_os = "linux")]
        {
            // SAFETY: valid descriptors and C strings.
            let r = unsafe { libc::syscall(libc::SYS_renameat2, fd, from.as_ptr(), fd, to.as_ptr(), libc::RENAME_NOREPLACE) };
            match check(r as libc::c_int) {
                // A file system or kernel without it: the plain rename below.
                Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOSYS)) => {}
                other => return other,
            }
        }
        // SAFETY: valid descriptors and C strings.
        check(unsafe { libc::renameat(fd, from.as_ptr(), fd, to.as_ptr()) })
    }

    /// Flushes the file `rel`'s data to stable storage (a read-only descriptor will do here).
    pub fn sync_file(&self, rel: impl AsRef<OsStr>) -> io::Result<()> {
        self.open_file(rel)?.sync_all()
    }

    /// Flushes this directory's entries to stable storage.
    pub fn sync(&self) -> io::Result<()> {
        let fd = self.fd.as_raw_fd();
        // Apple's fsync leaves the data in the drive's cache; F_FULLFSYNC
        // (what std's `sync_all` uses there) does not.
        #[cfg(target_vendor = "apple")]
        // SAFETY: fcntl on a descriptor we own.
        return check(unsafe { libc::fcntl(fd, libc::F_FULLFSYNC) });
        #[cfg(not(target_vendor = "apple"))]
        // SAFETY: fsync on a descriptor we own.
        check(unsafe { libc::fsync(fd) })
    }

    /// Flushes everything written to the file system holding this directory
    /// (files, directories, links) to stable storage: one call instead of
    /// one fsync per file, each of which would wait for its own journal
    /// commit (see BENCHMARKS.md, "Durability"). Elsewhere than Linux, every
    /// file and directory beneath it is fsynced in turn.
    pub fn sync_everything_beneath(&self) -> io::Result<()> {
        #[cfg(target_os = "linux")]
        {
            // SAFETY: syncfs on a descriptor we own.
            check(unsafe { libc::syncfs(self.fd.as_raw_fd()) })
        }
        #[cfg(not(target_os = "linux"))]
        {
            self.sync_each_beneath()
        }
    }

    /// fsyncs every regular file and directory beneath this one, then this one.
    #[cfg_attr(target_os = "linux", allow(dead_code))]
    pub fn sync_each_beneath(&self) -> io::Result<()> {
        // Names from the path; each is then opened beneath the descriptor, no link followed.
        for entry in std::fs::read_dir(&self.path)? {
            let entry = entry?;
            let kind = entry.file_type()?;
            if kind.is_dir() {
                self.open_dir(entry.file_name())?.sync_each_beneath()?;
            } else if kind.is_file() {
                self.sync_file(entry.file_name())?;
            }
        }
        self.sync()
    }

    /// The directory holding `rel` (None: this one) and `rel`'s last component.
    fn parent_of(&self, rel: &OsStr) -> io::Result<(Option<OwnedFd>, CString)> {
        check_relative(rel)?;
        let bytes = rel.as_bytes();
        match bytes.iter().rposition(|&b| b == b'/') {
            None => Ok((None, CString::new(bytes).map_err(|_| invalid("NUL in path"))?)),
            Some(i) => {
                let parent = open_beneath(self.fd.as_fd(), OsStr::from_bytes(&bytes[..i]), libc::O_RDONLY | libc::O_DIRECTORY, 0)?;
                Ok((Some(parent), CString::new(&bytes[i + 1..]).map_err(|_| invalid("NUL in path"))?))
            }
        }
    }
}

fn invalid(why: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, why.to_string())
}

fn check(r: libc::c_int) -> io::Result<()> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn owned(fd: libc::c_int) -> io::Result<OwnedFd> {
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor just returned to us, owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn single_name(name: &OsStr) -> io::Result<CString> {
    if name.as_bytes().contains(&b'/') {
        return Err(invalid("a name in one directory contains '/'"));
    }
    check_relative(name)?;
    CString::new(name.as_bytes()).map_err(|_| invalid("NUL in path"))
}

/// A path beneath a directory: relative, no empty, `.` or `..` component, no
/// NUL. Build paths always are (the core checks them); this is the last line.
fn check_relative(rel: &OsStr) -> io::Result<()> {
    let bytes = rel.as_bytes();
    if bytes.is_empty() || bytes.contains(&0) || bytes.split(|&b| b == b'/').any(|c| c.is_empty() || c == b"." || c == b"..") {
        return Err(invalid("not a relative path without '.' or '..' components"));
    }
    Ok(())
}

/// A link on the way, as the kernel reports it: ELOOP (O_NOFOLLOW, or
/// RESOLVE_NO_SYMLINKS) or, for O_DIRECTORY | O_NOFOLLOW on some systems, ENOTDIR.
fn link_in_the_way(e: io::Error) -> io::Error {
    if e.raw_os_error() == Some(libc::ELOOP) {
        io::Error::new(io::ErrorKind::InvalidInput, "a symlink is in the way (links are never followed)")
    } else {
        e
    }
}

/// Opens `rel` beneath `dir` with `flags`, following no link in any component.
fn open_beneath(dir: BorrowedFd, rel: &OsStr, flags: libc::c_int, mode: u32) -> io::Result<OwnedFd> {
    check_relative(rel)?;
    let flags = flags | libc::O_CLOEXEC | libc::O_NOFOLLOW;
    #[cfg(target_os = "linux")]
    if let Some(result) = openat2_beneath(dir, rel, flags, mode) {
        return result.map_err(link_in_the_way);
    }
    open_component_by_component(dir, rel, flags, mode).map_err(link_in_the_way)
}

/// Whether openat2 answered ENOSYS (or EPERM from a seccomp filter that does
/// not know it) once: then it is not tried again.
#[cfg(target_os = "linux")]
static OPENAT2_MISSING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// None when the kernel has no openat2.
#[cfg(target_os = "linux")]
fn openat2_beneath(dir: BorrowedFd, rel: &OsStr, flags: libc::c_int, mode: u32) -> Option<io::Result<OwnedFd>> {
    use std::sync::atomic::Ordering;
    if OPENAT2_MISSING.load(Ordering::Relaxed) {
        return None;
    }
    let c = match CString::new(rel.as_bytes()) {
        Ok(c) => c,
        Err(_) => return Some(Err(invalid("NUL in path"))),
    };
    // SAFETY: open_how is plain data (non_exhaustive: built from zeroes).
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = flags as u64;
    // The kernel refuses a mode without O_CREAT.
    how.mode = if flags & libc::O_CREAT != 0 { mode as u64 } else { 0 };
    how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS;
    // SAFETY: valid descriptor, C string and open_how of the size passed.
    let fd = unsafe { libc::syscall(libc::SYS_openat2, dir.as_raw_fd(), c.as_ptr(), &how as *const libc::open_how, std::mem::size_of::<libc::open_how>()) };
    if fd < 0 {
        let e = io::Error::last_os_error();
        if matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::EPERM)) {
            OPENAT2_MISSING.store(true, Ordering::Relaxed);
            return None;
        }
        return Some(Err(e));
    }
    Some(owned(fd as libc::c_int))
}

/// Walks `rel` one directory at a time (each opened `O_NOFOLLOW |
/// O_DIRECTORY`, so a link there fails) and opens the last component from the
/// directory reached, `O_NOFOLLOW` (in `flags`).
fn open_component_by_component(dir: BorrowedFd, rel: &OsStr, flags: libc::c_int, mode: u32) -> io::Result<OwnedFd> {
    let bytes = rel.as_bytes();
    let mut components = bytes.split(|&b| b == b'/').peekable();
    let mut held: Option<OwnedFd> = None;
    while let Some(component) = components.next() {
        let at = held.as_ref().map_or(dir.as_raw_fd(), |d| d.as_raw_fd());
        let name = CString::new(component).map_err(|_| invalid("NUL in path"))?;
        let last = components.peek().is_none();
        let (f, m) = if last { (flags, mode) } else { (libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC, 0) };
        // SAFETY: a valid descriptor and C string; the result is owned below.
        let fd = unsafe { libc::openat(at, name.as_ptr(), f, m as libc::c_uint) };
        held = Some(owned(fd)?);
    }
    held.ok_or_else(|| invalid("empty path"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::unix::fs::symlink;

    /// Every way a link could redirect a read or a write: as the last
    /// component, as a directory on the way, in a chain that climbs above the
    /// directory. Each is refused and the sentinel outside stays as it was.
    #[test]
    fn no_path_goes_through_a_link() {
        let tmp = tempfile::tempdir().unwrap();
        let sentinel = tmp.path().join("sentinel");
        std::fs::create_dir(&sentinel).unwrap();
        std::fs::write(sentinel.join("secret"), b"untouched").unwrap();
        let root = tmp.path().join("root");
        std::fs::create_dir_all(root.join("real")).unwrap();
        std::fs::write(root.join("real/file"), b"inside").unwrap();
        symlink("../sentinel", root.join("out")).unwrap();
        symlink(".", root.join("x")).unwrap();
        symlink("x/..", root.join("s")).unwrap();
        symlink("real", root.join("to_real")).unwrap();
        symlink("real/file", root.join("to_file")).unwrap();
        let dir = BuildDir::open(&root).unwrap();

        let mut content = String::new();
        dir.open_file("real/file").unwrap().read_to_string(&mut content).unwrap();
        assert_eq!(content, "inside");
        for through in ["out/secret", "s/sentinel/secret", "x/s/sentinel/secret", "to_real/file", "to_file", "out"] {
            let err = dir.open_file(through).unwrap_err();
            assert!(err.to_string().contains("symlink") || err.raw_os_error() == Some(libc::ENOTDIR), "{through}: {err}");
            assert!(dir.create_file(through, 0o644).is_err(), "{through}");
            assert!(dir.open_dir(through).is_err(), "{through}");
        }
        for new in ["out/new", "s/sentinel/new", "x/new", "to_real/new"] {
            assert!(dir.create_file(new, 0o644).is_err(), "{new}");
            assert!(dir.create_dir(new).is_err(), "{new}");
            assert!(dir.create_symlink(new, "anything").is_err(), "{new}");
        }
        for bad in ["../sentinel/secret", "/etc/passwd", "real/../real/file", "./real/file", "real//file", ""] {
            assert!(dir.open_file(bad).is_err(), "{bad:?}");
        }
        // The plain operations work.
        dir.create_dir("real/sub").unwrap();
        dir.create_file("real/sub/new", 0o644).unwrap().write_all(b"new").unwrap();
        dir.create_symlink("real/sub/link", "../../../sentinel/secret").unwrap();
        assert_eq!(std::fs::read_link(root.join("real/sub/link")).unwrap(), Path::new("../../../sentinel/secret"));
        assert!(dir.open_file("real/sub/link").is_err());
        dir.open_dir("real/sub").unwrap().sync_each_beneath().unwrap();
        dir.sync_everything_beneath().unwrap();

        let names: Vec<_> = std::fs::read_dir(&sentinel).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["secret"]);
        assert_eq!(std::fs::read(sentinel.join("secret")).unwrap(), b"untouched");
    }

    /// The fallback for kernels without openat2 refuses the same links.
    #[test]
    fn component_walk_refuses_links_too() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        std::fs::create_dir(root.join("real")).unwrap();
        std::fs::write(root.join("real/file"), b"x").unwrap();
        symlink("real", root.join("link")).unwrap();
        symlink("real/file", root.join("file_link")).unwrap();
        let dir = BuildDir::open(root).unwrap();
        let flags = libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NOFOLLOW;
        open_component_by_component(dir.fd.as_fd(), OsStr::new("real/file"), flags, 0).unwrap();
        for through in ["link/file", "file_link"] {
            let err = open_component_by_component(dir.fd.as_fd(), OsStr::new(through), flags, 0).unwrap_err();
            assert!(matches!(err.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR)), "{through}: {err}");
        }
    }

    #[test]
    fn rename_new_never_replaces() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("a")).unwrap();
        std::fs::create_dir(tmp.path().join("b")).unwrap();
        let dir = BuildDir::open(tmp.path()).unwrap();
        assert!(dir.rename_new(OsStr::new("a"), OsStr::new("b")).is_err());
        dir.rename_new(OsStr::new("a"), OsStr::new("c")).unwrap();
        assert!(tmp.path().join("c").is_dir() && !tmp.path().join("a").exists());
    }
}
