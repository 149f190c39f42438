//! Copies the files a patch keeps unchanged from the old build into the
//! staging area, on a second thread, while the applier decodes the delta
//! files on the first (`BuildSink::copy_old_file`). Each copy reads the old
//! file once, hashes what it read and writes those same bytes; the applier
//! checks the hashes against the patch's files digest.

use std::fs::File;
use std::io::{self, Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;

use crate::build_dir::PathBeneath;
use crate::staged_output::create_new_file;

/// Files up to this size are read and written with one call each; larger
/// ones go through a buffer of this size.
const COPY_BUFFER: usize = 256 << 10;

struct Copy {
    from: PathBeneath,
    to: PathBeneath,
    mode: u32,
    size: u64,
}

/// Copies are handed over in batches of this many: one wake-up of the thread
/// per copy made the two threads take turns on one core (measured: 0.8-0.9
/// CPUs used and slower than one thread on three-tree).
const BATCH: usize = 256;

/// The copying thread (started with the first batch) and the copies queued for it.
pub struct UnchangedCopies {
    batch: Vec<Copy>,
    queue: Option<mpsc::Sender<Vec<Copy>>>,
    worker: Option<JoinHandle<io::Result<Vec<[u8; 32]>>>>,
    /// Set when the apply failed: the thread stops after the copy under way.
    cancel: Arc<AtomicBool>,
    finished: bool,
}

impl UnchangedCopies {
    /// The thread starts with the first batch; the caller grew the
    /// descriptor table before (`reserve_descriptors`).
    pub fn new() -> Self {
        UnchangedCopies { batch: Vec::new(), queue: None, worker: None, cancel: Arc::default(), finished: false }
    }

    /// Queues a copy of the old file `from` (`size` bytes) to the new file `to`.
    pub fn push(&mut self, from: PathBeneath, to: PathBeneath, mode: u32, size: u64) -> io::Result<()> {
        if self.finished {
            return Err(io::Error::other("a copy offered after the copies were finished"));
        }
        self.batch.push(Copy { from, to, mode, size });
        if self.batch.len() < BATCH {
            return Ok(());
        }
        self.send()
    }

    /// Hands the copies queued so far to the thread, starting it the first time.
    pub fn send(&mut self) -> io::Result<()> {
        if self.batch.is_empty() {
            return Ok(());
        }
        if self.worker.is_none() {
            self.spawn()?;
        }
        let batch = std::mem::take(&mut self.batch);
        if self.queue.as_ref().is_some_and(|q| q.send(batch).is_ok()) {
            return Ok(());
        }
        // The thread stopped at a failed copy: its error is the answer.
        match self.finish() {
            Err(e) => Err(e),
            Ok(_) => Err(io::Error::other("the copying thread stopped")),
        }
    }

    fn spawn(&mut self) -> io::Result<()> {
        let (queue, batches) = mpsc::channel::<Vec<Copy>>();
        let cancel = Arc::clone(&self.cancel);
        let worker = std::thread::Builder::new().name("unchanged copies".into()).spawn(move || {
            let mut buf = vec![0u8; COPY_BUFFER];
            let mut hashes = Vec::new();
            for batch in batches {
                for c in &batch {
                    if cancel.load(Ordering::Relaxed) {
                        return Err(io::Error::other("cancelled"));
                    }
                    hashes.push(copy_file(c, &mut buf)?);
                }
            }
            Ok(hashes)
        })?;
        (self.queue, self.worker) = (Some(queue), Some(worker));
        Ok(())
    }

    /// Waits for every queued copy; the BLAKE3 of each, in the order queued.
    pub fn finish(&mut self) -> io::Result<Vec<[u8; 32]>> {
        self.send()?;
        self.finished = true;
        self.queue = None;
        match self.worker.take() {
            Some(worker) => worker.join().map_err(|_| io::Error::other("the copying thread panicked"))?,
            None => Ok(Vec::new()),
        }
    }
}

impl UnchangedCopies {
    /// Cancels the copies not yet made and waits for the one under way, so
    /// nothing is written into the staging area after its owner removes it.
    pub fn stop(&mut self) {
        self.cancel.store(true, Ordering::Relaxed);
        self.finished = true;
        self.batch.clear();
        self.queue = None;
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
    }
}

impl Drop for UnchangedCopies {
    fn drop(&mut self) {
        self.stop();
    }
}

fn copy_file(c: &Copy, buf: &mut [u8]) -> io::Result<[u8; 32]> {
    let old = |e: io::Error| io::Error::new(e.kind(), format!("old build: {}: {e}", c.from.full_path().display()));
    // As `OldBuildFiles` opens old inputs: through no symlink, never blocking.
    let mut from = c.from.dir.open_file(&c.from.rel).map_err(old)?;
    let meta = from.metadata().map_err(old)?;
    if !meta.is_file() || meta.len() != c.size {
        let why = if meta.is_file() { format!("is {} bytes, the patch expects {}", meta.len(), c.size) } else { "not a regular file".into() };
        return Err(old(io::Error::new(io::ErrorKind::InvalidData, why)));
    }
    let new = |e: io::Error| io::Error::new(e.kind(), format!("output: {}: {e}", c.to.full_path().display()));
    let mut hasher = blake3::Hasher::new();
    let mut to: Option<File> = None;
    let mut left = c.size;
    loop {
        let n = left.min(buf.len() as u64) as usize;
        from.read_exact(&mut buf[..n]).map_err(old)?;
        hasher.update(&buf[..n]);
        let file = match &mut to {
            Some(f) => f,
            None => to.insert(create_new_file(&c.to, c.mode).map_err(new)?),
        };
        file.write_all(&buf[..n]).map_err(new)?;
        left -= n as u64;
        if left == 0 {
            return Ok(*hasher.finalize().as_bytes());
        }
    }
}

// Unix: the tests use symlinks and Unix error codes.
#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use crate::build_dir::BuildDir;

    #[test]
    fn copies_in_batches_hash_in_order_and_report_failures() {
        let tmp = tempfile::tempdir().unwrap();
        let (old, new) = (tmp.path().join("old"), tmp.path().join("new"));
        std::fs::create_dir(&old).unwrap();
        std::fs::create_dir(&new).unwrap();
        let (old_dir, new_dir) = (Arc::new(BuildDir::open(&old).unwrap()), Arc::new(BuildDir::open(&new).unwrap()));
        let at = |dir: &Arc<BuildDir>, name: &str| PathBeneath::new(dir, name);
        // More files than a batch; an empty one; one larger than the buffer.
        let sizes: Vec<usize> = (0..BATCH + 5)
            .map(|i| {
                if i == 7 {
                    0
                } else if i == 9 {
                    COPY_BUFFER * 2 + 3
                } else {
                    i * 13
                }
            })
            .collect();
        let mut copies = UnchangedCopies::new();
        for (i, &size) in sizes.iter().enumerate() {
            let data: Vec<u8> = (0..size).map(|b| (b * 31 + i) as u8).collect();
            std::fs::write(old.join(format!("{i}")), &data).unwrap();
            copies.push(at(&old_dir, &format!("{i}")), at(&new_dir, &format!("{i}")), 0o644, size as u64).unwrap();
        }
        let hashes = copies.finish().unwrap();
        assert_eq!(hashes.len(), sizes.len());
        for (i, hash) in hashes.iter().enumerate() {
            let data = std::fs::read(new.join(format!("{i}"))).unwrap();
            assert_eq!(data, std::fs::read(old.join(format!("{i}"))).unwrap());
            assert_eq!(*hash, *blake3::hash(&data).as_bytes(), "file {i}");
        }

        // A missing old file, one of another size, one reached through a
        // link (the link's target is a fine file): the error names the path.
        std::os::unix::fs::symlink("1", old.join("link")).unwrap();
        for (name, size) in [("missing", 4u64), ("0", 99), ("link", 13)] {
            let mut copies = UnchangedCopies::new();
            copies.push(at(&old_dir, name), at(&new_dir, &format!("x{name}")), 0o644, size).unwrap();
            let err = copies.finish().unwrap_err().to_string();
            assert!(err.starts_with("old build: ") && err.contains(&*old.join(name).to_string_lossy()), "{err}");
        }
        // An output that exists already is never replaced, nor written through when it is a link.
        std::os::unix::fs::symlink("../old/2", new.join("new_link")).unwrap();
        for name in ["1", "new_link"] {
            let mut copies = UnchangedCopies::new();
            copies.push(at(&old_dir, "1"), at(&new_dir, name), 0o644, 13).unwrap();
            assert!(copies.finish().unwrap_err().to_string().starts_with("output: "));
        }
        assert_eq!(std::fs::read(old.join("2")).unwrap().len(), 26);
    }
}
