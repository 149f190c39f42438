//! Client of an edgepatch update server (the Worker in `worker/`, docs/UPDATE_PROTOCOL.md):
//! `publish` uploads a directory as a tar stream, `update` fetches an update descriptor,
//! checks the manifest (size, BLAKE3, ed25519 signature) and streams the patch straight
//! into the core's applier.

use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom, Write};
use std::path::Path;

use edgepatch_core::channel::{self, ChannelDocument, SeenHead};
use edgepatch_core::descriptor::UpdateDescriptor;
use edgepatch_core::key_rotations::{self, KeyRotation};
use edgepatch_core::manifest::{ManifestKind, ManifestView};
use edgepatch_core::manifest_binding::{BoundSink, ManifestBinding};
use edgepatch_core::trust;
use serde_json::Value;

use crate::build_files::{with_path, OldBuildFiles};
use crate::cli_error::{CliError, Refusal, ResultExt};
use crate::progress::Progress;
use crate::staged_output::StagedOutput;
use crate::trusted_keys::{self, ChannelState, KeySet, KnownKeys, TrustedKey};

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

/// Reading a response's body from `url` failed: the connection, not the content.
fn read_failed(url: &url::Url, e: io::Error) -> CliError {
    CliError::Network { message: format!("{url}: {e}"), url: Some(url.to_string()) }
}

/// An answer from `url` that is not JSON.
fn not_json(url: &url::Url, e: impl std::fmt::Display) -> CliError {
    CliError::bad_response(format!("{url}: not JSON: {e}"))
}

impl Server {
    /// `allow_insecure_http`: plain http to a host that is not this machine (the network
    /// could then change every unsigned answer and read the publish token).
    pub fn new(base: &str, allow_insecure_http: bool) -> Result<Server, CliError> {
        let mut s = base.trim_end_matches('/').to_string();
        s.push('/');
        let base = url::Url::parse(&s).map_err(|e| CliError::usage(format!("--server {base}: {e}")))?;
        if base.scheme() != "http" && base.scheme() != "https" {
            return Err(CliError::usage(format!("--server {base}: not an http(s) URL")));
        }
        if base.scheme() == "http" && !allow_insecure_http && !is_loopback(&base) {
            return Err(CliError::usage(format!(
                "--server {base}: plain http is allowed only to this machine (127.0.0.1, ::1, localhost); use https, or --allow-insecure-http if you must"
            )));
        }
        // Under local `wrangler dev`, a request sent right after a long generation used to stall
        // until another connection arrived (fixed in the Worker, worker/README.md "Known
        // issues"). Kept as a guard against servers and proxies that stall like that: one
        // connection per request, and immutable objects are asked for again after a stall.
        let agent = ureq::AgentBuilder::new().max_idle_connections(0).timeout_connect(std::time::Duration::from_secs(30)).build();
        let fetch_agent =
            ureq::AgentBuilder::new().max_idle_connections(0).timeout_connect(std::time::Duration::from_secs(30)).timeout_read(FETCH_STALL).build();
        Ok(Server { base, agent, fetch_agent })
    }

    /// `scheme://host:port`: what keys are pinned for.
    pub fn origin(&self) -> String {
        self.base.origin().ascii_serialization()
    }

    fn url(&self, path: &str) -> Result<url::Url, CliError> {
        self.base.join(path).map_err(|e| CliError::other(format!("{path}: {e}")))
    }

    /// GET of an immutable object; a request that stalls before its answer (transport
    /// error, e.g. the read timeout) is sent again, up to FETCH_TRIES times.
    fn get_immutable(&self, url: &url::Url) -> Result<ureq::Response, CliError> {
        let mut last = None;
        for _ in 0..FETCH_TRIES {
            match self.fetch_agent.request_url("GET", url).call() {
                Ok(r) => return Ok(r),
                Err(e @ ureq::Error::Status(..)) => return Err(e.into()),
                Err(e) => last = Some(CliError::from(e)),
            }
        }
        let last = last.unwrap_or_else(|| CliError::Network { message: String::new(), url: None });
        Err(last.reword(|m| format!("{url}: {m} ({FETCH_TRIES} tries)")))
    }

    fn get_json(&self, url: &url::Url) -> Result<Value, CliError> {
        let resp = self.agent.request_url("GET", url).call()?;
        resp.into_json::<Value>().map_err(|e| not_json(url, e))
    }

