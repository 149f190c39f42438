//! WebAssembly bindings over `edgepatch-core`: bindings only, no patch logic of
//! their own.
//!
//! - [`PatchApplier`]: the core's push-driven applier. Patch bytes are pushed in
//!   chunks as they arrive; old data is read through a JS object
//!   (`fileSize`, `readAt`); the new build leaves through a JS sink object
//!   (`createDirectory`, `createSymlink`, `beginFile`, `writeFile`, `finishFile`).
//! - [`diff_files`] (`diffFiles` in JS): the core's diff of two single files,
//!   on one thread (wasm has none).
//!
//! Errors are JS `Error`s carrying the core's message. Callbacks are called
//! synchronously from inside `push`; they must not call back into the same
//! applier, and a callback that throws fails the apply with its message.

use std::io;

use edgepatch_core::apply::{BuildSink, OldBuild, PatchApplier as CoreApplier};
use edgepatch_core::error::ErrorKind;
use edgepatch_core::manifest_binding::{BoundSink, ManifestBinding, ManifestRefusal, PatchStreamHash};
use edgepatch_core::patch_format::{ListedEntry, ListedKind};
use edgepatch_core::trust;
#[cfg(feature = "diff")]
use edgepatch_core::{diff_builds, Build, DiffOptions};
use js_sys::{Object, Reflect, Uint8Array};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

#[wasm_bindgen(typescript_custom_section)]
const TS_INTERFACES: &str = r#"
/** Random access to the old build. `path` is a build path ("" in a single-file patch). */
export interface OldBuildSource {
  /** Size in bytes of the old file at `path`; throw if there is none. */
  fileSize(path: string): number;
  /** Exactly `length` bytes of the old file at `path`, from byte `offset`. */
  readAt(path: string, offset: number, length: number): Uint8Array;
  /**
   * Optional, preferred over `readAt` when present: fills all of `target` from
   * byte `offset` (or throws). `target` is a view of the module's memory, valid
   * only during the call: no copy, no allocation (e.g. `fs.readSync(fd, target,
   * 0, target.length, offset)` or `accessHandle.read(target, { at: offset })`).
   */
  readInto?(path: string, offset: number, target: Uint8Array): void | number;
  /**
   * Needed for tree patches: every entry of the old build (any order; the
   * applier sorts). A patch keeps unchanged entries by their place in this
   * list, so it must be exactly the old build (its digest is checked): a
   * build's stored manifest entries give it (`{ path, kind, executable, size,
   * symlinkTarget }` of `ManifestEntry` fits).
   */
  listing?(): ListedEntry[];
}

/** One entry of the old build, as `OldBuildSource.listing` returns it. */
export interface ListedEntry {
  path: string;
  kind: "file" | "symlink" | "directory";
  /** Files: the executable bit. */
  executable?: boolean;
  /** Files: the size in bytes. */
  size?: number;
  /** Symlinks: the target. */
  symlinkTarget?: string;
}

/**
 * Where the new build goes, in the order the patch produces it: directories,
 * symlinks and copied files first, delta files as their data arrives. Nothing
 * is final until `PatchApplier.finish()` returned; on an error, discard it all.
 */
export interface BuildSink {
  createDirectory(path: string): void;
  createSymlink(path: string, target: string): void;
  beginFile(path: string, executable: boolean, size: number): void;
  /** The next bytes of the current file (a copy the sink may keep). */
  writeFile(bytes: Uint8Array): void;
  /** Called only once the file's content matched its BLAKE3. */
  finishFile(): void;
  /**
   * Needed only by `PatchApplier.resume`: reopen a new file of which the first
   * `written` bytes were written before the interruption (drop anything after
   * them); the next `writeFile` calls continue at byte `written`.
   */
  resumeFile?(path: string, executable: boolean, size: number, written: number): void;
  /**
   * Needed only by `PatchApplier.resume`: fill all of `target` with bytes
   * already written to the new file at `path`, from byte `offset`. `target` is
   * a view of the module's memory, valid only during the call.
   */
  readWritten?(path: string, offset: number, target: Uint8Array): void;
  /**
   * Optional, with `finishCopies`: offered each file the patch keeps unchanged
   * (the old build's file `from`, `size` bytes, becomes the new file `path`).
   * Return true to copy it on the sink's own (e.g. asynchronously, without
   * passing its bytes through the module); false leaves it to the applier
   * (`beginFile`/`writeFile`). A sink that takes copies must copy exactly those
   * bytes and check them itself before the build is used.
   */
  copyOldFile?(from: string, path: string, executable: boolean, size: number): boolean;
  /**
   * Once every copy was offered: the BLAKE3 (hex) of each file the sink took,
   * in offer order. With a manifest each must be the one the manifest lists.
   */
  finishCopies?(): string[];
  /**
   * Optional, with `readScratch`: scratch space, a byte array that is not part of the
   * build, written synchronously. The applier keeps there what it would otherwise hold in
   * memory: the old module of each wasm file stored in the field-split layout, split (up to
   * 64 MiB each, written once, front to back, in pieces of at most 256 KiB). `bytes` is a copy
   * the sink may keep. Return true once written; false (at the first write) says there is no
   * scratch space, and the applier holds those bytes in its memory. Discard the scratch
   * space when the apply ends, however it ends.
   */
  writeScratch?(offset: number, bytes: Uint8Array): boolean;
  /**
   * Fill all of `target` from byte `offset` of the scratch space. `target` is a view of the
   * module's memory, valid only during the call.
   */
  readScratch?(offset: number, target: Uint8Array): void;
}

/** Where an interrupted apply can continue (see `PatchApplier.resumePoint`). */
export interface ResumePoint {
  segmentsDone: number;
  patchOffset: number;
  newOffset: number;
  /**
   * Set when the applier was given a manifest: the patch's BLAKE3 state up to
   * `patchOffset` (opaque; persist it with the rest, `resume` needs it back).
   */
  patchHashState?: string;
}

export interface ApplyProgress {
  patchBytesRead: number;
  newBytesWritten: number;
  newBytesTotal: number;
  entriesDone: number;
  entriesTotal: number;
}

