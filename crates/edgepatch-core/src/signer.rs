//! Streaming signer: builds a [`Signature`] from entries that arrive one at a
//! time in any order (a tar stream at upload, a directory walk), holding one
//! block of file data at most. Every path and symlink target is checked by the
//! same rules as the rest of the core, so an upload can be refused entry by
//! entry; parent directories a stream leaves implicit are added at the end.

use std::collections::HashSet;

use crate::build::{validate_path, validate_symlink_target, TreeChecker};
use crate::error::{Error, Result};
use crate::signature::{block_hash, BlockHash, Signature, SignedEntry, SignedKind, MAX_BLOCK_SIZE, MIN_BLOCK_SIZE};

struct OpenFile {
    path: String,
    executable: bool,
    size: u64,
    received: u64,
    hasher: blake3::Hasher,
    blocks: Vec<BlockHash>,
    /// The current partial block.
    block: Vec<u8>,
}

/// Makes a [`Signature`] from entries pushed one at a time. Paths follow the
/// build rules; a file's bytes must total the size announced in
/// [`Signer::begin_file`]; [`Error::Invalid`] when the calls come out of order.
pub struct Signer {
    block_size: u32,
    entries: Vec<SignedEntry>,
    paths: HashSet<String>,
    open: Option<OpenFile>,
}

impl Signer {
    /// A signer with blocks of `block_size` bytes; [`Error::Invalid`] outside
    /// [`MIN_BLOCK_SIZE`]`..=`[`MAX_BLOCK_SIZE`].
    pub fn new(block_size: u32) -> Result<Signer> {
        if !(MIN_BLOCK_SIZE..=MAX_BLOCK_SIZE).contains(&block_size) {
            return Err(Error::Invalid(format!("block size {block_size} out of range {MIN_BLOCK_SIZE}..={MAX_BLOCK_SIZE}")));
        }
        Ok(Signer { block_size, entries: Vec::new(), paths: HashSet::new(), open: None })
    }

    fn add_path(&mut self, path: &str) -> Result<()> {
        if self.open.is_some() {
            return Err(Error::Invalid(format!("{path}: a file is still open (finish it first)")));
        }
        // "" is the single-file build: its only entry.
        if !path.is_empty() || !self.entries.is_empty() {
            validate_path(path)?;
        }
        if self.paths.contains("") || (path.is_empty() && !self.entries.is_empty()) {
            return Err(Error::InvalidPath { path: path.into(), why: "a single-file build has exactly one entry".into() });
        }
        if !self.paths.insert(path.to_string()) {
            return Err(Error::InvalidPath { path: path.into(), why: "appears twice".into() });
        }
        Ok(())
    }

    /// Adds the directory `path`.
    pub fn directory(&mut self, path: &str) -> Result<()> {
        if path.is_empty() {
            return Err(Error::InvalidPath { path: path.into(), why: "empty path".into() });
        }
        self.add_path(path)?;
        self.entries.push(SignedEntry { path: path.to_string(), kind: SignedKind::Directory });
        Ok(())
    }

    /// Adds the symlink `path` -> `target` (target checked as [`crate::build`] says).
    pub fn symlink(&mut self, path: &str, target: &str) -> Result<()> {
        if path.is_empty() {
            return Err(Error::InvalidPath { path: path.into(), why: "empty path".into() });
        }
        validate_symlink_target(path, target)?;
        self.add_path(path)?;
        self.entries.push(SignedEntry { path: path.to_string(), kind: SignedKind::Symlink { target: target.to_string() } });
        Ok(())
    }

    /// Starts a file of `size` bytes; exactly that many must follow through `update`.
    pub fn begin_file(&mut self, path: &str, executable: bool, size: u64) -> Result<()> {
        self.add_path(path)?;
        self.open = Some(OpenFile {
            path: path.to_string(),
            executable,
            size,
            received: 0,
            hasher: blake3::Hasher::new(),
            blocks: Vec::with_capacity(size.div_ceil(self.block_size as u64).min(1 << 20) as usize),
            block: Vec::with_capacity(self.block_size as usize),
        });
        Ok(())
    }

    /// The next bytes of the open file; more than its announced size is an error.
    pub fn update(&mut self, mut data: &[u8]) -> Result<()> {
        let block_size = self.block_size as usize;
        let f = self.open.as_mut().ok_or_else(|| Error::Invalid("file data outside a file".into()))?;
        if data.len() as u64 > f.size - f.received {
            return Err(Error::Invalid(format!("{}: more than the {} bytes announced", f.path, f.size)));
        }
        f.received += data.len() as u64;
        f.hasher.update(data);
        while !data.is_empty() {
            if f.block.is_empty() && data.len() >= block_size {
                f.blocks.push(block_hash(&data[..block_size]));
                data = &data[block_size..];
                continue;
            }
            let n = (block_size - f.block.len()).min(data.len());
            f.block.extend_from_slice(&data[..n]);
            data = &data[n..];
            if f.block.len() == block_size {
                f.blocks.push(block_hash(&f.block));
                f.block.clear();
            }
        }
        Ok(())
    }

