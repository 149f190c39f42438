//! Client of an edgepatch update server (the Worker in `worker/`, docs/UPDATE_PROTOCOL.md):
//! `publish` uploads a directory as a tar stream, `update` fetches an update descriptor,
//! checks the manifest (size, BLAKE3, ed25519 signature) and streams the patch straight
//! into the core's applier.

use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom, Write};
use std::path::Path;

use base64::Engine;
use ed25519_dalek::{Signature, VerifyingKey};
use edgepatch_core::manifest::{ManifestKind, ManifestView};
use serde_json::Value;

use crate::build_files::{with_path, OldBuildFiles};
use crate::staged_output::StagedOutput;

/// Bodies up to this size go in one request; larger ones upload in parts of this size.
pub const DEFAULT_PART_BYTES: u64 = 64 << 20;

pub struct Server {
    base: url::Url,
    /// No read timeout: an update descriptor waits for its generation, which may take minutes.
    agent: ureq::Agent,
    /// For the public key and immutable objects, whose answer should start at once: a stalled request is retried.
    fetch_agent: ureq::Agent,
}

/// Read timeout of `fetch_agent`, and how many times an immutable object is asked for.
const FETCH_STALL: std::time::Duration = std::time::Duration::from_secs(10);
const FETCH_TRIES: u32 = 3;

fn b64() -> base64::engine::GeneralPurpose {
    base64::engine::general_purpose::STANDARD
}

/// The `error` of a JSON error body, or the status line.
fn describe(e: ureq::Error) -> String {
    match e {
        ureq::Error::Status(code, resp) => {
            let url = resp.get_url().to_string();
            let body = resp.into_string().unwrap_or_default();
            let msg = serde_json::from_str::<Value>(&body)
                .ok()
                .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_string))
                .unwrap_or_else(|| body.chars().take(200).collect());
            format!("{url}: HTTP {code}: {msg}")
        }
        ureq::Error::Transport(t) => format!("{t}"),
    }
}

impl Server {
    pub fn new(base: &str) -> Result<Server, String> {
        let mut s = base.trim_end_matches('/').to_string();
        s.push('/');
        let base = url::Url::parse(&s).map_err(|e| format!("--server {base}: {e}"))?;
        if base.scheme() != "http" && base.scheme() != "https" {
            return Err(format!("--server {base}: not an http(s) URL"));
        }
        // Under local `wrangler dev`, a request sent right after a long generation used to stall
        // until another connection arrived (fixed in the Worker, worker/README.md "Known
        // issues"). Kept as a guard against servers and proxies that stall like that: one
        // connection per request, and immutable objects are asked for again after a stall.
        let agent = ureq::AgentBuilder::new().max_idle_connections(0).timeout_connect(std::time::Duration::from_secs(30)).build();
        let fetch_agent = ureq::AgentBuilder::new()
            .max_idle_connections(0)
            .timeout_connect(std::time::Duration::from_secs(30))
            .timeout_read(FETCH_STALL)
            .build();
        Ok(Server { base, agent, fetch_agent })
    }

    fn url(&self, path: &str) -> Result<url::Url, String> {
        self.base.join(path).map_err(|e| format!("{path}: {e}"))
    }

    /// GET of an immutable object; a request that stalls before its answer (transport
    /// error, e.g. the read timeout) is sent again, up to FETCH_TRIES times.
    fn get_immutable(&self, url: &url::Url) -> Result<ureq::Response, String> {
        let mut last = String::new();
        for _ in 0..FETCH_TRIES {
            match self.fetch_agent.request_url("GET", url).call() {
                Ok(r) => return Ok(r),
                Err(e @ ureq::Error::Status(..)) => return Err(describe(e)),
                Err(e) => last = describe(e),
            }
        }
        Err(format!("{url}: {last} ({FETCH_TRIES} tries)"))
    }

    fn get_json(&self, url: &url::Url) -> Result<Value, String> {
        let resp = self.agent.request_url("GET", url).call().map_err(describe)?;
        resp.into_json::<Value>().map_err(|e| format!("{url}: not JSON: {e}"))
    }
}

fn token() -> Result<String, String> {
    std::env::var("EDGEPATCH_TOKEN").map_err(|_| "EDGEPATCH_TOKEN is not set (the server's publish token)".to_string())
}

fn name_ok(what: &str, s: &str) -> Result<(), String> {
    let ok = (1..=64).contains(&s.len())
        && !s.starts_with('.')
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-');
    if ok { Ok(()) } else { Err(format!("{what} {s:?} is not 1-64 of [A-Za-z0-9._-] not starting with '.'")) }
}

