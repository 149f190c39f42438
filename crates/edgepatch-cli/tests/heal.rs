//! `edgepatch heal` against a static update site made by `site add` and served over loopback
//! HTTP: an install made by `update` with one file corrupted and one deleted is reported by
//! `--dry-run`, left unchanged by a site that serves a forged patch, and repaired byte for
//! byte from the real one, with only the two damaged files replaced.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

mod common;
use common::site_server::{load_site, serve, Site};
use common::{leftovers, snapshot, unpack};

fn edgepatch(args: &[&str], config: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_edgepatch")).args(args).env("EDGEPATCH_CONFIG_DIR", config).env_remove("EDGEPATCH_PUBLIC_KEY").output().unwrap()
}

fn ok(out: Output) -> String {
    assert!(out.status.success(), "failed: {}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// Every regular file under `root`, relative, sorted.
fn files(root: &Path) -> Vec<String> {
    // With `/` separators, as the CLI names manifest paths on every system.
    snapshot(root).into_iter().filter(|(_, kind, _, _)| kind == "file").map(|(rel, ..)| rel.replace('\\', "/")).collect()
}

/// What says a file was not replaced: its inode (Unix) and modification time.
fn identity(path: &Path) -> (u64, std::time::SystemTime) {
    let m = fs::symlink_metadata(path).unwrap();
    #[cfg(unix)]
    let ino = std::os::unix::fs::MetadataExt::ino(&m);
    #[cfg(not(unix))]
    let ino = 0;
    (ino, m.modified().unwrap())
}

#[test]
fn heal_repairs_exactly_the_damaged_files_and_nothing_when_the_site_lies() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let v1 = unpack("game-v1.tar", t);
    let (site_dir, key, config) = (t.join("site"), t.join("site.key"), t.join("config"));
    let s = |p: &Path| p.to_str().unwrap().to_string();
    ok(edgepatch(&["keygen", &s(&key)], t));
    let add = ["--quiet", "site", "add", "--site", &s(&site_dir), "--key", &s(&key), "--game", "demo", "--build", "v1", "--level", "3", &s(&v1)];
    ok(edgepatch(&add, t));
    let public = site_dir.join("public");
    let site: Site = Arc::new(Mutex::new(Default::default()));
    let base = serve(site.clone());
    load_site(&site, &public);

    // Installed as a client does: `update` from nothing, the key pinned on first use.
    let installs = t.join("installs");
    fs::create_dir(&installs).unwrap();
    let (empty, installed) = (t.join("empty"), installs.join("game"));
    fs::create_dir(&empty).unwrap();
    let update = ["--quiet", "update", "--server", &base, "--game", "demo", "--from", "_", "--to", "v1", "--trust-on-first-use", &s(&empty), &s(&installed)];
    ok(edgepatch(&update, &config));
    assert_eq!(snapshot(&installed), snapshot(&v1));

    let all = files(&installed);
    assert!(all.len() >= 4, "{all:?}");
    let (corrupted, deleted) = (all[1].clone(), all[all.len() - 1].clone());
    let mut bytes = fs::read(installed.join(&corrupted)).unwrap();
    bytes[0] ^= 0xff;
    fs::write(installed.join(&corrupted), &bytes).unwrap();
    fs::remove_file(installed.join(&deleted)).unwrap();
    let others: Vec<(PathBuf, _)> =
        all.iter().filter(|p| **p != corrupted && **p != deleted).map(|p| (installed.join(p), identity(&installed.join(p)))).collect();
    let damaged = snapshot(&installed);
    let heal = |extra: &[&str]| {
        let mut args = vec!["--json", "heal", "--server", &base, "--game", "demo", "--build", "v1"];
        args.extend_from_slice(extra);
        let dir = s(&installed);
        args.push(&dir);
        edgepatch(&args, &config)
    };
    let reported = |out: &Output| -> Vec<String> {
        let answer: serde_json::Value = serde_json::from_slice(out.stdout.split(|b| *b == b'\n').next().unwrap()).unwrap();
        let mut paths: Vec<String> = answer["damaged"].as_array().unwrap().iter().map(|d| d["path"].as_str().unwrap().to_string()).collect();
        paths.sort();
        paths
    };
    let mut expected = vec![corrupted.clone(), deleted.clone()];
    expected.sort();

    // --dry-run names the two and changes nothing: exit 4 (`damaged`), as `verify`.
    let dry = heal(&["--dry-run"]);
    assert_eq!(dry.status.code(), Some(4), "{}", String::from_utf8_lossy(&dry.stderr));
    assert_eq!(reported(&dry), expected);
    assert_eq!(snapshot(&installed), damaged);

    // A site that serves another build under the same names, signed by a key the client
    // never pinned: refused (untrusted_key), the install as it was.
    let (other_site, other_key, other_build) = (t.join("other-site"), t.join("other.key"), t.join("other-build"));
    common::copy_tree(&v1, &other_build);
    fs::write(other_build.join(&corrupted), &bytes).unwrap();
    ok(edgepatch(&["keygen", &s(&other_key)], t));
    ok(edgepatch(
        &["--quiet", "site", "add", "--site", &s(&other_site), "--key", &s(&other_key), "--game", "demo", "--build", "v1", "--level", "3", &s(&other_build)],
        t,
    ));
    load_site(&site, &other_site.join("public"));
    let other = heal(&[]);
    assert_eq!(other.status.code(), Some(4), "{}", String::from_utf8_lossy(&other.stderr));
    assert!(String::from_utf8_lossy(&other.stderr).contains("not one of the accepted keys"), "{}", String::from_utf8_lossy(&other.stderr));
    assert_eq!(snapshot(&installed), damaged, "a refused heal changed the install");
    load_site(&site, &public);

    // A site that serves a forged install patch (same size, one byte changed): refused,
    // the install as it was, nothing left beside it.
    let descriptor: serde_json::Value = serde_json::from_slice(&fs::read(public.join("v1/games/demo/updates/_/v1")).unwrap()).unwrap();
    let patch_path = format!("/v1/games/demo/patches/{}", descriptor["patchUrl"].as_str().unwrap().rsplit('/').next().unwrap());
    {
        let mut served = site.lock().unwrap();
        let patch = served.get_mut(&patch_path).expect("the install patch is served");
        let n = patch.len();
        patch[n - 40] ^= 0x01;
    }
    let forged = heal(&[]);
    // Exit 3 (a patch that breaks the format) or 4 (one that decodes to other bytes).
    assert!(matches!(forged.status.code(), Some(3 | 4)), "a forged patch: {:?} {}", forged.status, String::from_utf8_lossy(&forged.stderr));
    assert_eq!(snapshot(&installed), damaged, "a refused heal changed the install");
    assert!(leftovers(&installs).is_empty(), "{:?}", leftovers(&installs));

    // The real site: exactly the two are replaced, the result is byte for byte the build.
    load_site(&site, &public);
    let healed = heal(&[]);
    assert!(healed.status.success(), "{}", String::from_utf8_lossy(&healed.stderr));
    assert_eq!(reported(&healed), expected);
    assert_eq!(snapshot(&installed), snapshot(&v1));
    for (path, before) in &others {
        assert_eq!(&identity(path), before, "{} was replaced", path.display());
    }
    assert!(leftovers(&installs).is_empty(), "{:?}", leftovers(&installs));
    let again = heal(&["--dry-run"]);
    assert!(again.status.success());
    assert_eq!(reported(&again), Vec::<String>::new());

    // `heal .` from inside the build: staged beside it, nothing left inside.
    fs::remove_file(installed.join(&corrupted)).unwrap();
    let inside = Command::new(env!("CARGO_BIN_EXE_edgepatch"))
        .args(["--quiet", "heal", "--server", &base, "--game", "demo", "--build", "v1", "."])
        .current_dir(&installed)
        .env("EDGEPATCH_CONFIG_DIR", &config)
        .env_remove("EDGEPATCH_PUBLIC_KEY")
        .output()
        .unwrap();
    ok(inside);
    assert_eq!(snapshot(&installed), snapshot(&v1));
    assert!(leftovers(&installs).is_empty(), "{:?}", leftovers(&installs));

    // A directory where the build has a file: never deleted; refused (exit 4), nothing changed.
    fs::remove_file(installed.join(&deleted)).unwrap();
    fs::create_dir(installed.join(&deleted)).unwrap();
    let wrong_kind = snapshot(&installed);
    let refused = heal(&[]);
    assert_eq!(refused.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("move it away"), "{}", String::from_utf8_lossy(&refused.stderr));
    assert_eq!(snapshot(&installed), wrong_kind);
}
