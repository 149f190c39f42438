//! Native file system adapters: reading a build from disk, random access to the
//! old build, signing and verifying a directory, and process settings for
//! apply. The sink that writes the new build is in `staged_output.rs`.

use std::collections::HashMap;
use std::fs::{self, File};
use std::io;

use std::path::{Path, PathBuf};

use edgepatch_core::patch_format::ListedEntry;
use edgepatch_core::signature::{check_file_content, sign_content, Damage, Signature, SignedEntry, SignedKind};
use edgepatch_core::{Build, BuildEntry, EntryContent, OldBuild};

use crate::build_dir::BuildDir;
use crate::platform;

/// Reads a file or a directory tree into memory as a build.
pub fn read_build(root: &Path) -> io::Result<Build> {
    // The root itself may be a symlink (to the build); entries inside are not followed.
    let meta = fs::metadata(root).map_err(|e| with_path(root, e))?;
    if meta.is_file() {
        return Ok(Build::single_file(fs::read(root).map_err(|e| with_path(root, e))?));
    }
    if !meta.is_dir() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{}: not a file or directory", root.display())));
    }
    let mut entries = Vec::new();
    walk(root, "", &mut entries)?;
    Build::from_entries(entries).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{}: {e}", root.display())))
}

fn walk(dir: &Path, prefix: &str, out: &mut Vec<BuildEntry>) -> io::Result<()> {
    let mut names: Vec<_> = fs::read_dir(dir).map_err(|e| with_path(dir, e))?.collect::<io::Result<Vec<_>>>()?;
    names.sort_by_key(|d| d.file_name());
    for d in names {
        let name =
            d.file_name().into_string().map_err(|n| io::Error::new(io::ErrorKind::InvalidData, format!("{}: file name {n:?} is not UTF-8", dir.display())))?;
        let path = if prefix.is_empty() { name.clone() } else { format!("{prefix}/{name}") };
        let full = d.path();
        let meta = fs::symlink_metadata(&full).map_err(|e| with_path(&full, e))?;
        let content = if meta.file_type().is_symlink() {
            let target = fs::read_link(&full)?;
            let target = target.to_str().ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, format!("{}: link target not UTF-8", full.display())))?;
            EntryContent::Symlink { target: target.to_string() }
        } else if meta.is_dir() {
            out.push(BuildEntry { path: path.clone(), content: EntryContent::Directory });
            walk(&full, &path, out)?;
            continue;
        } else if meta.is_file() {
            EntryContent::File { executable: platform::is_executable(&meta), data: fs::read(&full).map_err(|e| with_path(&full, e))? }
        } else {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{}: not a regular file, directory or symlink", full.display())));
        };
        out.push(BuildEntry { path, content });
    }
    Ok(())
}

pub fn with_path(path: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

/// The old build on disk, a file or a directory; keeps up to `max_open` files
/// open. A tree's delta segments read from many old files in turn, so a cache
/// smaller than the tree reopens files over and over (three-tree: 2,952 opens
/// of 1,264 files with 512 slots; one open each with enough slots).
pub struct OldBuildFiles {
    root: PathBuf,
    /// A tree's root, opened at the first read: every old file is opened
    /// beneath it with no link followed (a single-file build's root is the file).
    dir: Option<BuildDir>,
    /// Every regular file's size, from `listing` (a tree patch asks for the
    /// listing first): `file_size` then needs no system call.
    listed_sizes: Option<HashMap<String, u64>>,
    open: HashMap<String, (File, u64)>,
    /// Last-use counter for the least-recently-used eviction.
    tick: u64,
    max_open: usize,
}

impl OldBuildFiles {
    pub fn new(root: &Path) -> Self {
        // Resolved once, so each open walks the build's own path only (the
        // kernel's path walk was 5% of a tree apply through a symlinked root).
        let root = fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
        OldBuildFiles { root, dir: None, listed_sizes: None, open: HashMap::new(), tick: 0, max_open: old_files_open_limit() }
    }

    /// How many descriptors apply may hold at once: the old files it keeps
    /// open, and a few for the patch, an output file and a copy under way.
    pub fn descriptors_needed(&self) -> usize {
        self.max_open + 64
    }

    /// The old build's path, resolved.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn file(&mut self, path: &str) -> io::Result<&File> {
        self.tick += 1;
        if !self.open.contains_key(path) {
            if self.open.len() >= self.max_open {
                let oldest = self.open.iter().min_by_key(|(_, (_, used))| *used).map(|(p, _)| p.clone());
                self.open.remove(&oldest.expect("the cache is full"));
            }
            // Old inputs are read through no symlink (in any component) and
            // never block (O_NONBLOCK: a FIFO fails its read instead).
            // `file_size` and the reads check that each is a regular file.
            let file = if path.is_empty() {
                platform::open_no_follow(&self.root)?
            } else {
                let dir = match &mut self.dir {
                    Some(d) => d,
                    None => self.dir.insert(BuildDir::open(&self.root)?),
                };
                dir.open_file(path)?
            };
            self.open.insert(path.to_string(), (file, 0));
        }
        let (file, used) = self.open.get_mut(path).expect("just ensured");
        *used = self.tick;
        Ok(file)
    }
}

