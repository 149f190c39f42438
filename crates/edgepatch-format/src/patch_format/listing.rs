//! The old build's listing as a tree patch states it (docs/FORMAT.md §2.1): the entries an
//! applier lists without content, and the digests of their canonical encoding that tell
//! whether an old build is the one the patch was made from.

use super::{KIND_DIRECTORY, KIND_FILE, KIND_SYMLINK};
use crate::wire::{put_str, put_varint};
/// One entry of the old build as an applier lists it, without content: what a
/// tree patch keeps from the old build without naming it (§2.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedEntry {
    /// Relative, `/`-separated (empty for a single-file build's file).
    pub path: String,
    /// What the entry is.
    pub kind: ListedKind,
}

/// What a listed entry is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListedKind {
    /// A regular file.
    File {
        /// The executable bit.
        executable: bool,
        /// Size in bytes.
        size: u64,
    },
    /// A symlink.
    Symlink {
        /// Where the link points, as stored.
        target: String,
    },
    /// A directory.
    Directory,
}

/// BLAKE3 of a listing (sorted by path) in its canonical encoding (§2.1).
pub fn listing_digest(listing: &[ListedEntry]) -> [u8; 32] {
    digest_listing(listing, true)
}

/// The digest of `listing` as a system without executable bits lists it: every file not
/// executable (§2.1, flag bit 4).
pub fn mode_blind_listing_digest(listing: &[ListedEntry]) -> [u8; 32] {
    digest_listing(listing, false)
}

/// BLAKE3 of the canonical encoding of `listing`, with each file's executable byte, or 0 for
/// every file when `with_modes` is false.
fn digest_listing(listing: &[ListedEntry], with_modes: bool) -> [u8; 32] {
    let mut out = Vec::with_capacity(listing.len() * 48);
    put_varint(&mut out, listing.len() as u64);
    for e in listing {
        put_str(&mut out, &e.path);
        match &e.kind {
            ListedKind::File { executable, size } => {
                out.push(KIND_FILE);
                out.push((with_modes && *executable) as u8);
                put_varint(&mut out, *size);
            }
            ListedKind::Symlink { target } => {
                out.push(KIND_SYMLINK);
                put_str(&mut out, target);
            }
            ListedKind::Directory => out.push(KIND_DIRECTORY),
        }
    }
    *blake3::hash(&out).as_bytes()
}

/// Whether some file of `listing` is executable (then a tree patch carries the mode-blind digest).
pub(super) fn has_executable(listing: &[ListedEntry]) -> bool {
    listing.iter().any(|e| matches!(e.kind, ListedKind::File { executable: true, .. }))
}

/// The listing of a single-file patch's old build: its one file, never executable.
pub fn single_file_listing(size: u64) -> Vec<ListedEntry> {
    vec![ListedEntry { path: String::new(), kind: ListedKind::File { executable: false, size } }]
}
