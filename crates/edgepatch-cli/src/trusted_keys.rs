//! Which signing keys `edgepatch update` accepts, and what it remembers between
//! runs (docs/UPDATE_PROTOCOL.md, "What a client checks"):
//!
//! - the keys: `--public-key` (repeatable), else `EDGEPATCH_PUBLIC_KEY` (comma
//!   separated), else those pinned for the server in `known_keys`. A server never
//!   seen has its current key pinned there only with `--trust-on-first-use` (like
//!   ssh's known_hosts); without any key `update` refuses. A key the server later
//!   signs with is accepted only through a key rotation signed by an accepted key
//!   (docs/UPDATE_PROTOCOL.md), and then pinned beside the old one;
//! - each channel's highest signed sequence, in `channels`, so an older channel
//!   document (a rollback) is refused.
//!
//! Both files live in the config directory: `EDGEPATCH_CONFIG_DIR`, else
//! `$XDG_CONFIG_HOME/edgepatch`, else `~/.config/edgepatch` (`%APPDATA%\edgepatch`
//! on Windows). Lines are space-separated; `#` starts a comment.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use base64::Engine;
use edgepatch_core::trust::key_id_hex;

use crate::cli_error::{CliError, IoResultExt};

/// One accepted key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrustedKey {
    pub public_key: [u8; 32],
    pub key_id: String,
}

/// The keys an update may be signed with, and where they came from (printed with the result).
#[derive(Clone, Debug)]
pub struct KeySet {
    pub keys: Vec<TrustedKey>,
    pub source: String,
    /// The server origin the keys are pinned for in `known_keys`: keys learned from a
    /// rotation are pinned there too. None: keys given for this run only.
    pub pinned_for: Option<String>,
}

impl KeySet {
    pub fn find(&self, id: &str) -> Option<&TrustedKey> {
        self.keys.iter().find(|k| k.key_id == id)
    }

    pub fn ids(&self) -> String {
        self.keys.iter().map(|k| k.key_id.as_str()).collect::<Vec<_>>().join(", ")
    }
}

pub fn parse_public_key(text: &str) -> Result<TrustedKey, CliError> {
    let bytes =
        base64::engine::general_purpose::STANDARD.decode(text.trim()).map_err(|e| CliError::bad_input(format!("public key {text:?} is not base64: {e}")))?;
    let public_key: [u8; 32] =
        bytes.as_slice().try_into().map_err(|_| CliError::bad_input(format!("public key {text:?} has {} bytes, not 32", bytes.len())))?;
    Ok(TrustedKey { public_key, key_id: key_id_hex(&public_key) })
}

/// Keys given as one or more arguments, each possibly a comma-separated list.
pub fn parse_key_list<'a>(texts: impl IntoIterator<Item = &'a str>, source: &str) -> Result<Option<KeySet>, CliError> {
    let keys = texts.into_iter().flat_map(|t| t.split(',')).map(str::trim).filter(|t| !t.is_empty()).map(parse_public_key).collect::<Result<Vec<_>, _>>()?;
    Ok(if keys.is_empty() { None } else { Some(KeySet { keys, source: source.to_string(), pinned_for: None }) })
}

/// The keys given with `--public-key`, else in EDGEPATCH_PUBLIC_KEY; None: neither (then the
/// keys pinned for the server apply).
pub fn given_keys(public_key: &[String]) -> Result<Option<KeySet>, CliError> {
    match parse_key_list(public_key.iter().map(String::as_str), "--public-key")? {
        Some(k) => Ok(Some(k)),
        None => parse_key_list(std::env::var("EDGEPATCH_PUBLIC_KEY").ok().as_deref(), "EDGEPATCH_PUBLIC_KEY"),
    }
}

pub fn config_dir() -> Result<PathBuf, CliError> {
    if let Some(d) = std::env::var_os("EDGEPATCH_CONFIG_DIR").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(d));
    }
    if let Some(d) = std::env::var_os("XDG_CONFIG_HOME").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(d).join("edgepatch"));
    }
    if cfg!(windows) {
        if let Some(d) = std::env::var_os("APPDATA").filter(|d| !d.is_empty()) {
            return Ok(PathBuf::from(d).join("edgepatch"));
        }
    }
    match std::env::var_os("HOME").filter(|d| !d.is_empty()) {
        Some(h) => Ok(PathBuf::from(h).join(".config").join("edgepatch")),
        None => Err(CliError::other("no config directory: set EDGEPATCH_CONFIG_DIR (or pass --public-key)")),
    }
}

