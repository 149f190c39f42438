//! The bounded generator storing changed wasm modules normalized (docs/FORMAT.md §2.8), and
//! in the field-split layout where its trial says so (§2.8.7): its patches apply byte for byte
//! with the fast and the reference applier, a split generation gives the one-pass bytes, and
//! a transform that does not fit the module or the normalized bytes it is fed is refused.

mod appliers;
mod fixture_builds;
mod reference_applier;
mod wasm_modules;

use appliers::apply_both as apply;
use edgepatch_core::generate::{generate_patch, generate_patch_transformed, BuildReaders, ByteRange, FileForm, PatchGenerator, WasmTransform};
use edgepatch_core::inspect::inspect_patch;
use edgepatch_core::manifest::{EntrySource, ManifestView};
use edgepatch_core::patch_format::{FLAG_RUN_CODED_DIFF, FLAG_SINGLE_FILE, FLAG_WASM_TRANSFORM};
use edgepatch_core::signature::Signature;
use edgepatch_core::{Build, Error};
use edgepatch_testkit::{corpus, leb128, noise};
use fixture_builds::file;

/// The bytes a patch's transforms keep beside the builds, by path.
#[derive(Clone, Default)]
struct Forms {
    normalized: Vec<(String, Vec<u8>)>,
    old_split: Vec<(String, Vec<u8>)>,
}

impl Forms {
    /// These forms with the normalized one of the first module replaced.
    fn with_normalized(&self, bytes: Vec<u8>) -> Forms {
        Forms { normalized: vec![(self.normalized[0].0.clone(), bytes)], old_split: self.old_split.clone() }
    }

    fn get(&self, form: FileForm, path: &str) -> edgepatch_core::Result<&[u8]> {
        let list = if form == FileForm::OldSplit { &self.old_split } else { &self.normalized };
        list.iter().find(|(p, _)| p == path).map(|(_, d)| d.as_slice()).ok_or_else(|| Error::Invalid(format!("no {form:?} of {path}")))
    }
}

/// Reads ranges of the files of `build` (or of a transform's form of a module, by path).
fn read_ranges(build: &Build, forms: &Forms, ranges: &[ByteRange]) -> Vec<u8> {
    let mut out = Vec::new();
    for r in ranges {
        let data = match r.form {
            FileForm::AsIs => build.files().find(|(p, _)| *p == r.path).map(|(_, d)| d).expect("file"),
            form => forms.get(form, &r.path).expect("a transform's form"),
        };
        out.extend_from_slice(&data[r.offset as usize..(r.offset + r.len) as usize]);
    }
    out
}

fn signatures(old: &Build, new: &Build) -> (Signature, Signature) {
    (Signature::of_build(old, 16 << 10), Signature::of_build(new, 16 << 10))
}

/// Transforms of every changed `.wasm` file of `new` (or the single file) against the old file at its path.
fn prepare(old: &Build, new: &Build) -> (Vec<WasmTransform>, Forms) {
    let (mut transforms, mut forms) = (Vec::new(), Forms::default());
    for (path, data) in new.files() {
        let Some((_, old_data)) = old.files().find(|(p, _)| *p == path) else { continue };
        if let Some(p) = WasmTransform::prepare(path, old_data, data) {
            assert_eq!(p.transform.is_split(), p.old_split.is_some());
            assert_eq!(p.transform.old_split_blake3(), p.old_split.as_ref().map(|o| *blake3::hash(o).as_bytes()));
            transforms.push(p.transform);
            forms.normalized.push((path.to_string(), p.normalized));
            if let Some(o) = p.old_split {
                assert_eq!(o.len(), old_data.len(), "the split layout keeps the module's size");
                forms.old_split.push((path.to_string(), o));
            }
        }
    }
    (transforms, forms)
}

/// One pass; returns the patch and its manifest (none for a single file: a manifest lists paths).
/// Reads ranges of the files of `build` as they are.
fn reader(build: &Build) -> impl FnMut(&str, u64, &mut [u8]) -> edgepatch_core::Result<()> {
    let build = build.clone();
    move |path: &str, offset: u64, buf: &mut [u8]| {
        let (_, d) = build.files().find(|(p, _)| *p == path).ok_or_else(|| Error::Invalid(format!("no file {path}")))?;
        buf.copy_from_slice(&d[offset as usize..offset as usize + buf.len()]);
        Ok(())
    }
}