/// Writes DIR as a tar (paths sorted, modes 0644/0755, mtime 0, owner 0: the same
/// directory always gives the same bytes), symlinks stored as links, never followed.
pub fn write_tar(dir: &Path, out: File) -> io::Result<File> {
    fn add(b: &mut tar::Builder<File>, root: &Path, rel: &str) -> io::Result<()> {
        let here = if rel.is_empty() { root.to_path_buf() } else { root.join(rel) };
        let mut names: Vec<_> = std::fs::read_dir(&here).map_err(|e| with_path(&here, e))?.collect::<io::Result<Vec<_>>>()?;
        names.sort_by_key(|e| e.file_name());
        for e in names {
            let name = e.file_name().into_string().map_err(|n| io::Error::other(format!("{}: file name is not UTF-8", here.join(n).display())))?;
            let path = if rel.is_empty() { name } else { format!("{rel}/{name}") };
            let full = root.join(&path);
            let meta = std::fs::symlink_metadata(&full).map_err(|e| with_path(&full, e))?;
            let mut h = tar::Header::new_gnu();
            h.set_mtime(0);
            h.set_uid(0);
            h.set_gid(0);
            let ft = meta.file_type();
            if ft.is_symlink() {
                let target = std::fs::read_link(&full).map_err(|e| with_path(&full, e))?;
                h.set_entry_type(tar::EntryType::Symlink);
                h.set_mode(0o777);
                h.set_size(0);
                b.append_link(&mut h, &path, &target)?;
            } else if ft.is_dir() {
                h.set_entry_type(tar::EntryType::Directory);
                h.set_mode(0o755);
                h.set_size(0);
                b.append_data(&mut h, format!("{path}/"), io::empty())?;
                add(b, root, &path)?;
            } else if ft.is_file() {
                use std::os::unix::fs::PermissionsExt;
                h.set_entry_type(tar::EntryType::Regular);
                h.set_mode(if meta.permissions().mode() & 0o111 != 0 { 0o755 } else { 0o644 });
                h.set_size(meta.len());
                let f = File::open(&full).map_err(|e| with_path(&full, e))?;
                b.append_data(&mut h, &path, BufReader::new(f))?;
            } else {
                return Err(io::Error::other(format!("{}: not a file, directory or symlink", full.display())));
            }
        }
        Ok(())
    }
    let mut b = tar::Builder::new(out);
    b.mode(tar::HeaderMode::Deterministic);
    add(&mut b, dir, "")?;
    b.into_inner()
}

pub struct PublishOptions<'a> {
    pub game: &'a str,
    pub build: &'a str,
    pub channel: Option<&'a str>,
    pub part_bytes: u64,
}

/// Publishes DIR: one PUT of the tar, or (larger than `part_bytes`) start, parts, complete.
/// Returns the server's build record.
pub fn publish(server: &Server, dir: &Path, o: &PublishOptions) -> Result<Value, String> {
    name_ok("game", o.game)?;
    name_ok("build", o.build)?;
    if let Some(c) = o.channel {
        name_ok("channel", c)?;
    }
    if !dir.is_dir() {
        return Err(format!("{}: publish takes a build directory", dir.display()));
    }
    let auth = format!("Bearer {}", token()?);
    let mut tar = write_tar(dir, tempfile::tempfile().map_err(|e| format!("temporary file: {e}"))?).map_err(|e| e.to_string())?;
    let size = tar.seek(SeekFrom::End(0)).map_err(|e| e.to_string())?;
    tar.seek(SeekFrom::Start(0)).map_err(|e| e.to_string())?;
    let query = o.channel.map(|c| format!("?channel={c}")).unwrap_or_default();
    let build_path = format!("v1/games/{}/builds/{}", o.game, o.build);
    if size <= o.part_bytes {
        let url = server.url(&format!("{build_path}{query}"))?;
        let resp = server
            .agent
            .request_url("PUT", &url)
            .set("Authorization", &auth)
            .set("Content-Type", "application/x-tar")
            .set("Content-Length", &size.to_string())
            .send(BufReader::new(tar))
            .map_err(describe)?;
        return resp.into_json().map_err(|e| e.to_string());
    }
    let part_bytes = o.part_bytes.max(5 << 20);
    let start = server
        .agent
        .request_url("POST", &server.url(&format!("{build_path}/uploads"))?)
        .set("Authorization", &auth)
        .call()
        .map_err(describe)?
        .into_json::<Value>()
        .map_err(|e| e.to_string())?;
    let id = start["uploadId"].as_str().ok_or("server gave no uploadId")?.to_string();
    let upload_path = format!("{build_path}/uploads/{id}");
    let mut run = || -> Result<Value, String> {
        let mut parts = Vec::new();
        let (mut offset, mut n) = (0u64, 1u32);
        while offset < size {
            let len = part_bytes.min(size - offset);
            tar.seek(SeekFrom::Start(offset)).map_err(|e| e.to_string())?;
            let body = (&tar).take(len);
            let part = server
                .agent
                .request_url("PUT", &server.url(&format!("{upload_path}/parts/{n}"))?)
                .set("Authorization", &auth)
                .set("Content-Length", &len.to_string())
                .send(BufReader::new(body))
                .map_err(describe)?
                .into_json::<Value>()
                .map_err(|e| e.to_string())?;
            parts.push(serde_json::json!({ "partNumber": n, "etag": part["etag"] }));
            offset += len;
            n += 1;
        }
        server
            .agent
            .request_url("POST", &server.url(&format!("{upload_path}/complete{query}"))?)
            .set("Authorization", &auth)
            .send_json(serde_json::json!({ "parts": parts }))
            .map_err(describe)?
            .into_json()
            .map_err(|e| e.to_string())
    };
    run().inspect_err(|_| {
        if let Ok(u) = server.url(&upload_path) {
            let _ = server.agent.request_url("DELETE", &u).set("Authorization", &auth).call();
        }
    })
}

