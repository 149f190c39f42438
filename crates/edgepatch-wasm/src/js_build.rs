//! The old build and the new build's sink as JS objects (`OldBuildSource`, `BuildSink`),
//! adapted to the core's [`OldBuild`] and [`BuildSink`], and the apply's JS types.

use std::io;

use edgepatch_core::apply::{BuildSink, OldBuild};
use edgepatch_core::patch_format::{ListedEntry, ListedKind};
use js_sys::{Reflect, Uint8Array};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use crate::js::{has_method, js_io, unhex, MAX_SAFE};

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
  /**
   * Optional: true if the patch is trusted (one the caller made): its gzip/zlib files may be
   * rebuilt from preflate's side infos, which a hostile patch could keep running without end.
   * Without it, or false, a patch that needs them is refused before anything is written,
   * unless a signed manifest vouches for its head (a bound apply).
   */
  trustsSideInfos?(): boolean;
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
    #[wasm_bindgen(method, catch, js_name = trustsSideInfos)]
    fn trusts_side_infos(this: &JsBuildSink) -> Result<JsValue, JsValue>;

    #[wasm_bindgen(typescript_type = "ResumePoint")]
    pub type JsResumePoint;
    #[wasm_bindgen(typescript_type = "ResumePoint | undefined")]
    pub type MaybeResumePoint;

    #[wasm_bindgen(typescript_type = "ApplyProgress")]
    pub type ApplyProgress;
    #[wasm_bindgen(typescript_type = "ApplySummary")]
    pub type ApplySummary;
}

pub(crate) struct JsOld {
    pub(crate) source: OldBuildSource,
    /// The source has `readInto`: reads land in wasm memory directly.
    pub(crate) read_into: bool,
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

pub(crate) struct JsSink {
    sink: JsBuildSink,
    /// The sink has `copyOldFile` and `finishCopies`: unchanged files are offered to it.
    copies: bool,
    /// The sink has `writeScratch` and `readScratch`: split old modules go there.
    scratch: bool,
    /// The sink's `trustsSideInfos()` said true (asked once).
    trust_side_infos: bool,
}

impl JsSink {
    pub(crate) fn new(sink: JsBuildSink) -> JsSink {
        let copies = has_method(&sink, "copyOldFile") && has_method(&sink, "finishCopies");
        let scratch = has_method(&sink, "writeScratch") && has_method(&sink, "readScratch");
        let trust_side_infos = has_method(&sink, "trustsSideInfos") && sink.trusts_side_infos().is_ok_and(|v| v.as_bool() == Some(true));
        JsSink { sink, copies, scratch, trust_side_infos }
    }
}

impl BuildSink for JsSink {
    fn trusts_side_infos(&self) -> bool {
        self.trust_side_infos
    }

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

pub(crate) fn resume_point_from_js(v: &JsValue) -> Result<edgepatch_core::ResumePoint, JsError> {
    let field = |k: &str| -> Result<u64, JsError> {
        let n = Reflect::get(v, &JsValue::from_str(k)).ok().and_then(|x| x.as_f64());
        match n {
            Some(n) if (0.0..=MAX_SAFE).contains(&n) && n.fract() == 0.0 => Ok(n as u64),
            _ => Err(JsError::new(&format!("resume point: {k} is not a byte count"))),
        }
    };
    Ok(edgepatch_core::ResumePoint { segments_done: field("segmentsDone")?, patch_offset: field("patchOffset")?, new_offset: field("newOffset")? })
}