    /// One of the protocol's JSON documents (`what` names it in errors), by its Rust type.
    fn get_document<T: serde::de::DeserializeOwned>(&self, url: &url::Url, what: &str) -> Result<T, CliError> {
        serde_json::from_value(self.get_json(url)?).map_err(|e| CliError::bad_response(format!("{what}: {e}")))
    }
}

fn is_loopback(u: &url::Url) -> bool {
    match u.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(a)) => a.is_loopback(),
        Some(url::Host::Ipv6(a)) => a.is_loopback(),
        None => false,
    }
}

fn token() -> Result<String, CliError> {
    std::env::var("EDGEPATCH_TOKEN").map_err(|_| CliError::usage("EDGEPATCH_TOKEN is not set (the server's publish token)"))
}

/// The protocol's name rule, from the core (the one definition every client and server shares).
fn name_ok(what: &'static str, s: &str) -> Result<(), CliError> {
    Ok(trust::check_name(what, s)?)
}

/// The executable bit (Unix); other systems have none, so a build made there has no executables.
fn is_executable(meta: &std::fs::Metadata) -> bool {
    crate::platform::is_executable(meta)
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
                h.set_entry_type(tar::EntryType::Regular);
                h.set_mode(if is_executable(&meta) { 0o755 } else { 0o644 });
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
pub fn publish(server: &Server, dir: &Path, o: &PublishOptions, progress: &Progress) -> Result<Value, CliError> {
    name_ok("game", o.game)?;
    name_ok("build", o.build)?;
    if let Some(c) = o.channel {
        name_ok("channel", c)?;
    }
    if !dir.is_dir() {
        return Err(CliError::bad_input(format!("{}: publish takes a build directory", dir.display())).at(dir));
    }
    let auth = format!("Bearer {}", token()?);
    let mut tar = write_tar(dir, tempfile::tempfile().context("temporary file")?)?;
    let size = tar.seek(SeekFrom::End(0))?;
    tar.seek(SeekFrom::Start(0))?;
    progress.start_phase("publish (upload)", size);
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
            .send(UploadReader { inner: BufReader::new(tar), at: 0, progress })?;
        return resp.into_json().map_err(|e| CliError::bad_response(e.to_string()));
    }
    let part_bytes = o.part_bytes.max(5 << 20);
    let start = server
        .agent
        .request_url("POST", &server.url(&format!("{build_path}/uploads"))?)
        .set("Authorization", &auth)
        .call()?
        .into_json::<Value>()
        .map_err(|e| CliError::bad_response(e.to_string()))?;
    let id = start["uploadId"].as_str().ok_or_else(|| CliError::bad_response("server gave no uploadId"))?.to_string();
    let upload_path = format!("{build_path}/uploads/{id}");
    let mut run = || -> Result<Value, CliError> {
        let mut parts = Vec::new();
        let (mut offset, mut n) = (0u64, 1u32);
        while offset < size {
            let len = part_bytes.min(size - offset);
            tar.seek(SeekFrom::Start(offset))?;
            let body = (&tar).take(len);
            let part = server
                .agent
                .request_url("PUT", &server.url(&format!("{upload_path}/parts/{n}"))?)
                .set("Authorization", &auth)
                .set("Content-Length", &len.to_string())
                .send(UploadReader { inner: BufReader::new(body), at: offset, progress })?
                .into_json::<Value>()
                .map_err(|e| CliError::bad_response(e.to_string()))?;
            parts.push(serde_json::json!({ "partNumber": n, "etag": part["etag"] }));
            offset += len;
            n += 1;
        }
        server
            .agent
            .request_url("POST", &server.url(&format!("{upload_path}/complete{query}"))?)
            .set("Authorization", &auth)
            .send_json(serde_json::json!({ "parts": parts }))?
            .into_json()
            .map_err(|e| CliError::bad_response(e.to_string()))
    };
    run().inspect_err(|_| {
        if let Ok(u) = server.url(&upload_path) {
            let _ = server.agent.request_url("DELETE", &u).set("Authorization", &auth).call();
        }
    })
}

/// A request body that reports how far into the upload (`at`, bytes) it has been read.
struct UploadReader<'a, R> {
    inner: R,
    at: u64,
    progress: &'a Progress,
}

