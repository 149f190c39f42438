//! Errors of the formats' decoders and of the applies built on them. Every decoder error
//! names the input and the byte position where it went wrong, so a user can tell a
//! truncated download from a corrupt one. The whole enum lives here, the apply's cases
//! included, so that an apply and its decoders report through one type.

use std::io;

/// Which input an error is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Input {
    /// The patch.
    Patch,
    /// A build's signature (the new-build side's block hashes).
    Signature,
    /// The old build, read through an applier's `OldBuild`.
    OldBuild,
    /// The new build, written through an applier's `BuildSink`.
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

/// An error of a decoder or an apply. [`Error::kind`] gives its stable name; the message names the
/// input and, for decoder errors, the byte offset.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The input does not start with its format's magic bytes.
    #[error("{input} is not an edgepatch {input} (bad magic bytes)")]
    BadMagic {
        /// Which input.
        input: Input,
    },
    /// The input's format version is one this build does not read.
    #[error("{input} format version {found} is not supported (this build reads version {supported})")]
    UnsupportedVersion {
        /// Which input.
        input: Input,
        /// The version the input states.
        found: u16,
        /// The version this build reads.
        supported: u16,
    },
    /// The input ended inside `what`, at byte `offset`.
    #[error("{input} truncated at byte {offset}: {what}")]
    Truncated {
        /// Which input.
        input: Input,
        /// Where the input ended.
        offset: u64,
        /// What was being read.
        what: String,
    },
    /// A field, checksum, frame or op at byte `offset` breaks the format.
    #[error("{input} corrupt at byte {offset}: {what}")]
    Corrupt {
        /// Which input.
        input: Input,
        /// Where the broken field starts.
        offset: u64,
        /// What is wrong.
        what: String,
    },
    /// A size or count above a limit of docs/FORMAT.md §2.7: refused before
    /// anything that large is allocated.
    #[error("{input} exceeds a limit at byte {offset}: {what}")]
    Limit {
        /// Which input.
        input: Input,
        /// Where the size or count stands.
        offset: u64,
        /// Which limit, and the value.
        what: String,
    },
    /// A path that breaks the path or tree rules (see [`crate::path_rules`]).
    #[error("invalid path {path:?}: {why}")]
    InvalidPath {
        /// The path, as given.
        path: String,
        /// Which rule it breaks.
        why: String,
    },
    /// A symlink target no file system can store (empty, over 4096 bytes, or with
    /// a NUL byte). Any other target is data: appliers never follow links.
    #[error("symlink {path:?} -> {target:?}: {why}")]
    UnsafeLink {
        /// The link's path.
        path: String,
        /// Its target, as given.
        target: String,
        /// Why no file system can store it.
        why: String,
    },
    /// The new files' digest differs from the one the patch promises: the old build's
    /// content is not what the patch was made from, or the patch is corrupt. Nothing
    /// written may be kept.
    #[error("the new files do not match the patch's files digest (expected {expected}, got {actual}): the old build differs from the one the patch was made for (`edgepatch verify` names damaged files), or the patch is corrupt")]
    FilesDigestMismatch {
        /// The digest the patch states (hex).
        expected: String,
        /// The digest of the files written (hex).
        actual: String,
    },
    /// The old build is not the one the patch was made from: its list of
    /// entries or a file's size differs. Found before anything is written.
    #[error("old build: not the build this patch was made from: {what}")]
    WrongOldBuild {
        /// What differs.
        what: String,
    },
    /// The patch writes something its signed manifest does not vouch for
    /// (edgepatch-core's `manifest_binding`): the patch is whole but not the one
    /// that was signed. Nothing written may be kept.
    #[error("not in the signed manifest: {what}")]
    NotInManifest {
        /// What the patch wrote that the manifest does not list.
        what: String,
    },
    /// The patch rebuilds files from side infos that decoders trust (the compressed-asset
    /// transform's preflate corrections, docs/FORMAT.md §2.8.8), and neither a signed manifest
    /// vouches for its head nor the caller trusts the patch. Nothing is written.
    #[error("{what}")]
    UnvouchedSideInfo {
        /// Which file, and how to proceed.
        what: String,
    },
    /// A resume point or saved state that does not fit this patch (another
    /// patch, or a record from an older attempt): start the apply over.
    #[error("cannot resume: {what}")]
    CannotResume {
        /// What does not fit.
        what: String,
    },
    /// Reading the old build failed: a file is missing or unreadable.
    #[error("old build: {path}: {source}")]
    OldRead {
        /// The old build's file.
        path: String,
        /// What the old build's reader said.
        source: io::Error,
    },
    /// Copying an unchanged file from the old build to the new one failed.
    #[error("copying unchanged files: {0}")]
    Copy(io::Error),
    /// The sink refused a write, or writing `path` failed.
    #[error("output: {path}: {source}")]
    Output {
        /// The new build's entry being written.
        path: String,
        /// What the sink said.
        source: io::Error,
    },
    /// Reading the patch or signature failed (the reader's error, not a format error).
    #[error("reading {input}: {source}")]
    Io {
        /// Which input.
        input: Input,
        /// What the reader said.
        source: io::Error,
    },
    /// A writer was asked for a patch whose tree breaks a limit every reader enforces
    /// (`patch_format::TreeBudget`): refused before the patch is written, since no
    /// applier would accept it.
    #[error("the new build cannot be patched: {what}; every applier refuses such a tree (nested directories name their whole path at every level; docs/FORMAT.md §2.7)")]
    TreeBeyondLimits {
        /// Which limit, with the build's figure and the limit.
        what: String,
    },
    /// A caller's mistake: bad options, or an API used out of order.
    #[error("{0}")]
    Invalid(String),
}

