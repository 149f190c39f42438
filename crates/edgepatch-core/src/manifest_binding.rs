//! Binds what an apply writes to a (signed) patch manifest: a [`BuildSink`]
//! wrapper that refuses every entry, byte and file the manifest does not
//! vouch for, as it is written (docs/UPDATE_PROTOCOL.md, "What a client
//! checks", step 5). The patch's own files digest protects against damage;
//! this protects against a patch that is whole but not the one that was signed.
//!
//! Every client wraps its sink in [`BoundSink`]: the CLI's `update`, the wasm
//! `PatchApplier` given a manifest (browser, @edgepatch/js).

use std::collections::HashMap;
use std::io;

use crate::apply::BuildSink;
pub use crate::error::ManifestRefusal;
use crate::manifest::{self, EntryKind, ManifestKind, SegmentRef};
use crate::patch_format::{PatchTree, TreeEntryKind};
use crate::trust::{hex, PatchHasher};

/// Bytes re-read at a time when a resumed apply re-hashes a file written before.
const REREAD_BYTES: usize = 256 * 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Expected {
    File { size: u64, executable: bool, blake3: [u8; 32] },
    Directory,
    Symlink { target: String },
}

impl Expected {
    /// The same entry as `got`, a file's BLAKE3 aside (checked once it is written).
    fn same_kind(&self, got: &Expected) -> bool {
        match (self, got) {
            (Expected::File { size, executable, .. }, Expected::File { size: s, executable: x, .. }) => size == s && executable == x,
            (a, b) => a == b,
        }
    }

    fn of_tree_entry(kind: &TreeEntryKind) -> Expected {
        match kind {
            TreeEntryKind::File { executable, size, .. } => Expected::File { size: *size, executable: *executable, blake3: [0; 32] },
            TreeEntryKind::Directory => Expected::Directory,
            TreeEntryKind::Symlink { target } => Expected::Symlink { target: target.clone() },
        }
    }
}

struct OpenFile {
    path: String,
    size: u64,
    written: u64,
    hasher: blake3::Hasher,
    blake3: [u8; 32],
}

/// What a patch manifest says the new build is, and which of it was produced.
pub struct ManifestBinding {
    entries: HashMap<String, (Expected, bool)>,
    produced: usize,
    open: Option<OpenFile>,
    /// Files an inner sink took to copy (`copy_old_file`), in offer order, with their BLAKE3.
    copies: Vec<(String, [u8; 32])>,
    patch_size: u64,
    patch_blake3: [u8; 32],
    head_blake3: Option<[u8; 32]>,
    segments: Vec<SegmentRef>,
}

fn refused(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, ManifestRefusal { what })
}

impl ManifestBinding {
    /// From a patch manifest's bytes (already checked against a signature by the caller).
    pub fn new(manifest_bytes: &[u8]) -> Result<ManifestBinding, manifest::ManifestError> {
        let m = manifest::decode(manifest_bytes)?;
        if m.kind != ManifestKind::Patch {
            return Err(manifest::ManifestError::WrongKind { expected: ManifestKind::Patch, found: m.kind });
        }
        let mut entries = HashMap::with_capacity(m.entries.len());
        for e in m.entries {
            let expected = match e.kind {
                EntryKind::File => Expected::File { size: e.size, executable: e.executable, blake3: e.blake3 },
                EntryKind::Directory => Expected::Directory,
                EntryKind::Symlink => Expected::Symlink { target: e.symlink_target.unwrap_or_default() },
            };
            entries.insert(e.path, (expected, false));
        }
        Ok(ManifestBinding {
            entries,
            produced: 0,
            open: None,
            copies: Vec::new(),
            patch_size: m.patch_size,
            patch_blake3: m.patch_blake3,
            head_blake3: m.head_blake3,
            segments: m.segments,
        })
    }

    /// The patch's size the manifest vouches for.
    pub fn patch_size(&self) -> u64 {
        self.patch_size
    }

    /// The patch's BLAKE3 the manifest vouches for.
    pub fn patch_blake3(&self) -> [u8; 32] {
        self.patch_blake3
    }

    /// The patch's segments, as the manifest lists them.
    pub fn segments(&self) -> &[SegmentRef] {
        &self.segments
    }

