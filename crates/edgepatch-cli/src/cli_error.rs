//! The command line's error: one enum for every failure, each with a stable snake_case
//! `code` (printed by `--json`) and a process exit code. The table of codes, [`CODES`], is
//! the one docs/CLI.md ("Exit codes and JSON errors") documents; a test keeps them equal.
//!
//! Core errors are wrapped with their `ErrorKind` kept: the code of a core error is its
//! kind's name (`corrupt`, `digest`, `old_build`, ...). Messages are what the user reads;
//! scripts read `code`, `exitCode` and, when a file is involved, `path`.

use std::fmt::Display;
use std::io;
use std::path::{Path, PathBuf};

use edgepatch_core::document_rules::DocumentError;
use edgepatch_core::manifest::ManifestError;
use edgepatch_core::trust::TrustError;
use serde_json::{json, Value};

/// Exit code of a command that succeeded.
pub const EXIT_OK: u8 = 0;
/// Anything not listed below.
pub const EXIT_OTHER: u8 = 1;
/// The command line is wrong (clap's own errors, and options that cannot go together).
pub const EXIT_USAGE: u8 = 2;
/// An input the tool refuses: a patch, manifest, signature, key file or build that is
/// malformed, truncated, over a limit or of another format.
pub const EXIT_BAD_INPUT: u8 = 3;
/// Verification failed: damaged files, a signature or digest that does not match, an
/// untrusted key, a rollback or an expired channel.
pub const EXIT_VERIFICATION: u8 = 4;
/// The old build is not the one the patch was made from (or is missing or unreadable).
pub const EXIT_WRONG_OLD_BUILD: u8 = 5;
/// Reading or writing a local file failed.
pub const EXIT_IO: u8 = 6;
/// The server could not be reached, answered with an HTTP error, or answered nonsense.
pub const EXIT_NETWORK: u8 = 7;

/// Every JSON `code`, its exit code and what it means (docs/CLI.md lists the same rows).
pub const CODES: &[(&str, u8, &str)] = &[
    ("usage", EXIT_USAGE, "the command line is wrong: unknown option, missing argument, options that cannot go together"),
    ("magic", EXIT_BAD_INPUT, "not an edgepatch patch, signature or manifest at all (wrong magic bytes)"),
    ("version", EXIT_BAD_INPUT, "a format version this edgepatch does not read"),
    ("truncated", EXIT_BAD_INPUT, "the input ends early"),
    ("corrupt", EXIT_BAD_INPUT, "a field, checksum, frame or op breaks the format"),
    ("limit", EXIT_BAD_INPUT, "a size or count above a documented limit"),
    ("path", EXIT_BAD_INPUT, "a path that breaks the path or tree rules"),
    ("link", EXIT_BAD_INPUT, "a symlink no file system can store"),
    ("bad_input", EXIT_BAD_INPUT, "another input the tool refuses: a key file, name, JSON file or build"),
    ("not_portable", EXIT_BAD_INPUT, "with --strict-portable: paths of the new build that are not portable"),
    ("digest", EXIT_VERIFICATION, "the files produced do not match the patch's digest"),
    ("unvouched", EXIT_VERIFICATION, "the patch or manifest is not the one that was signed"),
    ("damaged", EXIT_VERIFICATION, "`verify`, `heal`: files do not match the signature or signed manifest"),
    ("signature", EXIT_VERIFICATION, "an ed25519 signature does not verify"),
    ("untrusted_key", EXIT_VERIFICATION, "signed by a key that is not accepted (and no signed rotation leads to it)"),
    ("rollback", EXIT_VERIFICATION, "a channel older than one already seen"),
    ("expired", EXIT_VERIFICATION, "a channel document past its expiry (frozen or stale)"),
    ("old_build", EXIT_WRONG_OLD_BUILD, "the old build is not the one the patch was made from, or a file of it is missing or unreadable"),
    ("io", EXIT_IO, "reading or writing a local file failed"),
    ("output", EXIT_IO, "writing the output failed"),
    ("network", EXIT_NETWORK, "the server could not be reached (connection, DNS, TLS, timeout)"),
    ("http", EXIT_NETWORK, "the server answered with an HTTP error status"),
    ("bad_response", EXIT_NETWORK, "the server's answer is not what the protocol says"),
    ("invalid", EXIT_OTHER, "a request that cannot be carried out as asked (e.g. a resume that does not fit)"),
    ("error", EXIT_OTHER, "any other failure"),
];

/// The exit code of `code` ([`CODES`]); 1 for a code not in the table.
pub fn exit_code_of(code: &str) -> u8 {
    CODES.iter().find(|(c, _, _)| *c == code).map_or(EXIT_OTHER, |(_, n, _)| *n)
}

