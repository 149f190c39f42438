//! The generator's side of transformed wasm files (docs/FORMAT.md §2.8): a changed module is
//! stored as its normalized form, whose bytes the caller computes once from the whole old and
//! new module ([`WasmTransform::prepare`]) and keeps where the generator's steps can read its
//! ranges (a file, an R2 object). The generator itself sees only the small [`WasmTransform`]:
//! the sizes, the side info and a BLAKE3 per MiB of the normalized form, which it checks
//! against the normalized bytes it is given, so a caller that reads the wrong object gets an
//! error, never a patch that rebuilds wrong bytes.
//!
//! When to transform: whenever the forward transform renumbers something. The native diff
//! diffs the module both ways and keeps the smaller; on the five measured module pairs the
//! normalized form never lost where something was renumbered (BENCHMARKS.md, "wasm-aware
//! patches in the format"), and the generator cannot afford two diffs of every segment.
//!
//! The field-split layout (docs/FORMAT.md §2.8.7), which the native diff also keeps only where
//! its diff is smaller, is chosen here by a trial that costs a fraction of a diff: both forms
//! compressed by zstd at level 3, part by part against their reference's same part (the old
//! module's sections, or its sections and field streams split), as the generator's segments
//! are cut, with long-distance matching; the split form is kept where it is 5% smaller
//! (BENCHMARKS.md, "Generator: the split trial part by part").
//! A split module's old file is read split too ([`FileForm::OldSplit`]): the caller keeps
//! those bytes as it keeps the normalized form, and checks them against their BLAKE3.

use std::borrow::Cow;

use crate::error::{Error, Result};
use crate::patch_format::{MAX_WASM_SIDE_INFO, MAX_WASM_TRANSFORM_BYTES};
use crate::wasm_transform::{self as wt, Normalized};
use crate::window_plan::AlignedPart;
use crate::zstd_frame::{compressed_len, FrameSearch, LongDistance};
use edgepatch_format::transform::{NormalizedBytes, Transform, TransformStop};
use edgepatch_format::{Capabilities, Capability};

/// Bytes of the normalized form covered by one check hash. At most one segment, so that
/// every chunk lies within a segment and the one before it (the history).
pub const NORMALIZED_CHECK_CHUNK: u64 = 1 << 20;

/// Version 2 added the split old module's BLAKE3 (and, with split flag 2, a renamed
/// module's old path); version 3 the parts of a split module (`WasmTransform`'s `parts`).
/// Version 2 records are still read (a split module without parts: cut every segment).
const ENCODING_VERSION: u8 = 3;

/// Which bytes of a file a [`super::ByteRange`] is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileForm {
    /// The file as it is in its build.
    AsIs,
    /// The normalized form of a transformed wasm module (what [`WasmTransform::prepare`]
    /// returned beside the transform), not the file.
    Normalized,
    /// The old module a split module reads in the field-split layout (at its path, or the one
    /// it was renamed from; [`PreparedTransform::old_split`]), not the file: old ranges only.
    OldSplit,
}

/// One new wasm module the generator stores in its normalized form: everything the
/// generator needs besides the normalized bytes, which it reads by range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WasmTransform {
    pub(super) path: String,
    pub(super) new_size: u64,
    pub(super) new_blake3: [u8; 32],
    pub(super) normalized_size: u64,
    pub(super) side_info: Vec<u8>,
    /// BLAKE3 of each `NORMALIZED_CHECK_CHUNK` of the normalized form (the last shorter).
    pub(super) chunk_hashes: Vec<[u8; 32]>,
    /// In the field-split layout: the BLAKE3 of the old module split (as the applier reads it).
    pub(super) old_split_blake3: Option<[u8; 32]>,
    /// The old module's path, where it is not `path` (a renamed module,
    /// [`NormalizedNew::renamed`]): the old file read split.
    pub(super) old_path: Option<String>,
    /// In the field-split layout: the split module's sections and field streams, each with
    /// the old module's same part (`crate::window_plan::stream_parts`): contiguous, from (0, 0) to
    /// (`normalized_size`, the old module's size). Each part's segments are diffed against
    /// the old part (the in-memory diff's stream-aligned segments).
    pub(super) parts: Vec<AlignedPart>,
}