    /// Whether the manifest states the BLAKE3 of the patch's head (header and tree section),
    /// so that no unvouched tree is ever decoded ([`ManifestBinding::check_head`]).
    pub fn vouches_for_head(&self) -> bool {
        self.head_blake3.is_some()
    }

    /// Refuses a patch head (its first `len` bytes, hashing to `blake3`) other than the one
    /// the manifest states, when it states one.
    pub fn check_head(&self, len: u64, blake3: &[u8; 32]) -> io::Result<()> {
        match self.head_blake3 {
            Some(want) if want != *blake3 => {
                Err(refused(format!("the patch's header and tree ({len} bytes) have BLAKE3 {}, the manifest lists {}", hex(blake3), hex(&want))))
            }
            _ => Ok(()),
        }
    }

    /// Bytes of the patch before its first segment (header and tree).
    pub fn header_and_tree_len(&self) -> Option<u64> {
        self.segments.first().map(|s| s.patch_offset)
    }

    fn claim(&mut self, path: &str, got: &Expected) -> io::Result<()> {
        let Some((want, seen)) = self.entries.get_mut(path) else {
            return Err(refused(format!("the patch writes {path:?}, which the manifest does not list")));
        };
        if !want.same_kind(got) {
            return Err(refused(format!("the patch writes {path:?} as {got:?}, the manifest lists {want:?}")));
        }
        if *seen {
            return Err(refused(format!("the patch writes {path:?} twice")));
        }
        *seen = true;
        self.produced += 1;
        Ok(())
    }

    /// The patch's tree, before anything is written: every entry the manifest lists, each of
    /// its kind and size, and a delta stream as long as the manifest's segments make. Sizes
    /// a caller reserves room by from the tree (the new files, `PatchTree::scratch_bytes`)
    /// are then the signed ones: a forged header claiming gigabytes is refused here as not
    /// vouched for, not taken for a full disk.
    pub fn check_tree(&self, tree: &PatchTree) -> io::Result<()> {
        for e in &tree.entries {
            let got = Expected::of_tree_entry(&e.kind);
            match self.entries.get(&e.path) {
                Some((want, _)) if want.same_kind(&got) => {}
                Some((want, _)) => return Err(refused(format!("the patch's tree lists {:?} as {got:?}, the manifest lists {want:?}", e.path))),
                None => return Err(refused(format!("the patch's tree lists {:?}, which the manifest does not", e.path))),
            }
        }
        // Paths are unique in both (each decoder refuses a repeated one).
        if tree.entries.len() != self.entries.len() {
            return Err(refused(format!("the patch's tree has {} entries, the manifest lists {}", tree.entries.len(), self.entries.len())));
        }
        let vouched = self.segments.iter().try_fold(0u64, |n, s| n.checked_add(s.new_len));
        let delta = tree.delta_bytes();
        if vouched != Some(delta) {
            return Err(refused(format!(
                "the patch's delta stream is {delta} bytes, the manifest's segments make {}",
                vouched.map_or("more than 2^64".into(), |n| n.to_string())
            )));
        }
        Ok(())
    }

    fn listed_blake3(&self, path: &str) -> [u8; 32] {
        match self.entries.get(path) {
            Some((Expected::File { blake3, .. }, _)) => *blake3,
            _ => [0; 32],
        }
    }

    /// Once the applier finished: every listed entry was produced, and (after a
    /// resume) each file written before the interruption is re-read and checked.
    /// Directories and links of a resumed apply were checked when created.
    pub fn finish<S: BuildSink>(&mut self, resumed: bool, sink: &mut S) -> io::Result<()> {
        if let Some(f) = &self.open {
            return Err(refused(format!("{:?} was left unfinished", f.path)));
        }
        if !self.copies.is_empty() {
            return Err(refused("copies offered but never reported".into()));
        }
        if !resumed {
            if self.produced != self.entries.len() {
                let missing = self.entries.iter().find(|(_, (_, seen))| !seen).map(|(p, _)| p.clone()).unwrap_or_default();
                return Err(refused(format!(
                    "the manifest lists {} entries, the patch produced {} (first missing: {missing:?})",
                    self.entries.len(),
                    self.produced
                )));
            }
            return Ok(());
        }
        let mut buf = vec![0u8; REREAD_BYTES];
        for (path, (want, seen)) in self.entries.iter_mut() {
            if *seen {
                continue;
            }
            if let Expected::File { size, blake3: want_hash, .. } = want {
                let mut hasher = blake3::Hasher::new();
                let mut at = 0u64;
                while at < *size {
                    let n = (*size - at).min(REREAD_BYTES as u64) as usize;
                    sink.read_written(path, at, &mut buf[..n])?;
                    hasher.update(&buf[..n]);
                    at += n as u64;
                }
                if hasher.finalize().as_bytes() != want_hash {
                    return Err(refused(format!("{path:?}, written before the interruption, differs from its manifest BLAKE3")));
                }
            }
            *seen = true;
        }
        Ok(())
    }
}

