//! [`ManifestReader`]: a binary manifest read in place, entries looked up by path.

use js_sys::Object;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use crate::js::{core_err, hex, object, set};

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
  /** Stored decoded: the build shipped this `.gz`/`.br` file compressed; size and blake3 are its decoded content's. */
  decoded: boolean;
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
    set(&o, "decoded", e.decoded);
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