/// What [`WasmTransform::prepare`] makes of a changed module pair: the transform, the
/// normalized form the patch stores, and, in the field-split layout, the old module as the
/// applier reads it (the same size as the old module).
#[derive(Debug)]
pub struct PreparedTransform {
    /// What every generator of the patch is given ([`super::PatchGenerator::add_wasm_transform`]).
    pub transform: WasmTransform,
    /// The normalized form, read as [`FileForm::Normalized`].
    pub normalized: Vec<u8>,
    /// The old module split, read as [`FileForm::OldSplit`], in the field-split layout.
    pub old_split: Option<Vec<u8>>,
}

/// A changed module pair half prepared ([`WasmTransform::normalize_owned`]): the new module
/// normalized and checked, waiting for the old module again to choose the layout it is stored
/// in ([`Self::finish`]).
#[derive(Debug)]
pub struct NormalizedNew {
    path: String,
    new_size: u64,
    new_blake3: [u8; 32],
    old_blake3: [u8; 32],
    renumbered: bool,
    normalized: Normalized,
    /// The old module's path, where it is not the new one's (a renamed module).
    old_path: Option<String>,
}

impl NormalizedNew {
    fn of(path: &str, old: Cow<[u8]>, new: Cow<[u8]>) -> Option<NormalizedNew> {
        let (new_size, old_blake3) = (new.len() as u64, *blake3::hash(&old).as_bytes());
        let (normalized, new_blake3, renumbered) = normalize_checked(old, new, false)?;
        Some(NormalizedNew { path: path.to_string(), new_size, new_blake3, old_blake3, renumbered, normalized, old_path: None })
    }

    /// For an old module at another path than the new one, `old_path` (a renamed module,
    /// [`crate::renamed_files::renamed_counterparts`]): in the field-split layout, the patch
    /// names that old file as the one read split (`FLAG_SPLIT_REFERENCE`, docs/FORMAT.md
    /// §2.8.1), and the caller keeps it split as for a module at its own path.
    pub fn renamed(self, old_path: &str) -> NormalizedNew {
        NormalizedNew { old_path: (old_path != self.path).then(|| old_path.to_string()), ..self }
    }

    /// The transform, from the old module given again (checked to be the one given first):
    /// normalized, or in the field-split layout where its trial (module doc) says so. None:
    /// store the module as it is (nothing renumbered and the split layout not smaller, or
    /// another old module).
    pub fn finish(self, old: Vec<u8>) -> Option<PreparedTransform> {
        self.finish_with(Cow::Owned(old))
    }

    fn finish_with(self, old: Cow<[u8]>) -> Option<PreparedTransform> {
        if *blake3::hash(&old).as_bytes() != self.old_blake3 {
            return None;
        }
        let NormalizedNew { path, new_size, new_blake3, renumbered, normalized, old_path, .. } = self;
        let (n, old_split, parts) = match split_if_smaller(old, normalized)? {
            // Nothing renumbered: the side info would only add bytes.
            Layout::Whole(_) if !renumbered => return None,
            Layout::Whole(n) => (n, None, Vec::new()),
            Layout::Split(split, old_split, parts) => (split, Some(old_split), parts),
        };
        let transform = WasmTransform {
            path,
            new_size,
            new_blake3,
            normalized_size: n.bytes.len() as u64,
            side_info: n.side_info,
            chunk_hashes: chunk_hashes(&n.bytes),
            old_split_blake3: old_split.as_ref().map(|o| *blake3::hash(o).as_bytes()),
            old_path: old_path.filter(|_| old_split.is_some()),
            parts,
        };
        Some(PreparedTransform { transform, normalized: n.bytes, old_split })
    }
}

/// The normalized form of `new` against `old` and its side info, if a patch may store it:
/// both are modules the transform reads, the old module is its own normalized form (the
/// applier reads the old file as it is), something was renumbered (else the side info only
/// adds bytes), the sizes are within the format's caps, and the inverse gives `new` back.
pub fn normalize_for_patch(old: &[u8], new: &[u8]) -> Option<Normalized> {
    normalize_checked(Cow::Borrowed(old), Cow::Borrowed(new), true).map(|(n, ..)| n)
}

