//! `edgepatch site`: a static update site (docs/UPDATE_PROTOCOL.md) that any CDN or
//! bucket can serve, made on the studio's machine, no server code (docs/STATIC_SITE.md).
//!
//! ```text
//! SITE/public/                     upload this directory as it is
//!   v1/public-key                  the signing key (JSON)
//!   v1/games/G/channels/C          signed channel documents (short-lived: re-sign with `site refresh`)
//!   v1/games/G/updates/FROM/TO     signed update descriptors
//!   v1/games/G/manifests/<blake3>  patch manifests (immutable)
//!   v1/games/G/patches/<blake3>    patches (immutable)
//! SITE/private/                    never upload: what later `site add`s diff against
//!   state.json                     builds in publish order, channels with their sequence
//!   builds/G/B/                    a copy of each build
//! ```
//!
//! The site's signing key is the one its `v1/public-key` names: `site add`, `site channel`
//! and `site refresh` refuse any other key, and `site rotate-key` moves the site to a new key
//! with a rotation signed by the old one (docs/UPDATE_PROTOCOL.md, "v1/public-key").
//!
//! `site add` publishes a build: patches from nothing (`_`, an install) and from
//! each of the game's last `--history` builds, so clients never follow a chain
//! of patches; with `--channel` it moves the channel (sequence + 1). Pairs the site
//! already publishes, signed by its key and checked against DIR, are kept (`published_pair`, `kept`).

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};

use base64::Engine;
use ed25519_dalek::{Signer, SigningKey};
use edgepatch_core::channel::ChannelDocument;
use edgepatch_core::descriptor::UpdateDescriptor;
use edgepatch_core::inspect::{inspect_patch, patch_manifest};
use edgepatch_core::key_rotations::KeyRotation;
use edgepatch_core::manifest::{EntryKind, ManifestKind, ManifestView};
use edgepatch_core::trust;
use edgepatch_core::{diff_builds, Build, DiffOptions, DiffStats, EntryContent};
use serde_json::{json, Value};

use crate::build_files::read_build;
use crate::cli_error::{CliError, IoResultExt, ResultExt};
use crate::progress::Progress;

pub struct SiteKey {
    signing: SigningKey,
    key_id: trust::KeyId,
}

impl SiteKey {
    /// Reads a key file written by `edgepatch keygen` (base64 of the 32-byte seed).
    pub fn load(path: &Path) -> Result<SiteKey, CliError> {
        let text = fs::read_to_string(path).at_path(path)?;
        let seed = base64::engine::general_purpose::STANDARD
            .decode(text.trim())
            .map_err(|_| CliError::bad_input(format!("{}: not a key file from `edgepatch keygen` (base64)", path.display())).at(path))?;
        let seed: [u8; 32] = seed
            .as_slice()
            .try_into()
            .map_err(|_| CliError::bad_input(format!("{}: holds {} bytes, not a 32-byte ed25519 seed", path.display(), seed.len())).at(path))?;
        let signing = SigningKey::from_bytes(&seed);
        let key_id = trust::key_id(&signing.verifying_key().to_bytes());
        Ok(SiteKey { signing, key_id })
    }

    fn public_key(&self) -> [u8; 32] {
        self.signing.verifying_key().to_bytes()
    }

    fn sign(&self, statement: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(self.signing.sign(statement).to_bytes())
    }

    pub fn key_id_hex(&self) -> String {
        trust::hex(&self.key_id)
    }
}

pub struct Site {
    root: PathBuf,
    state: Value,
    /// The published `v1/public-key` document, if any.
    keys: Option<Value>,
}

/// The rotation from `old` to `new` as a `v1/public-key` document lists it: signed by `old`.
pub fn rotation_json(old: &SiteKey, new: &SiteKey) -> Result<Value, CliError> {
    let statement = trust::rotation_statement(&old.key_id, &new.public_key())?;
    let rotation = KeyRotation {
        from: old.key_id_hex(),
        key_id: new.key_id_hex(),
        public_key: base64::engine::general_purpose::STANDARD.encode(new.public_key()),
        signature: old.sign(&statement),
    };
    Ok(serde_json::to_value(rotation).expect("JSON"))
}