export interface ApplySummary {
  entries: number;
  files: number;
  bytesWritten: number;
  patchBytes: number;
}
"#;

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(typescript_type = "OldBuildSource")]
    pub type OldBuildSource;
    #[wasm_bindgen(method, catch, js_name = fileSize)]
    fn file_size(this: &OldBuildSource, path: &str) -> Result<JsValue, JsValue>;
    #[wasm_bindgen(method, catch, js_name = readAt)]
    fn read_at(this: &OldBuildSource, path: &str, offset: f64, length: u32) -> Result<JsValue, JsValue>;
    #[wasm_bindgen(method, catch, js_name = readInto)]
    fn read_into(this: &OldBuildSource, path: &str, offset: f64, target: &Uint8Array) -> Result<JsValue, JsValue>;
    #[wasm_bindgen(method, catch, js_name = listing)]
    fn listing(this: &OldBuildSource) -> Result<JsValue, JsValue>;

    #[wasm_bindgen(typescript_type = "BuildSink")]
    pub type JsBuildSink;
    #[wasm_bindgen(method, catch, js_name = createDirectory)]
    fn create_directory(this: &JsBuildSink, path: &str) -> Result<(), JsValue>;
    #[wasm_bindgen(method, catch, js_name = createSymlink)]
    fn create_symlink(this: &JsBuildSink, path: &str, target: &str) -> Result<(), JsValue>;
    #[wasm_bindgen(method, catch, js_name = beginFile)]
    fn begin_file(this: &JsBuildSink, path: &str, executable: bool, size: f64) -> Result<(), JsValue>;
    #[wasm_bindgen(method, catch, js_name = writeFile)]
    fn write_file(this: &JsBuildSink, bytes: &Uint8Array) -> Result<(), JsValue>;
    #[wasm_bindgen(method, catch, js_name = finishFile)]
    fn finish_file(this: &JsBuildSink) -> Result<(), JsValue>;
    #[wasm_bindgen(method, catch, js_name = resumeFile)]
    fn resume_file(this: &JsBuildSink, path: &str, executable: bool, size: f64, written: f64) -> Result<(), JsValue>;
    #[wasm_bindgen(method, catch, js_name = readWritten)]
    fn read_written(this: &JsBuildSink, path: &str, offset: f64, target: &Uint8Array) -> Result<JsValue, JsValue>;
    #[wasm_bindgen(method, catch, js_name = copyOldFile)]
    fn copy_old_file(this: &JsBuildSink, from: &str, path: &str, executable: bool, size: f64) -> Result<JsValue, JsValue>;
    #[wasm_bindgen(method, catch, js_name = finishCopies)]
    fn finish_copies(this: &JsBuildSink) -> Result<JsValue, JsValue>;
    #[wasm_bindgen(method, catch, js_name = writeScratch)]
    fn write_scratch(this: &JsBuildSink, offset: f64, bytes: &Uint8Array) -> Result<JsValue, JsValue>;
    #[wasm_bindgen(method, catch, js_name = readScratch)]
    fn read_scratch(this: &JsBuildSink, offset: f64, target: &Uint8Array) -> Result<JsValue, JsValue>;

    #[wasm_bindgen(typescript_type = "ResumePoint")]
    pub type JsResumePoint;
    #[wasm_bindgen(typescript_type = "ResumePoint | undefined")]
    pub type MaybeResumePoint;

    #[wasm_bindgen(typescript_type = "ApplyProgress")]
    pub type ApplyProgress;
    #[wasm_bindgen(typescript_type = "ApplySummary")]
    pub type ApplySummary;

    #[wasm_bindgen(js_namespace = console, js_name = error)]
    fn console_error(message: &str);
}

/// Largest integer a JS number holds exactly.
const MAX_SAFE: f64 = 9_007_199_254_740_991.0;

/// A panic is a bug; say what it was on the console before the trap.
#[wasm_bindgen(start)]
fn start() {
    std::panic::set_hook(Box::new(|info| console_error(&format!("edgepatch-wasm panicked: {info}"))));
}

/// The message of a thrown JS value (an `Error`'s message, or the value as a string).
fn js_message(v: &JsValue) -> String {
    if let Some(e) = v.dyn_ref::<js_sys::Error>() {
        return String::from(e.message());
    }
    v.as_string().unwrap_or_else(|| format!("{v:?}"))
}

fn js_io(v: JsValue) -> io::Error {
    io::Error::other(js_message(&v))
}

fn check_methods(obj: &JsValue, what: &str, methods: &[&str]) -> Result<(), JsError> {
    let missing: Vec<&str> = methods.iter().copied().filter(|m| !has_method(obj, m)).collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(JsError::new(&format!("{what} has no method {}", missing.join(", "))))
    }
}

struct JsOld {
    source: OldBuildSource,
    /// The source has `readInto`: reads land in wasm memory directly.
    read_into: bool,
}

fn has_method(obj: &JsValue, name: &str) -> bool {
    obj.is_object() && Reflect::get(obj, &JsValue::from_str(name)).map(|f| f.is_function()).unwrap_or(false)
}

impl OldBuild for JsOld {
    fn file_size(&mut self, path: &str) -> io::Result<u64> {
        let v = self.source.file_size(path).map_err(js_io)?;
        match v.as_f64() {
            Some(n) if (0.0..=MAX_SAFE).contains(&n) && n.fract() == 0.0 => Ok(n as u64),
            _ => Err(io::Error::other(format!("fileSize returned {v:?}, not a byte count"))),
        }
    }

    fn read_at(&mut self, path: &str, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        if self.read_into {
            // SAFETY: the view covers exactly `buf`, which stays borrowed for the call;
            // JS may only write into it (a memory growth meanwhile detaches it: an error).
            let target = unsafe { Uint8Array::view_mut_raw(buf.as_mut_ptr(), buf.len()) };
            let v = self.source.read_into(path, offset as f64, &target).map_err(js_io)?;
            return match v.as_f64() {
                Some(n) if n as usize != buf.len() => {
                    Err(io::Error::new(io::ErrorKind::UnexpectedEof, format!("readInto read {n} bytes at offset {offset}, {} were asked for", buf.len())))
                }
                _ => Ok(()),
            };
        }
        let v = self.source.read_at(path, offset as f64, buf.len() as u32).map_err(js_io)?;
        let bytes: Uint8Array = v.dyn_into().map_err(|v| io::Error::other(format!("readAt returned {v:?}, not a Uint8Array")))?;
        if bytes.length() as usize != buf.len() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("readAt returned {} bytes at offset {offset}, {} were asked for", bytes.length(), buf.len()),
            ));
        }
        bytes.copy_to(buf);
        Ok(())
    }

    fn listing(&mut self) -> io::Result<Vec<ListedEntry>> {
        if !has_method(&self.source, "listing") {
            return Err(io::Error::new(io::ErrorKind::Unsupported, "the old build source has no method listing (a tree patch needs it)"));
        }
        let v = self.source.listing().map_err(js_io)?;
        let array: js_sys::Array = v.dyn_into().map_err(|v| io::Error::other(format!("listing returned {v:?}, not an array")))?;
        let field = |o: &JsValue, k: &str| Reflect::get(o, &JsValue::from_str(k)).unwrap_or(JsValue::UNDEFINED);
        let mut out = Vec::with_capacity(array.length() as usize);
        for (i, e) in array.iter().enumerate() {
            let bad = |what: &str| io::Error::other(format!("listing entry {i}: {what}"));
            let path = field(&e, "path").as_string().ok_or_else(|| bad("path is not a string"))?;
            let kind = match field(&e, "kind").as_string().as_deref() {
                Some("file") => {
                    let size = field(&e, "size").as_f64().filter(|n| (0.0..=MAX_SAFE).contains(n) && n.fract() == 0.0);
                    ListedKind::File { executable: field(&e, "executable").is_truthy(), size: size.ok_or_else(|| bad("size is not a byte count"))? as u64 }
                }
                Some("symlink") => ListedKind::Symlink { target: field(&e, "symlinkTarget").as_string().ok_or_else(|| bad("symlinkTarget is not a string"))? },
                Some("directory") => ListedKind::Directory,
                _ => return Err(bad("kind is not \"file\", \"symlink\" or \"directory\"")),
            };
            out.push(ListedEntry { path, kind });
        }
        Ok(out)
    }
}