/// Reads ranges of a transform's `form` of the module at a path.
fn form_reader(forms: &Forms, form: FileForm) -> impl FnMut(&str, u64, &mut [u8]) -> edgepatch_core::Result<()> + '_ {
    move |path: &str, offset: u64, buf: &mut [u8]| {
        buf.copy_from_slice(&forms.get(form, path)?[offset as usize..offset as usize + buf.len()]);
        Ok(())
    }
}

fn generate(old: &Build, new: &Build, transform: bool, level: i32) -> (Vec<u8>, Option<Vec<u8>>) {
    let (os, ns) = signatures(old, new);
    let (transforms, forms) = if transform { prepare(old, new) } else { (Vec::new(), Forms::default()) };
    let mut patch = Vec::new();
    let readers = BuildReaders {
        old: &mut reader(old),
        new: &mut reader(new),
        normalized: Some(&mut form_reader(&forms, FileForm::Normalized)),
        old_split: Some(&mut form_reader(&forms, FileForm::OldSplit)),
    };
    let g = generate_patch_transformed(Some(&os), &ns, level, transforms, readers, &mut |b| {
        patch.extend_from_slice(b);
        Ok(())
    })
    .expect("generate");
    let manifest = (!new.is_single_file()).then(|| g.manifest("v1", "v2").unwrap());
    (patch, manifest)
}

/// The header's flags without bit 3: the generator declares run-coded diffs in every patch
/// with a delta stream (its header comes before its segments), checked by `raw_flags`.
fn flags(patch: &[u8]) -> u16 {
    raw_flags(patch) & !FLAG_RUN_CODED_DIFF
}

fn raw_flags(patch: &[u8]) -> u16 {
    u16::from_le_bytes([patch[10], patch[11]])
}

#[test]
fn single_modules_are_stored_normalized_smaller_and_apply_exactly() {
    let mut pairs = vec![
        ("made-up".to_string(), wasm_modules::versions(3000, 20)),
        ("Go-like".to_string(), wasm_modules::go_like_versions(1500, 9)),
        ("Go-like, data in segments".to_string(), wasm_modules::go_like_segmented_versions(1500, 9)),
    ];
    // Real modules (Go, Emscripten, Rust), as the reference applier's test takes them.
    pairs.extend(corpus::wasm_pairs().into_iter().map(|p| (p.name, (p.old, p.new))));
    for (name, (v1, v2)) in pairs {
        let (old, new) = (Build::single_file(v1), Build::single_file(v2));
        let transformed = !prepare(&old, &new).0.is_empty();
        let (with, _) = generate(&old, &new, true, 9);
        let (without, _) = generate(&old, &new, false, 9);
        assert_eq!(apply(&with, &old), new, "{name}");
        println!("{name}: generator patch {} bytes with the transform, {} without", with.len(), without.len());
        if !transformed {
            assert_eq!(with, without, "{name}: nothing renumbered, the patch is the plain one");
            continue;
        }
        assert_eq!(flags(&with), FLAG_SINGLE_FILE | FLAG_WASM_TRANSFORM, "{name}");
        assert_eq!(flags(&without), FLAG_SINGLE_FILE, "{name}");
        assert!(with.len() < without.len(), "{name}: transformed {} bytes, plain {}", with.len(), without.len());
    }
}

/// a.bin (changed noise) ends just before 4 MiB, so game.wasm's normalized form crosses the
/// segment boundary (its check chunk is read partly from the history); z.bin comes after it.
fn tree_pair() -> (Build, Build) {
    let (v1, v2) = wasm_modules::versions(3000, 20);
    let a = noise(7, (4 << 20) - 50_000);
    let mut a2 = a.clone();
    for i in (0..a2.len()).step_by(9001) {
        a2[i] ^= 0x55;
    }
    let z = noise(8, 3 << 20);
    let mut z2 = z.clone();
    z2[100] ^= 1;
    let old = Build::from_entries(vec![file("a.bin", a), file("game.wasm", v1), file("z.bin", z)]).unwrap();
    let new = Build::from_entries(vec![file("a.bin", a2), file("game.wasm", v2), file("z.bin", z2)]).unwrap();
    (old, new)
}