/// What `rotate_key` did.
pub struct Rotated {
    pub descriptors: usize,
    pub channels: usize,
    /// The rotation it published.
    pub rotation: Value,
}

fn io_err(path: &Path, e: std::io::Error) -> CliError {
    CliError::io(path, e)
}

/// Writes through a temporary file and a rename: a reader (or an upload) never sees half a
/// document. A file that already holds `bytes` is left as it is (a sync by modification time
/// then uploads nothing).
fn write_file(path: &Path, bytes: &[u8]) -> Result<(), CliError> {
    if fs::metadata(path).is_ok_and(|m| m.len() == bytes.len() as u64) && fs::read(path).is_ok_and(|b| b == bytes) {
        return Ok(());
    }
    let dir = path.parent().ok_or_else(|| CliError::other("no parent directory"))?;
    fs::create_dir_all(dir).map_err(|e| io_err(dir, e))?;
    let tmp = dir.join(format!(".{}.tmp", path.file_name().and_then(|n| n.to_str()).unwrap_or("x")));
    fs::write(&tmp, bytes).map_err(|e| io_err(&tmp, e))?;
    fs::rename(&tmp, path).map_err(|e| io_err(path, e))
}

/// The bytes at `path`, or None when there is no such file.
fn read_if_there(path: &Path) -> Result<Option<Vec<u8>>, CliError> {
    match fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_err(path, e)),
    }
}

fn now_secs() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// Copies a build directory (files with their executable bit, directories, links as links).
fn copy_tree(from: &Path, to: &Path) -> Result<(), CliError> {
    fs::create_dir_all(to).map_err(|e| io_err(to, e))?;
    let mut names: Vec<_> = fs::read_dir(from).map_err(|e| io_err(from, e))?.collect::<Result<_, _>>().map_err(|e| io_err(from, e))?;
    names.sort_by_key(|e| e.file_name());
    for e in names {
        let (src, dst) = (e.path(), to.join(e.file_name()));
        let ft = fs::symlink_metadata(&src).map_err(|e| io_err(&src, e))?.file_type();
        if ft.is_symlink() {
            let target = fs::read_link(&src).map_err(|e| io_err(&src, e))?;
            #[cfg(unix)]
            std::os::unix::fs::symlink(&target, &dst).map_err(|e| io_err(&dst, e))?;
            #[cfg(not(unix))]
            return Err(
                CliError::bad_input(format!("{}: a symlink (to {}): builds with links are published from Unix only", src.display(), target.display())).at(&src)
            );
        } else if ft.is_dir() {
            copy_tree(&src, &dst)?;
        } else if ft.is_file() {
            fs::copy(&src, &dst).map_err(|e| io_err(&src, e))?;
        } else {
            return Err(CliError::bad_input(format!("{}: not a file, directory or symlink", src.display())).at(&src));
        }
    }
    Ok(())
}

/// The build in `dir` as the site stores it: with `decoded`, each file its `.gz`/`.br` name
/// says is compressed and that decodes whole (edgepatch_transform_compressed::decoded) is its
/// decoded content; returns the paths stored decoded.
fn read_site_build(dir: &Path, decoded: bool) -> Result<(Build, HashSet<String>), CliError> {
    use edgepatch_transform_compressed::decoded::{decode_for_storage, MAX_DECODED_BYTES};
    let mut build = read_build(dir).map_err(|e| CliError::io(dir, e))?;
    let mut paths = HashSet::new();
    if decoded {
        for e in &mut build.entries {
            if let EntryContent::File { data, .. } = &mut e.content {
                if let Ok(content) = decode_for_storage(&e.path, data, MAX_DECODED_BYTES) {
                    *data = content;
                    paths.insert(e.path.clone());
                }
            }
        }
    }
    Ok((build, paths))
}