struct JsSink {
    sink: JsBuildSink,
    /// The sink has `copyOldFile` and `finishCopies`: unchanged files are offered to it.
    copies: bool,
    /// The sink has `writeScratch` and `readScratch`: split old modules go there.
    scratch: bool,
}

impl JsSink {
    fn new(sink: JsBuildSink) -> JsSink {
        let copies = has_method(&sink, "copyOldFile") && has_method(&sink, "finishCopies");
        let scratch = has_method(&sink, "writeScratch") && has_method(&sink, "readScratch");
        JsSink { sink, copies, scratch }
    }
}

impl BuildSink for JsSink {
    fn create_directory(&mut self, path: &str) -> io::Result<()> {
        self.sink.create_directory(path).map_err(js_io)
    }

    fn create_symlink(&mut self, path: &str, target: &str) -> io::Result<()> {
        self.sink.create_symlink(path, target).map_err(js_io)
    }

    fn begin_file(&mut self, path: &str, executable: bool, size: u64) -> io::Result<()> {
        self.sink.begin_file(path, executable, size as f64).map_err(js_io)
    }

    fn write_file(&mut self, data: &[u8]) -> io::Result<()> {
        // A copy, not a view of wasm memory: the sink may keep it (an async writer).
        self.sink.write_file(&Uint8Array::from(data)).map_err(js_io)
    }

    fn finish_file(&mut self) -> io::Result<()> {
        self.sink.finish_file().map_err(js_io)
    }

    fn resume_file(&mut self, path: &str, executable: bool, size: u64, written: u64) -> io::Result<()> {
        self.sink.resume_file(path, executable, size as f64, written as f64).map_err(js_io)
    }

    fn read_written(&mut self, path: &str, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        // SAFETY: as in `JsOld::read_at`: a view of exactly `buf`, borrowed for the call.
        let target = unsafe { Uint8Array::view_mut_raw(buf.as_mut_ptr(), buf.len()) };
        self.sink.read_written(path, offset as f64, &target).map_err(js_io)?;
        Ok(())
    }

    fn copy_old_file(&mut self, from: &str, path: &str, executable: bool, size: u64) -> io::Result<bool> {
        if !self.copies {
            return Ok(false);
        }
        let v = self.sink.copy_old_file(from, path, executable, size as f64).map_err(js_io)?;
        v.as_bool().ok_or_else(|| io::Error::other(format!("copyOldFile returned {v:?}, not a boolean")))
    }

    fn write_scratch(&mut self, offset: u64, data: &[u8]) -> io::Result<bool> {
        if !self.scratch {
            return Ok(false);
        }
        let v = self.sink.write_scratch(offset as f64, &Uint8Array::from(data)).map_err(js_io)?;
        v.as_bool().ok_or_else(|| io::Error::other(format!("writeScratch returned {v:?}, not a boolean")))
    }

    fn read_scratch(&mut self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        if !self.scratch {
            return Err(io::Error::new(io::ErrorKind::Unsupported, "the sink has no readScratch"));
        }
        // SAFETY: as in `JsOld::read_at`: a view of exactly `buf`, borrowed for the call.
        let target = unsafe { Uint8Array::view_mut_raw(buf.as_mut_ptr(), buf.len()) };
        self.sink.read_scratch(offset as f64, &target).map_err(js_io)?;
        Ok(())
    }

    fn finish_copies(&mut self) -> io::Result<Vec<[u8; 32]>> {
        if !self.copies {
            return Ok(Vec::new());
        }
        let v = self.sink.finish_copies().map_err(js_io)?;
        let array: js_sys::Array = v.dyn_into().map_err(|v| io::Error::other(format!("finishCopies returned {v:?}, not an array")))?;
        let bad = |i: usize| io::Error::other(format!("finishCopies: entry {i} is not 64 hex digits"));
        array
            .iter()
            .enumerate()
            .map(|(i, h)| {
                let bytes = h.as_string().and_then(|s| unhex(&s)).ok_or_else(|| bad(i))?;
                <[u8; 32]>::try_from(bytes.as_slice()).map_err(|_| bad(i))
            })
            .collect()
    }
}

fn resume_point_from_js(v: &JsValue) -> Result<edgepatch_core::ResumePoint, JsError> {
    let field = |k: &str| -> Result<u64, JsError> {
        let n = Reflect::get(v, &JsValue::from_str(k)).ok().and_then(|x| x.as_f64());
        match n {
            Some(n) if (0.0..=MAX_SAFE).contains(&n) && n.fract() == 0.0 => Ok(n as u64),
            _ => Err(JsError::new(&format!("resume point: {k} is not a byte count"))),
        }
    };
    Ok(edgepatch_core::ResumePoint { segments_done: field("segmentsDone")?, patch_offset: field("patchOffset")?, new_offset: field("newOffset")? })
}

fn object(fields: &[(&str, u64)]) -> Object {
    let o = Object::new();
    for (k, v) in fields {
        Reflect::set(&o, &JsValue::from_str(k), &JsValue::from_f64(*v as f64)).expect("set on a plain object");
    }
    o
}

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

/// Makes a single-file patch from `old` to `new` (zstd `level` 1..=22, default
/// 19), byte-identical to `edgepatch diff --level N OLD NEW PATCH`. The whole
/// of both files is held in wasm memory, plus a suffix array of `old` (~5x its size).
#[cfg(feature = "diff")]
#[wasm_bindgen(js_name = diffFiles)]
pub fn diff_files(old: Vec<u8>, new: Vec<u8>, level: Option<i32>) -> Result<Vec<u8>, JsError> {
    let opts = DiffOptions { level: level.unwrap_or(19), threads: 1, ..DiffOptions::default() };
    let (patch, _stats) = diff_builds(&Build::single_file(old), &Build::single_file(new), &opts, &|_, _| {}).map_err(|e| JsError::new(&e.to_string()))?;
    Ok(patch)
}