/// [`normalize_for_patch`] also where nothing is renumbered (the normalized form is then the
/// module itself, with a side info that says so): a form the field-split layout can still
/// store smaller (docs/FORMAT.md §2.8.7), where a toolchain re-emitted code in place.
pub(crate) fn normalize_even_unchanged(old: &[u8], new: &[u8]) -> Option<Normalized> {
    normalize_checked(Cow::Borrowed(old), Cow::Borrowed(new), false).map(|(n, ..)| n)
}

/// [`normalize_for_patch`], also returning the new module's BLAKE3 and whether something was
/// renumbered. Owned inputs are freed as soon as they are no longer needed (the old module
/// once its reference is made, the new one once it is normalized and hashed; the inverse's
/// output is compared by BLAKE3).
fn normalize_checked(old: Cow<[u8]>, new: Cow<[u8]>, renumbered_only: bool) -> Option<(Normalized, [u8; 32], bool)> {
    let cap = MAX_WASM_TRANSFORM_BYTES as usize;
    let transform = crate::transforms::detect(&old, &new)?;
    if new.len() > cap || old.len() >= i32::MAX as usize {
        return None;
    }
    // The peak is the new module's forward transform, with the old module freed by then:
    // for esbuild's 14 MB module, natively, 43 MB of allocations at most (the new module,
    // the reference's copy of the old data, the forward's output and window lists; 60 MB of
    // wasm memory; measured when this was written; BENCHMARKS.md's history in git).
    let n = transform.forward(old, &new).ok()?;
    let renumbered = n.bytes != *new;
    if (renumbered_only && !renumbered) || n.bytes.len() > cap || n.side_info.is_empty() || n.side_info.len() as u64 > MAX_WASM_SIDE_INFO || n.bytes.len() < 8 {
        return None;
    }
    let (new_len, new_blake3) = (new.len(), *blake3::hash(&new).as_bytes());
    drop(new);
    // The writer's own check that the applier will get the file back.
    gives_back(transform, &n, new_len, &new_blake3).then_some((n, new_blake3, renumbered))
}

/// Whether the inverse of `n` is the module of `len` bytes and BLAKE3 `blake3`.
/// Hashed as the inverse hands it over, not rebuilt into a second module-sized buffer (which
/// was the peak of the Worker's transform phase: BENCHMARKS.md, "Worker: modules up to 20 MiB").
fn gives_back(transform: &dyn Transform, n: &Normalized, len: usize, blake3: &[u8; 32]) -> bool {
    let (mut hasher, mut total) = (blake3::Hasher::new(), 0usize);
    let rebuilt = transform.inverse(NormalizedBytes::Shared(&n.bytes), &n.side_info, &mut |piece: &[u8]| {
        total += piece.len();
        if total > len {
            return Err(TransformStop::Caller(invalid("rebuilds more bytes than the module has")));
        }
        hasher.update(piece);
        Ok(())
    });
    rebuilt.is_ok() && total == len && hasher.finalize().as_bytes() == blake3
}

/// zstd's level for the split-or-not trial: level 3 chose as the native diff's full diffs did
/// on all six measured pairs, where level 1 also did but with a narrower margin on sql.js
/// (split / whole: 1.054 at level 3, 1.312 at level 1; BENCHMARKS.md, "Generator: the
/// field-split layout").
const SPLIT_TRIAL_LEVEL: i32 = 3;

/// The split layout is kept where its trial is under this share (percent) of the whole
/// module's: splitting costs what the trial does not see (a larger side info, a segment's
/// headers and frames per part). On the 20 wasm pairs measured in session 34 the trials' ratio
/// was at most 0.824 (ort) where splitting paid, and at least 0.928 where it did not: sql.js,
/// whose split patch was 14,655 bytes against 12,549 whole. (It was 0.997 before the data gaps
/// made its split data section smaller, and this share 95.)
const SPLIT_TRIAL_MAX_PERCENT: usize = 88;