/// The patch from `old` to `new`, its manifest, the diff's counts and what a reader must
/// understand to apply the patch (hex, docs/FORMAT.md §5).
fn make_pair(
    old: &Build,
    new: &NewBuild,
    from: &str,
    to: &str,
    o: &AddOptions,
    progress: &Progress,
) -> Result<(Vec<u8>, Vec<u8>, DiffStats, String), CliError> {
    let (build, hashes) = (&new.build, &new.hashes);
    progress.start_phase(&format!("site add {from} -> {to}"), build.total_file_bytes());
    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let opts = DiffOptions { level: o.level, threads, trace: crate::timing::from_env(), reader: o.reader, ..DiffOptions::default() };
    let (patch, stats) = diff_builds(old, build, &opts, &|done, total| {
        progress.set_length(total);
        progress.set_position(done)
    })
    .context(format!("diff {from} -> {to}"))?;
    let info = inspect_patch(patch.as_slice())?;
    let tree = info.resolve(edgepatch_core::diff::build_listing(old))?;
    let hash_of = |i: usize| hashes.get(tree.entries[i].path.as_str()).copied().unwrap_or(*blake3::hash(b"").as_bytes());
    let mut manifest = patch_manifest(&tree, &info.layout, hash_of, *blake3::hash(&patch).as_bytes(), from, to)?;
    for e in &mut manifest.entries {
        e.decoded = new.decoded.contains(&e.path);
    }
    Ok((patch, manifest.encode()?, stats, info.required_capabilities().to_hex()))
}

/// The build `add` publishes, with its files' BLAKE3s (by path), hashed once for every pair.
struct NewBuild {
    build: Build,
    hashes: HashMap<String, [u8; 32]>,
    /// The paths of the files stored decoded.
    decoded: HashSet<String>,
}

impl NewBuild {
    fn read(dir: &Path, decoded: bool) -> Result<NewBuild, CliError> {
        let (build, decoded) = read_site_build(dir, decoded)?;
        let hashes = build
            .entries
            .iter()
            .filter_map(|e| if let EntryContent::File { data, .. } = &e.content { Some((e.path.clone(), *blake3::hash(data).as_bytes())) } else { None })
            .collect();
        Ok(NewBuild { build, hashes, decoded })
    }

    /// Every entry as a manifest lists it (path, kind, executable bit, size, BLAKE3, link
    /// target, stored decoded), in path order.
    fn listing(&self) -> Vec<ListedContent> {
        let mut out: Vec<ListedContent> = self
            .build
            .entries
            .iter()
            .map(|e| match &e.content {
                EntryContent::File { executable, data } => {
                    (e.path.clone(), EntryKind::File, *executable, data.len() as u64, self.hashes[&e.path], None, self.decoded.contains(&e.path))
                }
                EntryContent::Symlink { target } => (e.path.clone(), EntryKind::Symlink, false, 0, [0; 32], Some(target.clone()), false),
                EntryContent::Directory => (e.path.clone(), EntryKind::Directory, false, 0, [0; 32], None, false),
            })
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }
}

/// An entry as `NewBuild::listing` and `manifest_listing` compare them.
type ListedContent = (String, EntryKind, bool, u64, [u8; 32], Option<String>, bool);