/// Reserves `bytes` of the module's memory in one piece, free again at once: one allocation
/// of that size made and dropped (its pages are not written), so that the allocator has one
/// region that large for what follows (the Worker's transform phase: worker/src/transform.ts).
/// At most 256 MiB.
#[cfg(feature = "diff")]
#[wasm_bindgen(js_name = reserveWasmMemory)]
pub fn reserve_wasm_memory(bytes: f64) -> Result<(), JsError> {
    if !(bytes >= 0.0 && bytes <= (256u64 << 20) as f64 && bytes.fract() == 0.0) {
        return Err(JsError::new(&format!("reserving {bytes} bytes: at most 256 MiB")));
    }
    let mut region: Vec<u8> = Vec::new();
    region.try_reserve_exact(bytes as usize).map_err(|_| JsError::new(&format!("cannot reserve {bytes} bytes")))?;
    // Kept observable, or the allocation could be optimized away.
    drop(std::hint::black_box(region));
    Ok(())
}

/// The largest window and part, in bytes, a Worker's generator tries as an LZMA window segment
/// (`PatchGenerator.setLzmaWindowsUpTo`): what an isolate affords beside the generator.
#[wasm_bindgen(js_name = isolateLzmaWindowLimit)]
pub fn isolate_lzma_window_limit() -> f64 {
    edgepatch_core::generate::ISOLATE_LZMA_WINDOW_LIMIT as f64
}

/// Current size of this module's linear memory in bytes (it only grows).
#[wasm_bindgen(js_name = wasmMemoryBytes)]
pub fn wasm_memory_bytes() -> f64 {
    #[cfg(target_arch = "wasm32")]
    return (core::arch::wasm32::memory_size(0) * 65536) as f64;
    #[cfg(not(target_arch = "wasm32"))]
    return 0.0;
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

fn core_err(e: impl std::fmt::Display) -> JsError {
    JsError::new(&e.to_string())
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

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) || !s.is_ascii() {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok()).collect()
}

fn js_u64(what: &str, n: f64) -> Result<u64, JsError> {
    if (0.0..=MAX_SAFE).contains(&n) && n.fract() == 0.0 {
        Ok(n as u64)
    } else {
        Err(JsError::new(&format!("{what} is not a whole number from 0 to 2^53")))
    }
}

fn key_id_arg(key_id_hex: &str) -> Result<trust::KeyId, JsError> {
    trust::parse_hex::<8>("key id", key_id_hex).map_err(core_err)
}

/// The protocol's name rule for games, builds and channels (docs/UPDATE_PROTOCOL.md,
/// "Names"): throws an Error naming `what` and the name unless it is 1-64 bytes of
/// `[A-Za-z0-9._-]` not starting with `.` (`_`, the empty build, passes).
#[wasm_bindgen(js_name = checkName)]
pub fn check_name(what: &str, name: &str) -> Result<(), JsError> {
    let what: &'static str = match what {
        "game" => "game",
        "build" => "build",
        "channel" => "channel",
        _ => "name",
    };
    trust::check_name(what, name).map_err(core_err)
}

/// The key id of a 32-byte ed25519 public key (16 hex digits; docs/UPDATE_PROTOCOL.md).
#[wasm_bindgen(js_name = keyId)]
pub fn key_id(public_key: &[u8]) -> Result<String, JsError> {
    let pk: &[u8; 32] = public_key.try_into().map_err(|_| JsError::new(&format!("public key has {} bytes, not 32", public_key.len())))?;
    Ok(trust::key_id_hex(pk))
}

/// The bytes a server signs for an update descriptor (docs/UPDATE_PROTOCOL.md, "Signed statements").
#[wasm_bindgen(js_name = updateStatement)]
pub fn update_statement(key_id_hex: &str, game: &str, from: &str, to: &str, manifest_size: f64, manifest_blake3_hex: &str) -> Result<Vec<u8>, JsError> {
    let hash = trust::parse_hex::<32>("manifest BLAKE3", manifest_blake3_hex).map_err(core_err)?;
    trust::update_statement(&key_id_arg(key_id_hex)?, game, from, to, js_u64("manifest size", manifest_size)?, &hash).map_err(core_err)
}

/// The bytes a server signs for a channel document (docs/UPDATE_PROTOCOL.md, "Signed statements").
#[wasm_bindgen(js_name = channelStatement)]
pub fn channel_statement(key_id_hex: &str, game: &str, channel: &str, build: &str, sequence: f64, expires: f64) -> Result<Vec<u8>, JsError> {
    trust::channel_statement(&key_id_arg(key_id_hex)?, game, channel, build, js_u64("sequence", sequence)?, js_u64("expires", expires)?).map_err(core_err)
}

/// The bytes an old key signs to hand over to `new_public_key` (32 bytes): a key rotation
/// (docs/UPDATE_PROTOCOL.md, "Signed statements", kind 3). Throws for a new key that is not
/// a usable ed25519 key, or that is the old key.
#[wasm_bindgen(js_name = rotationStatement)]
pub fn rotation_statement(old_key_id_hex: &str, new_public_key: &[u8]) -> Result<Vec<u8>, JsError> {
    let pk: &[u8; 32] = new_public_key.try_into().map_err(|_| JsError::new(&format!("new public key has {} bytes, not 32", new_public_key.len())))?;
    trust::rotation_statement(&key_id_arg(old_key_id_hex)?, pk).map_err(core_err)
}

/// Checks an ed25519 signature (for engines whose WebCrypto lacks Ed25519).
/// False for a bad signature; throws only for arguments of the wrong size.
#[wasm_bindgen(js_name = verifyEd25519)]
pub fn verify_ed25519(public_key: &[u8], message: &[u8], signature: &[u8]) -> Result<bool, JsError> {
    let pk: &[u8; 32] = public_key.try_into().map_err(|_| JsError::new(&format!("public key has {} bytes, not 32", public_key.len())))?;
    let sig: &[u8; 64] = signature.try_into().map_err(|_| JsError::new(&format!("signature has {} bytes, not 64", signature.len())))?;
    Ok(trust::verify_ed25519(pk, message, sig).is_ok())
}

fn hex(bytes: &[u8; 32]) -> String {
    edgepatch_core::blake3::Hash::from_bytes(*bytes).to_hex().to_string()
}

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
    inner: edgepatch_core::blake3::Hasher,
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

#[wasm_bindgen(typescript_custom_section)]
const TS_MANIFEST: &str = r#"
export interface ManifestSegment { patchOffset: number; patchLen: number; newOffset: number; newLen: number; }
export type ManifestSource =
  | { type: "unchanged" }
  | { type: "copyOf"; oldPath: string }
  | { type: "delta"; newOffset: number }
  | { type: "none" };