/// A sink that passes every call to `inner` only if `binding` allows it.
pub struct BoundSink<'a, S: BuildSink> {
    /// What the manifest allows.
    pub binding: &'a mut ManifestBinding,
    /// The sink that receives what is allowed.
    pub inner: &'a mut S,
}

impl<S: BuildSink> BoundSink<'_, S> {
    fn open(&mut self, path: &str, executable: bool, size: u64) -> io::Result<()> {
        if self.binding.open.is_some() {
            return Err(refused(format!("{path:?} begins before the previous file finished")));
        }
        self.binding.claim(path, &Expected::File { size, executable, blake3: [0; 32] })?;
        let blake3 = self.binding.listed_blake3(path);
        self.binding.open = Some(OpenFile { path: path.to_string(), size, written: 0, hasher: blake3::Hasher::new(), blake3 });
        Ok(())
    }
}

impl<S: BuildSink> BuildSink for BoundSink<'_, S> {
    fn check_head(&mut self, len: u64, blake3: &[u8; 32]) -> io::Result<()> {
        self.binding.check_head(len, blake3)?;
        self.inner.check_head(len, blake3)
    }

    fn trusts_side_infos(&self) -> bool {
        self.binding.vouches_for_head() || self.inner.trusts_side_infos()
    }

    fn check_tree(&mut self, tree: &PatchTree) -> io::Result<()> {
        self.binding.check_tree(tree)?;
        self.inner.check_tree(tree)
    }

    fn create_directory(&mut self, path: &str) -> io::Result<()> {
        self.binding.claim(path, &Expected::Directory)?;
        self.inner.create_directory(path)
    }

    fn create_symlink(&mut self, path: &str, target: &str) -> io::Result<()> {
        self.binding.claim(path, &Expected::Symlink { target: target.to_string() })?;
        self.inner.create_symlink(path, target)
    }

    fn begin_file(&mut self, path: &str, executable: bool, size: u64) -> io::Result<()> {
        self.open(path, executable, size)?;
        self.inner.begin_file(path, executable, size)
    }

    fn write_file(&mut self, data: &[u8]) -> io::Result<()> {
        let Some(f) = self.binding.open.as_mut() else {
            return Err(refused("bytes written outside a file".into()));
        };
        if data.len() as u64 > f.size - f.written {
            return Err(refused(format!("{:?} grows past its {} bytes", f.path, f.size)));
        }
        f.hasher.update(data);
        f.written += data.len() as u64;
        self.inner.write_file(data)
    }

    fn finish_file(&mut self) -> io::Result<()> {
        let Some(f) = self.binding.open.take() else {
            return Err(refused("a file finished that was never begun".into()));
        };
        if f.written != f.size {
            return Err(refused(format!("{:?} has {} of its {} bytes", f.path, f.written, f.size)));
        }
        let got = f.hasher.finalize();
        if got.as_bytes() != &f.blake3 {
            return Err(refused(format!("{:?} has BLAKE3 {}, the manifest lists {}", f.path, got.to_hex(), hex(&f.blake3))));
        }
        self.inner.finish_file()
    }

    fn resume_file(&mut self, path: &str, executable: bool, size: u64, written: u64) -> io::Result<()> {
        if written > size {
            return Err(refused(format!("{path:?}: resume at byte {written} of {size}")));
        }
        self.open(path, executable, size)?;
        self.inner.resume_file(path, executable, size, written)?;
        // Re-hash what was written before the interruption, from the output itself.
        let mut buf = vec![0u8; REREAD_BYTES.min(written as usize)];
        let f = self.binding.open.as_mut().expect("opened above");
        while f.written < written {
            let n = (written - f.written).min(REREAD_BYTES as u64) as usize;
            self.inner.read_written(path, f.written, &mut buf[..n])?;
            f.hasher.update(&buf[..n]);
            f.written += n as u64;
        }
        Ok(())
    }

    fn read_written(&mut self, path: &str, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.inner.read_written(path, offset, buf)
    }

    // The scratch space is not the build: the manifest does not list it.
    fn write_scratch(&mut self, offset: u64, data: &[u8]) -> io::Result<bool> {
        self.inner.write_scratch(offset, data)
    }

    fn read_scratch(&mut self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.inner.read_scratch(offset, buf)
    }

    fn copy_old_file(&mut self, from: &str, path: &str, executable: bool, size: u64) -> io::Result<bool> {
        self.binding.claim(path, &Expected::File { size, executable, blake3: [0; 32] })?;
        let taken = self.inner.copy_old_file(from, path, executable, size)?;
        if taken {
            let blake3 = self.binding.listed_blake3(path);
            self.binding.copies.push((path.to_string(), blake3));
        } else {
            // The applier copies through begin_file/write_file: let that claim the entry.
            if let Some((_, seen)) = self.binding.entries.get_mut(path) {
                *seen = false;
                self.binding.produced -= 1;
            }
        }
        Ok(taken)
    }

    fn finish_copies(&mut self) -> io::Result<Vec<[u8; 32]>> {
        let hashes = self.inner.finish_copies()?;
        let copies = std::mem::take(&mut self.binding.copies);
        if hashes.len() != copies.len() {
            return Err(refused(format!("{} copies offered, {} reported", copies.len(), hashes.len())));
        }
        for ((path, want), got) in copies.iter().zip(&hashes) {
            if want != got {
                return Err(refused(format!("{path:?} (copied from the old build) has BLAKE3 {}, the manifest lists {}", hex(got), hex(want))));
            }
        }
        Ok(hashes)
    }
}

