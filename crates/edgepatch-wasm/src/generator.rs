//! [`PatchGenerator`]: the core's bounded-memory generator, driven from JS segment by
//! segment (or step by step), its byte ranges handed to JS to read.

#[cfg(feature = "diff")]
use js_sys::{Object, Uint8Array};
use wasm_bindgen::prelude::*;
#[cfg(feature = "diff")]
use wasm_bindgen::JsCast;

#[cfg(feature = "diff")]
use crate::js::{core_err, set, view_of};
#[cfg(feature = "diff")]
use crate::signer::FileHasher;

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

/// The largest window and part, in bytes, a Worker's generator tries as an LZMA window segment
/// (`PatchGenerator.setLzmaWindowsUpTo`): what an isolate affords beside the generator.
#[wasm_bindgen(js_name = isolateLzmaWindowLimit)]
pub fn isolate_lzma_window_limit() -> f64 {
    edgepatch_core::generate::ISOLATE_LZMA_WINDOW_LIMIT as f64
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

    /// What a reader must understand to apply a file stored by the transform `record`
    /// (docs/FORMAT.md §5), as hex: a generator for a reader without it leaves the transform
    /// out and stores the module as it is.
    #[wasm_bindgen(js_name = wasmTransformNeeds)]
    pub fn wasm_transform_needs(record: &[u8]) -> Result<String, JsError> {
        Ok(edgepatch_core::generate::WasmTransform::decode(record).map_err(core_err)?.required_capabilities().to_hex())
    }

    /// Tries each ops segment's streams as LZMA too (docs/FORMAT.md §2.3 `M`; an encoder of
    /// about 12 MiB while it runs), keeping whichever form is smaller: before `header()`, the
    /// same for every generator of one patch.
    /// Writes only what a reader with the set `hex` applies (docs/FORMAT.md §5; `readerFor`'s
    /// form): before any transform and `header()`, the same for every generator of one patch.
    /// A transform the reader cannot read is refused (`wasmTransformNeeds`).
    #[wasm_bindgen(js_name = setReader)]
    pub fn set_reader(&mut self, hex: &str) -> Result<(), JsError> {
        let reader = edgepatch_core::Capabilities::from_hex(hex).map_err(core_err)?.known();
        self.inner.set_reader(reader).map_err(core_err)
    }

    /// What a reader must understand to apply the patch (docs/FORMAT.md §5), as hex: final
    /// once `header()` is written.
    #[wasm_bindgen(getter, js_name = requiredCapabilities)]
    pub fn required_capabilities(&self) -> String {
        self.inner.required_capabilities().to_hex()
    }

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
