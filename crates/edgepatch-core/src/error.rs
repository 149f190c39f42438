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
    /// A size or count above a limit of docs/FORMAT.md §2.7: refused before
    /// anything that large is allocated.
    #[error("{input} exceeds a limit at byte {offset}: {what}")]
    Limit { input: Input, offset: u64, what: String },
    #[error("invalid path {path:?}: {why}")]
    InvalidPath { path: String, why: String },
    /// A symlink target no file system can store (empty, over 4096 bytes, or with
    /// a NUL byte). Any other target is data: appliers never follow links.
    #[error("symlink {path:?} -> {target:?}: {why}")]
    UnsafeLink { path: String, target: String, why: String },
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

/// What kind of failure an [`Error`] is, with a stable name (`as_str`) that
/// tests, fixtures (`fixtures/hostile/vectors.json`) and JSON output use: a
/// test asserts the kind, never a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// Not this format at all (wrong magic bytes).
    Magic,
    /// A version this build does not read.
    Version,
    /// The input ended early.
    Truncated,
    /// Malformed: a field, checksum, frame or op that breaks the format.
    Corrupt,
    /// A size or count above its documented limit.
    Limit,
    /// A path breaking the path or tree rules.
    Path,
    /// A symlink chain (a link target through another link).
    Link,
    /// The produced files differ from the patch's files digest.
    Digest,
    /// The old build: missing, unreadable, or not the one the patch was made from.
    OldBuild,
    /// Writing the output failed.
    Output,
    /// Reading an input failed.
    Io,
    /// A caller's mistake (bad options, misuse of an API).
    Invalid,
}

impl ErrorKind {
    pub const ALL: [ErrorKind; 12] = [
        ErrorKind::Magic,
        ErrorKind::Version,
        ErrorKind::Truncated,
        ErrorKind::Corrupt,
        ErrorKind::Limit,
        ErrorKind::Path,
        ErrorKind::Link,
        ErrorKind::Digest,
        ErrorKind::OldBuild,
        ErrorKind::Output,
        ErrorKind::Io,
        ErrorKind::Invalid,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Magic => "magic",
            ErrorKind::Version => "version",
            ErrorKind::Truncated => "truncated",
            ErrorKind::Corrupt => "corrupt",
            ErrorKind::Limit => "limit",
            ErrorKind::Path => "path",
            ErrorKind::Link => "link",
            ErrorKind::Digest => "digest",
            ErrorKind::OldBuild => "old_build",
            ErrorKind::Output => "output",
            ErrorKind::Io => "io",
            ErrorKind::Invalid => "invalid",
        }
    }

    pub fn from_name(name: &str) -> Option<ErrorKind> {
        ErrorKind::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Error {
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::BadMagic { .. } => ErrorKind::Magic,
            Error::UnsupportedVersion { .. } => ErrorKind::Version,
            Error::Truncated { .. } => ErrorKind::Truncated,
            Error::Corrupt { .. } => ErrorKind::Corrupt,
            Error::Limit { .. } => ErrorKind::Limit,
            Error::InvalidPath { .. } => ErrorKind::Path,
            Error::UnsafeLink { .. } => ErrorKind::Link,
            Error::FilesDigestMismatch { .. } => ErrorKind::Digest,
            Error::OldRead { .. } => ErrorKind::OldBuild,
            Error::Copy(_) | Error::Output { .. } => ErrorKind::Output,
            Error::Io { .. } => ErrorKind::Io,
            Error::Invalid(_) => ErrorKind::Invalid,
        }
    }
}

impl crate::manifest::ManifestError {
    pub fn kind(&self) -> ErrorKind {
        use crate::manifest::ManifestError as M;
        match self {
            M::BadMagic => ErrorKind::Magic,
            M::UnsupportedVersion(_) => ErrorKind::Version,
            M::Truncated { .. } | M::LengthMismatch { .. } => ErrorKind::Truncated,
            M::Invalid { .. } | M::ChecksumMismatch { .. } => ErrorKind::Corrupt,
            M::IndexOutOfRange { .. } | M::Encode(_) => ErrorKind::Invalid,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