export interface ManifestEntry {
  path: string;
  kind: "file" | "directory" | "symlink";
  executable: boolean;
  size: number;
  /** hex; all zeros for directories and symlinks */
  blake3: string;
  symlinkTarget?: string;
  source: ManifestSource;
}
"#;

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(typescript_type = "ManifestSegment[]")]
    pub type ManifestSegments;
    #[wasm_bindgen(typescript_type = "ManifestEntry[]")]
    pub type ManifestEntries;
    #[wasm_bindgen(typescript_type = "ManifestEntry | undefined")]
    pub type MaybeManifestEntry;
}

fn set(o: &Object, k: &str, v: impl Into<JsValue>) {
    Reflect::set(o, &JsValue::from_str(k), &v.into()).expect("set on a plain object");
}

fn entry_object(e: &edgepatch_core::manifest::ManifestEntry) -> Object {
    use edgepatch_core::manifest::{EntryKind, EntrySource};
    let o = Object::new();
    set(&o, "path", e.path.as_str());
    set(
        &o,
        "kind",
        match e.kind {
            EntryKind::File => "file",
            EntryKind::Directory => "directory",
            EntryKind::Symlink => "symlink",
        },
    );
    set(&o, "executable", e.executable);
    set(&o, "size", e.size as f64);
    set(&o, "blake3", hex(&e.blake3));
    if let Some(t) = &e.symlink_target {
        set(&o, "symlinkTarget", t.as_str());
    }
    let s = Object::new();
    match &e.source {
        EntrySource::Unchanged => set(&s, "type", "unchanged"),
        EntrySource::CopyOf { old_path } => {
            set(&s, "type", "copyOf");
            set(&s, "oldPath", old_path.as_str());
        }
        EntrySource::Delta { new_offset } => {
            set(&s, "type", "delta");
            set(&s, "newOffset", *new_offset as f64);
        }
        EntrySource::None => set(&s, "type", "none"),
    }
    set(&o, "source", s);
    o
}

/// Reads a binary manifest (docs/FORMAT.md §4) without parsing all of it:
/// `lookup(path)` is O(1) through the manifest's perfect-hash index. The
/// constructor checks the header, the section bounds and the checksum.
#[wasm_bindgen]
pub struct ManifestReader {
    bytes: Vec<u8>,
}

impl ManifestReader {
    fn view(&self) -> edgepatch_core::manifest::ManifestView<'_> {
        edgepatch_core::manifest::ManifestView::open(&self.bytes).expect("checked in the constructor")
    }
}

#[wasm_bindgen]
impl ManifestReader {
    #[wasm_bindgen(constructor)]
    pub fn new(bytes: Vec<u8>) -> Result<ManifestReader, JsError> {
        let view = edgepatch_core::manifest::ManifestView::open(&bytes).map_err(core_err)?;
        view.verify_checksum().map_err(core_err)?;
        Ok(ManifestReader { bytes })
    }

    /// "build" or "patch".
    #[wasm_bindgen(getter)]
    pub fn kind(&self) -> String {
        match self.view().kind() {
            edgepatch_core::manifest::ManifestKind::Build => "build".into(),
            edgepatch_core::manifest::ManifestKind::Patch => "patch".into(),
        }
    }

    #[wasm_bindgen(getter, js_name = fromBuild)]
    pub fn from_build(&self) -> Option<String> {
        self.view().from_build().map(str::to_string)
    }

    #[wasm_bindgen(getter, js_name = toBuild)]
    pub fn to_build(&self) -> String {
        self.view().to_build().to_string()
    }

    #[wasm_bindgen(getter, js_name = patchSize)]
    pub fn patch_size(&self) -> f64 {
        self.view().patch_size() as f64
    }

    /// Hex.
    #[wasm_bindgen(getter, js_name = patchBlake3)]
    pub fn patch_blake3(&self) -> String {
        hex(&self.view().patch_blake3())
    }

    /// Number of entries.
    #[wasm_bindgen(getter)]
    pub fn length(&self) -> u32 {
        self.view().len() as u32
    }

    pub fn segments(&self) -> Result<ManifestSegments, JsError> {
        let arr = js_sys::Array::new();
        for s in self.view().segments().map_err(core_err)? {
            arr.push(&object(&[("patchOffset", s.patch_offset), ("patchLen", s.patch_len), ("newOffset", s.new_offset), ("newLen", s.new_len)]));
        }
        Ok(arr.unchecked_into())
    }

    /// Every entry, in the manifest's order.
    pub fn entries(&self) -> Result<ManifestEntries, JsError> {
        let arr = js_sys::Array::new();
        for e in self.view().entries() {
            arr.push(&entry_object(&e.map_err(core_err)?));
        }
        Ok(arr.unchecked_into())
    }

    /// One entry by path, or undefined; reads only that entry's record.
    pub fn lookup(&self, path: &str) -> Result<MaybeManifestEntry, JsError> {
        Ok(match self.view().lookup(path).map_err(core_err)? {
            Some(e) => JsValue::from(entry_object(&e)).unchecked_into(),
            None => JsValue::UNDEFINED.unchecked_into(),
        })
    }
}

#[wasm_bindgen(typescript_custom_section)]
const TS_GENERATOR: &str = r#"
/** Bytes `[offset, offset + length)` of the file at `path` of a build; with `normalized` true,
 *  of the normalized form of that new wasm module (`prepareWasmTransform`), not the file; with
 *  `oldSplit` true (old ranges), of that old module in the field-split layout
 *  (`oldSplitView()`), not the file. */
export interface ByteRange { path: string; offset: number; length: number; normalized: boolean; oldSplit: boolean; }
"#;

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(typescript_type = "ByteRange[]")]
    pub type ByteRanges;
}

#[cfg(feature = "diff")]
fn ranges_to_js(ranges: &[edgepatch_core::generate::ByteRange]) -> ByteRanges {
    let arr = js_sys::Array::new();
    for r in ranges {
        let o = Object::new();
        set(&o, "path", r.path.as_str());
        set(&o, "offset", r.offset as f64);
        set(&o, "length", r.len as f64);
        set(&o, "normalized", r.form == edgepatch_core::generate::FileForm::Normalized);
        set(&o, "oldSplit", r.form == edgepatch_core::generate::FileForm::OldSplit);
        arr.push(&o);
    }
    arr.unchecked_into()
}

