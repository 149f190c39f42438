//! What differs between operating systems, in one place: permission bits, the umask,
//! descriptor limits, positioned reads, whether a process still runs, opening a file
//! without following a link. Unix (Linux, macOS, the BSDs) through libc; Windows
//! through std's Windows extensions. Resolving build paths beneath a directory is the
//! larger part and has its own files (`build_dir.rs`, `build_dir_windows.rs`).

use std::fs::{File, Metadata, OpenOptions};
use std::io;
use std::path::Path;

/// Whether files here have an executable bit: a listing made here tells it (Unix), or says
/// no file is executable (Windows; a patch is then matched by its mode-blind digest).
pub const MODES_KNOWN: bool = cfg!(unix);

/// The executable bit of a file (any of user, group, other). Windows has none: a build
/// read there has no executables, and applying one there records the bits in the
/// manifest only.
pub fn is_executable(meta: &Metadata) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        meta.permissions().mode() & 0o111 != 0
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        false
    }
}

/// An apply's error as the user reads it. Where files have no executable bit (Windows) every
/// old file is listed as not executable; a patch whose writer predates the mode-blind digest
/// (docs/FORMAT.md §2.1, flag bit 4) then cannot match an old build that has executable
/// files elsewhere. Said plainly rather than only as "another build". An error about the old
/// build names `old` (the OLD argument) as its file, in `path` and in the message:
/// "old build OLD: not the build this patch was made from: ...".
pub fn apply_error(e: edgepatch_core::Error, old: &Path) -> crate::cli_error::CliError {
    let old_build = e.kind() == edgepatch_core::error::ErrorKind::OldBuild;
    let e = match e {
        e @ edgepatch_core::Error::WrongOldBuild { .. } if !MODES_KNOWN => crate::cli_error::CliError::from(e).reword(|m| {
            format!(
                "{m} (or the patch was made where files have executable bits by an edgepatch older \
                 than its mode-blind digest: this system has none; README.md, \"Platforms\")"
            )
        }),
        e => e.into(),
    };
    if old_build {
        e.reword(|m| match m.strip_prefix("old build: ") {
            Some(rest) => format!("old build {}: {rest}", old.display()),
            None => format!("old build {}: {m}", old.display()),
        })
        .at(old)
    } else {
        e
    }
}

/// Sets a file's permission bits to exactly `mode` (Unix; nothing elsewhere).
pub fn set_mode(file: &File, mode: u32) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(std::fs::Permissions::from_mode(mode))
    }
    #[cfg(not(unix))]
    {
        let _ = (file, mode);
        Ok(())
    }
}

/// The process's file mode mask (setting and restoring it: call before threads start);
/// None where there is none.
pub fn umask() -> Option<u32> {
    #[cfg(unix)]
    // SAFETY: umask only swaps the process's file mode mask; restored at once.
    unsafe {
        let mask = libc::umask(0o022);
        libc::umask(mask);
        Some(mask as u32)
    }
    #[cfg(not(unix))]
    None
}

/// Opens `path` for reading without following a link at its last component and without
/// blocking on a FIFO (Unix: `O_NOFOLLOW | O_NONBLOCK`; Windows: the reparse point itself
/// is opened, and refused below). The caller checks it is a regular file.
pub fn open_no_follow(path: &Path) -> io::Result<File> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(path).map_err(|e| {
            // O_NOFOLLOW reports a symlink as ELOOP ("too many levels of symbolic links").
            if e.raw_os_error() == Some(libc::ELOOP) {
                io::Error::new(io::ErrorKind::InvalidInput, "not a regular file (a symlink)")
            } else {
                e
            }
        })
    }
    #[cfg(windows)]
    {
        use std::os::windows::fs::OpenOptionsExt;
        const FILE_FLAG_OPEN_REPARSE_POINT: u32 = 0x0020_0000;
        let f = OpenOptions::new().read(true).custom_flags(FILE_FLAG_OPEN_REPARSE_POINT).open(path)?;
        if f.metadata()?.file_type().is_symlink() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a regular file (a symlink)"));
        }
        Ok(f)
    }
}

/// Reads exactly `buf.len()` bytes at `offset`, without moving a shared file position.
pub fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileExt;
        file.read_exact_at(buf, offset)
    }
    #[cfg(windows)]
    {
        use std::os::windows::fs::FileExt;
        whole_at(buf.len(), io::ErrorKind::UnexpectedEof, "file shorter than expected", |done| file.seek_read(&mut buf[done..], offset + done as u64))
    }
}

/// Writes all of `data` at `offset`, without moving a shared file position.
pub fn write_all_at(file: &File, data: &[u8], offset: u64) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileExt;
        file.write_all_at(data, offset)
    }
    #[cfg(windows)]
    {
        use std::os::windows::fs::FileExt;
        whole_at(data.len(), io::ErrorKind::WriteZero, "wrote nothing", |done| file.seek_write(&data[done..], offset + done as u64))
    }
}