fn step_segments(old: &Build, new: &Build, first: u64, end: u64) -> Vec<Vec<u8>> {
    let (os, ns) = signatures(old, new);
    let (transforms, forms) = prepare(old, new);
    let mut g = PatchGenerator::new(Some(&os), &ns, 3).unwrap();
    for t in transforms {
        // As a step in another invocation gets it: encoded and decoded.
        g.add_wasm_transform(WasmTransform::decode(&t.encode()).unwrap()).unwrap();
    }
    let history = read_ranges(new, &forms, &g.history_ranges(first).unwrap());
    g.start_at(first, &history).unwrap();
    let mut out = Vec::new();
    for i in first..end {
        let fresh = read_ranges(new, &forms, &g.new_ranges(i).unwrap());
        let old_bytes = read_ranges(old, &forms, &g.plan_segment(i, &fresh).unwrap());
        out.push(g.encode_segment(i, &fresh, old_bytes).unwrap());
    }
    out
}

#[test]
fn a_module_across_a_segment_boundary_steps_give_the_one_pass_bytes() {
    let (old, new) = tree_pair();
    let (one_pass, manifest) = generate(&old, &new, true, 3);
    let manifest = manifest.unwrap();
    assert_eq!(flags(&one_pass), FLAG_WASM_TRANSFORM);
    assert_eq!(raw_flags(&one_pass) & FLAG_RUN_CODED_DIFF, FLAG_RUN_CODED_DIFF, "a delta stream: run-coded diffs declared");
    assert_eq!(apply(&one_pass, &old), new);
    let (os, ns) = signatures(&old, &new);
    let (transforms, forms) = prepare(&old, &new);
    assert_eq!(transforms.len(), 1);
    let mut g = PatchGenerator::new(Some(&os), &ns, 3).unwrap();
    g.add_wasm_transform(transforms[0].clone()).unwrap();
    let count = g.segment_count();
    assert_eq!(count, 2);
    // The module's ranges are of its normalized form, on both sides of the boundary.
    for i in 0..count {
        let ranges = g.new_ranges(i).unwrap();
        let game = ranges.iter().find(|r| r.path == "game.wasm").expect("game.wasm in every segment");
        assert_eq!(game.form, FileForm::Normalized);
        assert!(ranges.iter().filter(|r| r.path != "game.wasm").all(|r| r.form == FileForm::AsIs));
    }
    for cuts in [vec![0, 2], vec![0, 1, 2]] {
        let mut segments = Vec::new();
        for w in cuts.windows(2) {
            segments.extend(step_segments(&old, &new, w[0], w[1]));
        }
        let mut a = PatchGenerator::new(Some(&os), &ns, 3).unwrap();
        a.add_wasm_transform(transforms[0].clone()).unwrap();
        let mut patch = a.header().unwrap();
        for (i, s) in segments.iter().enumerate() {
            a.absorb_segment(i as u64, s).unwrap();
            patch.extend_from_slice(s);
        }
        patch.extend_from_slice(&a.finish().unwrap());
        assert_eq!(patch, one_pass, "steps {cuts:?}");
        assert_eq!(a.manifest("v1", "v2").unwrap(), manifest, "steps {cuts:?}");
    }
    // The manifest gives game.wasm's own size and BLAKE3, and z.bin's new_offset follows
    // game.wasm's normalized size in the delta stream (docs/FORMAT.md §4).
    let view = ManifestView::open(&manifest).unwrap();
    view.verify_checksum().unwrap();
    assert_eq!(view.patch_blake3(), *blake3::hash(&one_pass).as_bytes());
    let game = view.lookup("game.wasm").unwrap().unwrap();
    let game_bytes = new.files().find(|(p, _)| *p == "game.wasm").unwrap().1;
    assert_eq!((game.size, game.blake3), (game_bytes.len() as u64, *blake3::hash(game_bytes).as_bytes()));
    let game_new_len = forms.normalized[0].1.len() as u64;
    assert_eq!(view.lookup("z.bin").unwrap().unwrap().source, EntrySource::Delta { new_offset: (4 << 20) - 50_000 + game_new_len });
}