/// A changed wasm module to store normalized in a generated patch (docs/FORMAT.md §2.8):
/// `prepareWasmTransform(path, oldModule, newModule)` reads both modules whole and returns
/// undefined (store the module as it is: not wasm, nothing renumbered, above the caps) or
/// this. Keep `takeNormalized()`'s bytes where the generation's steps can read their ranges
/// (those with `normalized: true`), and give `record` to every generator of the patch
/// (`addWasmTransform`). The record is small (the side info and a hash per MiB). Where the
/// module is stored in the field-split layout (`oldSplitBlake3` set), keep the old module
/// split (`oldSplitView()`) too: old ranges with `oldSplit: true` are read from it, after
/// checking it against `oldSplitBlake3`.
#[cfg(feature = "diff")]
#[wasm_bindgen]
pub struct PreparedWasmTransform {
    record: Vec<u8>,
    normalized: Vec<u8>,
    normalized_size: u64,
    old_split: Vec<u8>,
    old_split_blake3: Option<String>,
}

#[cfg(feature = "diff")]
#[wasm_bindgen]
impl PreparedWasmTransform {
    /// The transform, encoded (for `PatchGenerator.addWasmTransform`).
    #[wasm_bindgen(getter)]
    pub fn record(&self) -> Vec<u8> {
        self.record.clone()
    }

    /// Bytes of the normalized form.
    #[wasm_bindgen(getter, js_name = normalizedSize)]
    pub fn normalized_size(&self) -> f64 {
        self.normalized_size as f64
    }

    /// The normalized form, moved out of the module's memory (a second call returns nothing).
    #[wasm_bindgen(js_name = takeNormalized)]
    pub fn take_normalized(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.normalized)
    }

    /// A view of the normalized form where it is, in the module's memory (no copy into JS):
    /// valid until this is freed or the memory grows (then detached: take it again).
    #[wasm_bindgen(js_name = normalizedView)]
    pub fn normalized_view(&mut self) -> Uint8Array {
        view_of(&mut self.normalized)
    }

    /// BLAKE3 (hex) of the old module split, if the patch stores the module in the
    /// field-split layout; undefined otherwise.
    #[wasm_bindgen(getter, js_name = oldSplitBlake3)]
    pub fn old_split_blake3(&self) -> Option<String> {
        self.old_split_blake3.clone()
    }

    /// A view of the old module split (empty unless `oldSplitBlake3` is set), as
    /// `normalizedView()`.
    #[wasm_bindgen(js_name = oldSplitView)]
    pub fn old_split_view(&mut self) -> Uint8Array {
        view_of(&mut self.old_split)
    }
}

/// A whole wasm module filled in place in the module's memory (`view()`), for
/// `normalizeWasmModuleFilled` and `finishFilled`: a caller short of memory (a Worker) reads it there from its
/// store without holding a copy in JS.
#[cfg(feature = "diff")]
#[wasm_bindgen]
pub struct ModuleBuffer {
    bytes: Vec<u8>,
}

#[cfg(feature = "diff")]
#[wasm_bindgen]
impl ModuleBuffer {
    /// `size` bytes (at most the format's cap on a transformed module), zeroed.
    #[wasm_bindgen(constructor)]
    pub fn new(size: f64) -> Result<ModuleBuffer, JsError> {
        use edgepatch_core::patch_format::MAX_WASM_TRANSFORM_BYTES;
        if !(size >= 0.0 && size <= MAX_WASM_TRANSFORM_BYTES as f64 && size.fract() == 0.0) {
            return Err(JsError::new(&format!("module buffer of {size} bytes: at most {MAX_WASM_TRANSFORM_BYTES}")));
        }
        Ok(ModuleBuffer { bytes: vec![0; size as usize] })
    }

    /// A view of the buffer to fill: valid until the buffer is consumed or the memory grows
    /// (then detached, `byteLength` 0: take it again).
    pub fn view(&mut self) -> Uint8Array {
        view_of(&mut self.bytes)
    }
}

/// A changed module pair half prepared (`normalizeWasmModuleFilled`): the new module
/// normalized, waiting for the old module again (`finishFilled`), which chooses the layout the
/// patch stores it in. For a caller short of memory (a Worker): the old module is not held
/// during the new one's forward transform, the phase's peak.
#[cfg(feature = "diff")]
#[wasm_bindgen]
pub struct NormalizedWasmModule {
    inner: Option<edgepatch_core::generate::NormalizedNew>,
}

#[cfg(feature = "diff")]
#[wasm_bindgen]
impl NormalizedWasmModule {
    /// The transform (see [`PreparedWasmTransform`]) from the old module read again into a
    /// filled buffer, which it consumes; undefined: store the module as it is. Once only.
    #[wasm_bindgen(js_name = finishFilled)]
    pub fn finish_filled(&mut self, old_module: ModuleBuffer) -> Result<Option<PreparedWasmTransform>, JsError> {
        let n = self.inner.take().ok_or_else(|| JsError::new("finishFilled called twice"))?;
        Ok(n.finish(old_module.bytes).map(prepared_to_js))
    }

    /// The old module is at `oldPath`, another path than the new one (`renamedCounterparts`):
    /// in the field-split layout, that old file is the one read split (the ranges the
    /// generator asks for with `oldSplit: true` name its path).
    pub fn renamed(&mut self, old_path: &str) {
        self.inner = self.inner.take().map(|n| n.renamed(old_path));
    }
}

/// The files of the new build renamed from a file of the old build (content-hashed names),
/// by the core's one rule (`edgepatch_core::renamed_files`): pairs of indices into
/// `newPaths` and `oldPaths` (files only), flattened as `[new, old, new, old, ...]`.
#[cfg(feature = "diff")]
#[wasm_bindgen(js_name = renamedCounterparts)]
pub fn renamed_counterparts(old_paths: Vec<String>, new_paths: Vec<String>) -> Vec<u32> {
    let (old, new): (Vec<&str>, Vec<&str>) = (old_paths.iter().map(String::as_str).collect(), new_paths.iter().map(String::as_str).collect());
    edgepatch_core::renamed_files::renamed_counterparts(&old, &new).into_iter().flat_map(|(n, o)| [n as u32, o as u32]).collect()
}

/// The first half of [`prepare_wasm_transform`] from two filled [`ModuleBuffer`]s, which it
/// consumes (the core frees each as soon as it can); undefined: store the module as it is.
#[cfg(feature = "diff")]
#[wasm_bindgen(js_name = normalizeWasmModuleFilled)]
pub fn normalize_wasm_module_filled(path: &str, old_module: ModuleBuffer, new_module: ModuleBuffer) -> Option<NormalizedWasmModule> {
    let n = edgepatch_core::generate::WasmTransform::normalize_owned(path, old_module.bytes, new_module.bytes)?;
    Some(NormalizedWasmModule { inner: Some(n) })
}