fn read_lines(path: &Path) -> Result<Vec<Vec<String>>, CliError> {
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(CliError::io(path, e)),
    };
    Ok(text.lines().map(|l| l.split('#').next().unwrap_or("").split_whitespace().map(str::to_string).collect::<Vec<_>>()).filter(|f| !f.is_empty()).collect())
}

/// Replaces `path` with `text` through a temporary file, fsync and rename.
fn write_file(path: &Path, text: &str) -> Result<(), CliError> {
    let dir = path.parent().ok_or_else(|| CliError::other("config path has no directory"))?;
    fs::create_dir_all(dir).at_path(dir)?;
    let tmp = path.with_extension("tmp");
    let mut f = fs::File::create(&tmp).at_path(&tmp)?;
    f.write_all(text.as_bytes()).and_then(|_| f.sync_all()).at_path(&tmp)?;
    fs::rename(&tmp, path).at_path(path)
}

/// `known_keys`: `ORIGIN KEY_ID PUBLIC_KEY_BASE64` per line.
pub struct KnownKeys {
    pub path: PathBuf,
}

impl KnownKeys {
    pub fn open() -> Result<KnownKeys, CliError> {
        Ok(KnownKeys { path: config_dir()?.join("known_keys") })
    }

    /// The keys pinned for `origin` (none: never seen).
    pub fn pinned(&self, origin: &str) -> Result<Vec<TrustedKey>, CliError> {
        let mut out = Vec::new();
        for f in read_lines(&self.path)? {
            if f.len() == 3 && f[0] == origin {
                let k = parse_public_key(&f[2]).map_err(|e| e.context(self.path.display()).at(&self.path))?;
                if k.key_id != f[1] {
                    return Err(CliError::bad_input(format!("{}: key id {} does not match its key ({})", self.path.display(), f[1], k.key_id)).at(&self.path));
                }
                out.push(k);
            }
        }
        Ok(out)
    }

    /// Pins `key` for `origin` (a key already pinned for it is left as it is).
    pub fn pin(&self, origin: &str, key: &TrustedKey) -> Result<(), CliError> {
        if self.pinned(origin)?.contains(key) {
            return Ok(());
        }
        let mut text = fs::read_to_string(&self.path).unwrap_or_default();
        if text.is_empty() {
            text.push_str("# edgepatch: update servers' signing keys (ORIGIN KEY_ID PUBLIC_KEY): pinned on first use or learned from a signed key rotation\n");
        }
        if !text.ends_with('\n') {
            text.push('\n');
        }
        let b64 = base64::engine::general_purpose::STANDARD.encode(key.public_key);
        text.push_str(&format!("{origin} {} {b64}\n", key.key_id));
        write_file(&self.path, &text)
    }
}

/// `channels`: `ORIGIN GAME CHANNEL SEQUENCE BUILD` per line: the newest signed
/// position of each channel this machine updated from.
pub struct ChannelState {
    pub path: PathBuf,
}

impl ChannelState {
    pub fn open() -> Result<ChannelState, CliError> {
        Ok(ChannelState { path: config_dir()?.join("channels") })
    }

    pub fn last(&self, origin: &str, game: &str, channel: &str) -> Result<Option<(u64, String)>, CliError> {
        for f in read_lines(&self.path)? {
            if f.len() == 5 && f[0] == origin && f[1] == game && f[2] == channel {
                let seq = f[3].parse::<u64>().map_err(|_| CliError::bad_input(format!("{}: bad sequence {:?}", self.path.display(), f[3])).at(&self.path))?;
                return Ok(Some((seq, f[4].clone())));
            }
        }
        Ok(None)
    }

    pub fn record(&self, origin: &str, game: &str, channel: &str, sequence: u64, build: &str) -> Result<(), CliError> {
        let mut lines: Vec<String> =
            read_lines(&self.path)?.into_iter().filter(|f| !(f.len() == 5 && f[0] == origin && f[1] == game && f[2] == channel)).map(|f| f.join(" ")).collect();
        lines.push(format!("{origin} {game} {channel} {sequence} {build}"));
        write_file(&self.path, &(lines.join("\n") + "\n"))
    }
}

/// A new signing key: 32 random bytes (the ed25519 seed) as base64, and its public key.
pub fn generate_key() -> Result<(String, TrustedKey), CliError> {
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).map_err(|e| CliError::other(format!("no randomness from the OS: {e}")))?;
    let signing = ed25519_dalek::SigningKey::from_bytes(&seed);
    let public_key = signing.verifying_key().to_bytes();
    Ok((base64::engine::general_purpose::STANDARD.encode(seed), TrustedKey { public_key, key_id: key_id_hex(&public_key) }))
}

pub fn encode_public_key(key: &TrustedKey) -> String {
    base64::engine::general_purpose::STANDARD.encode(key.public_key)
}