/// How the patch stores a module: its normalized form, or that in the field-split layout
/// with the old module split.
enum Layout {
    Whole(Normalized),
    /// The split form, the old module split, and their parts paired.
    Split(Normalized, Vec<u8>, Vec<AlignedPart>),
}

/// `n` (checked to give the new module back) in the field-split layout with `old` split, if
/// their trial (module doc) is smaller than `n` against `old` as it is. Splits in place, for a
/// Worker's heap: at most two module-sized buffers and about half a code section at once (`n`
/// split in place beside `old`, then `old` split in place beside it), and a trial's frame of a
/// quarter of one; the check that the split form joins back to `n` hashes it a body at a time.
/// A borrowed `old` (the CLI's) is split into a buffer of its own. None: a step failed once `n`
/// was split.
fn split_if_smaller(old: Cow<[u8]>, mut n: Normalized) -> Option<Layout> {
    // Each part of `new` against `old`'s same part (paired as the patch's segments are), summed.
    let trial = |new: &[u8], old: &[u8], parts: &[AlignedPart]| -> Option<usize> {
        let search = FrameSearch { long_distance: Some(LongDistance::default()), ..FrameSearch::level(SPLIT_TRIAL_LEVEL) };
        let part = |p: &AlignedPart| compressed_len(&new[p.new.0 as usize..p.new.1 as usize], &old[p.old.0 as usize..p.old.1 as usize], search).ok();
        parts.iter().map(part).sum()
    };
    let sections = wt::section_parts(&n.bytes).ok().zip(wt::section_parts(&old).ok());
    let whole_parts = sections.map(|(new_parts, old_parts)| crate::window_plan::stream_parts(n.bytes.len() as u64, &new_parts, old.len() as u64, &old_parts));
    let Some(whole) = whole_parts.and_then(|parts| trial(&n.bytes, &old, &parts)) else { return Some(Layout::Whole(n)) };
    let (n_blake3, whole_side_info) = (blake3::hash(&n.bytes), n.side_info.clone());
    // On an error `n` is as it was.
    if wt::into_code_layout(&mut n, Some(&old)).is_err() {
        return Some(Layout::Whole(n));
    }
    let split = n;
    let (old_split, parts) = crate::window_plan::split_old_paired(old, &split.bytes, &split.side_info).ok()?;
    let split_size = trial(&split.bytes, &old_split, &parts)?;
    if wt::join_code_layout_hash(&split.bytes, &split.side_info).ok()? != n_blake3 {
        return None;
    }
    if split_size * 100 < whole * SPLIT_TRIAL_MAX_PERCENT && split.side_info.len() as u64 <= MAX_WASM_SIDE_INFO {
        return Some(Layout::Split(split, old_split, parts));
    }
    drop(old_split);
    let joined = wt::join_code_layout(&split.bytes, &split.side_info).ok()?;
    Some(Layout::Whole(Normalized { bytes: joined, side_info: whole_side_info }))
}

fn invalid(what: impl Into<String>) -> Error {
    Error::Invalid(what.into())
}

fn chunk_hashes(normalized: &[u8]) -> Vec<[u8; 32]> {
    normalized.chunks(NORMALIZED_CHECK_CHUNK as usize).map(|c| *blake3::hash(c).as_bytes()).collect()
}

impl WasmTransform {
    /// The transform of the new build's module at `path` ("" for a single file) from the whole
    /// old and new module, the normalized form (which the caller keeps, to be read by the
    /// ranges the generator asks for with [`FileForm::Normalized`]) and, in the field-split
    /// layout, the old module split (kept likewise, for [`FileForm::OldSplit`]). None: store
    /// the module as it is (see [`normalize_for_patch`]).
    pub fn prepare(path: &str, old: &[u8], new: &[u8]) -> Option<PreparedTransform> {
        NormalizedNew::of(path, Cow::Borrowed(old), Cow::Borrowed(new))?.finish_with(Cow::Borrowed(old))
    }

    /// [`Self::prepare`] in two calls, for a caller short of memory (a Worker's wasm heap):
    /// this one takes both modules and frees each as soon as it can (the old one before the
    /// new one's forward transform, the peak); [`NormalizedNew::finish`] takes the old module
    /// again, read anew, to choose the layout.
    pub fn normalize_owned(path: &str, old: Vec<u8>, new: Vec<u8>) -> Option<NormalizedNew> {
        NormalizedNew::of(path, Cow::Owned(old), Cow::Owned(new))
    }