/// See [`PreparedWasmTransform`]. `path` is the module's path in the new build ("" for a
/// single file). Holds both modules throughout: a caller short of memory uses
/// `normalizeWasmModuleFilled` and `finishFilled`.
#[cfg(feature = "diff")]
#[wasm_bindgen(js_name = prepareWasmTransform)]
pub fn prepare_wasm_transform(path: &str, old_module: Vec<u8>, new_module: Vec<u8>) -> Option<PreparedWasmTransform> {
    edgepatch_core::generate::WasmTransform::prepare(path, &old_module, &new_module).map(prepared_to_js)
}

#[cfg(feature = "diff")]
fn prepared_to_js(p: edgepatch_core::generate::PreparedTransform) -> PreparedWasmTransform {
    PreparedWasmTransform {
        record: p.transform.encode(),
        normalized_size: p.normalized.len() as u64,
        normalized: p.normalized,
        old_split_blake3: p.transform.old_split_blake3().map(|h| hex(&h)),
        old_split: p.old_split.unwrap_or_default(),
    }
}

/// Bounded-memory patch generator (the core's `PatchGenerator`), for a Worker:
/// works from the two builds' signatures and byte ranges the caller reads
/// (e.g. from R2), one 4 MiB segment at a time, never a whole build.
///
/// ```js
/// const gen = new PatchGenerator(oldSignature, newSignature, 19); // oldSignature null: an install
/// write(gen.header());
/// for (let i = 0; i < gen.segmentCount; i++) {
///   const fresh = await readAll(newBuild, gen.newRanges(i));
///   const old = await readAll(oldBuild, gen.planSegment(i, fresh));
///   write(gen.encodeSegment(i, fresh, old));
/// }
/// write(gen.finish());
/// const manifest = gen.manifest("v1", "v2");
/// ```
///
/// Or without a JS buffer per segment: the segment's data is read straight into
/// the module's own buffers (`newBytesTarget`, `oldBytesTarget`), then
/// `planFilledSegment(i)`, `encodeFilledSegment(i)` and `segmentOutput()`.
#[cfg(feature = "diff")]
#[wasm_bindgen]
pub struct PatchGenerator {
    inner: edgepatch_core::generate::PatchGenerator,
    /// Segment data filled in place by the caller, kept across segments so that
    /// reading a segment allocates nothing on the JS side.
    new_buf: Vec<u8>,
    old_buf: Vec<u8>,
    /// The last `encodeFilledSegment` output.
    out_buf: Vec<u8>,
}

/// A view of `buf` for JS to read or fill in place.
///
/// It aliases `buf` without a borrow (the methods that hand one out say so): it
/// is valid until `buf` is resized or dropped or the memory grows. A growth
/// detaches it (`byteLength` 0), so JS sees a stale view rather than writing
/// through it; the generator resizes its buffers only in the methods that
/// return a fresh view, or in `encodeFilledSegment`/`finish`.
#[cfg(feature = "diff")]
fn view_of(buf: &mut [u8]) -> Uint8Array {
    unsafe { Uint8Array::view_mut_raw(buf.as_mut_ptr(), buf.len()) }
}

#[cfg(feature = "diff")]
#[wasm_bindgen]
impl PatchGenerator {
    /// `level`: zstd level 1..=22 (default 19).
    #[wasm_bindgen(constructor)]
    pub fn new(old_signature: Option<Vec<u8>>, new_signature: &[u8], level: Option<i32>) -> Result<PatchGenerator, JsError> {
        use edgepatch_core::signature::Signature;
        let old = old_signature.map(|b| Signature::decode(&b)).transpose().map_err(|e| JsError::new(&format!("old signature: {e}")))?;
        let new = Signature::decode(new_signature).map_err(|e| JsError::new(&format!("new signature: {e}")))?;
        let inner = edgepatch_core::generate::PatchGenerator::new(old.as_ref(), &new, level.unwrap_or(19)).map_err(core_err)?;
        Ok(PatchGenerator { inner, new_buf: Vec::new(), old_buf: Vec::new(), out_buf: Vec::new() })
    }

    /// Stores a changed wasm module normalized (`prepareWasmTransform(...).record`): before
    /// `header()`/`startAtFilled()`, the same records for every generator of one patch. Its
    /// ranges in `newRanges` are then of the normalized form (`normalized: true`), whose
    /// bytes are checked against the record as they are encoded.
    #[wasm_bindgen(js_name = addWasmTransform)]
    pub fn add_wasm_transform(&mut self, record: &[u8]) -> Result<(), JsError> {
        let t = edgepatch_core::generate::WasmTransform::decode(record).map_err(core_err)?;
        self.inner.add_wasm_transform(t).map_err(core_err)
    }

    /// Tries each ops segment's streams as LZMA too (docs/FORMAT.md §2.3 `M`; an encoder of
    /// about 12 MiB while it runs), keeping whichever form is smaller: before `header()`, the
    /// same for every generator of one patch.
    #[wasm_bindgen(js_name = setLzmaOpsStreams)]
    pub fn set_lzma_ops_streams(&mut self, on: bool) -> Result<(), JsError> {
        self.inner.set_lzma_ops_streams(on).map_err(core_err)
    }

    /// Tries split modules' parts as LZMA window segments too (§2.6 `L`) where their window and
    /// data take at most `limit` bytes (an encoder of about 12 x `limit` bytes while it runs;
    /// 0: never): before `header()`, the same for every generator of one patch.
    #[wasm_bindgen(js_name = setLzmaWindowsUpTo)]
    pub fn set_lzma_windows_up_to(&mut self, limit: f64) -> Result<(), JsError> {
        self.inner.set_lzma_windows_up_to(limit as u64).map_err(core_err)
    }

    #[wasm_bindgen(getter, js_name = segmentCount)]
    pub fn segment_count(&self) -> u32 {
        self.inner.segment_count() as u32
    }

    /// Where segment `i` begins in the new delta stream (`i` = `segmentCount`: where the stream
    /// ends). Segments are 4 MiB, cut also at the parts of split wasm modules, so a fan-out
    /// step's bytes are `segmentStart(first)..segmentStart(end)`, not a multiple of 4 MiB.
    #[wasm_bindgen(js_name = segmentStart)]
    pub fn segment_start(&self, i: u32) -> Result<f64, JsError> {
        Ok(self.inner.segment_start(i.into()).map_err(core_err)? as f64)
    }

    /// The first bytes of the patch (header and tree).
    pub fn header(&mut self) -> Result<Vec<u8>, JsError> {
        self.inner.header().map_err(core_err)
    }

    /// The new-build ranges whose concatenation is segment `i`'s new data.
    #[wasm_bindgen(js_name = newRanges)]
    pub fn new_ranges(&self, i: u32) -> Result<ByteRanges, JsError> {
        Ok(ranges_to_js(&self.inner.new_ranges(i.into()).map_err(core_err)?))
    }