#[test]
fn a_transform_that_does_not_fit_is_refused() {
    let (old, new) = tree_pair();
    let (os, ns) = signatures(&old, &new);
    let (transforms, forms) = prepare(&old, &new);
    let t = &transforms[0];

    // Made from another module than the signed new file.
    let (o3, n3) = wasm_modules::versions(3000, 21);
    let other = WasmTransform::prepare("game.wasm", &o3, &n3).unwrap().transform;
    let mut g = PatchGenerator::new(Some(&os), &ns, 3).unwrap();
    assert!(g.add_wasm_transform(other).is_err());
    // For a file that is not there, or not changed.
    let mut renamed = t.encode();
    let (a, b) = (renamed.len() - 32, renamed.len());
    renamed[a..b].fill(0);
    assert!(WasmTransform::decode(&renamed).is_err(), "the record's checksum is checked");
    let (same_old, same_new) = (Build::from_entries(vec![file("game.wasm", new.files().nth(1).unwrap().1.to_vec())]).unwrap(), new.clone());
    let (s_os, s_ns) = signatures(&same_old, &same_new);
    let mut g = PatchGenerator::new(Some(&s_os), &s_ns, 3).unwrap();
    assert!(g.add_wasm_transform(t.clone()).is_err(), "game.wasm is unchanged there: a copy, not a delta file");
    // Twice, or after the header.
    let mut g = PatchGenerator::new(Some(&os), &ns, 3).unwrap();
    g.add_wasm_transform(t.clone()).unwrap();
    assert!(g.add_wasm_transform(t.clone()).is_err());
    g.header().unwrap();
    assert!(g.add_wasm_transform(t.clone()).is_err());

    // Fed the module as it is instead of its normalized form: the segment where the
    // normalized form's chunk ends is refused, in one pass and in a step.
    let wrong = forms.with_normalized({
        let mut w = forms.normalized[0].1.clone();
        let last = w.len() - 1;
        w[last] ^= 1;
        w
    });
    let mut g = PatchGenerator::new(Some(&os), &ns, 3).unwrap();
    g.add_wasm_transform(t.clone()).unwrap();
    g.header().unwrap();
    let mut refused = false;
    for i in 0..g.segment_count() {
        let fresh = read_ranges(&new, &wrong, &g.new_ranges(i).unwrap());
        let old_bytes = read_ranges(&old, &wrong, &g.plan_segment(i, &fresh).unwrap());
        match g.encode_segment(i, &fresh, old_bytes) {
            Ok(_) => {}
            Err(e) => {
                assert!(e.to_string().contains("game.wasm"), "{e}");
                refused = true;
                break;
            }
        }
    }
    assert!(refused, "a wrong normalized form must not make a patch");
    // A step whose history (the segment before) holds the wrong bytes is refused too.
    let mut wrong_start = forms.normalized[0].1.clone();
    wrong_start[0] ^= 1;
    let wrong_start = forms.with_normalized(wrong_start);
    let mut g = PatchGenerator::new(Some(&os), &ns, 3).unwrap();
    g.add_wasm_transform(t.clone()).unwrap();
    g.start_at(1, &read_ranges(&new, &wrong_start, &g.new_ranges(0).unwrap())).unwrap();
    let fresh = read_ranges(&new, &wrong_start, &g.new_ranges(1).unwrap());
    let old_bytes = read_ranges(&old, &wrong_start, &g.plan_segment(1, &fresh).unwrap());
    assert!(g.encode_segment(1, &fresh, old_bytes).is_err());

    // Without transforms the generator is what it was: generate_patch makes the plain patch.
    let mut plain = Vec::new();
    let read = |b: &Build| {
        let b = b.clone();
        move |p: &str, o: u64, buf: &mut [u8]| -> edgepatch_core::Result<()> {
            buf.copy_from_slice(&b.files().find(|(q, _)| *q == p).unwrap().1[o as usize..o as usize + buf.len()]);
            Ok(())
        }
    };
    generate_patch(Some(&os), &ns, 3, &mut read(&old), &mut read(&new), &mut |b| {
        plain.extend_from_slice(b);
        Ok(())
    })
    .unwrap();
    assert_eq!(flags(&plain), 0);
    assert_eq!(apply(&plain, &old), new);
}