/// What kind of failure an [`Error`] is, with a stable name (`as_str`) that
/// tests, fixtures (`fixtures/hostile/vectors.json`) and JSON output use: a
/// test asserts the kind, never a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
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
    /// The produced files differ from what the patch's files digest promises
    /// (a damaged old build, or a corrupt patch).
    Digest,
    /// The patch is whole but writes what its signed manifest does not vouch
    /// for: forged or substituted data, not damage.
    Unvouched,
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
    /// Every kind, so that tests and tables can go through them all.
    pub const ALL: [ErrorKind; 13] = [
        ErrorKind::Magic,
        ErrorKind::Version,
        ErrorKind::Truncated,
        ErrorKind::Corrupt,
        ErrorKind::Limit,
        ErrorKind::Path,
        ErrorKind::Link,
        ErrorKind::Digest,
        ErrorKind::Unvouched,
        ErrorKind::OldBuild,
        ErrorKind::Output,
        ErrorKind::Io,
        ErrorKind::Invalid,
    ];

    /// The kind's stable name (`"old_build"`, `"digest"`, ...).
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
            ErrorKind::Unvouched => "unvouched",
            ErrorKind::OldBuild => "old_build",
            ErrorKind::Output => "output",
            ErrorKind::Io => "io",
            ErrorKind::Invalid => "invalid",
        }
    }

    /// The kind named `name` ([`ErrorKind::as_str`]), if there is one.
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
    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::BadMagic { .. } => ErrorKind::Magic,
            Error::UnsupportedVersion { .. } => ErrorKind::Version,
            Error::Truncated { .. } => ErrorKind::Truncated,
            Error::Corrupt { .. } => ErrorKind::Corrupt,
            Error::Limit { .. } | Error::TreeBeyondLimits { .. } => ErrorKind::Limit,
            Error::InvalidPath { .. } => ErrorKind::Path,
            Error::UnsafeLink { .. } => ErrorKind::Link,
            Error::FilesDigestMismatch { .. } => ErrorKind::Digest,
            Error::NotInManifest { .. } | Error::UnvouchedSideInfo { .. } => ErrorKind::Unvouched,
            Error::OldRead { .. } | Error::WrongOldBuild { .. } => ErrorKind::OldBuild,
            Error::Copy(_) | Error::Output { .. } => ErrorKind::Output,
            Error::Io { .. } => ErrorKind::Io,
            Error::Invalid(_) | Error::CannotResume { .. } => ErrorKind::Invalid,
        }
    }
}

/// What a signed manifest's checks refuse (edgepatch-core's `manifest_binding::BoundSink`,
/// `ManifestBinding::finish` and `PatchStreamHash::check`), carried inside their `io::Error` (kind
/// `InvalidData`) so that a caller can tell it from a failing disk: the applier turns it into
/// [`Error::NotInManifest`], and [`ManifestRefusal::of`] finds it in any `io::Error`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not in the signed manifest: {what}")]
pub struct ManifestRefusal {
    /// What the patch wrote that the manifest does not list.
    pub what: String,
}

impl ManifestRefusal {
    /// The refusal inside `e`, if `e` is one.
    pub fn of(e: &io::Error) -> Option<&ManifestRefusal> {
        e.get_ref()?.downcast_ref::<ManifestRefusal>()
    }
}

/// The result type of the decoders and the apply.
pub type Result<T, E = Error> = std::result::Result<T, E>;