    /// The old-build ranges (at most 8 MiB in all) segment `i` is compressed against.
    #[wasm_bindgen(js_name = planSegment)]
    pub fn plan_segment(&mut self, i: u32, new_bytes: &[u8]) -> Result<ByteRanges, JsError> {
        Ok(ranges_to_js(&self.inner.plan_segment(i.into(), new_bytes).map_err(core_err)?))
    }

    /// Segment `i`'s patch bytes, from its new data and the planned old ranges' bytes (concatenated).
    #[wasm_bindgen(js_name = encodeSegment)]
    pub fn encode_segment(&mut self, i: u32, new_bytes: &[u8], old_bytes: Vec<u8>) -> Result<Vec<u8>, JsError> {
        self.inner.encode_segment(i.into(), new_bytes, old_bytes).map_err(core_err)
    }

    /// Sizes the module's buffer for segment data read from the new build to
    /// `length` bytes (the sum of `newRanges(i)`) and returns a view of it to fill
    /// in place. The view stays valid until this generator resizes the buffer
    /// or the module's memory grows (any call into the module may grow it,
    /// which detaches the view: `byteLength` 0); take it again with
    /// `newBytesView()` then.
    #[wasm_bindgen(js_name = newBytesTarget)]
    pub fn new_bytes_target(&mut self, length: u32) -> Uint8Array {
        // The last segment's output is written by now: free it before the next allocations.
        self.out_buf = Vec::new();
        self.new_buf.clear();
        self.new_buf.resize(length as usize, 0);
        view_of(&mut self.new_buf)
    }

    /// The buffer `newBytesTarget` sized, again (valid as its view is).
    #[wasm_bindgen(js_name = newBytesView)]
    pub fn new_bytes_view(&mut self) -> Uint8Array {
        view_of(&mut self.new_buf)
    }

    /// As `newBytesTarget`, for the old bytes `planFilledSegment` asked for.
    /// (Reserving room here for the window the core appends made the module's
    /// memory 4 MiB larger on freedoom2-wad, not smaller: left to the core.)
    #[wasm_bindgen(js_name = oldBytesTarget)]
    pub fn old_bytes_target(&mut self, length: u32) -> Uint8Array {
        self.old_buf.clear();
        self.old_buf.resize(length as usize, 0);
        view_of(&mut self.old_buf)
    }

    /// The buffer `oldBytesTarget` sized, again (valid as its view is).
    #[wasm_bindgen(js_name = oldBytesView)]
    pub fn old_bytes_view(&mut self) -> Uint8Array {
        view_of(&mut self.old_buf)
    }

    /// `planSegment(i, newBytes)` with the bytes filled in `newBytesTarget`.
    #[wasm_bindgen(js_name = planFilledSegment)]
    pub fn plan_filled_segment(&mut self, i: u32) -> Result<ByteRanges, JsError> {
        Ok(ranges_to_js(&self.inner.plan_segment(i.into(), &self.new_buf).map_err(core_err)?))
    }

    /// `encodeSegment` with the bytes filled in `newBytesTarget` and
    /// `oldBytesTarget` (the old buffer is used up). Returns the segment's patch
    /// length; its bytes are `segmentOutput()`.
    #[wasm_bindgen(js_name = encodeFilledSegment)]
    pub fn encode_filled_segment(&mut self, i: u32) -> Result<u32, JsError> {
        let old = std::mem::take(&mut self.old_buf);
        self.out_buf = Vec::new();
        self.out_buf = self.inner.encode_segment(i.into(), &self.new_buf, old).map_err(core_err)?;
        Ok(self.out_buf.len() as u32)
    }

    /// A view of the last `encodeFilledSegment` output, valid as the views of
    /// `newBytesTarget` are (take it again when detached), and only until the
    /// next `newBytesTarget`, which frees it.
    #[wasm_bindgen(js_name = segmentOutput)]
    pub fn segment_output(&mut self) -> Uint8Array {
        view_of(&mut self.out_buf)
    }

    /// Feeds bytes `[at, at + length)` of the buffer `newBytesTarget` filled to `hasher`
    /// (no copy through JS).
    #[wasm_bindgen(js_name = hashNewBytes)]
    pub fn hash_new_bytes(&self, hasher: &mut FileHasher, at: u32, length: u32) -> Result<(), JsError> {
        let (at, length) = (at as usize, length as usize);
        let bytes = self
            .new_buf
            .get(at..at.saturating_add(length))
            .ok_or_else(|| JsError::new(&format!("hashNewBytes: {at}+{length} outside the {}-byte buffer", self.new_buf.len())))?;
        hasher.inner.update(bytes);
        Ok(())
    }

    /// The new-build ranges whose concatenation is the history a step started at segment
    /// `first` takes (`startAtFilled`): the 4 MiB before it, or 8 MiB where the patch declares
    /// the text reach; none for 0.
    #[wasm_bindgen(js_name = historyRanges)]
    pub fn history_ranges(&self, first: u32) -> Result<ByteRanges, JsError> {
        Ok(ranges_to_js(&self.inner.history_ranges(first.into()).map_err(core_err)?))
    }

    /// One step of a split generation (the core's `start_at`): continues at segment `first`
    /// without a header. The history, the new data of `historyRanges(first)`, is what the
    /// caller filled in `newBytesTarget` (length 0 for `first` 0).
    #[wasm_bindgen(js_name = startAtFilled)]
    pub fn start_at_filled(&mut self, first: u32) -> Result<(), JsError> {
        let history = std::mem::take(&mut self.new_buf);
        self.inner.start_at(first.into(), &history).map_err(core_err)
    }

    /// Assembling a split generation: after `header()`, segment `i` as a step made it, in
    /// order (checked: one whole segment of the right size); then `finish()` and `manifest()`.
    #[wasm_bindgen(js_name = absorbSegment)]
    pub fn absorb_segment(&mut self, i: u32, bytes: &[u8]) -> Result<(), JsError> {
        self.inner.absorb_segment(i.into(), bytes).map_err(core_err)
    }

    /// The last bytes of the patch (end marker and checksum).
    pub fn finish(&mut self) -> Result<Vec<u8>, JsError> {
        self.new_buf = Vec::new();
        self.old_buf = Vec::new();
        self.out_buf = Vec::new();
        self.inner.finish().map_err(core_err)
    }

    /// The binary patch manifest (after `finish`).
    pub fn manifest(&self, from_build: &str, to_build: &str) -> Result<Vec<u8>, JsError> {
        self.inner.manifest(from_build, to_build).map_err(core_err)
    }

    /// New bytes the delta stream carries (files not copied from the old build).
    #[wasm_bindgen(getter, js_name = deltaBytes)]
    pub fn delta_bytes(&self) -> f64 {
        self.inner.stats().delta_bytes as f64
    }
}