/// Refusals the command line decides itself (not a core error).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
    /// A key file, name, JSON file or build the tool refuses.
    BadInput,
    /// `--strict-portable` and paths that are not portable.
    NotPortable,
    /// `verify` found damaged, missing or unexpected entries; `heal --dry-run` damaged or
    /// missing ones, or `heal` one it does not repair.
    Damaged,
    /// Files that do not match a patch's files digest.
    Digest,
    /// A signature that does not verify.
    Signature,
    /// Signed by a key that is not accepted.
    UntrustedKey,
    /// What was fetched is not what the signed statement or manifest vouches for.
    Unvouched,
    /// A channel position older than one already seen.
    Rollback,
    /// A channel document past its expiry.
    Expired,
    /// A server answer that breaks the protocol.
    BadResponse,
    /// An update whose patch needs format features this edgepatch does not read.
    Version,
}

impl Refusal {
    /// The refusal's JSON code.
    pub fn code(self) -> &'static str {
        match self {
            Refusal::BadInput => "bad_input",
            Refusal::NotPortable => "not_portable",
            Refusal::Damaged => "damaged",
            Refusal::Digest => "digest",
            Refusal::Signature => "signature",
            Refusal::UntrustedKey => "untrusted_key",
            Refusal::Unvouched => "unvouched",
            Refusal::Rollback => "rollback",
            Refusal::Expired => "expired",
            Refusal::BadResponse => "bad_response",
            Refusal::Version => "version",
        }
    }
}

/// An error of the command line: what the user reads (`Display`), a stable code
/// ([`CliError::code`]), an exit code ([`CliError::exit_code`]) and the file or URL it is
/// about, when there is one.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CliError {
    /// An error of the core; its code is the core's `ErrorKind` name.
    #[error("{message}")]
    // The sources are boxed: kept inline, they make every `Result<_, CliError>` large
    // (past clippy's `result_large_err` on Windows, where a `PathBuf` is bigger).
    Core { message: String, path: Option<PathBuf>, source: Box<edgepatch_core::Error> },
    /// A manifest the core's reader or writer refused; coded by [`ManifestError::kind`].
    #[error("{message}")]
    Manifest { message: String, path: Option<PathBuf>, source: Box<ManifestError> },
    /// A name, key, signature or rotation the core's trust rules refuse.
    #[error("{message}")]
    Trust { message: String, source: TrustError },
    /// Reading or writing a local file failed.
    #[error("{message}")]
    Io { message: String, path: Option<PathBuf>, source: io::Error },
    /// An input or answer the command line itself refuses.
    #[error("{message}")]
    Refused { refusal: Refusal, message: String, path: Option<PathBuf> },
    /// The server could not be reached.
    #[error("{message}")]
    Network { message: String, url: Option<String> },
    /// The server answered with an HTTP error status.
    #[error("{message}")]
    Http { message: String, url: String, status: u16 },
    /// Options that cannot go together, or an option's value out of range.
    #[error("{message}")]
    Usage { message: String },
    /// Anything else.
    #[error("{message}")]
    Other { message: String },
}

impl CliError {
    /// An input the tool refuses.
    pub fn bad_input(message: impl Into<String>) -> Self {
        CliError::Refused { refusal: Refusal::BadInput, message: message.into(), path: None }
    }

    /// A refusal of the given kind.
    pub fn refused(refusal: Refusal, message: impl Into<String>) -> Self {
        CliError::Refused { refusal, message: message.into(), path: None }
    }

    /// A server answer that breaks the protocol.
    pub fn bad_response(message: impl Into<String>) -> Self {
        Self::refused(Refusal::BadResponse, message)
    }

    /// A wrong command line found after parsing.
    pub fn usage(message: impl Into<String>) -> Self {
        CliError::Usage { message: message.into() }
    }

    /// Any other failure.
    pub fn other(message: impl Into<String>) -> Self {
        CliError::Other { message: message.into() }
    }

    /// Reading or writing `path` failed: "PATH: error".
    pub fn io(path: &Path, e: io::Error) -> Self {
        CliError::Io { message: format!("{}: {e}", path.display()), path: Some(path.to_path_buf()), source: e }
    }

    /// A core error about the file `path` (the message is the core's).
    pub fn core_at(path: &Path, e: edgepatch_core::Error) -> Self {
        CliError::Core { message: e.to_string(), path: Some(path.to_path_buf()), source: Box::new(e) }
    }

    /// A manifest error about `path`, when there is a file.
    pub fn manifest(e: ManifestError) -> Self {
        CliError::Manifest { message: e.to_string(), path: None, source: Box::new(e) }
    }

