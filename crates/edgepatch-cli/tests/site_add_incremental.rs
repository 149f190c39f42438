//! `site add` keeps what the site already publishes: a larger `--history` makes only the
//! missing pairs, an add interrupted before it recorded the build makes only what it had
//! not written, adding a published build again with the same content writes nothing, and
//! the site that results is byte for byte the one three plain adds make.

use std::fs;
use std::path::Path;
use std::process::{Command, Output};

mod common;
use common::{copy_tree, unpack};

fn edgepatch(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_edgepatch")).args(args).output().unwrap()
}

fn ok(out: Output) -> String {
    assert!(out.status.success(), "failed: {}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// `site add` of BUILD from DIR with `extra` options; the pairs of its --json answer as (from, reused).
fn add(site: &Path, key: &Path, build: &str, dir: &Path, extra: &[&str]) -> Vec<(String, bool)> {
    let (site, key, dir) = (site.to_str().unwrap(), key.to_str().unwrap(), dir.to_str().unwrap());
    let mut args = vec!["--json", "site", "add", "--site", site, "--key", key, "--game", "demo", "--build", build, "--level", "3"];
    args.extend_from_slice(extra);
    args.push(dir);
    let answer: serde_json::Value = serde_json::from_str(&ok(edgepatch(&args))).unwrap();
    answer["pairs"].as_array().unwrap().iter().map(|p| (p["from"].as_str().unwrap().to_string(), p["reused"].as_bool().unwrap())).collect()
}

fn pairs(list: &[(&str, bool)]) -> Vec<(String, bool)> {
    list.iter().map(|(f, r)| (f.to_string(), *r)).collect()
}

/// Every file under `root`: relative path -> (bytes, modification time).
fn files(root: &Path) -> Vec<(String, Vec<u8>, std::time::SystemTime)> {
    common::files_under(root).into_iter().map(|(rel, p)| (rel, fs::read(&p).unwrap(), fs::metadata(&p).unwrap().modified().unwrap())).collect()
}

fn contents(root: &Path) -> Vec<(String, Vec<u8>)> {
    files(root).into_iter().map(|(p, b, _)| (p, b)).collect()
}

#[test]
fn a_second_add_keeps_published_pairs_and_the_site_equals_one_made_from_scratch() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let (v1, v2) = (unpack("game-v1.tar", t), unpack("game-v2.tar", t));
    let v3 = t.join("game-v3");
    copy_tree(&v2, &v3);
    fs::write(v3.join("build-v3.txt"), "a file only v3 has\n").unwrap();
    let key = t.join("site.key");
    ok(edgepatch(&["keygen", key.to_str().unwrap()]));

    // From scratch: three adds.
    let scratch = t.join("scratch");
    assert_eq!(add(&scratch, &key, "v1", &v1, &[]), pairs(&[("_", false)]));
    assert_eq!(add(&scratch, &key, "v2", &v2, &[]), pairs(&[("_", false), ("v1", false)]));
    assert_eq!(add(&scratch, &key, "v3", &v3, &[]), pairs(&[("_", false), ("v2", false), ("v1", false)]));

    // Incrementally: v2 first with no history, then again with it: only v1 -> v2 is made.
    let site = t.join("site");
    add(&site, &key, "v1", &v1, &[]);
    assert_eq!(add(&site, &key, "v2", &v2, &["--history", "0"]), pairs(&[("_", false)]));
    assert_eq!(add(&site, &key, "v2", &v2, &[]), pairs(&[("_", true), ("v1", false)]));
    // v3's add interrupted after it wrote two of its pairs, before it recorded the build:
    // the next add makes only the missing pair.
    let state_path = site.join("private/state.json");
    let state_before_v3 = fs::read(&state_path).unwrap();
    add(&site, &key, "v3", &v3, &[]);
    fs::write(&state_path, &state_before_v3).unwrap();
    fs::remove_file(site.join("public/v1/games/demo/updates/v1/v3")).unwrap();
    assert_eq!(add(&site, &key, "v3", &v3, &[]), pairs(&[("_", true), ("v2", true), ("v1", false)]));
    assert_eq!(contents(&site.join("public")), contents(&scratch.join("public")));
    assert_eq!(fs::read(&state_path).unwrap(), fs::read(scratch.join("private/state.json")).unwrap());

    // The same build again: every pair kept, not one file of the site written.
    let before = files(&site);
    assert_eq!(add(&site, &key, "v3", &v3, &[]), pairs(&[("_", true), ("v2", true), ("v1", true)]));
    assert_eq!(files(&site), before);

    // A pair whose patch on the site was damaged is made again, not kept.
    let descriptor: serde_json::Value = serde_json::from_slice(&fs::read(site.join("public/v1/games/demo/updates/v2/v3")).unwrap()).unwrap();
    let patch = site.join("public/v1/games/demo").join(descriptor["patchUrl"].as_str().unwrap().trim_start_matches("../../"));
    let good = fs::read(&patch).unwrap();
    let mut bad = good.clone();
    bad[good.len() / 2] ^= 1;
    fs::write(&patch, &bad).unwrap();
    assert_eq!(add(&site, &key, "v3", &v3, &[]), pairs(&[("_", true), ("v2", false), ("v1", true)]));
    assert_eq!(fs::read(&patch).unwrap(), good);
    assert_eq!(contents(&site.join("public")), contents(&scratch.join("public")));

    // The same build for fewer readers: not refused as other content; a pair is kept only
    // if its patch needs nothing outside them.
    let for_baseline = add(&site, &key, "v3", &v3, &["--reader", "baseline"]);
    assert_eq!(for_baseline.iter().map(|(from, _)| from.as_str()).collect::<Vec<_>>(), ["_", "v2", "v1"]);
    for (from, _) in &for_baseline {
        let d: serde_json::Value = serde_json::from_slice(&fs::read(site.join(format!("public/v1/games/demo/updates/{from}/v3"))).unwrap()).unwrap();
        let needs = u64::from_str_radix(d["readerNeeds"].as_str().unwrap(), 16).unwrap();
        let baseline = u64::from_str_radix(&baseline_hex(), 16).unwrap();
        assert_eq!(needs & !baseline, 0, "{from} -> v3 needs {needs:x}, more than baseline {baseline:x}");
    }
}

/// The `baseline` reader set as hex (docs/FORMAT.md §5), as the core spells it.
fn baseline_hex() -> String {
    edgepatch_core::Capabilities::parse_list("baseline").unwrap().to_hex()
}

/// `--store-decoded`: a game's `.gz` files are published as their decoded content (the manifest
/// flags them, with the decoded size and BLAKE3), later builds follow the game's first, the patch
/// between two gzip builds is as small as between their contents, and a game first published
/// as shipped refuses the flag.
#[test]
fn store_decoded_publishes_gz_files_decoded_and_is_fixed_by_a_games_first_build() {
    use std::io::Write;
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let key = t.join("site.key");
    ok(edgepatch(&["keygen", key.to_str().unwrap()]));
    let content = |v: u8| -> Vec<u8> { (0..300_000u32).map(|i| if i % 10_007 == 0 { v } else { (i % 251) as u8 ^ (i >> 9) as u8 }).collect() };
    let build = |v: u8| {
        let dir = t.join(format!("b{v}"));
        fs::create_dir_all(dir.join("Build")).unwrap();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(9));
        gz.write_all(&content(v)).unwrap();
        fs::write(dir.join("Build/game.data.gz"), gz.finish().unwrap()).unwrap();
        fs::write(dir.join("Build/notes.gz"), b"not gzip at all").unwrap();
        dir
    };
    let (b1, b2) = (build(1), build(2));
    let patch_bytes = |site: &Path, extra: &[&str]| -> (u64, edgepatch_core::manifest::Manifest) {
        let s = site.to_str().unwrap();
        add(site, &key, "v1", &b1, extra);
        let args =
            ["--json", "site", "add", "--site", s, "--key", key.to_str().unwrap(), "--game", "demo", "--build", "v2", "--level", "3", b2.to_str().unwrap()];
        let answer: serde_json::Value = serde_json::from_str(&ok(edgepatch(&args))).unwrap();
        let pair = answer["pairs"].as_array().unwrap().iter().find(|p| p["from"] == "v1").unwrap().clone();
        let manifest = fs::read(site.join("public").join(pair["manifest"].as_str().unwrap())).unwrap();
        (pair["patch_bytes"].as_u64().unwrap(), edgepatch_core::manifest::decode(&manifest).unwrap())
    };
    let (decoded_patch, m) = patch_bytes(&t.join("decoded"), &["--store-decoded"]);
    let (shipped_patch, shipped) = patch_bytes(&t.join("shipped"), &[]);
    let data = m.entries.iter().find(|e| e.path == "Build/game.data.gz").unwrap();
    assert!(data.decoded);
    assert_eq!((data.size, data.blake3), (content(2).len() as u64, *blake3::hash(&content(2)).as_bytes()));
    let notes = m.entries.iter().find(|e| e.path == "Build/notes.gz").unwrap();
    assert!(!notes.decoded, "a .gz file that is not gzip is stored as it is");
    assert!(shipped.entries.iter().all(|e| !e.decoded));
    assert!(decoded_patch * 20 < shipped_patch, "decoded {decoded_patch} bytes, shipped {shipped_patch}");

    // The flag on a game whose first build was published as shipped: refused, nothing added.
    let s = t.join("shipped");
    let args = [
        "site",
        "add",
        "--site",
        s.to_str().unwrap(),
        "--key",
        key.to_str().unwrap(),
        "--game",
        "demo",
        "--build",
        "v3",
        "--store-decoded",
        b2.to_str().unwrap(),
    ];
    let out = edgepatch(&args);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("first build"), "{}", String::from_utf8_lossy(&out.stderr));
}