/// A module that starts after another file and ends in the same segment: its chunks are checked
/// in that segment (they once were skipped there, the offset into the module being negative).
#[test]
fn wrong_normalized_bytes_of_a_module_inside_one_segment_are_refused() {
    let (v1, v2) = wasm_modules::versions(3000, 20);
    let a = noise(9, 100_000);
    let mut a2 = a.clone();
    a2[5] ^= 1;
    let old = Build::from_entries(vec![file("a.bin", a), file("game.wasm", v1)]).unwrap();
    let new = Build::from_entries(vec![file("a.bin", a2), file("game.wasm", v2)]).unwrap();
    let (os, ns) = signatures(&old, &new);
    let (transforms, forms) = prepare(&old, &new);
    let mut wrong = forms.normalized[0].1.clone();
    wrong[10] ^= 1;
    let wrong = forms.with_normalized(wrong);
    for (form, refused) in [(&forms, false), (&wrong, true)] {
        let mut g = PatchGenerator::new(Some(&os), &ns, 3).unwrap();
        g.add_wasm_transform(transforms[0].clone()).unwrap();
        g.header().unwrap();
        assert_eq!(g.segment_count(), 1);
        let fresh = read_ranges(&new, form, &g.new_ranges(0).unwrap());
        let old_bytes = read_ranges(&old, form, &g.plan_segment(0, &fresh).unwrap());
        let made = g.encode_segment(0, &fresh, old_bytes);
        assert_eq!(made.is_err(), refused, "{:?}", made.err());
    }
}

