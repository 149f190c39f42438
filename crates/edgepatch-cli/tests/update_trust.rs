//! `edgepatch update` against a static update site served over loopback HTTP,
//! as an attacker who controls the site's bytes would serve it: a forged patch
//! of exactly the real patch's size, a descriptor signed for another game, a
//! rolled-back or expired channel, an unknown key, a changed server key after
//! first use, no key at all, a forged key rotation. Each is refused with a clear
//! line, OUT is never created and OLD is untouched; a good update names the key
//! that verified it, and a key rotation signed by a trusted key is followed.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

use base64::Engine;
use ed25519_dalek::{Signer, SigningKey};
use edgepatch_core::trust;
use serde_json::json;

mod common;
use common::site_server::{load_site, serve, serve_logged, Site};
use common::{copy_tree, unpack};

fn edgepatch(args: &[&str], config: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_edgepatch")).args(args).env("EDGEPATCH_CONFIG_DIR", config).env_remove("EDGEPATCH_PUBLIC_KEY").output().unwrap()
}

fn ok(out: Output) -> String {
    assert!(out.status.success(), "failed: {}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// The one error line of a failed command.
fn refused(out: Output) -> String {
    assert!(!out.status.success(), "succeeded but must not: {}", String::from_utf8_lossy(&out.stdout));
    String::from_utf8(out.stderr).unwrap()
}

fn tree_bytes(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            let m = fs::symlink_metadata(&p).unwrap();
            if m.is_dir() {
                stack.push(p.clone());
                out.push((rel, Vec::new()));
            } else if m.file_type().is_symlink() {
                out.push((rel, fs::read_link(&p).unwrap().to_string_lossy().as_bytes().to_vec()));
            } else {
                out.push((rel, fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

struct Pair {
    patch: Vec<u8>,
    manifest: Vec<u8>,
}

fn make_pair(tmp: &Path, old: &Path, new: &Path, name: &str, from: &str, to: &str) -> Pair {
    let (p, m) = (tmp.join(format!("{name}.patch")), tmp.join(format!("{name}.manifest")));
    ok(edgepatch(&["--quiet", "diff", "--level", "19", old.to_str().unwrap(), new.to_str().unwrap(), p.to_str().unwrap()], tmp));
    ok(edgepatch(
        &[
            "--quiet",
            "manifest",
            "--old",
            old.to_str().unwrap(),
            "--new",
            new.to_str().unwrap(),
            "--from",
            from,
            "--to",
            to,
            p.to_str().unwrap(),
            m.to_str().unwrap(),
        ],
        tmp,
    ));
    Pair { patch: fs::read(p).unwrap(), manifest: fs::read(m).unwrap() }
}

fn b64(b: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(b)
}

/// Puts the pair's descriptor (signed by `key` for `signed_game`), manifest and patch on the site.
fn publish(site: &Site, key: &SigningKey, game: &str, signed_game: &str, from: &str, to: &str, pair: &Pair) {
    let pk = key.verifying_key().to_bytes();
    let kid = trust::key_id(&pk);
    let mh = *blake3::hash(&pair.manifest).as_bytes();
    let statement = trust::update_statement(&kid, signed_game, from, to, pair.manifest.len() as u64, &mh).unwrap();
    let (mhex, phex) = (trust::hex(&mh), trust::hex(blake3::hash(&pair.patch).as_bytes()));
    let descriptor = json!({
        "game": game, "from": from, "to": to,
        "manifestUrl": format!("/m/{mhex}"), "manifestSize": pair.manifest.len(), "manifestBlake3": mhex,
        "patchUrl": format!("/p/{phex}"), "patchSize": pair.patch.len(),
        "keyId": trust::hex(&kid), "signature": b64(&key.sign(&statement).to_bytes()),
    });
    let mut s = site.lock().unwrap();
    s.insert(format!("/v1/games/{game}/updates/{from}/{to}"), descriptor.to_string().into_bytes());
    s.insert(format!("/m/{mhex}"), pair.manifest.clone());
    s.insert(format!("/p/{phex}"), pair.patch.clone());
}

fn set_channel(site: &Site, key: &SigningKey, game: &str, channel: &str, build: &str, sequence: u64, expires: u64) {
    let pk = key.verifying_key().to_bytes();
    let kid = trust::key_id(&pk);
    let statement = trust::channel_statement(&kid, game, channel, build, sequence, expires).unwrap();
    let doc = json!({ "game": game, "channel": channel, "build": build, "sequence": sequence, "expires": expires,
                      "keyId": trust::hex(&kid), "signature": b64(&key.sign(&statement).to_bytes()) });
    site.lock().unwrap().insert(format!("/v1/games/{game}/channels/{channel}"), doc.to_string().into_bytes());
}

fn set_public_key(site: &Site, key: &SigningKey) {
    let pk = key.verifying_key().to_bytes();
    let doc = json!({ "algorithm": "ed25519", "publicKey": b64(&pk), "keyId": trust::key_id_hex(&pk) });
    site.lock().unwrap().insert("/v1/public-key".into(), doc.to_string().into_bytes());
}

const LETTERS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz013456789";

fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()
}

/// v2 with the last letter of index.html's title changed (`variant` picks it): same paths and sizes.
fn forged_v2(tmp: &Path, v2: &Path, variant: usize) -> PathBuf {
    let dir = tmp.join(format!("forged-{variant}"));
    let _ = fs::remove_dir_all(&dir);
    copy_tree(v2, &dir);
    let index = dir.join("index.html");
    let mut html = fs::read(&index).unwrap();
    let at = html.windows(8).position(|w| w == b"</title>").expect("index.html has a title") - 1;
    html[at] = LETTERS[variant];
    fs::write(&index, html).unwrap();
    dir
}

#[test]
fn update_accepts_only_what_the_pinned_key_signed_for_this_game_pair_and_channel_position() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let (v1, v2) = (unpack("game-v1.tar", t), unpack("game-v2.tar", t));
    let v1_before = tree_bytes(&v1);
    let config = t.join("config");
    let site: Site = Arc::new(Mutex::new(HashMap::new()));
    let base = serve(site.clone());
    let key = SigningKey::from_bytes(&[7u8; 32]);
    let other_key = SigningKey::from_bytes(&[8u8; 32]);
    let pk = b64(&key.verifying_key().to_bytes());
    let real = make_pair(t, &v1, &v2, "real", "v1", "v2");
    let out = t.join("out");
    let out_s = out.to_str().unwrap();
    let update = |extra: &[&str]| {
        let mut args = vec!["--quiet", "update", "--server", &base, "--game", "demo", "--from", "v1"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&[v1.to_str().unwrap(), out_s]);
        edgepatch(&args, &config)
    };
    let untouched = |what: &str| {
        assert!(!out.exists(), "{what}: OUT was created");
        assert_eq!(tree_bytes(&v1), v1_before, "{what}: OLD changed");
    };

    // A forged patch of exactly the real patch's size (an attacker tries title variants until the
    // size matches), with its own self-consistent manifest; served as the real one's bytes.
    let forged = (0..LETTERS.len())
        .find_map(|i| {
            let dir = forged_v2(t, &v2, i);
            let p = make_pair(t, &v1, &dir, &format!("forged-{i}"), "v1", "v2");
            (p.patch.len() == real.patch.len()).then_some(p)
        })
        .expect("a same-size forgery among the title variants");
    publish(&site, &key, "demo", "demo", "v1", "v2", &real);
    let real_patch_url = format!("/p/{}", trust::hex(blake3::hash(&real.patch).as_bytes()));
    site.lock().unwrap().insert(real_patch_url.clone(), forged.patch.clone());
    let err = refused(update(&["--to", "v2", "--public-key", &pk]));
    assert!(err.contains("not in the signed manifest"), "forged same-size patch: {err}");
    untouched("forged patch");
    site.lock().unwrap().insert(real_patch_url, real.patch.clone());

    // A descriptor saying its patch needs a format feature this edgepatch does not know (a site
    // publishing for newer clients): refused before the patch is fetched, naming what to do.
    let descriptor_path = "/v1/games/demo/updates/v1/v2".to_string();
    let honest = site.lock().unwrap()[&descriptor_path].clone();
    let mut newer: serde_json::Value = serde_json::from_slice(&honest).unwrap();
    newer["readerNeeds"] = json!("8000000000000001");
    site.lock().unwrap().insert(descriptor_path.clone(), newer.to_string().into_bytes());
    let out_json = {
        let mut args = vec!["--json", "update", "--server", &base, "--game", "demo", "--from", "v1", "--to", "v2", "--public-key", &pk];
        args.extend_from_slice(&[v1.to_str().unwrap(), out_s]);
        edgepatch(&args, &config)
    };
    assert_eq!(out_json.status.code(), Some(3), "a format this edgepatch does not read: exit 3");
    let line = String::from_utf8_lossy(&out_json.stdout).lines().last().unwrap_or("").to_string();
    assert!(line.contains("\"code\":\"version\"") && line.contains("newer edgepatch"), "{line}");
    untouched("a patch for newer readers");
    site.lock().unwrap().insert(descriptor_path, honest);

    // A descriptor and manifest signed for another game, replayed under this one.
    publish(&site, &key, "demo", "other-game", "v1", "v2", &real);
    let err = refused(update(&["--to", "v2", "--public-key", &pk]));
    assert!(err.contains("signature does not verify"), "wrong game: {err}");
    untouched("wrong game");

    // Signed by a key that is not accepted.
    publish(&site, &other_key, "demo", "demo", "v1", "v2", &real);
    let err = refused(update(&["--to", "v2", "--public-key", &pk]));
    assert!(err.contains("not one of the accepted keys"), "unknown key: {err}");
    untouched("unknown key");

    // The good update, through a channel at position 5; the output names the key.
    publish(&site, &key, "demo", "demo", "v1", "v2", &real);
    set_channel(&site, &key, "demo", "stable", "v2", 5, now() + 3600);
    let text = ok(update(&["--channel", "stable", "--public-key", &pk]));
    assert!(text.contains(&format!("signed by key {}", trust::key_id_hex(&key.verifying_key().to_bytes()))) && text.contains("--public-key"), "{text}");
    assert_eq!(tree_bytes(&out), tree_bytes(&v2));
    fs::remove_dir_all(&out).unwrap();

    // An older signed channel document (a rollback) and an expired one (a freeze) are refused.
    set_channel(&site, &key, "demo", "stable", "v2", 4, now() + 3600);
    let err = refused(update(&["--channel", "stable", "--public-key", &pk]));
    assert!(err.contains("rollback"), "rollback: {err}");
    untouched("rollback");
    set_channel(&site, &key, "demo", "stable", "v2", 6, now() - 3600);
    let err = refused(update(&["--channel", "stable", "--public-key", &pk]));
    assert!(err.contains("expired"), "frozen channel: {err}");
    untouched("expired channel");

    // Trust on first use, when asked for: the server's key is pinned; later, a different key
    // (with no rotation signed by the pinned one) is a hard failure.
    set_public_key(&site, &key);
    let first = update(&["--to", "v2", "--trust-on-first-use"]);
    assert!(String::from_utf8_lossy(&first.stderr).contains("pinned its signing key"), "{}", String::from_utf8_lossy(&first.stderr));
    let text = ok(first);
    assert!(text.contains("pinned on first use"), "{text}");
    fs::remove_dir_all(&out).unwrap();
    let text = ok(update(&["--to", "v2"]));
    assert!(text.contains("pinned for"), "{text}");
    fs::remove_dir_all(&out).unwrap();
    set_public_key(&site, &other_key);
    publish(&site, &other_key, "demo", "demo", "v1", "v2", &real);
    let err = refused(update(&["--to", "v2"]));
    assert!(err.contains("not one of the accepted keys"), "changed server key: {err}");
    untouched("changed server key");
}

#[test]
fn plain_http_only_to_this_machine() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let out = edgepatch(
        &[
            "update",
            "--server",
            "http://updates.example.com",
            "--game",
            "g",
            "--from",
            "_",
            "--to",
            "b",
            "--public-key",
            &b64(&[1; 32]),
            t.to_str().unwrap(),
            t.join("o").to_str().unwrap(),
        ],
        t,
    );
    let err = refused(out);
    assert!(err.contains("plain http is allowed only to this machine"), "{err}");
}

#[test]
fn keygen_writes_a_secret_seed_once_and_prints_the_key_id() {
    let tmp = tempfile::tempdir().unwrap();
    let key = tmp.path().join("signing.key");
    let text = ok(edgepatch(&["keygen", key.to_str().unwrap()], tmp.path()));
    let seed = base64::engine::general_purpose::STANDARD.decode(fs::read_to_string(&key).unwrap().trim()).unwrap();
    let sk = SigningKey::from_bytes(&seed.try_into().unwrap());
    let pk = sk.verifying_key().to_bytes();
    assert!(text.contains(&b64(&pk)) && text.contains(&trust::key_id_hex(&pk)), "{text}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(fs::metadata(&key).unwrap().permissions().mode() & 0o777, 0o600);
    }
    let err = refused(edgepatch(&["keygen", key.to_str().unwrap()], tmp.path()));
    assert!(err.contains("exists"), "{err}");
}

/// `edgepatch --json site add` of build `name` (the directory `dir`) of the game "demo" to the
/// site `site`, on the channel "stable", with `extra` options; its JSON answer.
fn site_add(t: &Path, site: &Path, key: &Path, name: &str, dir: &Path, extra: &[&str]) -> String {
    let (site, key, dir) = (site.to_str().unwrap(), key.to_str().unwrap(), dir.to_str().unwrap());
    let mut args =
        vec!["--json", "--quiet", "site", "add", "--site", site, "--key", key, "--game", "demo", "--build", name, "--channel", "stable", "--level", "3"];
    args.extend_from_slice(extra);
    args.push(dir);
    ok(edgepatch(&args, t))
}

/// `edgepatch update` of the game "demo" from `base`: `old` (build `from`) into `out`, to the
/// build or channel `target` says.
fn update_demo(base: &str, config: &Path, from: &str, old: &Path, out: &Path, target: &[&str]) -> Output {
    let mut args = vec!["--quiet", "update", "--server", base, "--game", "demo", "--from", from];
    args.extend_from_slice(target);
    args.extend_from_slice(&[old.to_str().unwrap(), out.to_str().unwrap()]);
    edgepatch(&args, config)
}

#[test]
fn a_static_site_made_by_site_add_serves_installs_direct_updates_and_signed_channels() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let (v1, v2) = (unpack("game-v1.tar", t), unpack("game-v2.tar", t));
    let (site_dir, key, config) = (t.join("site"), t.join("site.key"), t.join("config"));
    let s = |p: &Path| p.to_str().unwrap().to_string();
    ok(edgepatch(&["keygen", &s(&key)], t));
    let answers: Vec<String> = [("v1", &v1), ("v2", &v2)].into_iter().map(|(build, dir)| site_add(t, &site_dir, &key, build, dir, &[])).collect();
    // v2 has patches from nothing and from v1.
    let public = site_dir.join("public");
    assert!(public.join("v1/games/demo/updates/_/v2").is_file() && public.join("v1/games/demo/updates/v1/v2").is_file());
    // The --json answer lists each pair with where its files are and what the listing needs.
    let answer: serde_json::Value = serde_json::from_str(&answers[1]).unwrap();
    let pairs = answer["pairs"].as_array().unwrap();
    assert_eq!(pairs.iter().map(|p| p["from"].as_str().unwrap()).collect::<Vec<_>>(), ["_", "v1"]);
    let v2_bytes: u64 = tree_bytes(&v2).iter().filter(|(rel, _)| fs::symlink_metadata(v2.join(rel)).unwrap().is_file()).map(|(_, b)| b.len() as u64).sum();
    for p in pairs {
        let size = |k: &str| fs::metadata(public.join(p[k].as_str().unwrap())).unwrap().len();
        assert_eq!(size("patch"), p["patch_bytes"].as_u64().unwrap(), "{p}");
        assert_eq!(size("manifest"), p["manifest_bytes"].as_u64().unwrap(), "{p}");
        let descriptor: serde_json::Value = serde_json::from_slice(&fs::read(public.join(p["descriptor"].as_str().unwrap())).unwrap()).unwrap();
        assert_eq!((descriptor["from"].as_str(), descriptor["patchSize"].as_u64()), (p["from"].as_str(), p["patch_bytes"].as_u64()));
        assert!(p["segments"].as_u64().unwrap() >= 1, "{p}");
        assert_eq!(p["new_bytes"].as_u64().unwrap(), v2_bytes, "{p}");
    }
    // v2 again with other content is refused (with the same content it is a no-op: site_add_incremental.rs).
    let err = refused(edgepatch(&["site", "add", "--site", &s(&site_dir), "--key", &s(&key), "--game", "demo", "--build", "v2", &s(&v1)], t));
    assert!(err.contains("immutable"), "{err}");

    let site: Site = Arc::new(Mutex::new(HashMap::new()));
    let base = serve(site.clone());
    load_site(&site, &public);
    let update = |from: &str, old: &Path, out: &Path, target: &[&str]| update_demo(&base, &config, from, old, out, target);
    // Install from nothing through the channel (key pinned on first use), then a direct v1 -> v2.
    let empty = t.join("empty");
    fs::create_dir(&empty).unwrap();
    ok(update("_", &empty, &t.join("installed"), &["--channel", "stable", "--trust-on-first-use"]));
    assert_eq!(tree_bytes(&t.join("installed")), tree_bytes(&v2));
    ok(update("v1", &v1, &t.join("updated"), &["--to", "v2"]));
    assert_eq!(tree_bytes(&t.join("updated")), tree_bytes(&v2));

    // The owner moves the channel back to v1: a new, higher position, accepted.
    ok(edgepatch(&["site", "channel", "--site", &s(&site_dir), "--key", &s(&key), "--game", "demo", "--channel", "stable", "--build", "v1"], t));
    load_site(&site, &public);
    ok(update("_", &empty, &t.join("back"), &["--channel", "stable"]));
    assert_eq!(tree_bytes(&t.join("back")), tree_bytes(&v1));
    // `site refresh` re-signs with the same position: still accepted.
    ok(edgepatch(&["site", "refresh", "--site", &s(&site_dir), "--key", &s(&key)], t));
    load_site(&site, &public);
    ok(update("_", &empty, &t.join("refreshed"), &["--channel", "stable"]));
}

#[test]
fn update_without_a_key_is_refused_before_anything_is_fetched() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let v1 = unpack("game-v1.tar", t);
    let (config, empty, out) = (t.join("config"), t.join("empty"), t.join("out"));
    fs::create_dir(&empty).unwrap();
    let site: Site = Arc::new(Mutex::new(HashMap::new()));
    let key = SigningKey::from_bytes(&[7u8; 32]);
    set_public_key(&site, &key);
    publish(&site, &key, "demo", "demo", "_", "v1", &make_pair(t, &empty, &v1, "install", "_", "v1"));
    let (base, requests) = serve_logged(site.clone());
    let update = |extra: &[&str]| {
        let mut args = vec!["--quiet", "update", "--server", &base, "--game", "demo", "--from", "_", "--to", "v1"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&[empty.to_str().unwrap(), out.to_str().unwrap()]);
        edgepatch(&args, &config)
    };

    // No key given, none pinned, no --trust-on-first-use: refused, naming the ways to give one.
    let err = refused(update(&[]));
    assert!(err.contains("--public-key") && err.contains("EDGEPATCH_PUBLIC_KEY") && err.contains("--trust-on-first-use"), "{err}");
    assert!(requests.lock().unwrap().is_empty(), "fetched {:?}", requests.lock().unwrap());
    assert!(!out.exists() && !config.join("known_keys").exists());

    // Trust on first use over plain http to another machine would let the network choose the key.
    let err = refused(update(&["--trust-on-first-use", "--allow-insecure-http"]));
    assert!(err.contains("--trust-on-first-use cannot be used with --allow-insecure-http"), "{err}");
    assert!(requests.lock().unwrap().is_empty(), "fetched {:?}", requests.lock().unwrap());

    // Asked for, the key is pinned; the next run uses the pinned key without the flag.
    let text = ok(update(&["--trust-on-first-use"]));
    assert!(text.contains("pinned on first use"), "{text}");
    let pk = b64(&key.verifying_key().to_bytes());
    assert!(fs::read_to_string(config.join("known_keys")).unwrap().contains(&pk));
    assert_eq!(tree_bytes(&out), tree_bytes(&v1));
    fs::remove_dir_all(&out).unwrap();
    let text = ok(update(&[]));
    assert!(text.contains("pinned for"), "{text}");
}

/// Signs the descriptor or channel document at `path` of `site` again with `key`.
fn resign(site: &Site, path: &str, key: &SigningKey) {
    let mut s = site.lock().unwrap();
    let mut d: serde_json::Value = serde_json::from_slice(&s[path]).unwrap();
    let kid = trust::key_id(&key.verifying_key().to_bytes());
    let g = |k: &str| d[k].as_str().unwrap().to_string();
    let statement = if d.get("channel").is_some() {
        trust::channel_statement(&kid, &g("game"), &g("channel"), &g("build"), d["sequence"].as_u64().unwrap(), d["expires"].as_u64().unwrap()).unwrap()
    } else {
        let mh = trust::parse_hex::<32>("manifest", &g("manifestBlake3")).unwrap();
        trust::update_statement(&kid, &g("game"), &g("from"), &g("to"), d["manifestSize"].as_u64().unwrap(), &mh).unwrap()
    };
    d["keyId"] = json!(trust::hex(&kid));
    d["signature"] = json!(b64(&key.sign(&statement).to_bytes()));
    s.insert(path.to_string(), d.to_string().into_bytes());
}

#[test]
fn a_key_rotation_signed_by_a_trusted_key_is_followed_and_a_forged_one_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let (v1, v2) = (unpack("game-v1.tar", t), unpack("game-v2.tar", t));
    let (site_dir, old_key, new_key) = (t.join("site"), t.join("old.key"), t.join("new.key"));
    let s = |p: &Path| p.to_str().unwrap().to_string();
    ok(edgepatch(&["keygen", &s(&old_key)], t));
    ok(edgepatch(&["keygen", &s(&new_key)], t));
    let site_add = |key: &Path, build: &str, dir: &Path| {
        edgepatch(
            &[
                "--quiet",
                "site",
                "add",
                "--site",
                &s(&site_dir),
                "--key",
                &s(key),
                "--game",
                "demo",
                "--build",
                build,
                "--channel",
                "stable",
                "--level",
                "3",
                &s(dir),
            ],
            t,
        )
    };
    ok(site_add(&old_key, "v1", &v1));
    let public = site_dir.join("public");
    let key_doc = || serde_json::from_slice::<serde_json::Value>(&fs::read(public.join("v1/public-key")).unwrap()).unwrap();
    let old_pk = key_doc()["publicKey"].as_str().unwrap().to_string();
    let old_id = key_doc()["keyId"].as_str().unwrap().to_string();

    let site: Site = Arc::new(Mutex::new(HashMap::new()));
    let base = serve(site.clone());
    load_site(&site, &public);
    let empty = t.join("empty");
    fs::create_dir(&empty).unwrap();
    let update = |config: &str, from: &str, old: &Path, out: &Path, extra: &[&str]| {
        let mut args = vec!["--quiet", "update", "--server", &base, "--game", "demo", "--from", from, "--channel", "stable"];
        args.extend_from_slice(extra);
        let (o, d) = (s(old), s(out));
        args.extend_from_slice(&[&o, &d]);
        edgepatch(&args, &t.join(config))
    };
    // Client "pinned" trusts the old key through known_keys; client "given" through --public-key.
    fs::create_dir_all(t.join("pinned")).unwrap();
    fs::write(t.join("pinned/known_keys"), format!("{base} {old_id} {old_pk}\n")).unwrap();
    ok(update("pinned", "_", &empty, &t.join("pinned-v1"), &[]));

    // Another signing key on the same site: refused, naming rotate-key; the site is unchanged.
    let before = fs::read(public.join("v1/public-key")).unwrap();
    let err = refused(site_add(&new_key, "v2", &v2));
    assert!(err.contains("rotate-key") && err.contains(&old_id), "{err}");
    let err = refused(edgepatch(&["site", "refresh", "--site", &s(&site_dir), "--key", &s(&new_key)], t));
    assert!(err.contains("rotate-key"), "{err}");
    assert_eq!(fs::read(public.join("v1/public-key")).unwrap(), before);
    assert!(!public.join("v1/games/demo/updates/v1/v2").exists());

    // The rotation, signed by the old key; then v2 signed by the new key only.
    ok(edgepatch(&["site", "rotate-key", "--site", &s(&site_dir), "--key", &s(&old_key), "--new-key", &s(&new_key)], t));
    let doc = key_doc();
    let new_id = doc["keyId"].as_str().unwrap().to_string();
    assert_ne!(new_id, old_id);
    assert_eq!(doc["rotations"].as_array().unwrap().len(), 1, "{doc}");
    assert_eq!((doc["rotations"][0]["from"].as_str(), doc["rotations"][0]["keyId"].as_str()), (Some(old_id.as_str()), Some(new_id.as_str())));
    assert!(doc["keys"].as_array().unwrap().iter().any(|k| k["keyId"] == json!(old_id)), "{doc}");
    let err = refused(site_add(&old_key, "v2", &v2));
    assert!(err.contains("rotate-key"), "{err}");
    ok(site_add(&new_key, "v2", &v2));
    let descriptor: serde_json::Value = serde_json::from_slice(&fs::read(public.join("v1/games/demo/updates/_/v1")).unwrap()).unwrap();
    assert_eq!(descriptor["keyId"], json!(new_id), "rotate-key re-signs the published descriptors");
    load_site(&site, &public);

    // Followed: the pinned client pins the new key beside the old one.
    let out = update("pinned", "v1", &v1, &t.join("pinned-v2"), &[]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("rotated its signing key"), "{}", String::from_utf8_lossy(&out.stderr));
    let text = ok(out);
    assert!(text.contains(&format!("signed by key {new_id}")), "{text}");
    assert_eq!(tree_bytes(&t.join("pinned-v2")), tree_bytes(&v2));
    let known = fs::read_to_string(t.join("pinned/known_keys")).unwrap();
    assert!(known.contains(&old_id) && known.contains(&new_id), "{known}");
    // A client given the old key follows it too (for that run), here for an install.
    ok(update("given", "_", &empty, &t.join("given-v2"), &["--public-key", &old_pk]));
    assert_eq!(tree_bytes(&t.join("given-v2")), tree_bytes(&v2));

    // Forged: the attacker's key signs v1 -> v2, "rotated to" by a rotation that another key of
    // the attacker signed.
    let (evil, evil_signer) = (SigningKey::from_bytes(&[66u8; 32]), SigningKey::from_bytes(&[67u8; 32]));
    let evil_pk = evil.verifying_key().to_bytes();
    let (evil_id, evil_signer_id) = (trust::key_id(&evil_pk), trust::key_id(&evil_signer.verifying_key().to_bytes()));
    let forge = |from: trust::KeyId| {
        let mut doc = key_doc();
        let sig = evil_signer.sign(&trust::rotation_statement(&from, &evil_pk).unwrap()).to_bytes();
        doc["rotations"]
            .as_array_mut()
            .unwrap()
            .push(json!({ "from": trust::hex(&from), "keyId": trust::hex(&evil_id), "publicKey": b64(&evil_pk), "signature": b64(&sig) }));
        doc["keyId"] = json!(trust::hex(&evil_id));
        doc["publicKey"] = json!(b64(&evil_pk));
        site.lock().unwrap().insert("/v1/public-key".into(), doc.to_string().into_bytes());
        resign(&site, "/v1/games/demo/channels/stable", &evil);
        resign(&site, "/v1/games/demo/updates/v1/v2", &evil);
        resign(&site, "/v1/games/demo/updates/_/v2", &evil);
    };
    forge(evil_signer_id);
    for (config, extra) in [("given2", vec!["--public-key", old_pk.as_str()]), ("pinned", vec![])] {
        let out = t.join(format!("forged-{config}"));
        let err = refused(update(config, "v1", &v1, &out, &extra));
        assert!(err.contains("rotation") && err.contains("signer is not trusted") && err.contains(&trust::hex(&evil_signer_id)), "{config}: {err}");
        assert!(!out.exists());
    }
    // Claiming the trusted key as the rotation's signer without its signature.
    forge(trust::parse_hex::<8>("key id", &new_id).unwrap());
    let err = refused(update("pinned", "v1", &v1, &t.join("forged-claimed"), &[]));
    assert!(err.contains("does not verify"), "{err}");
    assert!(!t.join("forged-claimed").exists());
    let known = fs::read_to_string(t.join("pinned/known_keys")).unwrap();
    assert!(!known.contains(&trust::hex(&evil_id)), "{known}");
}