/// The entries a patch manifest gives the new build, as [`NewBuild::listing`] lists them.
fn manifest_listing(view: &ManifestView) -> Result<Vec<ListedContent>, CliError> {
    let mut out = Vec::with_capacity(view.len());
    for e in view.entries() {
        let e = e?;
        out.push(match e.kind {
            EntryKind::File => (e.path, e.kind, e.executable, e.size, e.blake3, None, e.decoded),
            _ => (e.path, e.kind, false, 0, [0; 32], e.symlink_target, false),
        });
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// A published pair `add` keeps: one whose patch needs nothing outside `o.reader` (a pair
/// made for more capable readers is made again).
fn kept((pair, needs): (PublishedPair, Option<edgepatch_core::Capabilities>), o: &AddOptions) -> Option<PublishedPair> {
    needs.is_some_and(|n| n.is_subset(o.reader)).then_some(pair)
}

pub struct AddOptions<'a> {
    pub game: &'a str,
    pub build: &'a str,
    pub channel: Option<&'a str>,
    pub history: usize,
    pub level: i32,
    /// What the site's clients understand: the patches use nothing outside it.
    pub reader: edgepatch_core::Capabilities,
    /// The game's `.gz`/`.br` files are stored decoded (a game's first build sets it).
    pub store_decoded: bool,
    pub ttl_secs: u64,
}

/// One pair published by `add`: what a listing of the site (or a test) needs without
/// re-reading the patch.
pub struct PublishedPair {
    pub from: String,
    pub patch_bytes: usize,
    pub manifest_bytes: usize,
    /// Site-relative paths of the descriptor, manifest and patch under SITE/public.
    pub descriptor_path: String,
    pub manifest_path: String,
    pub patch_path: String,
    /// Segments of the patch's delta stream (resumable units) and bytes of the new build.
    pub segments: u64,
    pub new_bytes: u64,
    /// Already on the site, signed and checked, and kept rather than made again.
    pub reused: bool,
}

impl Site {
    pub fn open(root: &Path) -> Result<Site, CliError> {
        let path = root.join("private/state.json");
        let state = match fs::read(&path) {
            Ok(b) => serde_json::from_slice(&b).map_err(|e| CliError::bad_input(format!("{}: {e}", path.display())).at(&path))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => json!({ "version": 1, "games": {} }),
            Err(e) => return Err(io_err(&path, e)),
        };
        let key_path = root.join("public/v1/public-key");
        let keys = match fs::read(&key_path) {
            Ok(b) => Some(serde_json::from_slice::<Value>(&b).map_err(|e| CliError::bad_input(format!("{}: {e}", key_path.display())).at(&key_path))?),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(io_err(&key_path, e)),
        };
        Ok(Site { root: root.to_path_buf(), state, keys })
    }

    /// The key id the site publishes as its current key, if it published one.
    fn published_key_id(&self) -> Option<&str> {
        self.keys.as_ref().and_then(|d| d["keyId"].as_str())
    }

    /// Refuses a signing key that is not the site's published key: clients that pinned the
    /// published key would refuse everything it signs.
    fn check_key(&self, key: &SiteKey) -> Result<(), CliError> {
        match self.published_key_id() {
            Some(published) if published != key.key_id_hex() => Err(CliError::bad_input(format!(
                "signing key {} is not this site's key {} (its v1/public-key); clients that trust {published} would refuse what it signs. \
                 To move the site to the new key, run `edgepatch site rotate-key --site {} --key <the key of {published}> --new-key <new key file>`",
                key.key_id_hex(),
                published,
                self.root.display()
            ))),
            _ => Ok(()),
        }
    }

    fn save(&self) -> Result<(), CliError> {
        write_file(&self.root.join("private/state.json"), serde_json::to_string_pretty(&self.state).expect("JSON").as_bytes())
    }

    fn public(&self, rel: &str) -> PathBuf {
        self.root.join("public").join(rel)
    }

    fn game(&mut self, game: &str) -> &mut Value {
        let games = self.state["games"].as_object_mut().expect("games is an object");
        games.entry(game.to_string()).or_insert_with(|| json!({ "builds": [], "channels": {} }))
    }

    fn builds(&self, game: &str) -> Vec<String> {
        self.state["games"][game]["builds"].as_array().map(|a| a.iter().filter_map(|b| b.as_str().map(str::to_string)).collect()).unwrap_or_default()
    }

    /// Writes `v1/public-key` with `key` as the current key, keeping the keys and rotations
    /// published before, and `rotation` appended to them.
    fn write_public_key(&mut self, key: &SiteKey, rotation: Option<Value>) -> Result<(), CliError> {
        let pk = base64::engine::general_purpose::STANDARD.encode(key.public_key());
        let kid = key.key_id_hex();
        let old = self.keys.take().unwrap_or(Value::Null);
        let mut keys: Vec<Value> = old["keys"].as_array().cloned().unwrap_or_default();
        keys.retain(|k| k["keyId"].as_str() != Some(&kid));
        keys.insert(0, json!({ "keyId": kid, "publicKey": pk }));
        let mut rotations: Vec<Value> = old["rotations"].as_array().cloned().unwrap_or_default();
        rotations.extend(rotation);
        let mut doc = json!({ "algorithm": "ed25519", "publicKey": pk, "keyId": kid, "keys": keys });
        if !rotations.is_empty() {
            doc["rotations"] = Value::Array(rotations);
        }
        write_file(&self.public("v1/public-key"), (doc.to_string() + "\n").as_bytes())?;
        self.keys = Some(doc);
        Ok(())
    }

    /// Moves the site from `old` (its published key) to `new`: v1/public-key gets the
    /// rotation signed by `old` and `new` as its current key (`old` stays listed), then every
    /// update descriptor, checked under the key that signed it, and every channel document
    /// (same position, fresh expiry) is signed again with `new`.
    pub fn rotate_key(&mut self, old: &SiteKey, new: &SiteKey, ttl_secs: u64) -> Result<Rotated, CliError> {
        match self.published_key_id() {
            None => return Err(CliError::bad_input("the site has no v1/public-key yet: publish with `site add` and the new key instead")),
            Some(_) => self.check_key(old)?,
        }
        let rotations = self.keys.as_ref().and_then(|d| d["rotations"].as_array()).map_or(0, Vec::len);
        if rotations >= trust::MAX_ROTATIONS {
            return Err(CliError::bad_input(format!("the site lists {rotations} rotations already: clients follow at most {}", trust::MAX_ROTATIONS)));
        }
        let rotation = rotation_json(old, new)?;
        let descriptors = self.descriptor_paths()?;
        // Every descriptor is checked before anything is written: bytes this site did not sign
        // are never signed with the new key.
        let mut resigned = Vec::with_capacity(descriptors.len());
        for path in &descriptors {
            resigned.push((path, self.resign_descriptor(path, new)?));
        }
        self.write_public_key(new, Some(rotation.clone()))?;
        for (path, doc) in &resigned {
            write_file(path, (serde_json::to_string_pretty(doc).expect("JSON") + "\n").as_bytes())?;
        }
        let channels = self.write_channels(new, ttl_secs)?;
        Ok(Rotated { descriptors: descriptors.len(), channels, rotation })
    }

    /// Every update descriptor under public/v1/games/*/updates/*/*.
    fn descriptor_paths(&self) -> Result<Vec<PathBuf>, CliError> {
        let mut out = Vec::new();
        let list = |dir: &Path| -> Result<Vec<PathBuf>, CliError> {
            match fs::read_dir(dir) {
                Ok(rd) => {
                    let mut v = rd.map(|e| e.map(|e| e.path())).collect::<Result<Vec<_>, _>>().map_err(|e| io_err(dir, e))?;
                    v.sort();
                    Ok(v)
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
                Err(e) => Err(io_err(dir, e)),
            }
        };
        for game in list(&self.public("v1/games"))? {
            for from in list(&game.join("updates"))? {
                for to in list(&from)? {
                    if to.is_file() {
                        out.push(to);
                    }
                }
            }
        }
        Ok(out)
    }

    /// The descriptor at `path` signed with `key`, once its signature verified under the
    /// listed key that made it.
    fn resign_descriptor(&self, path: &Path, key: &SiteKey) -> Result<UpdateDescriptor, CliError> {
        let bad = |why: String| CliError::bad_input(format!("{}: {why}; not re-signing it", path.display())).at(path);
        let mut d: UpdateDescriptor =
            serde_json::from_slice(&fs::read(path).map_err(|e| io_err(path, e))?).map_err(|e| bad(format!("not an update descriptor: {e}")))?;
        let checked = d.check(&d.game, &d.from, &d.to).map_err(|e| bad(e.to_string()))?;
        let kid = checked.signed.key_id_hex().ok_or_else(|| bad("no keyId".into()))?;
        let listed = self.keys.as_ref().and_then(|doc| doc["keys"].as_array()).and_then(|ks| ks.iter().find(|k| k["keyId"].as_str() == Some(&kid)));
        let signer = listed.and_then(|k| k["publicKey"].as_str()).ok_or_else(|| bad(format!("signed by key {kid}, which v1/public-key does not list")))?;
        let signer = crate::trusted_keys::parse_public_key(signer).map_err(|e| bad(e.to_string()))?;
        checked.verify(&[signer.public_key]).map_err(|e| CliError::from(e).reword(|m| format!("{}: {m}; not re-signing it", path.display())).at(path))?;
        let statement = checked.statement(&key.key_id).map_err(|e| bad(e.to_string()))?;
        d.key_id = Some(key.key_id_hex());
        d.signature = Some(key.sign(&statement));
        Ok(d)
    }

    fn publish_pair(&self, key: &SiteKey, game: &str, from: &str, to: &str, pair: (Vec<u8>, Vec<u8>, DiffStats, String)) -> Result<PublishedPair, CliError> {
        let (patch, manifest, stats, reader_needs) = pair;
        let (mh, ph) = (*blake3::hash(&manifest).as_bytes(), blake3::hash(&patch).to_hex().to_string());
        let mhex = trust::hex(&mh);
        let published = PublishedPair {
            from: from.to_string(),
            patch_bytes: patch.len(),
            manifest_bytes: manifest.len(),
            descriptor_path: format!("v1/games/{game}/updates/{from}/{to}"),
            manifest_path: format!("v1/games/{game}/manifests/{mhex}"),
            patch_path: format!("v1/games/{game}/patches/{ph}"),
            segments: stats.segments,
            new_bytes: stats.new_bytes,
            reused: false,
        };
        write_file(&self.public(&published.manifest_path), &manifest)?;
        write_file(&self.public(&published.patch_path), &patch)?;
        let statement = trust::update_statement(&key.key_id, game, from, to, manifest.len() as u64, &mh)?;
        let descriptor = UpdateDescriptor {
            game: game.to_string(),
            from: from.to_string(),
            to: to.to_string(),
            manifest_url: format!("../../manifests/{mhex}"),
            manifest_size: manifest.len() as u64,
            manifest_blake3: mhex,
            patch_url: format!("../../patches/{ph}"),
            patch_size: patch.len() as u64,
            patch_blake3: None,
            reader_needs: Some(reader_needs),
            key_id: Some(key.key_id_hex()),
            signature: Some(key.sign(&statement)),
        };
        write_file(&self.public(&published.descriptor_path), (serde_json::to_string_pretty(&descriptor).expect("JSON") + "\n").as_bytes())?;
        Ok(published)
    }

    fn write_channel(&self, key: &SiteKey, game: &str, channel: &str, build: &str, sequence: u64, ttl_secs: u64) -> Result<(), CliError> {
        let expires = now_secs() + ttl_secs;
        let statement = trust::channel_statement(&key.key_id, game, channel, build, sequence, expires)?;
        let doc = ChannelDocument {
            game: game.to_string(),
            channel: channel.to_string(),
            build: build.to_string(),
            sequence: Some(sequence),
            expires: Some(expires),
            key_id: Some(key.key_id_hex()),
            signature: Some(key.sign(&statement)),
        };
        let text = serde_json::to_string(&doc).expect("JSON") + "\n";
        write_file(&self.public(&format!("v1/games/{game}/channels/{channel}")), text.as_bytes())
    }

    /// Publishes build DIR as `o.build` of `o.game`: the pairs from nothing and from the
    /// `o.history` builds published before it. A pair already on the site, signed by this
    /// site's key, whose manifest lists exactly DIR's entries and whose patch is the one the
    /// manifest names, is kept as it is (an add that was interrupted, or a larger `--history`,
    /// makes only the missing pairs). Adding a build already published is allowed only with
    /// the same content (checked against its signed install manifest) and then makes only
    /// what is missing: nothing, when nothing is. Returns the pairs, made or kept.
    pub fn add(&mut self, key: &SiteKey, dir: &Path, o: &AddOptions, progress: &Progress) -> Result<Vec<PublishedPair>, CliError> {
        self.check_key(key)?;
        for (what, name) in [("game", o.game), ("build", o.build)].into_iter().chain(o.channel.map(|c| ("channel", c))) {
            trust::check_name(what, name)?;
        }
        if o.build == "_" {
            return Err(CliError::bad_input("build name `_` is reserved for the empty build"));
        }
        let builds = self.builds(o.game);
        let decoded = self.state["games"][o.game]["storeDecoded"].as_bool() == Some(true);
        if o.store_decoded && !decoded && !builds.is_empty() {
            return Err(CliError::bad_input(format!(
                "game {} stores its builds as shipped: --store-decoded is set on a game's first build (clients hold its earlier builds compressed)",
                o.game
            )));
        }
        let decoded = decoded || o.store_decoded;
        let new = NewBuild::read(dir, decoded)?;
        let listing = new.listing();
        let published = builds.iter().position(|b| b == o.build);
        let earlier = match published {
            Some(at) => &builds[..at],
            None => &builds[..],
        };
        let install = self.published_pair(key, o, "_", &listing)?;
        if published.is_some() && install.is_none() {
            return Err(CliError::bad_input(format!(
                "build {}/{} is already on the site with other content (or its signed install manifest does not check); builds are immutable (publish under a new name)",
                o.game, o.build
            )));
        }
        if published.is_none() {
            let store = self.root.join("private/builds").join(o.game).join(o.build);
            if store.exists() {
                fs::remove_dir_all(&store).map_err(|e| io_err(&store, e))?;
            }
            copy_tree(dir, &store)?;
        }
        self.write_public_key(key, None)?;
        let mut pairs = Vec::new();
        pairs.push(match install.and_then(|p| kept(p, o)) {
            Some(p) => p,
            None => self.publish_pair(key, o.game, "_", o.build, make_pair(&Build { entries: Vec::new() }, &new, "_", o.build, o, progress)?)?,
        });
        for from in earlier.iter().rev().take(o.history) {
            if let Some(p) = self.published_pair(key, o, from, &listing)?.and_then(|p| kept(p, o)) {
                pairs.push(p);
                continue;
            }
            let old_dir = self.root.join("private/builds").join(o.game).join(from);
            let (old, _) = read_site_build(&old_dir, decoded)?;
            pairs.push(self.publish_pair(key, o.game, from, o.build, make_pair(&old, &new, from, o.build, o, progress)?)?);
        }
        if published.is_none() {
            self.game(o.game)["builds"].as_array_mut().expect("builds is an array").push(json!(o.build));
        }
        if decoded {
            self.game(o.game)["storeDecoded"] = json!(true);
        }
        if let Some(c) = o.channel {
            if self.state["games"][o.game]["channels"][c]["build"].as_str() != Some(o.build) {
                self.move_channel(key, o.game, c, o.build, o.ttl_secs)?;
            }
        }
        self.save()?;
        Ok(pairs)
    }

    /// The pair `from` -> `o.build` as the site has it, with what its readers need, when it
    /// checks: its descriptor signed by `key` for this game and these builds; its manifest the
    /// signed one (size, BLAKE3, checksum), for these builds, listing exactly `listing`; its
    /// patch the size and BLAKE3 the manifest names. None when any of it is missing or
    /// differs: the pair is then made again ([`kept`] also asks for the readers).
    fn published_pair(
        &self,
        key: &SiteKey,
        o: &AddOptions,
        from: &str,
        listing: &[ListedContent],
    ) -> Result<Option<(PublishedPair, Option<edgepatch_core::Capabilities>)>, CliError> {
        let game_dir = format!("v1/games/{}", o.game);
        let descriptor_path = format!("{game_dir}/updates/{from}/{}", o.build);
        let Some(bytes) = read_if_there(&self.public(&descriptor_path))? else { return Ok(None) };
        let Ok(d) = serde_json::from_slice::<UpdateDescriptor>(&bytes) else { return Ok(None) };
        let Ok(checked) = d.check(o.game, from, o.build) else { return Ok(None) };
        if checked.verify(&[key.public_key()]).is_err() {
            return Ok(None);
        }
        let manifest_path = format!("{game_dir}/manifests/{}", trust::hex(&checked.manifest_blake3));
        let Some(manifest) = read_if_there(&self.public(&manifest_path))? else { return Ok(None) };
        if manifest.len() as u64 != checked.manifest_size || blake3::hash(&manifest).as_bytes() != &checked.manifest_blake3 {
            return Ok(None);
        }
        let Ok(view) = ManifestView::open(&manifest) else { return Ok(None) };
        let from_ok = view.from_build() == Some(from) || (from == "_" && matches!(view.from_build(), None | Some("_")));
        if view.verify_checksum().is_err() || view.kind() != ManifestKind::Patch || view.to_build() != o.build || !from_ok {
            return Ok(None);
        }
        if manifest_listing(&view).ok().as_deref() != Some(listing) {
            return Ok(None);
        }
        let patch_path = format!("{game_dir}/patches/{}", trust::hex(&view.patch_blake3()));
        let Some(patch) = read_if_there(&self.public(&patch_path))? else { return Ok(None) };
        if patch.len() as u64 != view.patch_size() || blake3::hash(&patch).as_bytes() != &view.patch_blake3() || d.patch_size != view.patch_size() {
            return Ok(None);
        }
        let pair = PublishedPair {
            from: from.to_string(),
            patch_bytes: patch.len(),
            manifest_bytes: manifest.len(),
            descriptor_path,
            manifest_path,
            patch_path,
            segments: view.segment_count() as u64,
            new_bytes: listing.iter().map(|e| if e.1 == EntryKind::File { e.3 } else { 0 }).sum(),
            reused: true,
        };
        Ok(Some((pair, checked.reader_needs)))
    }

    /// Points `channel` at `build` (an earlier build too: a rollback by the owner is a move
    /// forward in sequence). Returns the new sequence.
    pub fn move_channel(&mut self, key: &SiteKey, game: &str, channel: &str, build: &str, ttl_secs: u64) -> Result<u64, CliError> {
        self.check_key(key)?;
        trust::check_name("channel", channel)?;
        if !self.builds(game).iter().any(|b| b == build) {
            return Err(CliError::bad_input(format!("no build {game}/{build} on the site")));
        }
        let g = self.game(game);
        let sequence = g["channels"][channel]["sequence"].as_u64().unwrap_or(0) + 1;
        g["channels"][channel] = json!({ "build": build, "sequence": sequence });
        self.write_channel(key, game, channel, build, sequence, ttl_secs)?;
        self.save()?;
        Ok(sequence)
    }

    /// Re-signs every channel document with a fresh expiry (same sequence, same build):
    /// run at least once per TTL, or clients refuse the channel as frozen.
    pub fn refresh(&mut self, key: &SiteKey, ttl_secs: u64) -> Result<usize, CliError> {
        self.check_key(key)?;
        self.write_public_key(key, None)?;
        self.write_channels(key, ttl_secs)
    }

    /// Signs every channel document again with `key` (same position and build, fresh expiry).
    fn write_channels(&self, key: &SiteKey, ttl_secs: u64) -> Result<usize, CliError> {
        let mut n = 0;
        if let Some(games) = self.state["games"].as_object() {
            for (game, g) in games {
                for (channel, c) in g["channels"].as_object().into_iter().flatten() {
                    let (build, sequence) = (c["build"].as_str().unwrap_or_default(), c["sequence"].as_u64().unwrap_or(0));
                    self.write_channel(key, game, channel, build, sequence, ttl_secs)?;
                    n += 1;
                }
            }
        }
        Ok(n)
    }
}
