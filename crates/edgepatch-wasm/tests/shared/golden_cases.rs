
#[cfg(feature = "diff")]
use edgepatch_wasm::diff_files;
use edgepatch_wasm::PatchApplier;
use js_sys::{Array, Function, Object, Reflect, Uint8Array};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_test::*;

const GOLDEN_PATCH: &[u8] = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/golden/game-v1-to-v2.patch"));
const V1_TAR: &[u8] = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/game-v1.tar"));
const V2_TAR: &[u8] = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/game-v2.tar"));

#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    Dir,
    Link(String),
    File { executable: bool, data: Vec<u8> },
}

/// A tiny ustar reader (the fixtures are written with Python's USTAR_FORMAT).
fn read_tar(tar: &[u8]) -> Vec<(String, Entry)> {
    let field = |h: &[u8], a: usize, b: usize| {
        let f = &h[a..b];
        String::from_utf8(f[..f.iter().position(|&c| c == 0).unwrap_or(f.len())].to_vec()).unwrap()
    };
    let octal = |h: &[u8], a: usize, b: usize| u64::from_str_radix(field(h, a, b).trim(), 8).unwrap_or(0);
    let mut out = Vec::new();
    let mut at = 0;
    while at + 512 <= tar.len() && tar[at..at + 512].iter().any(|&b| b != 0) {
        let h = &tar[at..at + 512];
        assert_eq!(&h[257..262], b"ustar", "ustar header at {at}");
        let (name, prefix) = (field(h, 0, 100), field(h, 345, 500));
        let path = if prefix.is_empty() { name } else { format!("{prefix}/{name}") };
        let path = path.trim_start_matches("./").trim_end_matches('/').to_string();
        let size = octal(h, 124, 136) as usize;
        let data = &tar[at + 512..at + 512 + size];
        let entry = match h[156] {
            b'5' => Entry::Dir,
            b'2' => Entry::Link(field(h, 157, 257)),
            b'0' | 0 => Entry::File { executable: octal(h, 100, 108) & 0o111 != 0, data: data.to_vec() },
            t => panic!("tar entry type {t} at {path}"),
        };
        out.push((path, entry));
        at += 512 + size.div_ceil(512) * 512;
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[cfg(feature = "diff")]
fn tar_file<'a>(tree: &'a [(String, Entry)], path: &str) -> &'a [u8] {
    match tree.iter().find(|(p, _)| p == path) {
        Some((_, Entry::File { data, .. })) => data,
        _ => panic!("{path} is not a file of the fixture"),
    }
}

fn js_fn(args: &str, body: &str) -> Function {
    Function::new_with_args(args, body)
}

/// An `OldBuildSource` over files held in a JS Map (with `readInto` too if `read_into`).
/// An `OldBuildSource` over plain (not executable) files only.
fn old_source(files: &[(&str, &[u8])]) -> JsValue {
    let entries: Vec<(String, Entry)> = files.iter().map(|(p, d)| (p.to_string(), Entry::File { executable: false, data: d.to_vec() })).collect();
    old_source_with(&entries, false)
}

fn old_source_with(entries: &[(String, Entry)], read_into: bool) -> JsValue {
    let (paths, datas, listing) = (Array::new(), Array::new(), Array::new());
    for (p, e) in entries {
        let item = Object::new();
        Reflect::set(&item, &"path".into(), &JsValue::from_str(p)).unwrap();
        let kind = match e {
            Entry::Dir => "directory",
            Entry::Link(target) => {
                Reflect::set(&item, &"symlinkTarget".into(), &JsValue::from_str(target)).unwrap();
                "symlink"
            }
            Entry::File { executable, data } => {
                paths.push(&JsValue::from_str(p));
                datas.push(&Uint8Array::from(data.as_slice()));
                Reflect::set(&item, &"executable".into(), &JsValue::from_bool(*executable)).unwrap();
                Reflect::set(&item, &"size".into(), &JsValue::from_f64(data.len() as f64)).unwrap();
                "file"
            }
        };
        Reflect::set(&item, &"kind".into(), &JsValue::from_str(kind)).unwrap();
        listing.push(&item);
    }
    js_fn(
        "paths, datas, readInto, listing",
        "const m = new Map(paths.map((p, i) => [p, datas[i]]));
         const get = (p) => { const f = m.get(p); if (!f) throw new Error('no old file ' + JSON.stringify(p)); return f; };
         const source = { reads: 0, intoReads: 0,
                  fileSize(p) { return get(p).length; },
                  readAt(p, o, n) { this.reads++; return get(p).subarray(o, o + n); },
                  listing() { return listing; } };
         if (readInto) source.readInto = function (p, o, target) {
           this.intoReads++;
           const f = get(p);
           if (o + target.length > f.length) throw new Error('read past the end');
           target.set(f.subarray(o, o + target.length));
         };
         return source;",
    )
    .apply(&JsValue::NULL, &Array::of4(&paths, &datas, &JsValue::from_bool(read_into), &listing))
    .unwrap()
}