/// What to update to: a named build, or whichever build a channel points at when asked.
#[derive(Clone, Copy)]
pub enum UpdateTarget<'a> {
    Build(&'a str),
    Channel(&'a str),
}

pub struct UpdateOptions<'a> {
    pub game: &'a str,
    pub from: &'a str,
    pub to: UpdateTarget<'a>,
    /// base64 ed25519 public key; None: ask the server (`v1/public-key`).
    pub public_key: Option<&'a str>,
}

pub struct UpdateSummary {
    pub apply: edgepatch_core::ApplySummary,
    /// The build OUT now is (the channel's, when the target was a channel).
    pub to: String,
    pub manifest_bytes: u64,
    pub patch_bytes: u64,
    pub key_from_server: bool,
}

/// The build `channel` of `game` points at now (`v1/games/{game}/channels/{channel}`).
pub fn channel_build(server: &Server, game: &str, channel: &str) -> Result<String, String> {
    name_ok("game", game)?;
    name_ok("channel", channel)?;
    let url = server.url(&format!("v1/games/{game}/channels/{channel}"))?;
    let v = server.get_json(&url)?;
    let build = v.get("build").and_then(|b| b.as_str()).ok_or_else(|| format!("{url}: the answer names no build"))?;
    name_ok(&format!("channel {channel}'s build"), build)?;
    Ok(build.to_string())
}

/// Hashes what it reads, so the patch can be tied to the signed manifest.
struct HashingReader<R> {
    inner: R,
    hasher: edgepatch_core::blake3::Hasher,
    count: u64,
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        self.count += n as u64;
        Ok(n)
    }
}