/// Re-emitted code (a toolchain change) in a tree: the generator's trial stores the module in
/// the field-split layout, every old range of its old file is of the split old module (and
/// none of the file as it is), the patch applies exactly with both appliers and is smaller
/// than the normalized form alone would be; steps give the one-pass bytes; the transform's
/// record carries the split old module's BLAKE3 and refuses a flag that disagrees with it.
#[test]
fn re_emitted_code_is_generated_in_the_split_layout_and_applies_exactly() {
    let (v1, v2) = wasm_modules::recompiled_versions(600);
    let a = noise(11, 200_000);
    let mut a2 = a.clone();
    a2[7] ^= 1;
    let old = Build::from_entries(vec![file("a.bin", a), file("game.wasm", v1.clone())]).unwrap();
    let new = Build::from_entries(vec![file("a.bin", a2), file("game.wasm", v2.clone())]).unwrap();
    let (transforms, forms) = prepare(&old, &new);
    assert_eq!(transforms.len(), 1);
    assert!(transforms[0].is_split(), "the trial keeps the split layout for re-emitted code");

    let (patch, _) = generate(&old, &new, true, 9);
    assert_eq!(flags(&patch), FLAG_WASM_TRANSFORM);
    assert_eq!(apply(&patch, &old), new);
    // At the CLI's level, where a window segment over split code is searched again deeper.
    let (deep, _) = generate(&old, &new, true, 19);
    assert_eq!(apply(&deep, &old), new);

    // Every old range of game.wasm is of its split form.
    let (os, ns) = signatures(&old, &new);
    let mut g = PatchGenerator::new(Some(&os), &ns, 9).unwrap();
    g.add_wasm_transform(transforms[0].clone()).unwrap();
    g.header().unwrap();
    let fresh = read_ranges(&new, &forms, &g.new_ranges(0).unwrap());
    let wanted = g.plan_segment(0, &fresh).unwrap();
    assert!(wanted.iter().any(|r| r.path == "game.wasm"));
    assert!(wanted.iter().all(|r| (r.path == "game.wasm") == (r.form == FileForm::OldSplit)), "{wanted:?}");

    // The same pair stored only normalized (the split layout's side info dropped): larger.
    let normalized_only = edgepatch_core::generate::normalize_for_patch(&v1, &v2).expect("renumbered");
    assert!(!edgepatch_core::wasm_transform::side_info_has_code_layout(&normalized_only.side_info));
    let split_single = generate(&Build::single_file(v1.clone()), &Build::single_file(v2.clone()), true, 9).0;
    let plain_single = generate(&Build::single_file(v1.clone()), &Build::single_file(v2.clone()), false, 9).0;
    println!("re-emitted module: generator patch {} bytes split, {} as it is", split_single.len(), plain_single.len());
    assert!(split_single.len() < plain_single.len());

    // Steps give the one-pass bytes (the record carried encoded, as between invocations).
    let steps = step_segments(&old, &new, 0, g.segment_count());
    let mut a = PatchGenerator::new(Some(&os), &ns, 9).unwrap();
    a.add_wasm_transform(WasmTransform::decode(&transforms[0].encode()).unwrap()).unwrap();
    let mut assembled = a.header().unwrap();
    for (i, s) in steps.iter().enumerate() {
        a.absorb_segment(i as u64, s).unwrap();
        assembled.extend_from_slice(s);
    }
    assembled.extend_from_slice(&a.finish().unwrap());
    let (at_level_3, _) = generate(&old, &new, true, 3);
    assert_eq!(assembled, at_level_3);

    // The record: its split flag must agree with its side info.
    let record = transforms[0].encode();
    let mut flag_and_hash = vec![1u8];
    flag_and_hash.extend_from_slice(&transforms[0].old_split_blake3().unwrap());
    let flag_at = record.windows(33).position(|w| w == flag_and_hash).expect("split flag 1 and the old module's hash");
    let mut flipped = record[..flag_at].to_vec();
    flipped.push(0);
    let check = *blake3::hash(&flipped).as_bytes();
    flipped.extend_from_slice(&check);
    let e = WasmTransform::decode(&flipped).unwrap_err();
    assert!(e.to_string().contains("disagree"), "{e}");

    // The record's parts (what cuts the segments) are checked as they are read: a record may
    // come back from storage that serves any bytes.
    let with_parts = |version: u8, parts: &[u64]| {
        let mut body = record[..flag_at + 33].to_vec();
        body[0] = version;
        for &v in parts {
            leb128::write_u64(&mut body, v);
        }
        let check = *blake3::hash(&body).as_bytes();
        body.extend_from_slice(&check);
        body
    };
    let size = transforms[0].normalized_size();
    let old_size = v1.len() as u64;
    for (parts, what) in [
        (vec![1, size + 1, old_size], "past the module"),
        (vec![2, size / 2, old_size, size / 2 - 1, 0], "do not cover"),
        (vec![1, 0, old_size], "empty"),
        (vec![u64::MAX / 2, 1, 1], "part count"),
        (vec![0], "part count"),
        (vec![1, size], "truncated"),
    ] {
        let e = WasmTransform::decode(&with_parts(3, &parts)).unwrap_err();
        assert!(e.to_string().contains(what), "{parts:?}: {e}");
    }
    // Parts measured on another old module are refused by the generator.
    let other = WasmTransform::decode(&with_parts(3, &[1, size, old_size + 1])).unwrap();
    let e = PatchGenerator::new(Some(&os), &ns, 3).unwrap().add_wasm_transform(other).unwrap_err();
    assert!(e.to_string().contains("another old module"), "{e}");
    // A version 2 record (before parts) still makes a patch that applies, cut every 4 MiB only.
    let v2_record = WasmTransform::decode(&with_parts(2, &[])).unwrap();
    let mut g2 = PatchGenerator::new(Some(&os), &ns, 3).unwrap();
    g2.add_wasm_transform(v2_record).unwrap();
    assert_eq!(g2.segment_count(), size.div_ceil(4 << 20));
    let mut patch2 = Vec::new();
    let (mut read_old, mut read_new) = (reader(&old), reader(&new));
    let (mut read_normalized, mut read_split) = (form_reader(&forms, FileForm::Normalized), form_reader(&forms, FileForm::OldSplit));
    let readers = BuildReaders { old: &mut read_old, new: &mut read_new, normalized: Some(&mut read_normalized), old_split: Some(&mut read_split) };
    edgepatch_core::generate::drive(g2, readers, &mut |b| {
        patch2.extend_from_slice(b);
        Ok(())
    })
    .unwrap();
    assert_eq!(apply(&patch2, &old), new);

    // Prepared in two calls (a Worker's way): the same transform and forms as in one; the
    // old module given again must be the one given first.
    let two = WasmTransform::normalize_owned("game.wasm", v1.clone(), v2.clone()).unwrap().finish(v1.clone()).unwrap();
    assert_eq!(two.transform, transforms[0]);
    assert_eq!((two.normalized, two.old_split), (forms.normalized[0].1.clone(), Some(forms.old_split[0].1.clone())));
    let mut other_old = v1.clone();
    *other_old.last_mut().unwrap() ^= 1;
    assert!(WasmTransform::normalize_owned("game.wasm", v1.clone(), v2.clone()).unwrap().finish(other_old).is_none());

    // A split transform needs the old file it reads split: at its path, for one made so.
    let moved =
        Build::from_entries(vec![file("a.bin", old.files().next().unwrap().1.to_vec()), file("other.wasm", old.files().nth(1).unwrap().1.to_vec())]).unwrap();
    let (m_os, _) = signatures(&moved, &new);
    let mut g = PatchGenerator::new(Some(&m_os), &ns, 3).unwrap();
    let e = g.add_wasm_transform(transforms[0].clone()).unwrap_err();
    assert!(e.to_string().contains("no file \"game.wasm\" to read"), "{e}");
}