/// Windows' positioned reads and writes move part of what was asked: repeats `step` (given the
/// bytes done so far) until `len` bytes are done; a step that moves nothing is `short`.
#[cfg(windows)]
fn whole_at(len: usize, short: io::ErrorKind, what: &str, mut step: impl FnMut(usize) -> io::Result<usize>) -> io::Result<()> {
    let mut done = 0;
    while done < len {
        match step(done) {
            Ok(0) => return Err(io::Error::new(short, what.to_string())),
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Creates `path` (which must not exist) as a scratch file, readable and writable by its
/// owner only, that no one can find by its name and that goes when it is closed, however the
/// process ends: on Unix it is unlinked at once (its name never outlives this call by more
/// than a crash between the two), on Windows it is opened delete-on-close.
pub fn scratch_file(path: &Path) -> io::Result<File> {
    let mut opts = OpenOptions::new();
    opts.read(true).write(true).create_new(true);
    owner_only(&mut opts);
    #[cfg(windows)]
    {
        use std::os::windows::fs::OpenOptionsExt;
        const FILE_FLAG_DELETE_ON_CLOSE: u32 = 0x0400_0000;
        const FILE_SHARE_DELETE: u32 = 0x0000_0004;
        opts.custom_flags(FILE_FLAG_DELETE_ON_CLOSE).share_mode(FILE_SHARE_DELETE);
    }
    let file = opts.open(path)?;
    #[cfg(not(windows))]
    std::fs::remove_file(path)?;
    Ok(file)
}

/// The soft limit on open files (Unix), or a fixed stand-in where handles are not so limited.
pub fn open_files_limit() -> u64 {
    #[cfg(unix)]
    {
        let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: getrlimit writes the struct it is given.
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0 {
            #[allow(clippy::unnecessary_cast)] // rlim_t is not u64 on every Unix
            let soft = limit.rlim_cur as u64;
            soft
        } else {
            1024
        }
    }
    #[cfg(not(unix))]
    8192
}

/// Raises the soft limit on open files to the hard limit, as Go programs do at start: the
/// default soft limit (1,024) is a relic of select(2), which this program does not use.
/// Best effort: a failure keeps the soft limit. Nothing to do on Windows.
pub fn raise_open_files_limit() {
    #[cfg(unix)]
    // SAFETY: getrlimit/setrlimit read and write the struct they are given.
    unsafe {
        let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max {
            limit.rlim_cur = limit.rlim_max.min(1 << 16).max(limit.rlim_cur);
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

/// Grows the process's descriptor table to `count` entries while it has one thread (Unix;
/// see `build_files::reserve_descriptors` for why). Best effort.
pub fn reserve_descriptors(count: usize) {
    #[cfg(unix)]
    {
        let Ok(probe) = File::open("/dev/null") else { return };
        let at = count.saturating_sub(1).min(i32::MAX as usize) as libc::c_int;
        // SAFETY: F_DUPFD_CLOEXEC takes the lowest free descriptor >= `at` (never one in
        // use), which is closed at once.
        unsafe {
            let fd = libc::fcntl(std::os::fd::AsRawFd::as_raw_fd(&probe), libc::F_DUPFD_CLOEXEC, at);
            if fd >= 0 {
                libc::close(fd);
            }
        }
    }
    #[cfg(not(unix))]
    let _ = count;
}

/// Whether process `pid` is known to have ended. Unix: `kill(pid, 0)` answers ESRCH. Windows:
/// no process has that id, or the one that has it has exited (its object outlives it while
/// anyone holds a handle, e.g. the parent that started it). Where it cannot be told, false: a
/// staging area is then kept, never removed from under a running apply.
pub fn process_is_gone(pid: u32) -> bool {
    #[cfg(unix)]
    {
        let Ok(pid) = libc::pid_t::try_from(pid) else { return false };
        // SAFETY: kill with signal 0 only checks whether the process exists.
        pid > 0 && unsafe { libc::kill(pid, 0) } != 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
    }
    #[cfg(windows)]
    {
        use windows_sys::Win32::Foundation::{CloseHandle, GetLastError, ERROR_INVALID_PARAMETER, WAIT_OBJECT_0};
        use windows_sys::Win32::System::Threading::{OpenProcess, WaitForSingleObject, PROCESS_SYNCHRONIZE};
        // SAFETY: OpenProcess returns a handle we close, or null.
        let handle = unsafe { OpenProcess(PROCESS_SYNCHRONIZE, 0, pid) };
        if handle.is_null() {
            // SAFETY: reads this thread's last error.
            return unsafe { GetLastError() } == ERROR_INVALID_PARAMETER; // no such process
        }
        // SAFETY: a zero timeout only asks whether the process object is signalled (exited).
        let exited = unsafe { WaitForSingleObject(handle, 0) } == WAIT_OBJECT_0;
        // SAFETY: the handle OpenProcess gave us.
        unsafe { CloseHandle(handle) };
        exited
    }
    #[cfg(not(any(unix, windows)))]
    {
        let _ = pid;
        false
    }
}

/// Makes `opts` create a file readable by its owner only (Unix mode 0600; on Windows the
/// file inherits its directory's ACL, which for a user's config directory is the user's).
pub fn owner_only(opts: &mut OpenOptions) {
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(opts, 0o600);
    #[cfg(not(unix))]
    let _ = opts;
}