impl<R: Read> Read for UploadReader<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.at += n as u64;
        self.progress.set_position(self.at);
        Ok(n)
    }
}

/// Points `channel` of `game` at `build` on the server (the owner's token); the server
/// signs the new position and pre-generates the updates it releases. Returns its answer.
pub fn set_channel(server: &Server, game: &str, channel: &str, build: &str) -> Result<Value, CliError> {
    name_ok("game", game)?;
    name_ok("channel", channel)?;
    name_ok("build", build)?;
    let auth = format!("Bearer {}", token()?);
    let url = server.url(&format!("v1/games/{game}/channels/{channel}"))?;
    server
        .agent
        .request_url("PUT", &url)
        .set("Authorization", &auth)
        .send_json(serde_json::json!({ "build": build }))?
        .into_json()
        .map_err(|e| CliError::bad_response(format!("{url}: {e}")))
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
    /// Keys given on the command line or in the environment; None: the keys pinned for
    /// this server.
    pub keys: Option<KeySet>,
    /// With no key given or pinned: pin the key the server presents now (else refused).
    pub trust_on_first_use: bool,
}

pub struct UpdateSummary {
    pub apply: edgepatch_core::ApplySummary,
    /// The build OUT now is (the channel's, when the target was a channel).
    pub to: String,
    pub manifest_bytes: u64,
    pub patch_bytes: u64,
    /// The key that verified the update, and where the accepted keys came from.
    pub key_id: String,
    pub key_source: String,
    /// The channel's signed sequence, when the target was a channel.
    pub channel_sequence: Option<u64>,
}

/// A signed channel document, checked (docs/UPDATE_PROTOCOL.md, "What a client checks", 1).
pub struct ChannelHead {
    pub build: String,
    pub sequence: u64,
}

/// Largest `v1/public-key` document read.
const MAX_PUBLIC_KEY_DOC_BYTES: u64 = 1 << 20;

/// The accepted key a document names by `keyId` (`id`, checked: 16 hex digits). A key id
/// that is not accepted is looked for in the server's key rotations (`follow_rotations`);
/// else an error that says what is accepted.
fn signing_key(server: &Server, keys: &mut KeySet, id: Option<&str>, what: &str) -> Result<TrustedKey, CliError> {
    let id = id.ok_or_else(|| {
        CliError::refused(Refusal::Signature, format!("{what} has no keyId: the server does not sign (protocol v2), and updates must be signed"))
    })?;
    if let Some(k) = keys.find(id) {
        return Ok(k.clone());
    }
    let not_accepted = format!("{what} is signed by key {id}, which is not one of the accepted keys ({}) from {}", keys.ids(), keys.source);
    let target = trust::parse_hex::<8>("key id", id).map_err(|e| CliError::refused(Refusal::UntrustedKey, format!("{not_accepted}: {e}")))?;
    follow_rotations(server, keys, &target).reword(|e| format!("{not_accepted}; {e}"))?;
    keys.find(id).cloned().ok_or_else(|| CliError::refused(Refusal::UntrustedKey, not_accepted))
}

/// Reads the server's `v1/public-key` and follows its `rotations` from the accepted keys to
/// the key `target` (edgepatch_core::trust::follow_rotations: every step signed by a key
/// already trusted). The keys learned are added to `keys` and, when `keys` are the pinned
/// ones, pinned beside them.
fn follow_rotations(server: &Server, keys: &mut KeySet, target: &trust::KeyId) -> Result<(), CliError> {
    let url = server.url("v1/public-key")?;
    let mut body = Vec::new();
    server.get_immutable(&url)?.into_reader().take(MAX_PUBLIC_KEY_DOC_BYTES + 1).read_to_end(&mut body).map_err(|e| read_failed(&url, e))?;
    if body.len() as u64 > MAX_PUBLIC_KEY_DOC_BYTES {
        return Err(CliError::bad_response(format!("{url}: larger than {MAX_PUBLIC_KEY_DOC_BYTES} bytes")));
    }
    let doc: Value = serde_json::from_slice(&body).map_err(|e| not_json(&url, e))?;
    let rotations = parse_rotations(&doc).context(&url)?;
    let trusted: Vec<[u8; 32]> = keys.keys.iter().map(|k| k.public_key).collect();
    let learned = trust::follow_rotations(&trusted, &rotations, target)?;
    let learned: Vec<TrustedKey> = learned.into_iter().map(|pk| TrustedKey { public_key: pk, key_id: trust::key_id_hex(&pk) }).collect();
    for k in &learned {
        match &keys.pinned_for {
            Some(origin) => {
                let known = KnownKeys::open()?;
                known.pin(origin, k)?;
                eprintln!("edgepatch: {origin} rotated its signing key to {}: the rotation is signed by a trusted key; pinned it in {}", k.key_id, known.path.display());
            }
            None => eprintln!(
                "edgepatch: the server rotated its signing key to {}: the rotation is signed by a trusted key; accepted for this run (give it with --public-key from now on)",
                k.key_id
            ),
        }
    }
    keys.keys.extend(learned);
    keys.source = format!("{}, and keys learned from signed rotations", keys.source);
    Ok(())
}