    /// The same error with `path` as the file it is about (kept if it names one already).
    pub fn at(mut self, file: &Path) -> Self {
        match &mut self {
            CliError::Core { path, .. } | CliError::Manifest { path, .. } | CliError::Io { path, .. } | CliError::Refused { path, .. } => {
                path.get_or_insert_with(|| file.to_path_buf());
            }
            _ => {}
        }
        self
    }

    fn message_mut(&mut self) -> &mut String {
        match self {
            CliError::Core { message, .. }
            | CliError::Manifest { message, .. }
            | CliError::Trust { message, .. }
            | CliError::Io { message, .. }
            | CliError::Refused { message, .. }
            | CliError::Network { message, .. }
            | CliError::Http { message, .. }
            | CliError::Usage { message }
            | CliError::Other { message } => message,
        }
    }

    /// The same error, its message prefixed: "PREFIX: message".
    pub fn context(self, prefix: impl Display) -> Self {
        self.reword(|m| format!("{prefix}: {m}"))
    }

    /// The same error (same code), its message rewritten by `f`.
    pub fn reword(mut self, f: impl FnOnce(&str) -> String) -> Self {
        let m = self.message_mut();
        *m = f(m);
        self
    }

    /// The stable snake_case code `--json` prints ([`CODES`]).
    pub fn code(&self) -> &'static str {
        match self {
            CliError::Core { source, .. } => source.kind().as_str(),
            CliError::Manifest { source, .. } => source.kind().as_str(),
            CliError::Trust { source, .. } => match source {
                TrustError::BadSignature { .. } => "signature",
                TrustError::Rotation { .. } => "untrusted_key",
                _ => "bad_input",
            },
            CliError::Io { .. } => "io",
            CliError::Refused { refusal, .. } => refusal.code(),
            CliError::Network { .. } => "network",
            CliError::Http { .. } => "http",
            CliError::Usage { .. } => "usage",
            CliError::Other { .. } => "error",
        }
    }

    /// The process's exit code for this error ([`CODES`]).
    pub fn exit_code(&self) -> u8 {
        exit_code_of(self.code())
    }

    /// The file this error is about, if any.
    pub fn path(&self) -> Option<&Path> {
        match self {
            CliError::Core { path, .. } | CliError::Manifest { path, .. } | CliError::Io { path, .. } | CliError::Refused { path, .. } => path.as_deref(),
            _ => None,
        }
    }

    /// The URL this error is about, if any.
    pub fn url(&self) -> Option<&str> {
        match self {
            CliError::Network { url, .. } => url.as_deref(),
            CliError::Http { url, .. } => Some(url),
            _ => None,
        }
    }

    /// What `--json` prints: `{"ok": false, "code", "error", "exitCode"}`, with `path` and
    /// `url` when the error is about a file or a URL.
    pub fn to_json(&self) -> Value {
        let mut v = json!({ "ok": false, "code": self.code(), "error": self.to_string(), "exitCode": self.exit_code() });
        if let Some(p) = self.path() {
            v["path"] = json!(p.display().to_string());
        }
        if let Some(u) = self.url() {
            v["url"] = json!(u);
        }
        v
    }
}

impl From<edgepatch_core::Error> for CliError {
    fn from(e: edgepatch_core::Error) -> Self {
        CliError::Core { message: e.to_string(), path: None, source: Box::new(e) }
    }
}

impl From<ManifestError> for CliError {
    fn from(e: ManifestError) -> Self {
        CliError::manifest(e)
    }
}

impl From<TrustError> for CliError {
    fn from(e: TrustError) -> Self {
        CliError::Trust { message: e.to_string(), source: e }
    }
}

/// A refused update descriptor or channel document (edgepatch_core::document_rules), by the
/// refusal its code names.
impl From<DocumentError> for CliError {
    fn from(e: DocumentError) -> Self {
        let refusal = match &e {
            DocumentError::BadSignature(t) => return t.clone().into(),
            DocumentError::NotSigned(_) => Refusal::Signature,
            DocumentError::UnknownKey { .. } => Refusal::UntrustedKey,
            DocumentError::Expired { .. } => Refusal::Expired,
            DocumentError::Rollback { .. } => Refusal::Rollback,
            DocumentError::ReaderNeeds { needs, reads } => {
                return CliError::refused(
                    Refusal::Version,
                    format!("this update's patch needs format features this edgepatch does not read ({}): install a newer edgepatch", needs.difference(*reads)),
                )
            }
            _ => Refusal::BadResponse,
        };
        CliError::refused(refusal, e.to_string())
    }
}

/// An I/O error whose message already names its file (`build_files::with_path`).
impl From<io::Error> for CliError {
    fn from(e: io::Error) -> Self {
        CliError::Io { message: e.to_string(), path: None, source: e }
    }
}

