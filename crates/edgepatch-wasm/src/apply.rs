//! [`PatchApplier`]: the core's push-driven applier, patch bytes pushed from JS, optionally
//! bound to a signed manifest.

use std::io;

use edgepatch_core::apply::PatchApplier as CoreApplier;
use edgepatch_core::error::ErrorKind;
use edgepatch_core::manifest_binding::{BoundSink, ManifestBinding, ManifestRefusal, PatchStreamHash};
use js_sys::Reflect;
use wasm_bindgen::prelude::*;

use crate::js::{check_methods, core_err, has_method, object, unhex};
use crate::js_build::{resume_point_from_js, ApplyProgress, ApplySummary, JsBuildSink, JsOld, JsResumePoint, JsSink, MaybeResumePoint, OldBuildSource};

/// Applies a patch pushed in chunks of any size as it arrives.
///
/// ```js
/// const applier = new PatchApplier(oldSource, sink);
/// for await (const chunk of response.body) applier.push(chunk);
/// const summary = applier.finish(); // only now is the output verified and final
/// ```
#[wasm_bindgen]
pub struct PatchApplier {
    inner: Option<CoreApplier>,
    old: JsOld,
    sink: JsSink,
    /// Given a manifest: what every write and the patch's bytes are checked against.
    bound: Option<Bound>,
    /// The first error; every later call repeats it.
    failed: Option<Failure>,
    /// Progress as `finish` found it.
    finished: edgepatch_core::ApplyProgress,
}

impl PatchApplier {
    /// Remembers the first failure (every later call repeats it) and throws it.
    fn fail(&mut self, f: Failure) -> JsValue {
        let js = f.to_js();
        self.failed = Some(f);
        js
    }
}

#[wasm_bindgen]
impl PatchApplier {
    /// With `manifest` (a patch manifest's bytes, whose signature the caller
    /// checked), every entry and byte written must be one the manifest lists,
    /// each file's BLAKE3 must be the listed one, and `finish` checks the
    /// patch's size and BLAKE3 against it (docs/UPDATE_PROTOCOL.md, steps 4-5).
    #[wasm_bindgen(constructor)]
    pub fn new(old: OldBuildSource, sink: JsBuildSink, manifest: Option<Vec<u8>>) -> Result<PatchApplier, JsError> {
        check_methods(&old, "the old build source", &["fileSize", "readAt"])?;
        check_methods(&sink, "the sink", &["createDirectory", "createSymlink", "beginFile", "writeFile", "finishFile"])?;
        let read_into = has_method(&old, "readInto");
        let bound = manifest.map(|m| Bound::new(&m)).transpose()?;
        Ok(PatchApplier {
            inner: Some(CoreApplier::new()),
            old: JsOld { source: old, read_into },
            sink: JsSink::new(sink),
            bound,
            failed: None,
            finished: Default::default(),
        })
    }

    /// Continues an interrupted apply (the core's `PatchApplier::resume`):
    /// `headerAndTree` are the patch's bytes before its first segment (the
    /// manifest's first `patchOffset`), `point` a `resumePoint()` persisted
    /// earlier. Then `push` the patch from `point.patchOffset` on. The sink
    /// must have `resumeFile` and `readWritten`; nothing verified before the
    /// point is downloaded or written again. The whole-patch checksum cannot be
    /// checked after a resume; every file's BLAKE3 still is.
    ///
    /// With `manifest`, `point.patchHashState` is required: the patch's BLAKE3
    /// then covers the bytes pushed before the interruption too.
    pub fn resume(
        old: OldBuildSource,
        sink: JsBuildSink,
        header_and_tree: &[u8],
        point: JsResumePoint,
        manifest: Option<Vec<u8>>,
    ) -> Result<PatchApplier, JsError> {
        check_methods(&old, "the old build source", &["fileSize", "readAt"])?;
        check_methods(&sink, "the sink", &["createDirectory", "createSymlink", "beginFile", "writeFile", "finishFile", "resumeFile", "readWritten"])?;
        let at = resume_point_from_js(&point)?;
        let read_into = has_method(&old, "readInto");
        let (mut old, mut sink) = (JsOld { source: old, read_into }, JsSink::new(sink));
        let mut bound = match manifest {
            None => None,
            Some(m) => {
                let state = Reflect::get(&point, &JsValue::from_str("patchHashState")).ok().and_then(|v| v.as_string());
                let state = state.ok_or_else(|| JsError::new("resume point has no patchHashState (needed with a manifest)"))?;
                let state = unhex(&state).ok_or_else(|| JsError::new("resume point: patchHashState is not hex"))?;
                let mut b = Bound::new(&m)?;
                b.hash = PatchStreamHash::resume(&b.binding, &state, header_and_tree).map_err(core_err)?;
                if b.hash.len() != at.patch_offset {
                    return Err(JsError::new("resume point: patchHashState is not at patchOffset"));
                }
                b.resumed = true;
                Some(b)
            }
        };
        let inner = match bound.as_mut() {
            Some(b) => CoreApplier::resume(header_and_tree, at, &mut old, &mut BoundSink { binding: &mut b.binding, inner: &mut sink }),
            None => CoreApplier::resume(header_and_tree, at, &mut old, &mut sink),
        }
        .map_err(core_err)?;
        Ok(PatchApplier { inner: Some(inner), old, sink, bound, failed: None, finished: Default::default() })
    }