fn decode_hex32(s: &str) -> Option<[u8; 32]> {
    if s.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

fn verifying_key(b64_key: &str) -> Result<VerifyingKey, String> {
    let bytes = b64().decode(b64_key.trim()).map_err(|e| format!("public key is not base64: {e}"))?;
    let arr: [u8; 32] = bytes.as_slice().try_into().map_err(|_| format!("public key has {} bytes, not 32", bytes.len()))?;
    VerifyingKey::from_bytes(&arr).map_err(|e| format!("public key: {e}"))
}

/// Turns OLD into OUT = build `to`: descriptor, manifest (checked and signature-verified),
/// then the patch streamed into the applier; OUT appears only when everything verified.
pub fn update(server: &Server, old: &Path, out: &Path, o: &UpdateOptions, progress: &mut dyn FnMut(u64, u64)) -> Result<UpdateSummary, String> {
    name_ok("game", o.game)?;
    if o.from != "_" {
        name_ok("from build", o.from)?;
    }
    // A channel is resolved once: the update is to that build even if the channel moves meanwhile.
    let to = match o.to {
        UpdateTarget::Build(b) => {
            name_ok("to build", b)?;
            b.to_string()
        }
        UpdateTarget::Channel(c) => channel_build(server, o.game, c)?,
    };
    let to = to.as_str();
    let descriptor_url = server.url(&format!("v1/games/{}/updates/{}/{to}", o.game, o.from))?;
    let d = server.get_json(&descriptor_url)?;
    let field = |k: &str| d.get(k).ok_or_else(|| format!("update descriptor has no {k}"));
    let str_field = |k: &str| field(k).and_then(|v| v.as_str().map(str::to_string).ok_or_else(|| format!("update descriptor: {k} is not a string")));
    let num_field = |k: &str| field(k).and_then(|v| v.as_u64().ok_or_else(|| format!("update descriptor: {k} is not a byte count")));
    let manifest_url = descriptor_url.join(&str_field("manifestUrl")?).map_err(|e| format!("manifestUrl: {e}"))?;
    let patch_url = descriptor_url.join(&str_field("patchUrl")?).map_err(|e| format!("patchUrl: {e}"))?;
    let manifest_size = num_field("manifestSize")?;
    let manifest_blake3 = decode_hex32(&str_field("manifestBlake3")?).ok_or("update descriptor: manifestBlake3 is not 64 hex digits")?;
    let patch_size = num_field("patchSize")?;

    // The key: given, or the server's (which guards against damage and caches, not against the server itself).
    let key_from_server = o.public_key.is_none();
    let key_text = match o.public_key {
        Some(k) => k.to_string(),
        None => {
            let url = server.url("v1/public-key")?;
            let v: Value = server.get_immutable(&url)?.into_json().map_err(|e| format!("{url}: not JSON: {e}"))?;
            v["publicKey"].as_str().ok_or("v1/public-key has no publicKey")?.to_string()
        }
    };
    let key = verifying_key(&key_text)?;

    // Manifest: size, BLAKE3, signature, then what it says about the patch.
    let resp = server.get_immutable(&manifest_url)?;
    let mut manifest = Vec::with_capacity(manifest_size.min(64 << 20) as usize);
    resp.into_reader().take(manifest_size + 1).read_to_end(&mut manifest).map_err(|e| format!("{manifest_url}: {e}"))?;
    if manifest.len() as u64 != manifest_size {
        return Err(format!("manifest is {} bytes, the descriptor says {manifest_size}", manifest.len()));
    }
    if edgepatch_core::blake3::hash(&manifest).as_bytes() != &manifest_blake3 {
        return Err("manifest BLAKE3 differs from the update descriptor's".into());
    }
    let sig_text = d.get("manifestSignature").and_then(|v| v.as_str()).ok_or("update descriptor has no manifestSignature, and updates must be signed")?;
    let sig_bytes = b64().decode(sig_text).map_err(|e| format!("manifestSignature is not base64: {e}"))?;
    let sig = Signature::from_slice(&sig_bytes).map_err(|e| format!("manifestSignature: {e}"))?;
    key.verify_strict(&manifest, &sig).map_err(|_| "manifest signature does not verify with the public key".to_string())?;
    let view = ManifestView::open(&manifest).map_err(|e| format!("manifest: {e}"))?;
    view.verify_checksum().map_err(|e| format!("manifest: {e}"))?;
    if view.kind() != ManifestKind::Patch {
        return Err("manifest is not a patch manifest".into());
    }
    let from_ok = view.from_build() == Some(o.from) || (o.from == "_" && matches!(view.from_build(), None | Some("_")));
    if view.to_build() != to || !from_ok {
        return Err(format!("manifest is for {:?} -> {}, not {} -> {to}", view.from_build(), view.to_build(), o.from));
    }
    if view.patch_size() != patch_size {
        return Err(format!("manifest says the patch is {} bytes, the descriptor {patch_size}", view.patch_size()));
    }
    let patch_blake3 = view.patch_blake3();

    // Patch: streamed from the response into the applier; committed only if its BLAKE3 is the signed one.
    let resp = server.get_immutable(&patch_url)?;
    let mut reader = HashingReader { inner: resp.into_reader().take(patch_size + 1), hasher: edgepatch_core::blake3::Hasher::new(), count: 0 };
    let mut old_files = OldBuildFiles::new(old);
    let mut staged = StagedOutput::new(out, old_files.root(), old_files.descriptors_needed()).map_err(|e| e.to_string())?;
    let apply = edgepatch_core::apply_patch(&mut reader, &mut old_files, &mut staged, &mut |p| progress(p.patch_bytes_read, patch_size))
        .map_err(|e| format!("applying {patch_url}: {e}"))?;
    // The applier stops at the checksum; anything after it would be a different patch.
    let mut rest = [0u8; 1];
    if reader.read(&mut rest).map_err(|e| e.to_string())? != 0 || reader.count != patch_size {
        return Err(format!("patch is not the {patch_size} bytes the manifest names"));
    }
    if reader.hasher.finalize().as_bytes() != &patch_blake3 {
        return Err("patch BLAKE3 differs from the signed manifest's".into());
    }
    staged.commit().map_err(|e| format!("{}: {e}", out.display()))?;
    io::stderr().flush().ok();
    Ok(UpdateSummary { apply, to: to.to_string(), manifest_bytes: manifest_size, patch_bytes: patch_size, key_from_server })
}