/// Two re-emitted modules and a plain file in one tree: each module's old ranges are of its own
/// old module split (and only those), the patch applies exactly with both appliers, in one pass
/// and in steps.
#[test]
fn two_split_modules_in_one_tree_each_read_their_own_old_module() {
    let (a1, a2) = wasm_modules::recompiled_versions(500);
    let (b1, b2) = wasm_modules::recompiled_versions(300);
    let z = noise(12, 300_000);
    let mut z2 = z.clone();
    z2[1000] ^= 1;
    let old = Build::from_entries(vec![file("a.wasm", a1), file("b.wasm", b1), file("z.bin", z)]).unwrap();
    let new = Build::from_entries(vec![file("a.wasm", a2), file("b.wasm", b2), file("z.bin", z2)]).unwrap();
    let (transforms, forms) = prepare(&old, &new);
    assert_eq!(transforms.iter().filter(|t| t.is_split()).count(), 2);
    let (os, ns) = signatures(&old, &new);
    let mut g = PatchGenerator::new(Some(&os), &ns, 9).unwrap();
    for t in &transforms {
        g.add_wasm_transform(t.clone()).unwrap();
    }
    g.header().unwrap();
    // Segments are cut where each module's parts begin: a segment within a module reads that
    // old module, split, and its same part whole.
    assert!(g.segment_count() > 2, "cut at the modules' parts: {} segments", g.segment_count());
    let mut read = Vec::new();
    for i in 0..g.segment_count() {
        let new_ranges = g.new_ranges(i).unwrap();
        let fresh = read_ranges(&new, &forms, &new_ranges);
        let wanted = g.plan_segment(i, &fresh).unwrap();
        for r in &wanted {
            assert_eq!(r.form == FileForm::OldSplit, r.path.ends_with(".wasm"), "{r:?}");
        }
        if let [only] = new_ranges.as_slice() {
            if only.path.ends_with(".wasm") {
                assert!(wanted.iter().all(|r| r.path == only.path), "segment {i} of {} reads {wanted:?}", only.path);
            }
        }
        read.extend(wanted.iter().map(|r| r.path.clone()));
        let old_bytes = read_ranges(&old, &forms, &wanted);
        g.encode_segment(i, &fresh, old_bytes).unwrap();
    }
    for path in ["a.wasm", "b.wasm"] {
        assert!(read.iter().any(|r| r == path), "{path} is read");
    }
    let (patch, _) = generate(&old, &new, true, 9);
    assert_eq!(apply(&patch, &old), new);
    // One step per segment (each started within a module's parts, its history the bytes
    // before it) gives the one pass's segments.
    let count = g.segment_count();
    let one_pass = step_segments(&old, &new, 0, count);
    assert_eq!(one_pass.len() as u64, count);
    let one_by_one: Vec<Vec<u8>> = (0..count).flat_map(|i| step_segments(&old, &new, i, i + 1)).collect();
    assert!(one_by_one == one_pass, "steps of one segment differ from one pass");
    assert_eq!(g.segment_start(count).unwrap(), g.segment_start(count - 1).unwrap() + g.new_ranges(count - 1).unwrap().iter().map(|r| r.len).sum::<u64>());
    assert!(g.segment_start(count + 1).is_err());
}