/// How many old files apply keeps open: half the descriptor limit (the rest is
/// for outputs, the patch and the process), at most 4,096 and at least 16.
fn old_files_open_limit() -> usize {
    (platform::open_files_limit() / 2).clamp(16, 4096) as usize
}

/// Raises the soft limit on open files (see `platform::raise_open_files_limit`).
pub fn raise_open_files_limit() {
    platform::raise_open_files_limit()
}

impl OldBuild for OldBuildFiles {
    fn file_size(&mut self, path: &str) -> io::Result<u64> {
        // The applier asks for every old file's size up front. In a tree the
        // listing has them: most files are then opened only by whoever reads
        // them (unchanged ones by the copying thread), 775 opens fewer on the
        // applier's thread for three-tree. Reads still check each file: a
        // short read fails, a copy checks the size, and the files digest
        // checks every byte.
        if let Some(sizes) = &self.listed_sizes {
            return sizes.get(path).copied().ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "not a regular file in the old build"));
        }
        // A single file: opening it (kept in the cache for the reads) and
        // asking the descriptor walks the path once.
        let meta = self.file(path)?.metadata()?;
        if !meta.is_file() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a regular file"));
        }
        Ok(meta.len())
    }

    fn read_at(&mut self, path: &str, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        platform::read_exact_at(self.file(path)?, buf, offset)
    }

    fn listing(&mut self) -> io::Result<Vec<ListedEntry>> {
        let listing = old_listing(&self.root)?;
        self.listed_sizes = Some(
            listing
                .iter()
                .filter_map(|e| match e.kind {
                    edgepatch_core::patch_format::ListedKind::File { size, .. } => Some((e.path.clone(), size)),
                    _ => None,
                })
                .collect(),
        );
        Ok(listing)
    }

    fn modes_known(&self) -> bool {
        platform::MODES_KNOWN
    }
}

/// The listing of the old build at `root` (what a tree patch keeps by position).
/// Anything but a regular file, directory or symlink makes it differ from any
/// build's listing, so the patch is refused as made for another build.
pub fn old_listing(root: &Path) -> io::Result<Vec<ListedEntry>> {
    let listed = list_tree(root)?;
    Ok(listed
        .into_iter()
        .map(|(path, _, kind)| ListedEntry {
            path,
            kind: match kind {
                ListedKind::File(executable, size) => edgepatch_core::patch_format::ListedKind::File { executable, size },
                ListedKind::Symlink(target) => edgepatch_core::patch_format::ListedKind::Symlink { target },
                ListedKind::Directory => edgepatch_core::patch_format::ListedKind::Directory,
            },
        })
        .collect())
}

/// The paths of a file ("") or directory tree, without reading contents.
pub fn list_paths(root: &Path) -> io::Result<Vec<String>> {
    Ok(list_tree(root)?.into_iter().map(|(p, _, _)| p).collect())
}

/// Bytes of the regular files of a file or directory tree (from the listing: nothing read).
pub fn total_file_bytes(root: &Path) -> io::Result<u64> {
    Ok(list_tree(root)?.iter().map(|(_, _, k)| if let ListedKind::File(_, size) = k { *size } else { 0 }).sum())
}

/// Signs a file or directory, streaming each file (never the whole build in memory).
pub fn sign_path(root: &Path, block_size: u32) -> io::Result<Signature> {
    let mut entries = Vec::new();
    for (path, full, kind) in list_tree(root)? {
        let kind = match kind {
            ListedKind::Directory => SignedKind::Directory,
            ListedKind::Symlink(target) => SignedKind::Symlink { target },
            ListedKind::File(executable, _) => {
                let mut f = File::open(&full).map_err(|e| with_path(&full, e))?;
                let (size, blake3, blocks) = sign_content(&mut f, block_size).map_err(|e| with_path(&full, e))?;
                SignedKind::File { executable, size, blake3, blocks }
            }
        };
        entries.push(SignedEntry { path, kind });
    }
    Ok(Signature { block_size, entries })
}