/// A `BuildSink` collecting entries in `out`; `failOn` makes `beginFile` of that path throw.
fn collecting_sink(fail_on: Option<&str>) -> JsValue {
    js_fn(
        "failOn",
        "let cur = null;
         return { out: [],
           createDirectory(p) { this.out.push({ kind: 'dir', path: p }); },
           createSymlink(p, t) { this.out.push({ kind: 'link', path: p, target: t }); },
           beginFile(p, x, size) {
             if (p === failOn) throw new Error('disk full writing ' + p);
             if (cur) throw new Error('beginFile inside a file');
             cur = { path: p, executable: x, size, chunks: [] };
           },
           writeFile(b) { if (!(b instanceof Uint8Array)) throw new Error('not bytes'); cur.chunks.push(b); },
           finishFile() {
             const data = new Uint8Array(cur.chunks.reduce((n, c) => n + c.length, 0));
             let o = 0; for (const c of cur.chunks) { data.set(c, o); o += c.length; }
             if (data.length !== cur.size) throw new Error('size announced ' + cur.size + ', got ' + data.length);
             this.out.push({ kind: 'file', path: cur.path, executable: cur.executable, data });
             cur = null;
           } };",
    )
    .call1(&JsValue::NULL, &fail_on.map(JsValue::from_str).unwrap_or(JsValue::NULL))
    .unwrap()
}

fn get(o: &JsValue, k: &str) -> JsValue {
    Reflect::get(o, &JsValue::from_str(k)).unwrap()
}