/// The patch's BLAKE3, hashed as it streams, with a saved state at every
/// segment boundary the manifest names, so that a resume point (always at a
/// segment boundary) can carry the hash of everything before it.
pub struct PatchStreamHash {
    hasher: PatchHasher,
    /// Boundaries still ahead (patch offsets where a segment starts), ascending.
    boundaries: Vec<u64>,
    next: usize,
    /// Saved states at passed boundaries not yet taken by [`PatchStreamHash::state_at`].
    saved: Vec<(u64, PatchHasher)>,
    /// BLAKE3 of the header and tree, once passed (a resume re-fetches them: they must be the same bytes).
    head: Option<[u8; 32]>,
    head_len: u64,
}

impl PatchStreamHash {
    /// Hashes a patch from its first byte, for `binding`'s patch.
    pub fn new(binding: &ManifestBinding) -> PatchStreamHash {
        // Resume points fall where a segment ends; the first segment's start ends the header and tree.
        let mut boundaries: Vec<u64> = binding.segments.iter().flat_map(|s| [s.patch_offset, s.patch_offset.saturating_add(s.patch_len)]).collect();
        boundaries.push(binding.patch_size);
        boundaries.sort_unstable();
        boundaries.dedup();
        let head_len = boundaries.first().copied().unwrap_or(binding.patch_size);
        PatchStreamHash { hasher: PatchHasher::new(), boundaries, next: 0, saved: Vec::new(), head: None, head_len }
    }

    /// Continues from [`PatchStreamHash::state_at`]'s bytes; `header_and_tree` must
    /// be the bytes hashed the first time.
    pub fn resume(binding: &ManifestBinding, state: &[u8], header_and_tree: &[u8]) -> io::Result<PatchStreamHash> {
        let bad = |why: String| io::Error::new(io::ErrorKind::InvalidData, format!("patch hash state: {why}"));
        if state.len() < 32 {
            return Err(bad("truncated".into()));
        }
        let mut s = PatchStreamHash::new(binding);
        let head: [u8; 32] = state[..32].try_into().expect("32 bytes");
        if blake3::hash(header_and_tree).as_bytes() != &head || header_and_tree.len() as u64 != s.head_len {
            return Err(bad("the patch's header and tree differ from the ones the interrupted apply used".into()));
        }
        s.head = Some(head);
        s.hasher = PatchHasher::from_state(&state[32..]).map_err(|e| bad(e.to_string()))?;
        let at = s.hasher.len();
        if !s.boundaries.contains(&at) {
            return Err(bad(format!("{at} bytes hashed is not a segment boundary of this patch")));
        }
        s.next = s.boundaries.partition_point(|&b| b <= at);
        Ok(s)
    }