/// A transport error is `network`; an HTTP error status is `http`, with the `error` of a
/// JSON error body (or the body's start) in the message: "URL: HTTP 404: not found".
impl From<ureq::Error> for CliError {
    fn from(e: ureq::Error) -> Self {
        match e {
            ureq::Error::Status(status, resp) => {
                let url = resp.get_url().to_string();
                let body = resp.into_string().unwrap_or_default();
                let msg = serde_json::from_str::<Value>(&body)
                    .ok()
                    .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_string))
                    .unwrap_or_else(|| body.chars().take(200).collect());
                CliError::Http { message: format!("{url}: HTTP {status}: {msg}"), url, status }
            }
            ureq::Error::Transport(t) => CliError::Network { url: t.url().map(|u| u.to_string()), message: t.to_string() },
        }
    }
}

/// `context` on results.
pub trait ResultExt<T> {
    /// The error's message prefixed: "PREFIX: message".
    fn context(self, prefix: impl Display) -> Result<T, CliError>;
    /// The error's message rewritten by `f`, its code kept.
    fn reword(self, f: impl FnOnce(&str) -> String) -> Result<T, CliError>;
}

impl<T, E: Into<CliError>> ResultExt<T> for Result<T, E> {
    fn context(self, prefix: impl Display) -> Result<T, CliError> {
        self.map_err(|e| e.into().context(prefix))
    }

    fn reword(self, f: impl FnOnce(&str) -> String) -> Result<T, CliError> {
        self.map_err(|e| e.into().reword(f))
    }
}

/// `path`'s I/O errors as [`CliError::io`].
pub trait IoResultExt<T> {
    /// "PATH: error", with `path` as the error's file.
    fn at_path(self, path: &Path) -> Result<T, CliError>;
}

impl<T> IoResultExt<T> for io::Result<T> {
    fn at_path(self, path: &Path) -> Result<T, CliError> {
        self.map_err(|e| CliError::io(path, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use edgepatch_core::error::ErrorKind;

    /// Every core kind has a row, so a core error never falls through to exit 1 unnoticed.
    #[test]
    fn every_core_kind_is_in_the_table() {
        for k in ErrorKind::ALL {
            assert!(CODES.iter().any(|(c, _, _)| *c == k.as_str()), "{k} has no row in CODES");
        }
    }

    #[test]
    fn codes_are_unique_snake_case() {
        for (i, (c, _, _)) in CODES.iter().enumerate() {
            assert!(c.chars().all(|ch| ch.is_ascii_lowercase() || ch == '_'), "{c}");
            assert!(!CODES[..i].iter().any(|(d, _, _)| d == c), "{c} twice");
        }
    }

    /// docs/CLI.md's table ("| exit | `code` | meaning |") lists exactly the codes of
    /// [`CODES`], each with its exit code.
    #[test]
    fn docs_table_matches_the_codes() {
        let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/CLI.md")).expect("docs/CLI.md");
        let section = doc.split("## Exit codes and JSON errors").nth(1).expect("docs/CLI.md has the section \"Exit codes and JSON errors\"");
        let mut documented = Vec::new();
        for line in section.lines().filter(|l| l.starts_with('|')) {
            let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
            let Ok(exit) = cells[0].parse::<u8>() else { continue };
            for code in cells[1].split(',').map(|c| c.trim().trim_matches('`')).filter(|c| !c.is_empty() && *c != "-") {
                documented.push((code.to_string(), exit));
            }
        }
        for (code, exit) in &documented {
            assert!(CODES.iter().any(|(c, _, _)| c == code), "docs/CLI.md documents `{code}`, which the CLI does not have");
            assert_eq!(exit_code_of(code), *exit, "docs/CLI.md gives `{code}` exit {exit}");
        }
        for (code, exit, _) in CODES {
            assert!(documented.iter().any(|(c, e)| c == code && e == exit), "`{code}` (exit {exit}) is not in docs/CLI.md's table");
        }
        let exits: Vec<u8> = section.lines().filter_map(|l| l.trim_matches('|').split('|').next()?.trim().parse::<u8>().ok()).collect();
        assert!(exits.contains(&EXIT_OK), "docs/CLI.md's table lists exit 0");
    }

    #[test]
    fn json_names_the_file() {
        let e = CliError::io(Path::new("/no/such"), io::Error::from(io::ErrorKind::NotFound));
        let v = e.to_json();
        assert_eq!((v["code"].as_str(), v["exitCode"].as_u64(), v["path"].as_str()), (Some("io"), Some(6), Some("/no/such")));
        let c = CliError::from(edgepatch_core::Error::WrongOldBuild { what: "a.bin is 3 bytes".into() }).at(Path::new("old"));
        assert_eq!((c.code(), c.exit_code(), c.path()), ("old_build", 5, Some(Path::new("old"))));
    }
}
