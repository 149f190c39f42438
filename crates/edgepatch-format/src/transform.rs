//! The interface every file transform implements (docs/FORMAT.md §2.8): a transform rewrites a
//! new file into a normalized form that diffs better against the old file, and a side info
//! with which the applier turns that form back into the exact file. The writer asks whether a
//! transform reads a file pair ([`Transform::detect`]) and makes the form
//! ([`Transform::forward`]); the applier rebuilds the file front to back in bounded memory
//! from the form and the side info alone ([`Transform::inverse`]); a writer for a stated
//! reader asks what a side info needs it to understand ([`Transform::required_capabilities`]).
//! A transform whose delta reads the old file in a layout of its own (the wasm transform's
//! field-split layout, §2.8.7) makes that old file's bytes ([`Transform::split_old_in_place`],
//! [`Transform::split_old_read`]).
//!
//! A side info's first four bytes name its transform ([`Transform::id`]). The implementations
//! live in crates of their own (edgepatch-transform-wasm) that depend on this one; the core
//! keeps the transforms it knows in one registry and reaches each through this trait.

use std::borrow::Cow;

use crate::capabilities::Capabilities;
use crate::error::Error;

/// Reads bytes of a file that is not in memory: fills the buffer from the offset.
pub type ReadAt<'a, E = TransformStop> = dyn FnMut(u64, &mut [u8]) -> Result<(), E> + 'a;

/// Takes bytes of a file at an offset.
pub type WriteAt<'a, E = TransformStop> = dyn FnMut(u64, &[u8]) -> Result<(), E> + 'a;

/// Takes the next piece of a file produced front to back.
pub type Emit<'a> = dyn FnMut(&[u8]) -> Result<(), TransformStop> + 'a;

/// Why a transform's step stopped.
#[derive(Debug)]
pub enum TransformStop {
    /// The input is not a file the transform reads: for the writer, store the file as it is;
    /// for an old file the applier reads split, the wrong old build.
    NotInput(Box<dyn std::error::Error + Send + Sync>),
    /// The side info, or the normalized bytes with it, do not read as the transform writes
    /// them: a corrupt patch.
    Corrupt(Box<dyn std::error::Error + Send + Sync>),
    /// A callback (a read, a write, an emit) failed, with this error, returned as is.
    Caller(Error),
}

/// A normalized form and the side info its inverse needs: what [`Transform::forward`] makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Normalized {
    /// The normalized file.
    pub bytes: Vec<u8>,
    /// What the inverse needs to restore the file (encoded side info).
    pub side_info: Vec<u8>,
}

/// Where an inverse reads the normalized form from.
pub enum NormalizedBytes<'a> {
    /// In memory, the caller's for the time of the inverse: the transform may rewrite it in
    /// place (an applier's buffer, cleared afterwards).
    InPlace(&'a mut [u8]),
    /// In memory, shared: the transform copies what it rewrites (a writer checking its own
    /// form).
    Shared(&'a [u8]),
    /// Not in memory: `len` bytes read through `read` (an applier's scratch space).
    Read {
        /// Bytes of the normalized form.
        len: u64,
        /// Reads them.
        read: &'a mut ReadAt<'a>,
    },
}

/// A file transform (module doc).
pub trait Transform: Sync {
    /// The four bytes its side infos start with: how a patch names the transform of a file
    /// (docs/FORMAT.md §2.8.4).
    fn id(&self) -> [u8; 4];

    /// Whether the transform reads this pair of files: a look at their first bytes, before
    /// [`Transform::forward`] reads them whole.
    fn detect(&self, old: &[u8], new: &[u8]) -> bool;

    /// The normalized form of `new` against `old` and its side info, where the applier reads
    /// the old file as it is. `old` is dropped as soon as the transform is done with it (an
    /// owned one frees its memory before `new`'s form is made, the peak). `NotInput`: store
    /// `new` as it is.
    fn forward(&self, old: Cow<'_, [u8]>, new: &[u8]) -> Result<Normalized, TransformStop>;

    /// What a reader must understand to apply a file with this side info (docs/FORMAT.md §5).
    fn required_capabilities(&self, side_info: &[u8]) -> Capabilities;

    /// Rebuilds the file from its normalized form and side info, handed to `emit` front to
    /// back in pieces, in bounded memory where the form is read through a callback. Hostile
    /// input gives an error, never a panic; an error of a callback stops the inverse and is
    /// returned as is.
    fn inverse(&self, normalized: NormalizedBytes<'_>, side_info: &[u8], emit: &mut Emit<'_>) -> Result<(), TransformStop>;

    /// Puts `old` in place in the layout the delta of a file with this side info reads its old
    /// file in (docs/FORMAT.md §2.8.7); the patch format's tree says which files read their
    /// old file so (`PatchTree::split_old_file`). An error leaves `old` as it was.
    /// By default the old file as it is.
    fn split_old_in_place(&self, old: &mut [u8], side_info: &[u8]) -> Result<(), TransformStop> {
        let _ = (old, side_info);
        Ok(())
    }

    /// [`Transform::split_old_in_place`] of an old file of `len` bytes that is not in memory:
    /// read through `read`, written through `write` (every byte once), in bounded memory.
    /// By default copied as it is.
    fn split_old_read(&self, len: u64, read: &mut ReadAt<'_>, side_info: &[u8], write: &mut WriteAt<'_>) -> Result<(), TransformStop> {
        let _ = side_info;
        let mut buf = vec![0u8; (64 << 10).min(len) as usize];
        let mut at = 0;
        while at < len {
            let n = (len - at).min(buf.len() as u64) as usize;
            read(at, &mut buf[..n])?;
            write(at, &buf[..n])?;
            at += n as u64;
        }
        Ok(())
    }
}