/// A module renamed between builds (content-hashed names): prepared against the old module it
/// replaced (`renamed`), re-emitted code is stored in the field-split layout with that old file
/// read split (the patch's row names it), and the generator aligns it with that old file; the
/// patch applies exactly and is smaller than without the transform.
#[test]
fn a_renamed_module_is_generated_split_against_the_one_it_replaced() {
    let (v1, v2) = wasm_modules::recompiled_versions(600);
    let z = noise(13, 100_000);
    let old = Build::from_entries(vec![file("game-1a2b3c4d.wasm", v1.clone()), file("z.bin", z.clone())]).unwrap();
    let new = Build::from_entries(vec![file("game-9f8e7d6c.wasm", v2.clone()), file("z.bin", z)]).unwrap();
    let prepared = WasmTransform::normalize_owned("game-9f8e7d6c.wasm", v1.clone(), v2).unwrap().renamed("game-1a2b3c4d.wasm").finish(v1).unwrap();
    assert!(prepared.transform.is_split(), "re-emitted code is split");
    assert_eq!(prepared.transform.split_old_path(), Some("game-1a2b3c4d.wasm"));
    let record = WasmTransform::decode(&prepared.transform.encode()).unwrap();
    assert_eq!(record, prepared.transform, "the old path survives the record");
    let (os, ns) = signatures(&old, &new);
    let forms = Forms {
        normalized: vec![("game-9f8e7d6c.wasm".into(), prepared.normalized)],
        old_split: vec![("game-1a2b3c4d.wasm".into(), prepared.old_split.unwrap())],
    };
    let mut g = PatchGenerator::new(Some(&os), &ns, 9).unwrap();
    g.add_wasm_transform(prepared.transform.clone()).unwrap();
    let mut patch = g.header().unwrap();
    let mut read_split = false;
    for i in 0..g.segment_count() {
        let fresh = read_ranges(&new, &forms, &g.new_ranges(i).unwrap());
        let wanted = g.plan_segment(i, &fresh).unwrap();
        for r in &wanted {
            assert_eq!(r.form == FileForm::OldSplit, r.path == "game-1a2b3c4d.wasm", "{r:?}");
            read_split |= r.form == FileForm::OldSplit;
        }
        let old_bytes = read_ranges(&old, &forms, &wanted);
        patch.extend_from_slice(&g.encode_segment(i, &fresh, old_bytes).unwrap());
    }
    patch.extend_from_slice(&g.finish().unwrap());
    assert!(read_split, "the old module is read split");
    assert_eq!(apply(&patch, &old), new);
    let info = inspect_patch(&patch[..]).unwrap();
    assert_eq!(info.tree.transforms[0].split_reference, Some(0), "the row names the old module");
    let (without, _) = generate(&old, &new, false, 9);
    println!("renamed module: generator patch {} bytes transformed, {} as it is", patch.len(), without.len());
    assert!(patch.len() < without.len());
    // The same module given with an old path that is no old file of the reference is refused.
    let elsewhere = WasmTransform::normalize_owned("game-9f8e7d6c.wasm", wasm_modules::recompiled_versions(600).0, wasm_modules::recompiled_versions(600).1)
        .unwrap()
        .renamed("gone.wasm")
        .finish(wasm_modules::recompiled_versions(600).0)
        .unwrap();
    let mut g = PatchGenerator::new(Some(&os), &ns, 9).unwrap();
    let err = g.add_wasm_transform(elsewhere.transform).unwrap_err();
    assert!(err.to_string().contains("no file \"gone.wasm\""), "{err}");
}
