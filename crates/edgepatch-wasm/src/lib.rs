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
    let missing: Vec<&str> = methods
        .iter()
        .copied()
        .filter(|m| !has_method(obj, m))
        .collect();
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
                Some(n) if n as usize != buf.len() => Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("readInto read {n} bytes at offset {offset}, {} were asked for", buf.len()),
                )),
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
}

struct JsSink(JsBuildSink);

impl BuildSink for JsSink {
    fn create_directory(&mut self, path: &str) -> io::Result<()> {
        self.0.create_directory(path).map_err(js_io)
    }

    fn create_symlink(&mut self, path: &str, target: &str) -> io::Result<()> {
        self.0.create_symlink(path, target).map_err(js_io)
    }

    fn begin_file(&mut self, path: &str, executable: bool, size: u64) -> io::Result<()> {
        self.0.begin_file(path, executable, size as f64).map_err(js_io)
    }

    fn write_file(&mut self, data: &[u8]) -> io::Result<()> {
        // A copy, not a view of wasm memory: the sink may keep it (an async writer).
        self.0.write_file(&Uint8Array::from(data)).map_err(js_io)
    }

    fn finish_file(&mut self) -> io::Result<()> {
        self.0.finish_file().map_err(js_io)
    }
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
    /// The first error; every later call repeats it.
    failed: Option<String>,
    /// Progress as `finish` found it.
    finished: edgepatch_core::ApplyProgress,
}

#[wasm_bindgen]
impl PatchApplier {
    #[wasm_bindgen(constructor)]
    pub fn new(old: OldBuildSource, sink: JsBuildSink) -> Result<PatchApplier, JsError> {
        check_methods(&old, "the old build source", &["fileSize", "readAt"])?;
        check_methods(&sink, "the sink", &["createDirectory", "createSymlink", "beginFile", "writeFile", "finishFile"])?;
        let read_into = has_method(&old, "readInto");
        Ok(PatchApplier { inner: Some(CoreApplier::new()), old: JsOld { source: old, read_into }, sink: JsSink(sink), failed: None, finished: Default::default() })
    }

    /// Feeds the next bytes of the patch; everything they complete is applied
    /// (the callbacks run before this returns).
    pub fn push(&mut self, chunk: &[u8]) -> Result<(), JsError> {
        if let Some(e) = &self.failed {
            return Err(JsError::new(e));
        }
        let Some(inner) = self.inner.as_mut() else {
            return Err(JsError::new("push after finish"));
        };
        inner.push(chunk, &mut self.old, &mut self.sink).map_err(|e| {
            let msg = e.to_string();
            self.failed = Some(msg.clone());
            JsError::new(&msg)
        })
    }

    /// Ends the patch: throws unless all of it arrived and every file and the
    /// patch checksum verified. Only then is the output final.
    pub fn finish(&mut self) -> Result<ApplySummary, JsError> {
        if let Some(e) = &self.failed {
            return Err(JsError::new(e));
        }
        let inner = self.inner.take().ok_or_else(|| JsError::new("finish called twice"))?;
        self.finished = inner.progress();
        let s = inner.finish().map_err(|e| {
            let msg = e.to_string();
            self.failed = Some(msg.clone());
            JsError::new(&msg)
        })?;
        Ok(object(&[("entries", s.entries), ("files", s.files), ("bytesWritten", s.bytes_written), ("patchBytes", s.patch_bytes)])
            .unchecked_into())
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
    let (patch, _stats) =
        diff_builds(&Build::single_file(old), &Build::single_file(new), &opts, &|_, _| {}).map_err(|e| JsError::new(&e.to_string()))?;
    Ok(patch)
}

/// Current size of this module's linear memory in bytes (it only grows).
#[wasm_bindgen(js_name = wasmMemoryBytes)]
pub fn wasm_memory_bytes() -> f64 {
    #[cfg(target_arch = "wasm32")]
    return (core::arch::wasm32::memory_size(0) * 65536) as f64;
    #[cfg(not(target_arch = "wasm32"))]
    return 0.0;
}