    /// Ends the open file; returns its BLAKE3.
    pub fn finish_file(&mut self) -> Result<[u8; 32]> {
        let mut f = self.open.take().ok_or_else(|| Error::Invalid("no file is open".into()))?;
        if f.received != f.size {
            return Err(Error::Invalid(format!("{}: {} bytes announced, {} received", f.path, f.size, f.received)));
        }
        if !f.block.is_empty() {
            f.blocks.push(block_hash(&f.block));
        }
        let blake3 = *f.hasher.finalize().as_bytes();
        self.entries.push(SignedEntry { path: f.path, kind: SignedKind::File { executable: f.executable, size: f.size, blake3, blocks: f.blocks } });
        Ok(blake3)
    }

    /// Sorts the entries, adds the parent directories the stream left implicit,
    /// and checks the tree (no entry below a symlink or a file).
    pub fn finish(mut self) -> Result<Signature> {
        if let Some(f) = &self.open {
            return Err(Error::Invalid(format!("{}: file not finished", f.path)));
        }
        let single = self.paths.contains("");
        if !single {
            let mut implied = Vec::new();
            for e in &self.entries {
                let mut p = e.path.as_str();
                while let Some((parent, _)) = p.rsplit_once('/') {
                    if self.paths.insert(parent.to_string()) {
                        implied.push(SignedEntry { path: parent.to_string(), kind: SignedKind::Directory });
                    }
                    p = parent;
                }
            }
            self.entries.extend(implied);
            self.entries.sort_by(|a, b| a.path.as_bytes().cmp(b.path.as_bytes()));
            let mut checker = TreeChecker::default();
            for e in &self.entries {
                checker.check(&e.path, matches!(e.kind, SignedKind::Directory))?;
            }
        }
        Ok(Signature { block_size: self.block_size, entries: self.entries })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::{Build, BuildEntry, EntryContent};

    #[test]
    fn streamed_signature_equals_the_in_memory_one() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i.wrapping_mul(2654435761) >> 11) as u8).collect();
        let build = Build::from_entries(vec![
            BuildEntry { path: "a".into(), content: EntryContent::Directory },
            BuildEntry { path: "a/big.bin".into(), content: EntryContent::File { executable: true, data: data.clone() } },
            BuildEntry { path: "a/link".into(), content: EntryContent::Symlink { target: "big.bin".into() } },
            BuildEntry { path: "empty".into(), content: EntryContent::File { executable: false, data: vec![] } },
        ])
        .unwrap();
        let expected = Signature::of_build(&build, 4096);
        // Out of order, the directory left implicit, data in odd chunk sizes.
        let mut s = Signer::new(4096).unwrap();
        s.begin_file("empty", false, 0).unwrap();
        s.finish_file().unwrap();
        s.symlink("a/link", "big.bin").unwrap();
        s.begin_file("a/big.bin", true, data.len() as u64).unwrap();
        for chunk in data.chunks(3001) {
            s.update(chunk).unwrap();
        }
        s.finish_file().unwrap();
        assert_eq!(s.finish().unwrap(), expected);
    }

    #[test]
    fn bad_entries_are_refused() {
        let mut s = Signer::new(4096).unwrap();
        assert!(s.begin_file("../x", false, 1).is_err());
        assert!(s.begin_file("/etc/passwd", false, 1).is_err());
        // A link target is data (it may leave the build), bounded: not empty, no NUL.
        assert!(s.symlink("l", "").is_err());
        assert!(s.symlink("l", "a\0b").is_err());
        s.symlink("l", "../../x").unwrap();
        s.begin_file("f", false, 2).unwrap();
        assert!(s.update(b"abc").is_err());
        s.update(b"ab").unwrap();
        s.finish_file().unwrap();
        assert!(s.begin_file("f", false, 0).is_err(), "duplicate");
        s.begin_file("g", false, 5).unwrap();
        s.update(b"ab").unwrap();
        assert!(s.finish_file().is_err(), "short file");
        let mut s = Signer::new(4096).unwrap();
        s.begin_file("file", false, 0).unwrap();
        s.finish_file().unwrap();
        s.begin_file("file/below", false, 0).unwrap();
        s.finish_file().unwrap();
        assert!(s.finish().is_err(), "an entry below a file");
    }
}