/// Compares a file or directory with a signature; returns every mismatch.
pub fn verify_path(root: &Path, sig: &Signature) -> io::Result<Vec<(String, Damage)>> {
    let listed: HashMap<String, (PathBuf, ListedKind)> = list_tree(root)?.into_iter().map(|(p, f, k)| (p, (f, k))).collect();
    let mut problems = Vec::new();
    for e in &sig.entries {
        let damage = match (listed.get(&e.path), &e.kind) {
            (None, _) => Some(Damage::Missing),
            (Some((_, ListedKind::Directory)), SignedKind::Directory) => None,
            (Some((_, ListedKind::Symlink(t))), SignedKind::Symlink { target }) => (t != target).then_some(Damage::WrongTarget),
            (Some((full, ListedKind::File(x, _))), kind @ SignedKind::File { executable, .. }) => {
                let mut f = File::open(full).map_err(|e| with_path(full, e))?;
                match check_file_content(kind, sig.block_size, &mut f).map_err(|e| with_path(full, e))? {
                    // Where files have no executable bit (Windows) there is no mode to compare.
                    None if platform::MODES_KNOWN && x != executable => Some(Damage::WrongMode),
                    other => other,
                }
            }
            _ => Some(Damage::WrongKind),
        };
        if let Some(d) = damage {
            problems.push((e.path.clone(), d));
        }
    }
    let signed: std::collections::HashSet<&str> = sig.entries.iter().map(|e| e.path.as_str()).collect();
    let mut unexpected: Vec<_> = listed.keys().filter(|p| !signed.contains(p.as_str())).cloned().collect();
    unexpected.sort();
    problems.extend(unexpected.into_iter().map(|p| (p, Damage::Unexpected)));
    Ok(problems)
}

enum ListedKind {
    /// Executable, size.
    File(bool, u64),
    Symlink(String),
    Directory,
}

/// Lists a file ("" path) or a directory tree in sorted order without reading contents.
fn list_tree(root: &Path) -> io::Result<Vec<(String, PathBuf, ListedKind)>> {
    // The root itself may be a symlink (to the build); entries inside are not followed.
    let meta = fs::metadata(root).map_err(|e| with_path(root, e))?;
    if meta.is_file() {
        return Ok(vec![(String::new(), root.to_path_buf(), ListedKind::File(platform::is_executable(&meta), meta.len()))]);
    }
    let mut out = Vec::new();
    let mut stack = vec![(root.to_path_buf(), String::new())];
    while let Some((dir, prefix)) = stack.pop() {
        for d in fs::read_dir(&dir).map_err(|e| with_path(&dir, e))? {
            let d = d?;
            let name = d.file_name().into_string().map_err(|n| io::Error::new(io::ErrorKind::InvalidData, format!("file name {n:?} is not UTF-8")))?;
            let path = if prefix.is_empty() { name } else { format!("{prefix}/{name}") };
            let full = d.path();
            // Relative to the open directory (fstatat): no walk of the whole path.
            let m = d.metadata()?;
            let kind = if m.file_type().is_symlink() {
                ListedKind::Symlink(fs::read_link(&full)?.to_string_lossy().into_owned())
            } else if m.is_dir() {
                stack.push((full.clone(), path.clone()));
                ListedKind::Directory
            } else if m.is_file() {
                ListedKind::File(platform::is_executable(&m), m.len())
            } else {
                return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{}: not a regular file, directory or symlink", full.display())));
            };
            out.push((path, full, kind));
        }
    }
    out.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    Ok(out)
}

/// Grows the process's descriptor table to `count` entries while it has one
/// thread. Once a second thread shares the table, the kernel waits for an
/// RCU grace period each time the table grows (`expand_fdtable`), and the
/// applier keeps every old file open: on three-tree that wait made two
/// threads slower than one (measured: 0.8 CPUs used). The table never
/// shrinks, so a descriptor taken and released at `count - 1` is enough.
/// Best effort: on failure the table just grows later.
pub fn reserve_descriptors(count: usize) {
    platform::reserve_descriptors(count)
}

/// glibc raises its mmap threshold whenever a large mmapped block is freed, so
/// the multi-MiB buffers apply frees and allocates segment after segment
/// (window, prefetch, streams) end up on the heap, where freed space is not
/// returned and peak RSS grows well past the live memory (measured: 40 MB
/// instead of 29 MB on the 101 MiB pair). A fixed threshold keeps every large
/// buffer mmapped and returned on free.
pub fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator parameters; called before other threads start.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 256 << 10);
        // One arena for the few threads apply starts: a thread's own arena
        // added about 1 MB of peak RSS for a handful of small allocations.
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}
