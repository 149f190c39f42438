//! In-memory adapters: an old build held in memory as [`OldBuild`], and a sink
//! that collects the new build. Used by tests, the fuzzer and bindings whose
//! data is already in memory.

use std::collections::HashMap;
use std::io;

use crate::apply::{BuildSink, OldBuild};
use crate::build::{Build, BuildEntry, EntryContent};
use crate::patch_format::ListedEntry;

/// An old build held in memory ([`Build`]), as an [`OldBuild`].
pub struct MemoryOldBuild<'a> {
    build: &'a Build,
    files: HashMap<&'a str, &'a [u8]>,
}

impl<'a> MemoryOldBuild<'a> {
    /// An old build that reads from `build`.
    pub fn new(build: &'a Build) -> Self {
        MemoryOldBuild { build, files: build.files().collect() }
    }

    fn file(&self, path: &str) -> io::Result<&'a [u8]> {
        self.files.get(path).copied().ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "not in the old build"))
    }
}

impl OldBuild for MemoryOldBuild<'_> {
    fn file_size(&mut self, path: &str) -> io::Result<u64> {
        Ok(self.file(path)?.len() as u64)
    }

    fn read_at(&mut self, path: &str, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let data = self.file(path)?;
        let src = usize::try_from(offset).ok().and_then(|o| data.get(o..o.checked_add(buf.len())?));
        buf.copy_from_slice(src.ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "read past the end"))?);
        Ok(())
    }

    fn listing(&mut self) -> io::Result<Vec<ListedEntry>> {
        Ok(crate::diff::build_listing(self.build))
    }
}

/// Collects the new build; `into_build` gives only files that were finished.
#[derive(Default)]
pub struct MemorySink {
    entries: Vec<BuildEntry>,
    current: Option<(String, bool, Vec<u8>)>,
    /// Scratch space (`BuildSink::write_scratch`), where the sink was made with some.
    scratch: Option<Vec<u8>>,
    /// `BuildSink::trusts_side_infos`.
    trust_side_infos: bool,
}

impl MemorySink {
    /// A sink with scratch space, in memory too: the applier takes the path it takes with a
    /// sink that keeps scratch bytes elsewhere (a file), which tests exercise with this one.
    pub fn with_scratch() -> Self {
        MemorySink { scratch: Some(Vec::new()), ..Self::default() }
    }

    /// The sink, trusting the patch's side infos (`BuildSink::trusts_side_infos`): a patch
    /// its caller made.
    pub fn trusting_side_infos(self) -> Self {
        MemorySink { trust_side_infos: true, ..self }
    }

    /// The entries in path order (the applier writes them in another order:
    /// directories, links and copies first, delta files as their data arrives).
    pub fn into_build(mut self) -> Build {
        self.entries.sort_by(|a, b| a.path.as_bytes().cmp(b.path.as_bytes()));
        Build { entries: self.entries }
    }
}

impl BuildSink for MemorySink {
    fn trusts_side_infos(&self) -> bool {
        self.trust_side_infos
    }

    fn create_directory(&mut self, path: &str) -> io::Result<()> {
        self.entries.push(BuildEntry { path: path.into(), content: EntryContent::Directory });
        Ok(())
    }

    fn create_symlink(&mut self, path: &str, target: &str) -> io::Result<()> {
        self.entries.push(BuildEntry { path: path.into(), content: EntryContent::Symlink { target: target.into() } });
        Ok(())
    }

    fn begin_file(&mut self, path: &str, executable: bool, _size: u64) -> io::Result<()> {
        // Like a file system: a path written again (after a resume) replaces the earlier one.
        self.entries.retain(|e| e.path != path);
        self.current = Some((path.into(), executable, Vec::new()));
        Ok(())
    }

    fn resume_file(&mut self, path: &str, executable: bool, _size: u64, written: u64) -> io::Result<()> {
        // The file is the one being written, or one finished past the resume point.
        let data = match self.current.take() {
            Some((p, _, data)) if p == path => Some(data),
            _ => self.entries.iter().position(|e| e.path == path).and_then(|i| match self.entries.remove(i).content {
                EntryContent::File { data, .. } => Some(data),
                _ => None,
            }),
        };
        match data {
            Some(mut data) if data.len() as u64 >= written => {
                data.truncate(written as usize);
                self.current = Some((path.into(), executable, data));
                Ok(())
            }
            _ => Err(io::Error::new(io::ErrorKind::NotFound, format!("{path}: no partly written file to resume"))),
        }
    }

    fn read_written(&mut self, path: &str, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let data = match &self.current {
            Some((p, _, data)) if p == path => data.as_slice(),
            _ => match self.entries.iter().find(|e| e.path == path) {
                Some(BuildEntry { content: EntryContent::File { data, .. }, .. }) => data.as_slice(),
                _ => return Err(io::Error::new(io::ErrorKind::NotFound, format!("{path}: not written"))),
            },
        };
        let src = usize::try_from(offset).ok().and_then(|o| data.get(o..o.checked_add(buf.len())?));
        buf.copy_from_slice(src.ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "read past what was written"))?);
        Ok(())
    }

    fn write_file(&mut self, data: &[u8]) -> io::Result<()> {
        self.current.as_mut().ok_or_else(|| io::Error::other("write outside a file"))?.2.extend_from_slice(data);
        Ok(())
    }

    fn finish_file(&mut self) -> io::Result<()> {
        let (path, executable, data) = self.current.take().ok_or_else(|| io::Error::other("finish outside a file"))?;
        self.entries.push(BuildEntry { path, content: EntryContent::File { executable, data } });
        Ok(())
    }

    fn write_scratch(&mut self, offset: u64, data: &[u8]) -> io::Result<bool> {
        let Some(scratch) = &mut self.scratch else { return Ok(false) };
        let end = usize::try_from(offset).ok().and_then(|o| o.checked_add(data.len())).ok_or_else(|| io::Error::other("scratch offset past memory"))?;
        if scratch.len() < end {
            scratch.resize(end, 0);
        }
        scratch[end - data.len()..end].copy_from_slice(data);
        Ok(true)
    }

    fn read_scratch(&mut self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let scratch = self.scratch.as_deref().unwrap_or_default();
        let src = usize::try_from(offset).ok().and_then(|o| scratch.get(o..o.checked_add(buf.len())?));
        buf.copy_from_slice(src.ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "read past the scratch space"))?);
        Ok(())
    }
}
