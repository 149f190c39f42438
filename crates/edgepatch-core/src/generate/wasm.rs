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

use std::borrow::Cow;

use crate::error::{Error, Result};
use crate::patch_format::{MAX_WASM_SIDE_INFO, MAX_WASM_TRANSFORM_BYTES};
use crate::wasm_transform::{self as wt, Normalized};

/// Bytes of the normalized form covered by one check hash. At most one segment, so that
/// every chunk lies within a segment and the one before it (the history).
pub const NORMALIZED_CHECK_CHUNK: u64 = 1 << 20;

const ENCODING_VERSION: u8 = 1;

/// Which bytes of a file a [`super::ByteRange`] is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileForm {
    /// The file as it is in its build.
    AsIs,
    /// The normalized form of a transformed wasm module (what [`WasmTransform::prepare`]
    /// returned beside the transform), not the file.
    Normalized,
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
}

/// The normalized form of `new` against `old` and its side info, if a patch may store it:
/// both are modules the transform reads, the old module is its own normalized form (the
/// applier reads the old file as it is), something was renumbered (else the side info only
/// adds bytes), the sizes are within the format's caps, and the inverse gives `new` back.
pub fn normalize_for_patch(old: &[u8], new: &[u8]) -> Option<Normalized> {
    normalize_checked(Cow::Borrowed(old), Cow::Borrowed(new), true).map(|(n, _)| n)
}

/// [`normalize_for_patch`] also where nothing is renumbered (the normalized form is then the
/// module itself, with a side info that says so): a form the field-split layout can still
/// store smaller (docs/FORMAT.md §2.8.7), where a toolchain re-emitted code in place.
pub(crate) fn normalize_even_unchanged(old: &[u8], new: &[u8]) -> Option<Normalized> {
    normalize_checked(Cow::Borrowed(old), Cow::Borrowed(new), false).map(|(n, _)| n)
}

/// [`normalize_for_patch`], also returning the new module's BLAKE3. Owned inputs are freed
/// as soon as they are no longer needed (the old module once its reference is made, the
/// new one once it is normalized and hashed; the inverse's output is compared by BLAKE3).
fn normalize_checked(old: Cow<[u8]>, new: Cow<[u8]>, renumbered_only: bool) -> Option<(Normalized, [u8; 32])> {
    let cap = MAX_WASM_TRANSFORM_BYTES as usize;
    if !new.starts_with(b"\0asm") || !old.starts_with(b"\0asm") || new.len() > cap || old.len() >= i32::MAX as usize {
        return None;
    }
    // The peak is the new module's forward transform, with the old module freed by then:
    // for esbuild's 14 MB module, natively, 43 MB of allocations at most (the new module,
    // the reference's copy of the old data, the forward's output and window lists; 60 MB of
    // wasm memory), BENCHMARKS.md, "wasm transform memory (session 10)".
    let reference = wt::reference(&old).ok()?;
    // forward(None, old).bytes == old, checked body by body, without building that copy.
    // (When the check built it, doing it before the reference measured 4.6 MB more wasm
    // memory on esbuild-wasm-adj: the allocator's layout.)
    if wt::is_own_normalized_form(&old) != Ok(true) {
        return None;
    }
    drop(old);
    let n = wt::forward(Some(&reference), &new).ok()?;
    drop(reference);
    if (renumbered_only && n.bytes == *new)
        || n.bytes.len() > cap
        || n.side_info.is_empty()
        || n.side_info.len() as u64 > MAX_WASM_SIDE_INFO
        || n.bytes.len() < 8
    {
        return None;
    }
    let (new_len, new_blake3) = (new.len(), *blake3::hash(&new).as_bytes());
    drop(new);
    // The writer's own check that the applier will get the file back.
    let back = wt::inverse(&n.bytes, &n.side_info).ok()?;
    if back.len() != new_len || *blake3::hash(&back).as_bytes() != new_blake3 {
        return None;
    }
    Some((n, new_blake3))
}

fn invalid(what: impl Into<String>) -> Error {
    Error::Invalid(what.into())
}

fn chunk_hashes(normalized: &[u8]) -> Vec<[u8; 32]> {
    normalized.chunks(NORMALIZED_CHECK_CHUNK as usize).map(|c| *blake3::hash(c).as_bytes()).collect()
}

impl WasmTransform {
    /// The transform of the new build's module at `path` ("" for a single file) from the whole
    /// old and new module, and its normalized form (which the caller keeps, to be read by
    /// the ranges the generator asks for with [`FileForm::Normalized`]). None: store the
    /// module as it is (see [`normalize_for_patch`]).
    pub fn prepare(path: &str, old: &[u8], new: &[u8]) -> Option<(WasmTransform, Vec<u8>)> {
        Self::prepare_checked(path, Cow::Borrowed(old), Cow::Borrowed(new))
    }

    /// [`Self::prepare`] taking the modules, which it frees as soon as it can (see
    /// [`normalize_for_patch`]): for a caller short of memory (a Worker's wasm heap).
    pub fn prepare_owned(path: &str, old: Vec<u8>, new: Vec<u8>) -> Option<(WasmTransform, Vec<u8>)> {
        Self::prepare_checked(path, Cow::Owned(old), Cow::Owned(new))
    }

    fn prepare_checked(path: &str, old: Cow<[u8]>, new: Cow<[u8]>) -> Option<(WasmTransform, Vec<u8>)> {
        let new_size = new.len() as u64;
        let (n, new_blake3) = normalize_checked(old, new, true)?;
        let t = WasmTransform {
            path: path.to_string(),
            new_size,
            new_blake3,
            normalized_size: n.bytes.len() as u64,
            side_info: n.side_info,
            chunk_hashes: chunk_hashes(&n.bytes),
        };
        Some((t, n.bytes))
    }

    /// The module's path in the new build.
    pub fn path(&self) -> &str {
        &self.path
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
        if body[0] != ENCODING_VERSION {
            return Err(bad(&format!("version {} (this reads {ENCODING_VERSION})", body[0])));
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
        if !r.is_empty() {
            return Err(bad("trailing bytes"));
        }
        Ok(WasmTransform { path, new_size, new_blake3, normalized_size, side_info, chunk_hashes })
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
