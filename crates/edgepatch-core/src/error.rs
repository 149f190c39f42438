//! Errors of the core. Every decoder error names the input and the byte position
//! where it went wrong, so a user can tell a truncated download from a corrupt one.

use std::io;

/// Which input an error is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    Patch,
    Signature,
    OldBuild,
    NewBuild,
}

impl std::fmt::Display for Input {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Input::Patch => "patch",
            Input::Signature => "signature",
            Input::OldBuild => "old build",
            Input::NewBuild => "new build",
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{input} is not an edgepatch {input} (bad magic bytes)")]
    BadMagic { input: Input },
    #[error("{input} format version {found} is not supported (this build reads version {supported})")]
    UnsupportedVersion { input: Input, found: u16, supported: u16 },
    #[error("{input} truncated at byte {offset}: {what}")]
    Truncated { input: Input, offset: u64, what: String },
    #[error("{input} corrupt at byte {offset}: {what}")]
    Corrupt { input: Input, offset: u64, what: String },
    #[error("{input} exceeds a limit: {what}")]
    Limit { input: Input, what: String },
    #[error("invalid path {path:?}: {why}")]
    InvalidPath { path: String, why: String },
    #[error("the new files do not match the patch's files digest (expected {expected}, got {actual}): the old build differs from the one the patch was made for (`edgepatch verify` names damaged files), or the patch is corrupt")]
    FilesDigestMismatch { expected: String, actual: String },
    #[error("old build: {path}: {source}")]
    OldRead { path: String, source: io::Error },
    #[error("copying unchanged files: {0}")]
    Copy(io::Error),
    #[error("output: {path}: {source}")]
    Output { path: String, source: io::Error },
    #[error("reading {input}: {source}")]
    Io { input: Input, source: io::Error },
    #[error("{0}")]
    Invalid(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
