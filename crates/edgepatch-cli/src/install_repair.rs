//! `edgepatch heal`: an installed build checked against the signed manifest of its install
//! (`_` -> BUILD, docs/UPDATE_PROTOCOL.md) and only its damaged entries replaced.
//!
//! The replacements come from the install patch, applied beside the build into a staging
//! directory under the same trust rules as `update` (the signed statement, the manifest it
//! vouches for, every written entry bound to that manifest). Each replacement is checked
//! against the manifest again (size, BLAKE3, executable bit, link target) and moved into
//! place with a rename, so an entry is either its old self or the signed content, and
//! nothing is touched when any of it fails. Entries that are not in the manifest are left
//! alone.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use edgepatch_core::manifest::{EntryKind, ManifestEntry, ManifestView};

use crate::cli_error::{CliError, IoResultExt, Refusal, ResultExt};
use crate::server_client::{self, Server, VerifiedUpdate};

/// What is wrong with an installed entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Damage {
    Missing,
    /// A file, directory or link where the build has another kind: not repaired (heal never
    /// deletes a directory); the message says what to move away.
    WrongKind,
    WrongSize {
        expected: u64,
        actual: u64,
    },
    WrongContent,
    WrongMode,
    WrongTarget,
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Damage::Missing => f.write_str("missing"),
            Damage::WrongKind => f.write_str("wrong kind (file, symlink or directory)"),
            Damage::WrongSize { expected, actual } => write!(f, "size {actual}, expected {expected}"),
            Damage::WrongContent => f.write_str("content differs (BLAKE3)"),
            Damage::WrongMode => f.write_str("wrong executable bit"),
            Damage::WrongTarget => f.write_str("symlink points elsewhere"),
        }
    }
}

/// A damaged entry: its manifest record and what is wrong.
pub struct Damaged {
    pub entry: ManifestEntry,
    pub damage: Damage,
}

/// The entries of `manifest` that DIR does not hold as signed, in the manifest's order
/// (a directory before what is in it). `progress(done)` counts the bytes of the manifest's
/// files checked so far.
pub fn find_damage(dir: &Path, manifest: &ManifestView, progress: &dyn Fn(u64)) -> Result<Vec<Damaged>, CliError> {
    let (mut out, mut done) = (Vec::new(), 0);
    for entry in manifest.entries() {
        let entry = entry.context("manifest")?;
        let file_size = (entry.kind == EntryKind::File).then_some(entry.size);
        if let Some(damage) = check_entry(&dir.join(&entry.path), &entry)? {
            out.push(Damaged { entry, damage });
        }
        if let Some(size) = file_size {
            done += size;
            progress(done);
        }
    }
    Ok(out)
}

/// The bytes of the files `manifest` lists.
pub fn file_bytes(manifest: &ManifestView) -> Result<u64, CliError> {
    let mut total = 0;
    for entry in manifest.entries() {
        let entry = entry.context("manifest")?;
        if entry.kind == EntryKind::File {
            total += entry.size;
        }
    }
    Ok(total)
}

/// What is wrong with `path` as `entry`, if anything. Links are never followed.
fn check_entry(path: &Path, entry: &ManifestEntry) -> Result<Option<Damage>, CliError> {
    let meta = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Some(Damage::Missing)),
        Err(e) => return Err(CliError::io(path, e)),
    };
    let ft = meta.file_type();
    Ok(match entry.kind {
        EntryKind::Directory if !ft.is_dir() => Some(Damage::WrongKind),
        EntryKind::Directory => None,
        EntryKind::Symlink if !ft.is_symlink() => Some(Damage::WrongKind),
        EntryKind::Symlink => {
            let target = fs::read_link(path).at_path(path)?;
            (Some(target.to_string_lossy().as_ref()) != entry.symlink_target.as_deref()).then_some(Damage::WrongTarget)
        }
        EntryKind::File if !ft.is_file() => Some(Damage::WrongKind),
        EntryKind::File if meta.len() != entry.size => Some(Damage::WrongSize { expected: entry.size, actual: meta.len() }),
        EntryKind::File if file_blake3(path)? != entry.blake3 => Some(Damage::WrongContent),
        EntryKind::File if cfg!(unix) && crate::platform::is_executable(&meta) != entry.executable => Some(Damage::WrongMode),
        EntryKind::File => None,
    })
}

fn kind_name(kind: EntryKind) -> &'static str {
    match kind {
        EntryKind::File => "file",
        EntryKind::Symlink => "symlink",
        EntryKind::Directory => "directory",
    }
}

fn file_blake3(path: &Path) -> Result<[u8; 32], CliError> {
    let mut hasher = edgepatch_core::blake3::Hasher::new();
    io::copy(&mut fs::File::open(path).at_path(path)?, &mut hasher).at_path(path)?;
    Ok(*hasher.finalize().as_bytes())
}

/// Replaces the `damaged` entries of DIR with those of the verified install `v`: the install
/// patch is applied into a staging directory beside DIR, each replacement is checked against
/// the manifest, then renamed into place. `progress(done, total)` follows the patch.
pub fn repair(dir: &Path, damaged: &[Damaged], v: &VerifiedUpdate, server: &Server, progress: &mut dyn FnMut(u64, u64)) -> Result<(), CliError> {
    if let Some(d) = damaged.iter().find(|d| d.damage == Damage::WrongKind) {
        return Err(CliError::refused(
            Refusal::Damaged,
            format!(
                "{}: the build has a {} here, DIR something else; move it away and run heal again (nothing was changed)",
                d.entry.path,
                kind_name(d.entry.kind)
            ),
        )
        .at(dir));
    }
    // Beside DIR (never inside it, even for `.`), on its file system, so a rename moves each entry.
    let dir = &fs::canonicalize(dir).at_path(dir)?;
    let parent = dir.parent().unwrap_or(dir);
    let staging = tempfile::Builder::new().prefix(".edgepatch-heal-").tempdir_in(parent).at_path(parent)?;
    let (empty, fresh) = (staging.path().join("empty"), staging.path().join("fresh"));
    fs::create_dir(&empty).at_path(&empty)?;
    server_client::apply_verified(v, server, &empty, &fresh, progress)?;
    // Every replacement is checked before the first goes in: all of them or none.
    let mut moves: Vec<(PathBuf, PathBuf)> = Vec::new();
    for d in damaged {
        let (from, to) = (fresh.join(&d.entry.path), dir.join(&d.entry.path));
        if d.entry.kind != EntryKind::Directory {
            if let Some(problem) = check_entry(&from, &d.entry)? {
                return Err(CliError::refused(
                    Refusal::Unvouched,
                    format!("{}: the install's copy is not what the manifest signs ({problem}); nothing was changed", d.entry.path),
                ));
            }
        }
        moves.push((from, to));
    }
    for (d, (from, to)) in damaged.iter().zip(moves) {
        if d.entry.kind == EntryKind::Directory {
            // Missing: made empty; what it holds is listed (and repaired) after it.
            fs::create_dir(&to).at_path(&to)?;
        } else {
            fs::rename(&from, &to).at_path(&to)?;
        }
    }
    Ok(())
}