#[test]
fn key_rotate_prints_the_rotation_signed_by_the_old_key() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let (a, b, c) = (t.join("a.key"), t.join("b.key"), t.join("c.key"));
    for k in [&a, &b, &c] {
        ok(edgepatch(&["keygen", &s(k)], t));
    }
    let load = |p: &Path| {
        SigningKey::from_bytes(&base64::engine::general_purpose::STANDARD.decode(fs::read_to_string(p).unwrap().trim()).unwrap().try_into().unwrap())
    };
    let first = ok(edgepatch(&["key", "rotate", "--old-key", &s(&a), "--new-key", &s(&b)], t));
    let list: serde_json::Value = serde_json::from_str(&first).unwrap();
    let (pa, pb) = (load(&a).verifying_key().to_bytes(), load(&b).verifying_key().to_bytes());
    let r = &list[0];
    assert_eq!(
        (r["from"].as_str().unwrap(), r["keyId"].as_str().unwrap(), r["publicKey"].as_str().unwrap()),
        (&*trust::key_id_hex(&pa), &*trust::key_id_hex(&pb), &*b64(&pb))
    );
    let sig: [u8; 64] = base64::engine::general_purpose::STANDARD.decode(r["signature"].as_str().unwrap()).unwrap().try_into().unwrap();
    trust::verify_ed25519(&pa, &trust::rotation_statement(&trust::key_id(&pa), &pb).unwrap(), &sig).unwrap();
    // Appended to the earlier ones.
    fs::write(t.join("rotations.json"), &first).unwrap();
    let both: serde_json::Value =
        serde_json::from_str(&ok(edgepatch(&["key", "rotate", "--old-key", &s(&b), "--new-key", &s(&c), "--rotations", &s(&t.join("rotations.json"))], t)))
            .unwrap();
    assert_eq!(both.as_array().unwrap().len(), 2);
    assert_eq!(both[0], list[0]);
    assert_eq!(both[1]["from"], json!(trust::key_id_hex(&pb)));
    // A rotation that does not continue the chain is refused.
    let err = refused(edgepatch(&["key", "rotate", "--old-key", &s(&c), "--new-key", &s(&a), "--rotations", &s(&t.join("rotations.json"))], t));
    assert!(err.contains("oldest first"), "{err}");
}

