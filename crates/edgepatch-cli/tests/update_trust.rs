//! `edgepatch update` against a static update site served over loopback HTTP,
//! as an attacker who controls the site's bytes would serve it: a forged patch
//! of exactly the real patch's size, a descriptor signed for another game, a
//! rolled-back or expired channel, an unknown key, a changed server key after
//! first use. Each is refused with a clear line, OUT is never created and OLD
//! is untouched; a good update names the key that verified it.

use std::collections::HashMap;
use std::fs;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

use base64::Engine;
use ed25519_dalek::{Signer, SigningKey};
use edgepatch_core::trust;
use serde_json::json;

mod common;
use common::{copy_tree, unpack};

type Site = Arc<Mutex<HashMap<String, Vec<u8>>>>;

/// Serves `site` (URL path -> bytes) on 127.0.0.1 until the test ends; one request a connection.
fn serve(site: Site) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            let mut req = Vec::new();
            let mut buf = [0u8; 4096];
            while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => req.extend_from_slice(&buf[..n]),
                }
            }
            let line = String::from_utf8_lossy(&req).lines().next().unwrap_or("").to_string();
            let path = line.split(' ').nth(1).unwrap_or("/").to_string();
            let body = site.lock().unwrap().get(&path).cloned();
            let (status, body) = match body {
                Some(b) => ("200 OK", b),
                None => ("404 Not Found", br#"{"error":"not found","status":404}"#.to_vec()),
            };
            let head = format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
            let _ = s.write_all(head.as_bytes()).and_then(|_| s.write_all(&body));
        }
    });
    format!("http://{addr}")
}

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

    // Trust on first use: the server's key is pinned; later, a different key is a hard failure.
    set_public_key(&site, &key);
    let first = update(&["--to", "v2"]);
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

/// Every file under `dir`, as URL path -> bytes.
fn load_site(site: &Site, dir: &Path) {
    let mut stack = vec![dir.to_path_buf()];
    let mut s = site.lock().unwrap();
    s.clear();
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().to_string_lossy().replace('\\', "/");
                s.insert(format!("/{rel}"), fs::read(&p).unwrap());
            }
        }
    }
}

#[test]
fn a_static_site_made_by_site_add_serves_installs_direct_updates_and_signed_channels() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let (v1, v2) = (unpack("game-v1.tar", t), unpack("game-v2.tar", t));
    let (site_dir, key, config) = (t.join("site"), t.join("site.key"), t.join("config"));
    let s = |p: &Path| p.to_str().unwrap().to_string();
    ok(edgepatch(&["keygen", &s(&key)], t));
    let mut answers = Vec::new();
    for (build, dir) in [("v1", &v1), ("v2", &v2)] {
        answers.push(ok(edgepatch(
            &[
                "--json",
                "--quiet",
                "site",
                "add",
                "--site",
                &s(&site_dir),
                "--key",
                &s(&key),
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
        )));
    }
    // v2 has patches from nothing and from v1; publishing v2 again is refused.
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
    let err = refused(edgepatch(&["site", "add", "--site", &s(&site_dir), "--key", &s(&key), "--game", "demo", "--build", "v2", &s(&v2)], t));
    assert!(err.contains("immutable"), "{err}");

    let site: Site = Arc::new(Mutex::new(HashMap::new()));
    let base = serve(site.clone());
    load_site(&site, &public);
    let update = |from: &str, old: &Path, out: &Path, target: &[&str]| {
        let mut args = vec!["--quiet", "update", "--server", &base, "--game", "demo", "--from", from];
        args.extend_from_slice(target);
        let (o, d) = (s(old), s(out));
        args.extend_from_slice(&[&o, &d]);
        edgepatch(&args, &config)
    };
    // Install from nothing through the channel (key pinned on first use), then a direct v1 -> v2.
    let empty = t.join("empty");
    fs::create_dir(&empty).unwrap();
    ok(update("_", &empty, &t.join("installed"), &["--channel", "stable"]));
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