/// The `rotations` of a `v1/public-key` document (none when it has no such field), read by
/// the format's rules (edgepatch_core::key_rotations).
pub fn parse_rotations(doc: &Value) -> Result<Vec<trust::Rotation>, CliError> {
    let Some(list) = doc.get("rotations") else { return Ok(Vec::new()) };
    let list: Vec<KeyRotation> = serde_json::from_value(list.clone()).map_err(|e| CliError::bad_response(format!("rotations: {e}")))?;
    Ok(key_rotations::parse_rotations(&list)?)
}

/// The accepted keys: given, else pinned for this server, else (with `trust_on_first_use`
/// only) the server's current key, pinned now. With none of these, refused before anything
/// is fetched.
pub fn resolve_keys(server: &Server, given: Option<KeySet>, trust_on_first_use: bool) -> Result<KeySet, CliError> {
    if let Some(k) = given {
        return Ok(k);
    }
    let known = KnownKeys::open()?;
    let origin = server.origin();
    let pinned = known.pinned(&origin)?;
    if !pinned.is_empty() {
        return Ok(KeySet { keys: pinned, source: format!("pinned for {origin} in {}", known.path.display()), pinned_for: Some(origin) });
    }
    if !trust_on_first_use {
        return Err(CliError::refused(
            Refusal::UntrustedKey,
            format!(
                "no signing key for {origin}: pass the server's public key with --public-key KEY (or EDGEPATCH_PUBLIC_KEY), \
             or --trust-on-first-use to pin the key it presents now (check that key out of band); nothing was fetched"
            ),
        ));
    }
    let url = server.url("v1/public-key")?;
    let v: Value = server.get_immutable(&url)?.into_json().map_err(|e| not_json(&url, e))?;
    let key = trusted_keys::parse_public_key(v["publicKey"].as_str().ok_or_else(|| CliError::bad_response("v1/public-key has no publicKey"))?)
        .map_err(|e| CliError::bad_response(e.to_string()))?;
    known.pin(&origin, &key)?;
    eprintln!(
        "edgepatch: first use of {origin} (--trust-on-first-use): pinned its signing key {} in {} (check it out of band; another key later is accepted only through a rotation signed by this one)",
        key.key_id,
        known.path.display()
    );
    Ok(KeySet { keys: vec![key], source: format!("pinned on first use for {origin} in {}", known.path.display()), pinned_for: Some(origin) })
}

