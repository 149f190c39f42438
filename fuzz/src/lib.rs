//! Helpers shared by the fuzz targets and the seed generator: the fixed old
//! builds every `patch_apply` input is applied to, and in-memory
//! implementations of `OldBuild` and `BuildSink`.

use std::io;

pub mod hostile;
pub mod wasm;

/// The independent reference applier of the core's tests (written from
/// docs/FORMAT.md alone), which every differential check compares against.
#[path = "../../crates/edgepatch-core/tests/reference_applier/mod.rs"]
pub mod reference_applier;
pub use reference_applier::apply_as_received as reference_apply;

use edgepatch_core::{Build, BuildEntry, BuildSink, EntryContent, OldBuild};

/// All three formats end in a BLAKE3 of everything before it, which a
/// mutating fuzzer practically never gets right. Returns the input with its
/// last 32 bytes replaced by the correct checksum, if that changes anything,
/// so the targets can also reach the code behind the checksum check.
pub fn with_fixed_trailer(data: &[u8]) -> Option<Vec<u8>> {
    let body = data.len().checked_sub(32).map(|n| &data[..n])?;
    let hash = blake3::hash(body);
    if &data[body.len()..] == hash.as_bytes() {
        return None;
    }
    let mut fixed = body.to_vec();
    fixed.extend_from_slice(hash.as_bytes());
    Some(fixed)
}

/// Deterministic filler bytes (xorshift64, the low byte of each value), so the old builds never change.
pub fn noise(seed: u64, len: usize) -> Vec<u8> {
    edgepatch_testkit::Rng::xorshift64_seeded(seed).bytes_from_bit(len, 0)
}

/// Some text, some binary: what a small game file looks like.
pub fn mixed(seed: u64, lines: usize) -> Vec<u8> {
    let mut v = Vec::new();
    for i in 0..lines {
        v.extend_from_slice(format!("line {i:04} of file {seed}: the quick brown fox\n").as_bytes());
        if i % 8 == 7 {
            v.extend_from_slice(&noise(seed * 1000 + i as u64, 48));
        }
    }
    v
}

/// The old single file (path "").
pub fn old_single() -> Build {
    Build::single_file(mixed(1, 64))
}

pub fn file(path: &str, executable: bool, data: Vec<u8>) -> BuildEntry {
    BuildEntry { path: path.into(), content: EntryContent::File { executable, data } }
}
pub fn dir(path: &str) -> BuildEntry {
    BuildEntry { path: path.into(), content: EntryContent::Directory }
}
pub fn symlink(path: &str, target: &str) -> BuildEntry {
    BuildEntry { path: path.into(), content: EntryContent::Symlink { target: target.into() } }
}

/// The old tree: directories, files (one executable, one empty), a symlink.
pub fn old_tree_entries() -> Vec<BuildEntry> {
    vec![
        dir("assets"),
        file("assets/a.txt", false, mixed(2, 24)),
        file("assets/b.bin", false, noise(3, 700)),
        dir("assets/deep"),
        file("assets/deep/c.dat", false, mixed(4, 10)),
        dir("bin"),
        file("bin/run", true, mixed(5, 16)),
        file("empty", false, Vec::new()),
        symlink("latest", "bin/run"),
        file("readme.md", false, b"# game\nversion 1\n".to_vec()),
    ]
}

pub fn old_tree() -> Build {
    Build::from_entries(old_tree_entries()).expect("fixed old tree is valid")
}

/// Random access to an in-memory build; errors (never panics) on unknown
/// paths and out-of-range reads.
pub struct MemOld<'a>(pub &'a Build);

impl MemOld<'_> {
    fn data(&self, path: &str) -> io::Result<&[u8]> {
        self.0
            .entries
            .iter()
            .find_map(|e| match &e.content {
                EntryContent::File { data, .. } if e.path == path => Some(data.as_slice()),
                _ => None,
            })
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("no old file {path:?}")))
    }
}

impl OldBuild for MemOld<'_> {
    fn file_size(&mut self, path: &str) -> io::Result<u64> {
        Ok(self.data(path)?.len() as u64)
    }
    fn read_at(&mut self, path: &str, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let data = self.data(path)?;
        let range = usize::try_from(offset)
            .ok()
            .and_then(|s| s.checked_add(buf.len()).map(|e| s..e))
            .filter(|r| r.end <= data.len())
            .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "read past the end of the old file"))?;
        buf.copy_from_slice(&data[range]);
        Ok(())
    }
    fn listing(&mut self) -> io::Result<Vec<edgepatch_core::patch_format::ListedEntry>> {
        Ok(edgepatch_core::diff::build_listing(self.0))
    }
}

/// Collects the new build in memory, in the order the applier produced it.
/// Refuses (io error, not panic) protocol misuse and more than `limit` bytes.
pub struct MemSink {
    pub entries: Vec<BuildEntry>,
    open: Option<(u64, u64)>, // (declared size, written)
    total: u64,
    limit: u64,
}

impl MemSink {
    pub fn new(limit: u64) -> Self {
        MemSink { entries: Vec::new(), open: None, total: 0, limit }
    }

    /// The entries in path order: the applier writes directories, links and
    /// copies first and delta files as their data arrives.
    pub fn sorted_entries(&self) -> Vec<BuildEntry> {
        let mut e = self.entries.clone();
        e.sort_by(|a, b| a.path.as_bytes().cmp(b.path.as_bytes()));
        e
    }
    fn misuse(what: &str) -> io::Error {
        io::Error::other(format!("sink misuse: {what}"))
    }
}

impl BuildSink for MemSink {
    fn create_directory(&mut self, path: &str) -> io::Result<()> {
        if self.open.is_some() {
            return Err(Self::misuse("directory while a file is open"));
        }
        self.entries.push(dir(path));
        Ok(())
    }
    fn create_symlink(&mut self, path: &str, target: &str) -> io::Result<()> {
        if self.open.is_some() {
            return Err(Self::misuse("symlink while a file is open"));
        }
        self.entries.push(symlink(path, target));
        Ok(())
    }
    fn begin_file(&mut self, path: &str, executable: bool, size: u64) -> io::Result<()> {
        if self.open.is_some() {
            return Err(Self::misuse("begin_file while a file is open"));
        }
        self.open = Some((size, 0));
        self.entries.push(file(path, executable, Vec::new()));
        Ok(())
    }
    fn write_file(&mut self, chunk: &[u8]) -> io::Result<()> {
        let Some((size, written)) = self.open.as_mut() else {
            return Err(Self::misuse("write_file without begin_file"));
        };
        *written += chunk.len() as u64;
        // The applier must never write more than the size it announced.
        assert!(*written <= *size, "apply_patch wrote {written} bytes to a file announced as {size}");
        self.total += chunk.len() as u64;
        if self.total > self.limit {
            return Err(io::Error::other("fuzz sink: output limit reached"));
        }
        match self.entries.last_mut() {
            Some(BuildEntry { content: EntryContent::File { data, .. }, .. }) => data.extend_from_slice(chunk),
            _ => unreachable!("open file is the last entry"),
        }
        Ok(())
    }
    fn finish_file(&mut self) -> io::Result<()> {
        let Some((size, written)) = self.open.take() else {
            return Err(Self::misuse("finish_file without begin_file"));
        };
        assert_eq!(size, written, "apply_patch finished a file before writing all its announced bytes");
        Ok(())
    }
}