fn sink_entries(sink: &JsValue) -> Vec<(String, Entry)> {
    let mut out: Vec<(String, Entry)> = Array::from(&get(sink, "out"))
        .iter()
        .map(|e| {
            let path = get(&e, "path").as_string().unwrap();
            let entry = match get(&e, "kind").as_string().unwrap().as_str() {
                "dir" => Entry::Dir,
                "link" => Entry::Link(get(&e, "target").as_string().unwrap()),
                _ => Entry::File {
                    executable: get(&e, "executable").as_bool().unwrap(),
                    data: get(&e, "data").dyn_into::<Uint8Array>().unwrap().to_vec(),
                },
            };
            (path, entry)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn message(e: impl Into<JsValue>) -> String {
    let v = e.into();
    assert!(v.is_instance_of::<js_sys::Error>(), "a JS Error");
    String::from(v.unchecked_ref::<js_sys::Error>().message())
}

/// The core's error kind an applier's JS error carries (`kind`), with its message.
fn kind_and_message(e: JsValue) -> (String, String) {
    (get(&e, "kind").as_string().unwrap_or_default(), message(e))
}

fn num(o: &JsValue, k: &str) -> u64 {
    get(o, k).as_f64().unwrap() as u64
}

/// Pushes `patch` in `chunk`-byte pieces, then finishes; the first error's message.
fn apply(patch: &[u8], chunk: usize, old: &JsValue, sink: &JsValue) -> Result<(PatchApplier, JsValue), String> {
    apply_bound(patch, chunk, old, sink, None)
}

/// `apply`, bound to a patch manifest when one is given.
fn apply_bound(patch: &[u8], chunk: usize, old: &JsValue, sink: &JsValue, manifest: Option<&[u8]>) -> Result<(PatchApplier, JsValue), String> {
    let mut a = PatchApplier::new(old.clone().unchecked_into(), sink.clone().unchecked_into(), manifest.map(<[u8]>::to_vec)).map_err(message)?;
    for c in patch.chunks(chunk) {
        a.push(c).map_err(message)?;
    }
    let summary = a.finish().map_err(message)?;
    Ok((a, summary.into()))
}

fn v1_source() -> JsValue {
    v1_source_with(false)
}

fn v1_source_with(read_into: bool) -> JsValue {
    old_source_with(&read_tar(V1_TAR), read_into)
}

#[wasm_bindgen_test]
fn golden_patch_in_1000_byte_chunks_gives_v2() {
    let (old, sink) = (v1_source(), collecting_sink(None));
    let (applier, summary) = apply(GOLDEN_PATCH, 1000, &old, &sink).expect("golden patch applies");
    assert_eq!(sink_entries(&sink), read_tar(V2_TAR), "output is fixture v2 exactly");
    assert_eq!(num(&summary, "patchBytes"), GOLDEN_PATCH.len() as u64);
    assert_eq!(num(&summary, "entries"), read_tar(V2_TAR).len() as u64);
    let p: JsValue = applier.progress().into();
    assert_eq!(num(&p, "patchBytesRead"), GOLDEN_PATCH.len() as u64, "progress stays after finish");
    assert_eq!(num(&p, "entriesDone"), num(&p, "entriesTotal"));
    assert!(num(&old, "reads") > 0);
}


#[wasm_bindgen_test]
fn golden_patch_bound_to_its_manifest_gives_v2_and_a_truncated_one_is_refused() {
    let (old, sink) = (v1_source(), collecting_sink(None));
    apply_bound(GOLDEN_PATCH, 999, &old, &sink, Some(GOLDEN_MANIFEST)).expect("golden patch applies bound to its manifest");
    assert_eq!(sink_entries(&sink), read_tar(V2_TAR));
    // The patch with its last byte missing: whatever the applier says, the manifest's size refuses it.
    let err = apply_bound(&GOLDEN_PATCH[..GOLDEN_PATCH.len() - 1], 999, &v1_source(), &collecting_sink(None), Some(GOLDEN_MANIFEST)).map(|_| ()).unwrap_err();
    assert!(!err.is_empty());
    // Not a manifest: refused at construction.
    let err = apply_bound(GOLDEN_PATCH, 999, &v1_source(), &collecting_sink(None), Some(&GOLDEN_PATCH[..100])).map(|_| ()).unwrap_err();
    assert!(err.starts_with("manifest: "), "{err}");
}

#[wasm_bindgen_test]
fn statements_and_signatures_through_the_bindings() {
    let pk = [7u8; 32];
    let id = edgepatch_wasm::key_id(&pk).unwrap();
    assert_eq!(id.len(), 16);
    let s = edgepatch_wasm::update_statement(&id, "demo", "_", "v2", 1234.0, &"ab".repeat(32)).unwrap();
    assert_eq!(&s[..8], b"EPSTMT1\0");
    assert!(edgepatch_wasm::update_statement(&id, "demo", "_", "v2", 1.5, &"ab".repeat(32)).is_err());
    assert!(edgepatch_wasm::channel_statement(&id, "de/mo", "stable", "v2", 1.0, 2.0).is_err());
    assert!(!edgepatch_wasm::verify_ed25519(&pk, &s, &[0u8; 64]).unwrap());
    assert!(edgepatch_wasm::verify_ed25519(&pk, &s, &[0u8; 63]).is_err());
}

#[wasm_bindgen_test]
fn rotation_statement_through_the_bindings() {
    // RFC 8032's first test key (public key of the all-zero-message vector 1).
    let new_pk: [u8; 32] = [
        0xd7, 0x5a, 0x98, 0x01, 0x82, 0xb1, 0x0a, 0xb7, 0xd5, 0x4b, 0xfe, 0xd3, 0xc9, 0x64, 0x07, 0x3a, 0x0e, 0xe1, 0x72, 0xf3, 0xda, 0xa6, 0x23, 0x25, 0xaf, 0x02,
        0x1a, 0x68, 0xf7, 0x07, 0x51, 0x1a,
    ];
    let old_id = "0123456789abcdef";
    let s = edgepatch_wasm::rotation_statement(old_id, &new_pk).unwrap();
    let mut want = b"EPSTMT1\0".to_vec();
    want.push(3);
    want.extend_from_slice(&[0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef]);
    want.extend_from_slice(&new_pk);
    assert_eq!(s, want);
    assert!(edgepatch_wasm::rotation_statement(old_id, &new_pk[..31]).is_err());
    assert!(edgepatch_wasm::rotation_statement("xyz", &new_pk).is_err());
    assert!(edgepatch_wasm::rotation_statement(old_id, &[0u8; 32]).is_err());
    let own_id = edgepatch_wasm::key_id(&new_pk).unwrap();
    assert!(edgepatch_wasm::rotation_statement(&own_id, &new_pk).is_err());
}

#[wasm_bindgen_test]
fn read_into_is_used_when_the_source_has_it() {
    let (old, sink) = (v1_source_with(true), collecting_sink(None));
    apply(GOLDEN_PATCH, 1000, &old, &sink).expect("golden patch applies");
    assert_eq!(sink_entries(&sink), read_tar(V2_TAR));
    assert!(num(&old, "intoReads") > 0);
    assert_eq!(num(&old, "reads"), 0, "readAt unused");

    // A readInto that says it read less than asked is an error naming the old file.
    let short = js_fn("src", "return { fileSize: (p) => src.fileSize(p), listing: () => src.listing(), readAt() { throw new Error('unused'); },
                                      readInto(p, o, t) { src.readInto(p, o, t); return t.length - 1; } };")
        .call1(&JsValue::NULL, &v1_source_with(true))
        .unwrap();
    let err = apply(GOLDEN_PATCH, 1000, &short, &collecting_sink(None)).map(|_| ()).unwrap_err();
    assert!(err.starts_with("old build: ") && err.contains("readInto read"), "{err}");
}

#[wasm_bindgen_test]
fn progress_is_reported_while_pushing() {
    let (old, sink) = (v1_source(), collecting_sink(None));
    let mut a = PatchApplier::new(old.unchecked_into(), sink.unchecked_into(), None).unwrap();
    let (mut last_written, mut saw_total) = (0, false);
    for c in GOLDEN_PATCH.chunks(4096) {
        a.push(c).unwrap();
        let p: JsValue = a.progress().into();
        assert!(num(&p, "newBytesWritten") >= last_written);
        last_written = num(&p, "newBytesWritten");
        saw_total |= num(&p, "entriesTotal") > 0;
    }
    let p: JsValue = a.progress().into();
    assert_eq!(num(&p, "patchBytesRead"), GOLDEN_PATCH.len() as u64);
    assert_eq!(num(&p, "newBytesWritten"), num(&p, "newBytesTotal"));
    assert_eq!(num(&p, "entriesDone"), num(&p, "entriesTotal"));
    assert!(saw_total && last_written > 0);
    a.finish().unwrap();
}

#[wasm_bindgen_test]
fn one_push_of_the_whole_patch_works_too() {
    let (old, sink) = (v1_source(), collecting_sink(None));
    apply(GOLDEN_PATCH, GOLDEN_PATCH.len(), &old, &sink).unwrap();
    assert_eq!(sink_entries(&sink), read_tar(V2_TAR));
}

#[wasm_bindgen_test]
fn corrupted_patch_is_an_error_with_a_clear_message() {
    // A byte flipped in the last segment's data, and one in the checksum.
    for at in [GOLDEN_PATCH.len() - 200, GOLDEN_PATCH.len() - 1] {
        let mut bad = GOLDEN_PATCH.to_vec();
        bad[at] ^= 0x55;
        let err = apply(&bad, 1000, &v1_source(), &collecting_sink(None)).map(|_| ()).expect_err("corrupt patch refused");
        assert!(err.starts_with("patch corrupt at byte") || err.contains("files digest"), "message: {err}");
    }
    let mut bad = GOLDEN_PATCH.to_vec();
    bad[0] = b'X';
    let err = apply(&bad, 1000, &v1_source(), &collecting_sink(None)).map(|_| ()).unwrap_err();
    assert!(err.contains("bad magic"), "{err}");
}

#[wasm_bindgen_test]
fn truncated_patch_fails_at_finish() {
    let err = apply(&GOLDEN_PATCH[..GOLDEN_PATCH.len() - 10], 1000, &v1_source(), &collecting_sink(None)).map(|_| ()).unwrap_err();
    assert!(err.starts_with("patch truncated at byte"), "{err}");
}

#[wasm_bindgen_test]
fn errors_repeat_and_the_applier_stays_usable_as_an_object() {
    let mut bad = GOLDEN_PATCH.to_vec();
    bad[GOLDEN_PATCH.len() - 1] ^= 1;
    let mut a = PatchApplier::new(v1_source().unchecked_into(), collecting_sink(None).unchecked_into(), None).unwrap();
    let first = a.push(&bad).map_err(kind_and_message).unwrap_err();
    assert_eq!(first.0, "corrupt", "the JS error names the core's kind: {first:?}");
    assert_eq!(a.push(b"more").map_err(kind_and_message).unwrap_err(), first);
    assert_eq!(a.finish().map(|_| ()).map_err(kind_and_message).unwrap_err(), first);
    let mut cut = PatchApplier::new(v1_source().unchecked_into(), collecting_sink(None).unchecked_into(), None).unwrap();
    cut.push(&GOLDEN_PATCH[..GOLDEN_PATCH.len() - 10]).unwrap();
    assert_eq!(cut.finish().map(|_| ()).map_err(kind_and_message).unwrap_err().0, "truncated");
}

#[wasm_bindgen_test]
fn wrong_old_build_and_throwing_callbacks_are_named() {
    // v2 is not the build the patch was made from.
    let v2 = read_tar(V2_TAR);
    let files: Vec<(&str, &[u8])> = v2
        .iter()
        .filter_map(|(p, e)| match e {
            Entry::File { data, .. } => Some((p.as_str(), data.as_slice())),
            _ => None,
        })
        .collect();
    let err = apply(GOLDEN_PATCH, 1000, &old_source(&files), &collecting_sink(None)).map(|_| ()).unwrap_err();
    assert!(err.starts_with("old build:") && err.contains("not the build this patch was made from"), "{err}");

    let err = apply(GOLDEN_PATCH, 1000, &v1_source(), &collecting_sink(Some("game.wasm"))).map(|_| ()).unwrap_err();
    assert_eq!(err, "output: game.wasm: disk full writing game.wasm");

    let err = apply(GOLDEN_PATCH, 1000, &old_source(&[]), &collecting_sink(None)).map(|_| ()).unwrap_err();
    assert!(err.starts_with("old build: ") && err.contains("not the build this patch was made from"), "{err}");

    let not_bytes = js_fn("", "return { fileSize() { return 100000000; }, readAt() { return [1, 2, 3]; } };").call0(&JsValue::NULL).unwrap();
    let err = apply(GOLDEN_PATCH, 1000, &not_bytes, &collecting_sink(None)).map(|_| ()).unwrap_err();
    assert!(err.starts_with("old build: "), "{err}");

    let err = PatchApplier::new(JsValue::from_f64(1.0).unchecked_into(), collecting_sink(None).unchecked_into(), None).map(|_| ()).map_err(message).unwrap_err();
    assert_eq!(err, "the old build source has no method fileSize, readAt");
}

#[cfg(feature = "diff")]
#[wasm_bindgen_test]
fn diff_files_output_applies() {
    let (v1, v2) = (read_tar(V1_TAR), read_tar(V2_TAR));
    let (old, new) = (tar_file(&v1, "game.wasm"), tar_file(&v2, "game.wasm"));
    assert_ne!(old, new);
    let patch = diff_files(old.to_vec(), new.to_vec(), Some(3)).map_err(message).unwrap();
    assert!(patch.len() < new.len() / 4, "patch of {} bytes for {} new", patch.len(), new.len());
    let sink = collecting_sink(None);
    apply(&patch, 777, &old_source(&[("", old)]), &sink).unwrap();
    assert_eq!(sink_entries(&sink), vec![(String::new(), Entry::File { executable: false, data: new.to_vec() })]);
    // The same inputs and level give the same bytes.
    assert_eq!(diff_files(old.to_vec(), new.to_vec(), Some(3)).map_err(message).unwrap(), patch);
}

const ARCADE_V1_LOGIC: &[u8] = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/arcade/v1/logic.wasm"));
const ARCADE_V2_LOGIC: &[u8] = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/arcade/v2/logic.wasm"));

/// The arcade's module at the default level is stored split with LZMA window segments
/// (docs/FORMAT.md §2.6): liblzma's encoder and decoder both run in this engine's wasm.
#[cfg(feature = "diff")]
#[wasm_bindgen_test]
fn a_split_module_diffed_at_the_default_level_has_lzma_window_segments_that_apply() {
    use edgepatch_core::patch_format::{Segment, WindowCodec};
    let patch = diff_files(ARCADE_V1_LOGIC.to_vec(), ARCADE_V2_LOGIC.to_vec(), None).map_err(message).unwrap();
    let info = edgepatch_core::inspect::inspect_patch(&patch[..]).unwrap();
    let lzma = info.layout.segments.iter().filter(|s| matches!(s, Segment::Window(w) if matches!(w.codec, WindowCodec::Lzma { .. }))).count();
    assert!(lzma > 0, "no LZMA window segment in {:?}", info.layout.segments);
    let sink = collecting_sink(None);
    apply(&patch, 500, &old_source(&[("", ARCADE_V1_LOGIC)]), &sink).unwrap();
    assert_eq!(sink_entries(&sink), vec![(String::new(), Entry::File { executable: false, data: ARCADE_V2_LOGIC.to_vec() })]);
}

#[cfg(feature = "diff")]
#[wasm_bindgen_test]
fn diff_files_rejects_a_bad_level() {
    let err = diff_files(vec![1, 2, 3], vec![1, 2, 4], Some(0)).map_err(message).unwrap_err();
    assert!(err.contains("compression level 0"), "{err}");
}

const GOLDEN_SIGNATURE: &[u8] = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/golden/game-v2.signature"));
const GOLDEN_MANIFEST: &[u8] = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/golden/game-v1-to-v2.manifest"));

#[wasm_bindgen_test]
fn signer_fed_in_tar_order_reproduces_the_golden_signature() {
    // Reverse order and odd chunks: the signer sorts and streams.
    let mut s = edgepatch_wasm::Signer::new(Some(4096)).unwrap();
    for (path, entry) in read_tar(V2_TAR).iter().rev() {
        match entry {
            Entry::Dir => s.directory(path).unwrap(),
            Entry::Link(t) => s.symlink(path, t).unwrap(),
            Entry::File { executable, data } => {
                s.begin_file(path, *executable, data.len() as f64).unwrap();
                for c in data.chunks(1111) {
                    s.update(c).unwrap();
                }
                assert_eq!(s.finish_file().unwrap(), edgepatch_wasm::blake3_hex(data));
            }
        }
    }
    assert_eq!(s.finish().map_err(message).unwrap(), GOLDEN_SIGNATURE);
}

#[wasm_bindgen_test]
fn signer_refuses_escaping_paths_with_clear_errors() {
    let mut s = edgepatch_wasm::Signer::new(None).unwrap();
    let err = s.begin_file("../evil", false, 1.0).map_err(message).unwrap_err();
    assert!(err.contains("'..'"), "{err}");
    // A link target is data, wherever it points; only its bounds are checked.
    let err = s.symlink("a/link", "a\0b").map_err(message).unwrap_err();
    assert!(err.contains("NUL"), "{err}");
    s.symlink("a/link", "../../etc/passwd").map_err(message).unwrap();
    let err = s.begin_file("/abs", false, 1.0).map_err(message).unwrap_err();
    assert!(err.contains("absolute"), "{err}");
}

#[wasm_bindgen_test]
fn manifest_reader_looks_up_entries_and_lists_segments() {
    let m = edgepatch_wasm::ManifestReader::new(GOLDEN_MANIFEST.to_vec()).map_err(message).unwrap();
    assert_eq!(m.kind(), "patch");
    assert_eq!(m.patch_size() as usize, GOLDEN_PATCH.len());
    assert_eq!(m.patch_blake3(), edgepatch_wasm::blake3_hex(GOLDEN_PATCH));
    let v2 = read_tar(V2_TAR);
    assert_eq!(m.length() as usize, v2.len());
    let entries = Array::from(&m.entries().unwrap().into());
    assert_eq!(entries.length() as usize, v2.len());
    for (path, entry) in &v2 {
        let e: JsValue = m.lookup(path).unwrap().into();
        assert_eq!(get(&e, "path").as_string().unwrap(), *path);
        if let Entry::File { data, executable } = entry {
            assert_eq!(get(&e, "kind").as_string().unwrap(), "file");
            assert_eq!(get(&e, "blake3").as_string().unwrap(), edgepatch_wasm::blake3_hex(data));
            assert_eq!(get(&e, "executable").as_bool().unwrap(), *executable);
        }
    }
    assert!(m.lookup("no/such/file").unwrap().is_undefined());
    let segments = Array::from(&m.segments().unwrap().into());
    assert!(segments.length() >= 1);
    let first = segments.get(0);
    assert!(num(&first, "patchOffset") > 0 && num(&first, "patchLen") > 0);
    let mut bad = GOLDEN_MANIFEST.to_vec();
    let at = bad.len() / 2;
    bad[at] ^= 1;
    assert!(edgepatch_wasm::ManifestReader::new(bad).is_err(), "a flipped byte fails the checksum");
}

/// A sink that keeps files by path (a file system in a Map) and can resume.
fn resumable_sink() -> JsValue {
    js_fn(
        "",
        "let cur = null;
         const files = new Map();
         const bytes = (f) => { const d = new Uint8Array(f.chunks.reduce((n, c) => n + c.length, 0)); let o = 0; for (const c of f.chunks) { d.set(c, o); o += c.length; } return d; };
         return { out: [], files, resumed: 0, readBack: 0,
           createDirectory(p) { this.out.push({ kind: 'dir', path: p }); },
           createSymlink(p, t) { this.out.push({ kind: 'link', path: p, target: t }); },
           beginFile(p, x, size) { cur = { path: p, executable: x, size, chunks: [] }; files.set(p, cur); },
           writeFile(b) { cur.chunks.push(b); },
           finishFile() { this.out.push({ kind: 'file', path: cur.path, executable: cur.executable, data: bytes(cur) }); cur = null; },
           resumeFile(p, x, size, written) {
             this.resumed++;
             const f = files.get(p); if (!f) throw new Error('nothing written to ' + p);
             f.chunks = [bytes(f).subarray(0, written)]; cur = f;
           },
           readWritten(p, o, target) {
             this.readBack += target.length;
             const f = files.get(p); if (!f) throw new Error('nothing written to ' + p);
             const d = bytes(f); if (o + target.length > d.length) throw new Error('read past what was written');
             target.set(d.subarray(o, o + target.length));
           } };",
    )
    .call0(&JsValue::NULL)
    .unwrap()
}

#[wasm_bindgen_test]
fn resume_continues_after_the_last_segment_applied() {
    let (old, sink) = (v1_source(), resumable_sink());
    let mut a = PatchApplier::new(old.clone().unchecked_into(), sink.clone().unchecked_into(), None).unwrap();
    assert!(a.resume_point().is_undefined());
    let mut pushed = 0;
    while a.resume_point().is_undefined() {
        assert!(pushed < GOLDEN_PATCH.len(), "no resume point after the whole patch: {:?}", JsValue::from(a.resume_point()));
        a.push(&GOLDEN_PATCH[pushed..(pushed + 100).min(GOLDEN_PATCH.len())]).unwrap();
        pushed += 100;
    }
    let point: JsValue = a.resume_point().into();
    drop(a);
    let m = edgepatch_wasm::ManifestReader::new(GOLDEN_MANIFEST.to_vec()).unwrap();
    let first = Array::from(&m.segments().unwrap().into()).get(0);
    let head = &GOLDEN_PATCH[..num(&first, "patchOffset") as usize];
    let mut b = PatchApplier::resume(old.unchecked_into(), sink.clone().unchecked_into(), head, point.clone().unchecked_into(), None).map_err(message).unwrap();
    b.push(&GOLDEN_PATCH[num(&point, "patchOffset") as usize..]).unwrap();
    b.finish().map_err(message).unwrap();
    assert_eq!(sink_entries(&sink), read_tar(V2_TAR), "output is fixture v2 exactly");
    assert!(num(&sink, "readBack") > 0, "history read back from the written files");

    // A sink without the resume methods is refused up front.
    let err = PatchApplier::resume(v1_source().unchecked_into(), collecting_sink(None).unchecked_into(), head, point.unchecked_into(), None).map(|_| ()).map_err(message).unwrap_err();
    assert!(err.contains("resumeFile"), "{err}");
}

#[cfg(feature = "diff")]
#[wasm_bindgen_test]
fn generator_from_signatures_and_ranges_makes_a_patch_that_applies() {
    let sign = |tree: &[(String, Entry)]| {
        let mut s = edgepatch_wasm::Signer::new(None).unwrap();
        for (path, entry) in tree {
            match entry {
                Entry::Dir => s.directory(path).unwrap(),
                Entry::Link(t) => s.symlink(path, t).unwrap(),
                Entry::File { executable, data } => {
                    s.begin_file(path, *executable, data.len() as f64).unwrap();
                    s.update(data).unwrap();
                    s.finish_file().unwrap();
                }
            }
        }
        s.finish().unwrap()
    };
    let (v1, v2) = (read_tar(V1_TAR), read_tar(V2_TAR));
    let read = |tree: &[(String, Entry)], ranges: JsValue| -> Vec<u8> {
        let mut out = Vec::new();
        for r in Array::from(&ranges).iter() {
            let (path, offset, len) = (get(&r, "path").as_string().unwrap(), num(&r, "offset") as usize, num(&r, "length") as usize);
            out.extend_from_slice(&tar_file(tree, &path)[offset..offset + len]);
        }
        out
    };
    let mut g = edgepatch_wasm::PatchGenerator::new(Some(sign(&v1)), &sign(&v2), Some(19)).map_err(message).unwrap();
    let mut patch = g.header().unwrap();
    for i in 0..g.segment_count() {
        let fresh = read(&v2, g.new_ranges(i).unwrap().into());
        let old = read(&v1, g.plan_segment(i, &fresh).unwrap().into());
        patch.extend(g.encode_segment(i, &fresh, old).map_err(message).unwrap());
    }
    patch.extend(g.finish().unwrap());
    let sink = collecting_sink(None);
    apply(&patch, 999, &v1_source(), &sink).unwrap();
    assert_eq!(sink_entries(&sink), v2);
    let m = edgepatch_wasm::ManifestReader::new(g.manifest("v1", "v2").unwrap()).unwrap();
    assert_eq!(m.patch_blake3(), edgepatch_wasm::blake3_hex(&patch));
    let err = g.finish().map_err(message).unwrap_err();
    assert!(err.contains("finish()"), "{err}");
}

// Hostile vectors (fixtures/hostile/vectors.json): every one refused, with the
// error kind the index names. The core compiled into this same wasm module
// gives the kind (`Error::kind`, `ManifestError::kind`); the bindings must
// refuse the same bytes with the same error.
const HOSTILE_INDEX: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/hostile/vectors.json"));

macro_rules! hostile {
    ($file:literal) => {
        ($file, include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/hostile/", $file)) as &[u8])
    };
}

const HOSTILE_FILES: &[(&str, &[u8])] = &[
    hostile!("garbage.patch"),
    hostile!("empty.patch"),
    hostile!("truncated.patch"),
    hostile!("trailing-bytes.patch"),
    hostile!("tree-zero-bomb.patch"),
    hostile!("tree-over-cap.patch"),
    hostile!("tree-path-bomb.patch"),
    hostile!("entry-count-bomb.patch"),
    hostile!("delta-size-overflow.patch"),
    hostile!("tree-two-frames.patch"),
    hostile!("tree-skippable-frame.patch"),
    hostile!("ops-length-overflow.patch"),
    hostile!("ops-diagonal-far.patch"),
    hostile!("ops-count-bomb.patch"),
    hostile!("segment-over-cap.patch"),
    hostile!("control-over-cap.patch"),
    hostile!("segment-beyond-files.patch"),
    hostile!("run-coded-without-flag.patch"),
    hostile!("run-coded-runs-past-diff.patch"),
    hostile!("run-coded-count-bomb.patch"),
    hostile!("window-span-overflow.patch"),
    hostile!("window-reach-over-cap.patch"),
    hostile!("window-reach-at-base.patch"),
    hostile!("window-reach-missing.patch"),
    hostile!("window-back-over-reach.patch"),
    hostile!("window-back-over-base.patch"),
    hostile!("window-back-over-produced.patch"),
    hostile!("lzma-window-without-flag.patch"),
    hostile!("lzma-window-bad-props.patch"),
    hostile!("lzma-window-corrupt.patch"),
    hostile!("lzma-window-truncated.patch"),
    hostile!("lzma-ops-without-flag.patch"),
    hostile!("lzma-ops-bad-form.patch"),
    hostile!("lzma-ops-empty-stream-marked.patch"),
    hostile!("lzma-ops-corrupt.patch"),
    hostile!("lzma-ops-reach-past-dictionary.patch"),
    hostile!("link-target-nul.patch"),
    hostile!("link-target-long.patch"),
    hostile!("wrong-old-build.patch"),
    hostile!("unknown-flag.patch"),
    hostile!("unknown-version.patch"),
    hostile!("tree-compressed-size-over.patch"),
    hostile!("tree-frame-size-mismatch.patch"),
    hostile!("tree-path-dot-dot.patch"),
    hostile!("tree-order.patch"),
    hostile!("tree-parent-not-listed.patch"),
    hostile!("tree-front-coding-split-char.patch"),
    hostile!("tree-entry-code.patch"),
    hostile!("tree-copy-index.patch"),
    hostile!("tree-run-beyond-listing.patch"),
    hostile!("run-count-bomb.patch"),
    hostile!("run-length-over-cap.patch"),
    hostile!("ops-extra-unused.patch"),
    hostile!("ops-control-trailing.patch"),
    hostile!("ops-stream-compressed-size-zero.patch"),
    hostile!("window-compressed-size-zero.patch"),
    hostile!("end-marker-count.patch"),
    hostile!("checksum-mismatch.patch"),
    hostile!("files-digest-mismatch.patch"),
    hostile!("wasm-transform-empty-table.patch"),
    hostile!("wasm-side-info-over-cap.patch"),
    hostile!("wasm-size-over-cap.patch"),
    hostile!("wasm-side-info-garbage.patch"),
    hostile!("wasm-side-info-trailing-bytes.patch"),
    hostile!("wasm-inverted-size-mismatch.patch"),
    hostile!("wasm-side-info-version-7.patch"),
    hostile!("wasm-dwarf-sections-byte-no-kind.patch"),
    hostile!("wasm-line-exception-beyond.patch"),
    hostile!("wasm-line-unit-past-section.patch"),
    hostile!("wasm-ranges-entry-past-section.patch"),
    hostile!("wasm-loc-expression-past-section.patch"),
    hostile!("wasm-sections-byte-elements-only.patch"),
    hostile!("wasm-sections-byte-unknown-bit.patch"),
    hostile!("wasm-exports-not-in-form.patch"),
    hostile!("wasm-names-subsection-past-section.patch"),
    hostile!("wasm-elements-layout-byte.patch"),
    hostile!("wasm-elements-exception-beyond.patch"),
    hostile!("wasm-elements-not-indices.patch"),
    hostile!("wasm-v2-exception-beyond-module.patch"),
    hostile!("wasm-split-reference-without-table.patch"),
    hostile!("wasm-split-reference-beyond-old-table.patch"),
    hostile!("wasm-split-reference-not-in-reference.patch"),
    hostile!("wasm-split-reference-unsplit-file.patch"),
    hostile!("wasm-split-reference-none-named.patch"),
    hostile!("wasm-split-streams-past-section.patch"),
    hostile!("wasm-split-stream-left-over.patch"),
    hostile!("wasm-split-body-past-streams.patch"),
    hostile!("wasm-split-locals-coding.patch"),
    hostile!("wasm-data-gap-narrower-address.patch"),
    hostile!("wasm-normalized-many-sections.patch"),
    hostile!("wasm-normalized-many-imports.patch"),
    hostile!("wasm-normalized-many-bodies.patch"),
    hostile!("manifest-oversized.manifest"),
    hostile!("manifest-entry-count.manifest"),
    hostile!("manifest-count-vs-bytes.manifest"),
    hostile!("manifest-records-offset.manifest"),
    hostile!("manifest-garbage.manifest"),
    hostile!("manifest-version.manifest"),
    hostile!("manifest-build-id-not-utf8.manifest"),
    hostile!("manifest-kind.manifest"),
    hostile!("manifest-head-in-build-manifest.manifest"),
    hostile!("manifest-unknown-flag.manifest"),
    hostile!("manifest-short.manifest"),
    hostile!("manifest-trailer.manifest"),
];

#[wasm_bindgen_test]
fn hostile_vectors_are_refused_with_their_kind() {
    let index = js_sys::JSON::parse(HOSTILE_INDEX).unwrap();
    let vectors = Array::from(&get(&index, "vectors"));
    assert_eq!(vectors.length() as usize, HOSTILE_FILES.len(), "every vector of vectors.json is included here");
    for v in vectors.iter() {
        let (name, file, kind) = (get(&v, "name").as_string().unwrap(), get(&v, "file").as_string().unwrap(), get(&v, "kind").as_string().unwrap());
        let bytes = HOSTILE_FILES.iter().find(|(f, _)| *f == file).unwrap_or_else(|| panic!("{file} not included")).1;
        assert_eq!(edgepatch_core::blake3::hash(bytes).to_hex().as_str(), get(&v, "blake3").as_string().unwrap(), "{name}");
        match get(&v, "input").as_string().unwrap().as_str() {
            "patch" => {
                let old = edgepatch_core::Build::from_entries(Vec::new()).unwrap();
                let mut sink = edgepatch_core::memory::MemorySink::default();
                let core = edgepatch_core::apply_patch(bytes, &mut edgepatch_core::memory::MemoryOldBuild::new(&old), &mut sink, &mut |_| {})
                    .expect_err(&format!("{name}: the core applied a hostile patch"));
                assert_eq!(core.kind().as_str(), kind, "{name}: {core}");
                let js = apply(bytes, 1000, &old_source_with(&[], false), &collecting_sink(None)).map(|_| ()).expect_err(&format!("{name}: PatchApplier applied a hostile patch"));
                assert_eq!(js.split(" at byte ").next(), core.to_string().split(" at byte ").next(), "{name}: the bindings refuse it otherwise than the core");
            }
            "manifest" => {
                let core = edgepatch_core::manifest::decode(bytes).expect_err(&format!("{name}: the core decoded a hostile manifest"));
                assert_eq!(core.kind().as_str(), kind, "{name}: {core}");
                assert!(edgepatch_wasm::ManifestReader::new(bytes.to_vec()).is_err(), "{name}: ManifestReader opened a hostile manifest");
            }
            other => panic!("{name}: unknown input {other}"),
        }
    }
}