    /// Whether the patch stores the module in the field-split layout: its old file is then
    /// read split ([`FileForm::OldSplit`]).
    pub fn is_split(&self) -> bool {
        self.old_split_blake3.is_some()
    }

    /// BLAKE3 of the old module split, in the field-split layout: what the caller checks the
    /// bytes it keeps for [`FileForm::OldSplit`] against.
    pub fn old_split_blake3(&self) -> Option<[u8; 32]> {
        self.old_split_blake3
    }

    /// The module's path in the new build.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The path of the old file read split ([`FileForm::OldSplit`]), in the field-split
    /// layout: the module's own, or the old module's where it was renamed.
    pub fn split_old_path(&self) -> Option<&str> {
        self.is_split().then(|| self.old_path.as_deref().unwrap_or(&self.path))
    }

    /// What a reader must understand to apply the file stored this way: its side info's
    /// capabilities, and the transform row naming its old module when that module is read
    /// split from another path (docs/FORMAT.md §5).
    pub fn required_capabilities(&self) -> Capabilities {
        let needs = crate::transforms::required_by_side_info(&self.side_info);
        match self.split_old_path() {
            Some(old) if old != self.path => needs.with(Capability::WasmSplitReference),
            _ => needs,
        }
    }

    /// Bytes of the normalized form (the file's size in the delta stream).
    pub fn normalized_size(&self) -> u64 {
        self.normalized_size
    }

    /// Bytes of the side info (stored in the patch's tree).
    pub fn side_info_len(&self) -> usize {
        self.side_info.len()
    }

    /// The transform as bytes, to carry it between a generation's invocations (not part of
    /// the patch format): version, fields, and a BLAKE3 of them that [`Self::decode`] checks.
    pub fn encode(&self) -> Vec<u8> {
        use crate::wire::put_varint;
        let mut out = vec![ENCODING_VERSION];
        crate::wire::put_str(&mut out, &self.path);
        put_varint(&mut out, self.new_size);
        out.extend_from_slice(&self.new_blake3);
        put_varint(&mut out, self.normalized_size);
        put_varint(&mut out, self.side_info.len() as u64);
        out.extend_from_slice(&self.side_info);
        for h in &self.chunk_hashes {
            out.extend_from_slice(h);
        }
        match (&self.old_split_blake3, &self.old_path) {
            (None, _) => out.push(0),
            (Some(h), None) => {
                out.push(1);
                out.extend_from_slice(h);
            }
            (Some(h), Some(old_path)) => {
                out.push(2);
                out.extend_from_slice(h);
                crate::wire::put_str(&mut out, old_path);
            }
        }
        if self.is_split() {
            // Contiguous from (0, 0): each part's ends, as growths.
            put_varint(&mut out, self.parts.len() as u64);
            let mut at = (0, 0);
            for p in &self.parts {
                put_varint(&mut out, p.new.1 - at.0);
                put_varint(&mut out, p.old.1 - at.1);
                at = (p.new.1, p.old.1);
            }
        }
        let check = blake3::hash(&out);
        out.extend_from_slice(check.as_bytes());
        out
    }