/// The build `channel` of `game` points at now, from its signed document, by the channel
/// rules (edgepatch_core::channel::accept_channel): the signature under an accepted key, the
/// names, not expired, not older than the newest position followed.
pub fn channel_head(server: &Server, keys: &mut KeySet, game: &str, channel: &str) -> Result<ChannelHead, CliError> {
    name_ok("game", game)?;
    name_ok("channel", channel)?;
    let url = server.url(&format!("v1/games/{game}/channels/{channel}"))?;
    let what = format!("channel {game}/{channel}");
    let doc: ChannelDocument = server.get_document(&url, &what)?;
    let key_id = doc.check(game, channel).context(&what)?.signed.key_id_hex();
    let key = signing_key(server, keys, key_id.as_deref(), &what)?;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let seen = ChannelState::open()?.last(&server.origin(), game, channel)?;
    let seen = seen.as_ref().map(|(sequence, build)| SeenHead { sequence: *sequence, build });
    let head = channel::accept_channel(&doc, game, channel, Some(&[key.public_key]), seen, now).context(&what)?;
    let sequence = head.sequence.ok_or_else(|| CliError::bad_response(format!("{what}: the document has no sequence")))?;
    Ok(ChannelHead { build: head.build, sequence })
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

/// An update's manifest, checked against the statement the accepted key signed, and where
/// the patch it vouches for is.
pub struct VerifiedUpdate {
    pub manifest: Vec<u8>,
    pub patch_url: url::Url,
    pub patch_size: u64,
    pub patch_blake3: [u8; 32],
    /// The key that verified the statement.
    pub key_id: String,
}

/// The signed update `from` -> `to` of `game`: the descriptor's update statement verified
/// under an accepted key, then the manifest it vouches for (size, BLAKE3, kind, builds,
/// patch size). Nothing of the patch is fetched.
pub fn verified_update(server: &Server, keys: &mut KeySet, game: &str, from: &str, to: &str) -> Result<VerifiedUpdate, CliError> {
    name_ok("game", game)?;
    name_ok("from build", from)?;
    name_ok("to build", to)?;
    let mut descriptor_url = server.url(&format!("v1/games/{game}/updates/{from}/{to}"))?;
    // What this client applies (docs/FORMAT.md §5): a server that negotiates answers with a
    // patch that needs no more; a static site ignores the query.
    descriptor_url.query_pairs_mut().append_pair("reader", &edgepatch_core::reader_capabilities().to_hex());
    let desc: UpdateDescriptor = server.get_document(&descriptor_url, "update descriptor")?;
    let d = desc.check(game, from, to).context("update descriptor")?;
    // Before anything else is fetched: a patch made for newer readers than this edgepatch.
    d.check_reader(edgepatch_core::reader_capabilities())?;
    let raw = |u: &str, field: &str| descriptor_url.join(u).map_err(|e| CliError::bad_response(format!("{field}: {e}")));
    let (manifest_url, patch_url) = (raw(&desc.manifest_url, "manifestUrl")?, raw(&desc.patch_url, "patchUrl")?);
    let (manifest_size, manifest_blake3, patch_size) = (d.manifest_size, d.manifest_blake3, d.patch_size);

    // The update statement, rebuilt from what was asked for: game, from and to are signed.
    let what = format!("update {game} {from} -> {to}");
    let key = signing_key(server, keys, d.signed.key_id_hex().as_deref(), &what)?;
    d.verify(&[key.public_key]).context(&what).reword(|e| format!("{e} (not signed for this game and these builds, or not by this key)"))?;

    // Manifest: the signed size and BLAKE3, then what it says about the patch.
    if manifest_size > MAX_MANIFEST_BYTES {
        return Err(CliError::bad_response(format!("manifest of {manifest_size} bytes is larger than this client accepts ({MAX_MANIFEST_BYTES})")));
    }
    let resp = server.get_immutable(&manifest_url)?;
    let mut manifest = Vec::with_capacity(manifest_size as usize);
    resp.into_reader().take(manifest_size + 1).read_to_end(&mut manifest).map_err(|e| read_failed(&manifest_url, e))?;
    if manifest.len() as u64 != manifest_size {
        return Err(CliError::refused(Refusal::Unvouched, format!("manifest is {} bytes, the signed statement says {manifest_size}", manifest.len())));
    }
    if edgepatch_core::blake3::hash(&manifest).as_bytes() != &manifest_blake3 {
        return Err(CliError::refused(Refusal::Unvouched, "manifest BLAKE3 differs from the signed statement's"));
    }
    let view = ManifestView::open(&manifest).context("manifest")?;
    view.verify_checksum().context("manifest")?;
    if view.kind() != ManifestKind::Patch {
        return Err(CliError::bad_response("manifest is not a patch manifest"));
    }
    let from_ok = view.from_build() == Some(from) || (from == "_" && matches!(view.from_build(), None | Some("_")));
    if view.to_build() != to || !from_ok {
        return Err(CliError::refused(Refusal::Unvouched, format!("manifest is for {:?} -> {}, not {from} -> {to}", view.from_build(), view.to_build())));
    }
    if view.patch_size() != patch_size {
        return Err(CliError::refused(Refusal::Unvouched, format!("manifest says the patch is {} bytes, the descriptor {patch_size}", view.patch_size())));
    }
    let patch_blake3 = view.patch_blake3();
    Ok(VerifiedUpdate { manifest, patch_url, patch_size, patch_blake3, key_id: key.key_id })
}

/// Applies the patch of `v` to OLD into OUT: streamed from the response into the applier,
/// every write checked against the manifest; OUT appears only if the patch's BLAKE3 is the
/// signed one too.
pub fn apply_verified(
    v: &VerifiedUpdate,
    server: &Server,
    old: &Path,
    out: &Path,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<edgepatch_core::ApplySummary, CliError> {
    let (patch_url, patch_size) = (&v.patch_url, v.patch_size);
    let mut binding = ManifestBinding::new(&v.manifest).context("manifest")?;
    let resp = server.get_immutable(patch_url)?;
    let mut reader = HashingReader { inner: resp.into_reader().take(patch_size + 1), hasher: edgepatch_core::blake3::Hasher::new(), count: 0 };
    let mut old_files = OldBuildFiles::new(old);
    let mut staged = StagedOutput::new(out, old_files.root(), old_files.descriptors_needed()).map_err(|e| CliError::from(e).at(out))?;
    let apply = edgepatch_core::apply_patch(&mut reader, &mut old_files, &mut BoundSink { binding: &mut binding, inner: &mut staged }, &mut |p| {
        progress(p.patch_bytes_read, patch_size)
    })
    .map_err(|e| match e.kind() {
        // The applier's reads of the patch are reads of the response: the network failed.
        edgepatch_core::error::ErrorKind::Io => CliError::Network { message: format!("applying {patch_url}: {e}"), url: Some(patch_url.to_string()) },
        _ => crate::platform::apply_error(e, old).context(format!("applying {patch_url}")),
    })?;
    binding.finish(false, &mut staged).map_err(|e| CliError::refused(Refusal::Unvouched, format!("applying {patch_url}: {e}")))?;
    // The applier stops at the checksum; anything after it would be a different patch.
    let mut rest = [0u8; 1];
    if reader.read(&mut rest).map_err(|e| read_failed(patch_url, e))? != 0 || reader.count != patch_size {
        return Err(CliError::refused(Refusal::Unvouched, format!("patch is not the {patch_size} bytes the manifest names")));
    }
    if reader.hasher.finalize().as_bytes() != &v.patch_blake3 {
        return Err(CliError::refused(Refusal::Unvouched, "patch BLAKE3 differs from the signed manifest's"));
    }
    staged.commit().map_err(|e| CliError::io(out, e))?;
    Ok(apply)
}

/// Turns OLD into OUT = build `to`: the signed channel (if asked), the descriptor's signed
/// update statement, the manifest it vouches for, then the patch streamed into the
/// applier with every write bound to the manifest; OUT appears only when all of it verified.
pub fn update(server: &Server, old: &Path, out: &Path, o: UpdateOptions, progress: &mut dyn FnMut(u64, u64)) -> Result<UpdateSummary, CliError> {
    name_ok("game", o.game)?;
    name_ok("from build", o.from)?;
    let mut keys = resolve_keys(server, o.keys, o.trust_on_first_use)?;
    // A channel is resolved once: the update is to that build even if the channel moves meanwhile.
    let (to, channel) = match o.to {
        UpdateTarget::Build(b) => {
            name_ok("to build", b)?;
            (b.to_string(), None)
        }
        UpdateTarget::Channel(c) => {
            let head = channel_head(server, &mut keys, o.game, c)?;
            (head.build.clone(), Some((c, head)))
        }
    };
    let v = verified_update(server, &mut keys, o.game, o.from, &to)?;
    let apply = apply_verified(&v, server, old, out, progress)?;
    // Only now is the channel's position remembered: a refused update leaves it as it was.
    let channel_sequence = match channel {
        Some((c, head)) => {
            ChannelState::open()?.record(&server.origin(), o.game, c, head.sequence, &head.build)?;
            Some(head.sequence)
        }
        None => None,
    };
    io::stderr().flush().ok();
    Ok(UpdateSummary {
        apply,
        to,
        manifest_bytes: v.manifest.len() as u64,
        patch_bytes: v.patch_size,
        key_id: v.key_id,
        key_source: keys.source.clone(),
        channel_sequence,
    })
}

/// Largest manifest `update` fetches (about 100 bytes an entry: a million-entry build fits).
pub const MAX_MANIFEST_BYTES: u64 = 256 << 20;
