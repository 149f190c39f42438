//! Signatures of builds ([`Signer`]) and BLAKE3 of files ([`FileHasher`], `blake3Hex`).

use wasm_bindgen::prelude::*;

use crate::js::{core_err, hex, MAX_SAFE};

/// BLAKE3 of `bytes`, as 64 lowercase hex digits (as manifests and descriptors spell it).
#[wasm_bindgen(js_name = blake3Hex)]
pub fn blake3_hex(bytes: &[u8]) -> String {
    edgepatch_core::blake3::hash(bytes).to_hex().to_string()
}

/// Streaming signer (the core's `Signer`): entries in any order, file data in
/// chunks; every path and symlink target is checked as it arrives (a JS Error
/// names the problem: `..`, absolute, escaping link, duplicate, entry below a
/// file). `finish()` returns the signature bytes (docs/FORMAT.md §3).
#[wasm_bindgen]
pub struct Signer {
    inner: Option<edgepatch_core::signer::Signer>,
}

#[wasm_bindgen]
impl Signer {
    /// `blockSize` defaults to the CLI's (16 KiB).
    #[wasm_bindgen(constructor)]
    pub fn new(block_size: Option<u32>) -> Result<Signer, JsError> {
        let s = edgepatch_core::signer::Signer::new(block_size.unwrap_or(edgepatch_core::signature::DEFAULT_BLOCK_SIZE)).map_err(core_err)?;
        Ok(Signer { inner: Some(s) })
    }

    fn inner(&mut self) -> Result<&mut edgepatch_core::signer::Signer, JsError> {
        self.inner.as_mut().ok_or_else(|| JsError::new("signer already finished"))
    }

    pub fn directory(&mut self, path: &str) -> Result<(), JsError> {
        self.inner()?.directory(path).map_err(core_err)
    }

    pub fn symlink(&mut self, path: &str, target: &str) -> Result<(), JsError> {
        self.inner()?.symlink(path, target).map_err(core_err)
    }

    #[wasm_bindgen(js_name = beginFile)]
    pub fn begin_file(&mut self, path: &str, executable: bool, size: f64) -> Result<(), JsError> {
        if !(0.0..=MAX_SAFE).contains(&size) || size.fract() != 0.0 {
            return Err(JsError::new(&format!("{path}: size {size} is not a byte count")));
        }
        self.inner()?.begin_file(path, executable, size as u64).map_err(core_err)
    }

    pub fn update(&mut self, bytes: &[u8]) -> Result<(), JsError> {
        self.inner()?.update(bytes).map_err(core_err)
    }

    /// Ends the current file; returns its BLAKE3 (hex).
    #[wasm_bindgen(js_name = finishFile)]
    pub fn finish_file(&mut self) -> Result<String, JsError> {
        self.inner()?.finish_file().map(|h| hex(&h)).map_err(core_err)
    }

    /// The signature bytes. The signer cannot be used afterwards.
    pub fn finish(&mut self) -> Result<Vec<u8>, JsError> {
        let s = self.inner.take().ok_or_else(|| JsError::new("signer already finished"))?;
        Ok(s.finish().map_err(core_err)?.encode())
    }
}

/// Streaming BLAKE3 of one file's bytes (hex when finished): the Worker's integrity checks of
/// stored files against the BLAKE3 recorded at upload. Only the hash: cheaper than a `Signer`,
/// which also computes block hashes. Bytes come from JS (`update`) or straight from a
/// generator's filled new-data buffer (`PatchGenerator.hashNewBytes`), without a copy.
#[wasm_bindgen]
pub struct FileHasher {
    pub(crate) inner: edgepatch_core::blake3::Hasher,
}

#[wasm_bindgen]
impl FileHasher {
    #[wasm_bindgen(constructor)]
    #[allow(clippy::new_without_default)]
    pub fn new() -> FileHasher {
        FileHasher { inner: edgepatch_core::blake3::Hasher::new() }
    }

    pub fn update(&mut self, bytes: &[u8]) {
        self.inner.update(bytes);
    }

    /// The BLAKE3 (hex) of the bytes so far; the hasher starts over.
    pub fn finish(&mut self) -> String {
        let h = self.inner.finalize().to_hex().to_string();
        self.inner.reset();
        h
    }
}