    /// The next bytes of the patch.
    pub fn update(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            let pos = self.hasher.len();
            let Some(&b) = self.boundaries.get(self.next) else {
                self.hasher.update(data);
                return;
            };
            if pos == b {
                self.next += 1;
                continue;
            }
            let take = ((b - pos) as usize).min(data.len());
            self.hasher.update(&data[..take]);
            data = &data[take..];
            if self.hasher.len() == b {
                if b == self.head_len && self.head.is_none() {
                    // The hash of the header and tree alone: a resume re-fetches them and must get the same bytes.
                    self.head = Some(self.hasher.finalize());
                }
                self.saved.push((b, self.hasher.clone()));
                if self.saved.len() > 4 {
                    self.saved.remove(0);
                }
                self.next += 1;
            }
        }
    }

    /// Bytes of the patch's header and tree (up to the first segment).
    pub fn head_len(&self) -> u64 {
        self.head_len
    }

    /// The state to save with a resume point at patch offset `at`.
    pub fn state_at(&self, at: u64) -> Option<Vec<u8>> {
        let head = self.head?;
        let h = if self.hasher.len() == at { Some(&self.hasher) } else { self.saved.iter().rev().find(|(o, _)| *o == at).map(|(_, h)| h) }?;
        let mut out = head.to_vec();
        out.extend_from_slice(&h.state());
        Some(out)
    }

    /// Bytes hashed so far.
    pub fn len(&self) -> u64 {
        self.hasher.len()
    }

    /// Whether nothing was hashed yet.
    pub fn is_empty(&self) -> bool {
        self.hasher.is_empty()
    }

    /// Checks size and BLAKE3 against the manifest.
    pub fn check(&self, binding: &ManifestBinding) -> io::Result<()> {
        if self.hasher.len() != binding.patch_size {
            return Err(refused(format!("the patch is {} bytes, the manifest says {}", self.hasher.len(), binding.patch_size)));
        }
        let got = self.hasher.finalize();
        if got != binding.patch_blake3 {
            return Err(refused(format!("the patch has BLAKE3 {}, the manifest lists {}", hex(&got), hex(&binding.patch_blake3))));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{Error, ErrorKind};
    use crate::manifest::{Manifest, ManifestError};
    use crate::memory::{MemoryOldBuild, MemorySink};
    use crate::{apply_patch, diff_builds, Build, DiffOptions};

    fn manifest(kind: ManifestKind, patch: &[u8]) -> Vec<u8> {
        let patch_kind = kind == ManifestKind::Patch;
        Manifest {
            kind,
            from_build: patch_kind.then(|| "a".into()),
            to_build: "b".into(),
            patch_size: if patch_kind { patch.len() as u64 } else { 0 },
            patch_blake3: if patch_kind { *blake3::hash(patch).as_bytes() } else { [0; 32] },
            head_blake3: None,
            segments: Vec::new(),
            entries: Vec::new(),
        }
        .encode()
        .unwrap()
    }

    /// A forged header that claims a transformed module's normalized form is 64 MiB (the
    /// scratch space a browser reserves room for before it writes: `PatchTree::scratch_bytes`)
    /// is refused at its tree, as not vouched for, before the sink receives anything.
    #[test]
    fn a_forged_tree_claiming_scratch_space_is_refused_before_anything_is_written() {
        let arcade = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/arcade");
        let read = |v: &str| std::fs::read(arcade.join(v).join("logic.wasm")).unwrap();
        let build = |v: &str| {
            let content = crate::EntryContent::File { executable: false, data: read(v) };
            Build::from_entries(vec![crate::BuildEntry { path: "logic.wasm".into(), content }]).unwrap()
        };
        let (old, new) = (build("v1"), build("v2"));
        let (patch, _) = diff_builds(&old, &new, &DiffOptions::default(), &|_, _| {}).unwrap();
        let info = crate::inspect::inspect_patch(&patch[..]).unwrap();
        let mut tree = info.resolve(crate::diff::build_listing(&old)).unwrap();
        assert_eq!(tree.transforms.len(), 1, "the module is stored transformed");
        let new_hash = *blake3::hash(&read("v2")).as_bytes();
        let m = crate::inspect::patch_manifest(&tree, &info.layout, |_| new_hash, *blake3::hash(&patch).as_bytes(), "a", "b").unwrap().encode().unwrap();

        // The real patch applies bound to its manifest.
        let mut binding = ManifestBinding::new(&m).unwrap();
        let mut sink = MemorySink::default();
        apply_patch(&patch[..], &mut MemoryOldBuild::new(&old), &mut BoundSink { binding: &mut binding, inner: &mut sink }, &mut |_| {}).unwrap();
        assert_eq!(sink.into_build(), new);

        // The forger's header: the same entries, the normalized form claimed at the cap.
        let head = info.layout.segment_spans[0].0 as usize;
        tree.transforms[0].normalized_size = crate::patch_format::MAX_WASM_TRANSFORM_BYTES;
        let mut forged = crate::tree_plan::encode_header_and_tree(&tree, 3).unwrap();
        forged.extend_from_slice(&patch[head..]);
        let claimed = tree.scratch_bytes();
        assert!(claimed >= crate::patch_format::MAX_WASM_TRANSFORM_BYTES, "{claimed}");

        // Refused at its head (the manifest states the head's BLAKE3), before the tree is
        // decoded; and, under a manifest that does not state it, at its tree.
        let mut old_style = crate::manifest::decode(&m).unwrap();
        old_style.head_blake3 = None;
        for (manifest, why) in [(m.clone(), "header and tree"), (old_style.encode().unwrap(), "delta stream")] {
            let mut binding = ManifestBinding::new(&manifest).unwrap();
            let mut sink = MemorySink::default();
            let mut applier = crate::PatchApplier::new();
            let err = applier.push(&forged[..], &mut MemoryOldBuild::new(&old), &mut BoundSink { binding: &mut binding, inner: &mut sink }).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Unvouched, "{err}");
            assert!(err.to_string().contains(why), "{err}");
            assert!(applier.tree().is_none_or(|t| t.scratch_bytes() == claimed), "the caller may see the claim, after the refusal");
            assert_eq!(sink.into_build(), Build::from_entries(Vec::new()).unwrap(), "nothing written");
        }
    }

    #[test]
    fn refusals_the_wrong_old_build_and_a_bad_resume_point_are_typed() {
        let old = Build::single_file(vec![7; 5000]);
        let (patch, _) = diff_builds(&old, &Build::single_file(vec![8; 5000]), &DiffOptions::default(), &|_, _| {}).unwrap();

        let err = ManifestBinding::new(&manifest(ManifestKind::Build, &patch)).err().unwrap();
        assert_eq!(err, ManifestError::WrongKind { expected: ManifestKind::Patch, found: ManifestKind::Build });
        assert_eq!(err.kind(), ErrorKind::Invalid);

        // A manifest that lists nothing: the patch's one file is refused as it begins.
        let mut binding = ManifestBinding::new(&manifest(ManifestKind::Patch, &patch)).unwrap();
        let mut sink = MemorySink::default();
        let err = apply_patch(&patch[..], &mut MemoryOldBuild::new(&old), &mut BoundSink { binding: &mut binding, inner: &mut sink }, &mut |_| {}).unwrap_err();
        assert!(matches!(err, Error::NotInManifest { .. }), "{err}");
        assert_eq!(err.kind(), ErrorKind::Unvouched);
        assert!(err.to_string().starts_with("not in the signed manifest: "), "{err}");

        let short = Build::single_file(vec![7; 4999]);
        let err = apply_patch(&patch[..], &mut MemoryOldBuild::new(&short), &mut MemorySink::default(), &mut |_| {}).unwrap_err();
        assert!(matches!(err, Error::WrongOldBuild { .. }), "{err}");
        assert_eq!(err.kind(), ErrorKind::OldBuild);

        let head = crate::inspect::inspect_patch(&patch[..]).unwrap().layout.segment_spans[0].0 as usize;
        let point = crate::ResumePoint { segments_done: 0, patch_offset: head as u64, new_offset: 1 };
        let err = crate::PatchApplier::resume(&patch[..head], point, &mut MemoryOldBuild::new(&old), &mut MemorySink::default()).err().unwrap();
        assert!(matches!(err, Error::CannotResume { .. }), "{err}");
        assert_eq!(err.kind(), ErrorKind::Invalid);
    }
}