/// A site published for readers that know the compressed-asset transform (`--reader current`,
/// native clients): a game's `.gz` file patches as its content, and `update` rebuilds it byte for
/// byte without `--trust-patch`, since the signed manifest vouches for the patch's head.
#[test]
fn update_rebuilds_a_sites_gzip_files_byte_for_byte_from_vouched_side_infos() {
    use std::io::Write;
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let (g1, g2) = (unpack("game-v1.tar", t), unpack("game-v2.tar", t));
    let (site_dir, key, config) = (t.join("site"), t.join("site.key"), t.join("config"));
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let build = |name: &str, game: &Path| {
        let dir = t.join(name);
        fs::create_dir_all(dir.join("Build")).unwrap();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(9));
        gz.write_all(&fs::read(game.join("game.wasm")).unwrap()).unwrap();
        fs::write(dir.join("Build/game.wasm.gz"), gz.finish().unwrap()).unwrap();
        fs::write(dir.join("index.html"), b"<html>").unwrap();
        dir
    };
    let (v1, v2) = (build("v1", &g1), build("v2", &g2));
    ok(edgepatch(&["keygen", &s(&key)], t));
    site_add(t, &site_dir, &key, "v1", &v1, &["--reader", "current"]);
    let answer = site_add(t, &site_dir, &key, "v2", &v2, &["--reader", "current"]);
    let answer: serde_json::Value = serde_json::from_str(&answer).unwrap();
    let pair = answer["pairs"].as_array().unwrap().iter().find(|p| p["from"] == "v1").unwrap().clone();
    let public = site_dir.join("public");
    let descriptor: serde_json::Value = serde_json::from_slice(&fs::read(public.join(pair["descriptor"].as_str().unwrap())).unwrap()).unwrap();
    let needs = edgepatch_core::Capabilities::from_hex(descriptor["readerNeeds"].as_str().unwrap()).unwrap();
    assert!(needs.contains(edgepatch_core::Capability::DeflateTransform), "{descriptor}");
    let gz_size = fs::metadata(v2.join("Build/game.wasm.gz")).unwrap().len();
    assert!(pair["patch_bytes"].as_u64().unwrap() * 4 < gz_size, "{pair}");

    let site: Site = Arc::new(Mutex::new(HashMap::new()));
    let base = serve(site.clone());
    load_site(&site, &public);
    let empty = t.join("empty");
    fs::create_dir(&empty).unwrap();
    let update = |from: &str, old: &Path, out: &Path, target: &[&str]| update_demo(&base, &config, from, old, out, target);
    ok(update("_", &empty, &t.join("installed-v1"), &["--to", "v1", "--trust-on-first-use"]));
    ok(update("v1", &v1, &t.join("updated"), &["--to", "v2"]));
    assert_eq!(tree_bytes(&t.join("updated")), tree_bytes(&v2), "the .gz file byte for byte");
}