    /// Reads what [`Self::encode`] wrote; refuses anything else (a changed byte, another version).
    pub fn decode(bytes: &[u8]) -> Result<WasmTransform> {
        let bad = |what: &str| invalid(format!("wasm transform record: {what}"));
        if bytes.len() < 33 {
            return Err(bad("truncated"));
        }
        let (body, check) = bytes.split_at(bytes.len() - 32);
        if blake3::hash(body).as_bytes() != check {
            return Err(bad("checksum differs (not the bytes encode() wrote)"));
        }
        let version = body[0];
        if !(2..=ENCODING_VERSION).contains(&version) {
            return Err(bad(&format!("version {version} (this reads 2..={ENCODING_VERSION})")));
        }
        let mut r = crate::wire::SliceReader::new(&body[1..], 1, crate::error::Input::Signature);
        let e = |e: Error| bad(&e.to_string());
        let path = r.string(4096, "path").map_err(e)?.to_string();
        let new_size = r.varint("new size").map_err(e)?;
        let new_blake3: [u8; 32] = r.array("new BLAKE3").map_err(e)?;
        let normalized_size = r.varint("normalized size").map_err(e)?;
        let side_len = r.varint("side info length").map_err(e)?;
        if !(8..=MAX_WASM_TRANSFORM_BYTES).contains(&normalized_size) || side_len == 0 || side_len > MAX_WASM_SIDE_INFO {
            return Err(bad("sizes outside the format's caps"));
        }
        let side_info = r.take(side_len as usize, "side info").map_err(e)?.to_vec();
        let chunks = normalized_size.div_ceil(NORMALIZED_CHECK_CHUNK);
        let mut chunk_hashes = Vec::with_capacity(chunks as usize);
        for _ in 0..chunks {
            chunk_hashes.push(r.array("chunk hash").map_err(e)?);
        }
        let (old_split_blake3, old_path) = match r.array::<1>("split flag").map_err(e)? {
            [0] => (None, None),
            [1] => (Some(r.array("split old BLAKE3").map_err(e)?), None),
            [2] => (Some(r.array("split old BLAKE3").map_err(e)?), Some(r.string(4096, "old path").map_err(e)?.to_string())),
            _ => return Err(bad("split flag not 0, 1 or 2")),
        };
        if old_path.as_ref().is_some_and(|p| *p == path) {
            return Err(bad("the old path is the module's own"));
        }
        if old_split_blake3.is_some() != wt::side_info_has_code_layout(&side_info) {
            return Err(bad("split old BLAKE3 and side info disagree"));
        }
        let mut parts = Vec::new();
        if version >= 3 && old_split_blake3.is_some() {
            let count = r.varint("part count").map_err(e)?;
            // Each part takes two bytes at least: a count past that is a lie, not an allocation.
            if count == 0 || count > r.remaining() as u64 / 2 {
                return Err(bad("part count"));
            }
            let mut at = (0u64, 0u64);
            for _ in 0..count {
                let grow = (r.varint("part length").map_err(e)?, r.varint("old part length").map_err(e)?);
                let end = (at.0.checked_add(grow.0), at.1.checked_add(grow.1));
                let (Some(new_end), Some(old_end)) = end else { return Err(bad("part past the module")) };
                if grow.0 == 0 || new_end > normalized_size {
                    return Err(bad("part empty or past the module"));
                }
                parts.push(AlignedPart { new: (at.0, new_end), old: (at.1, old_end) });
                at = (new_end, old_end);
            }
            if at.0 != normalized_size {
                return Err(bad("parts do not cover the module"));
            }
        }
        if !r.is_empty() {
            return Err(bad("trailing bytes"));
        }
        Ok(WasmTransform { path, new_size, new_blake3, normalized_size, side_info, chunk_hashes, old_split_blake3, old_path, parts })
    }

    /// Checks every chunk of the normalized form that ends within `(from, to]` against its
    /// hash: `hash_bytes(start, end, hasher)` feeds the chunk's bytes `[start, end)` to the
    /// hasher, where they lie (the caller hands each chunk whole exactly once).
    pub(super) fn check_chunks_ending_in(&self, from: u64, to: u64, hash_bytes: impl Fn(u64, u64, &mut blake3::Hasher)) -> Result<()> {
        for (j, want) in self.chunk_hashes.iter().enumerate() {
            let start = j as u64 * NORMALIZED_CHECK_CHUNK;
            let end = (start + NORMALIZED_CHECK_CHUNK).min(self.normalized_size);
            if end <= from || end > to {
                continue;
            }
            let mut hasher = blake3::Hasher::new();
            hash_bytes(start, end, &mut hasher);
            if hasher.finalize().as_bytes() != want {
                return Err(invalid(format!(
                    "{:?}: normalized bytes {start}..{end} are not those its wasm transform was made from (read from the wrong form or object?)",
                    self.path
                )));
            }
        }
        Ok(())
    }
}