    /// Where a later `resume` can continue: the end of the last segment
    /// applied (undefined before the first). Persist it after a `push`
    /// returned (even one that threw) once the sink has flushed what it was given.
    #[wasm_bindgen(js_name = resumePoint)]
    pub fn resume_point(&self) -> MaybeResumePoint {
        match self.inner.as_ref().and_then(|a| a.resume_point()) {
            Some(p) => {
                let o = object(&[("segmentsDone", p.segments_done), ("patchOffset", p.patch_offset), ("newOffset", p.new_offset)]);
                if let Some(b) = &self.bound {
                    match b.hash.state_at(p.patch_offset) {
                        Some(state) => {
                            Reflect::set(&o, &JsValue::from_str("patchHashState"), &JsValue::from_str(&edgepatch_core::trust::hex(&state)))
                                .expect("set on a plain object");
                        }
                        // Not resumable with the hash: no point rather than one that cannot be checked.
                        None => return JsValue::UNDEFINED.unchecked_into(),
                    }
                }
                JsValue::from(o).unchecked_into()
            }
            None => JsValue::UNDEFINED.unchecked_into(),
        }
    }

    /// Feeds the next bytes of the patch; everything they complete is applied
    /// (the callbacks run before this returns).
    pub fn push(&mut self, chunk: &[u8]) -> Result<(), JsValue> {
        if let Some(f) = &self.failed {
            return Err(f.to_js());
        }
        let Some(inner) = self.inner.as_mut() else {
            return Err(Failure::invalid("push after finish").to_js());
        };
        let pushed = match self.bound.as_mut() {
            Some(b) => {
                b.hash.update(chunk);
                inner.push(chunk, &mut self.old, &mut BoundSink { binding: &mut b.binding, inner: &mut self.sink })
            }
            None => inner.push(chunk, &mut self.old, &mut self.sink),
        };
        pushed.map_err(|e| self.fail(Failure::from_core(&e)))
    }

    /// Ends the patch: throws unless all of it arrived and every file and the
    /// patch checksum verified. Only then is the output final.
    pub fn finish(&mut self) -> Result<ApplySummary, JsValue> {
        if let Some(f) = &self.failed {
            return Err(f.to_js());
        }
        let inner = self.inner.take().ok_or_else(|| Failure::invalid("finish called twice").to_js())?;
        self.finished = inner.progress();
        let s = inner.finish().map_err(|e| Failure::from_core(&e)).and_then(|s| {
            if let Some(b) = self.bound.as_mut() {
                b.binding.finish(b.resumed, &mut self.sink).map_err(|e| Failure::from_binding(&e))?;
                b.hash.check(&b.binding).map_err(|e| Failure::from_binding(&e))?;
            }
            Ok(s)
        });
        let s = s.map_err(|f| self.fail(f))?;
        Ok(object(&[("entries", s.entries), ("files", s.files), ("bytesWritten", s.bytes_written), ("patchBytes", s.patch_bytes)]).unchecked_into())
    }

    /// The most the apply writes to the sink's scratch space (`writeScratch`), in bytes, once
    /// the patch's header and tree have been pushed (undefined before): room a caller needs
    /// besides the new build's files while the apply runs. 0 when no file is transformed.
    #[wasm_bindgen(js_name = scratchBytes)]
    pub fn scratch_bytes(&self) -> Option<f64> {
        self.inner.as_ref().and_then(|a| a.tree()).map(|t| t.scratch_bytes() as f64)
    }

    /// Bytes and entries so far (totals are known once the tree has been read).
    pub fn progress(&self) -> ApplyProgress {
        let p = self.inner.as_ref().map_or(self.finished, |a| a.progress());
        object(&[
            ("patchBytesRead", p.patch_bytes_read),
            ("newBytesWritten", p.new_bytes_written),
            ("newBytesTotal", p.new_bytes_total),
            ("entriesDone", p.entries_done),
            ("entriesTotal", p.entries_total),
        ])
        .unchecked_into()
    }
}

/// An apply failure as JS sees it: an `Error` with the message and a `kind`
/// property, the core's stable [`ErrorKind`] name (`"unvouched"`, `"corrupt"`,
/// `"old_build"`, ...), so that callers branch on a name, never on message text.
#[derive(Clone)]
struct Failure {
    message: String,
    kind: ErrorKind,
}

impl Failure {
    fn from_core(e: &edgepatch_core::Error) -> Failure {
        Failure { message: e.to_string(), kind: e.kind() }
    }

    /// What the manifest binding refuses is unvouched data; anything else it
    /// reports is the sink's failing storage.
    fn from_binding(e: &io::Error) -> Failure {
        let kind = if ManifestRefusal::of(e).is_some() { ErrorKind::Unvouched } else { ErrorKind::Output };
        Failure { message: e.to_string(), kind }
    }

    fn invalid(message: &str) -> Failure {
        Failure { message: message.to_string(), kind: ErrorKind::Invalid }
    }

    fn to_js(&self) -> JsValue {
        let e = js_sys::Error::new(&self.message);
        Reflect::set(&e, &JsValue::from_str("kind"), &JsValue::from_str(self.kind.as_str())).expect("set on an Error");
        e.into()
    }
}

/// A `PatchApplier`'s manifest binding and the patch's running BLAKE3.
struct Bound {
    binding: ManifestBinding,
    hash: PatchStreamHash,
    resumed: bool,
}

impl Bound {
    fn new(manifest: &[u8]) -> Result<Bound, JsError> {
        let binding = ManifestBinding::new(manifest).map_err(|e| JsError::new(&format!("manifest: {e}")))?;
        let hash = PatchStreamHash::new(&binding);
        Ok(Bound { binding, hash, resumed: false })
    }
}
