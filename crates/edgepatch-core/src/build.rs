//! The in-memory model of a build (a game's file tree, or one file) and the path
//! rules every decoder enforces so that nothing is ever written outside the target.

use crate::error::{Error, Result};

pub const MAX_PATH_LEN: usize = 4096;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryContent {
    File { executable: bool, data: Vec<u8> },
    Symlink { target: String },
    Directory,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildEntry {
    /// Relative, `/`-separated. The empty path is the root itself and only
    /// appears in a single-file build.
    pub path: String,
    pub content: EntryContent,
}

/// A build: either one file (a single entry with the empty path) or a tree whose
/// entries are sorted by path bytes, parents before children.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Build {
    pub entries: Vec<BuildEntry>,
}

impl Build {
    pub fn single_file(data: Vec<u8>) -> Build {
        Build {
            entries: vec![BuildEntry {
                path: String::new(),
                content: EntryContent::File { executable: false, data },
            }],
        }
    }

    pub fn is_single_file(&self) -> bool {
        self.entries.len() == 1 && self.entries[0].path.is_empty()
    }

    /// Sorts entries and checks the tree rules (see `check_tree_entry`).
    pub fn from_entries(mut entries: Vec<BuildEntry>) -> Result<Build> {
        entries.sort_by(|a, b| a.path.as_bytes().cmp(b.path.as_bytes()));
        let mut checker = TreeChecker::default();
        for e in &entries {
            checker.check(&e.path, matches!(e.content, EntryContent::Directory))?;
            if let EntryContent::Symlink { target } = &e.content {
                validate_symlink_target(&e.path, target)?;
            }
        }
        Ok(Build { entries })
    }

    /// The regular files, as (path, content), in entry order.
    pub fn files(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.entries.iter().filter_map(|e| match &e.content {
            EntryContent::File { data, .. } => Some((e.path.as_str(), data.as_slice())),
            _ => None,
        })
    }

    pub fn total_file_bytes(&self) -> u64 {
        self.entries
            .iter()
            .map(|e| match &e.content {
                EntryContent::File { data, .. } => data.len() as u64,
                _ => 0,
            })
            .sum()
    }
}

fn invalid(path: &str, why: &str) -> Error {
    Error::InvalidPath { path: path.to_string(), why: why.to_string() }
}

/// A build path must be relative, `/`-separated, without empty, `.` or `..`
/// components, without NUL or backslash, and at most `MAX_PATH_LEN` bytes.
pub fn validate_path(path: &str) -> Result<()> {
    if let Some(why) = relative_path_problem(path) {
        return Err(invalid(path, why));
    }
    if path.contains('\\') {
        return Err(invalid(path, "contains a backslash"));
    }
    Ok(())
}

/// What makes `path` not a relative path inside the build, if anything: the
/// rules builds, patches, signatures and manifests share (manifests allow a
/// backslash as an ordinary byte; see docs/FORMAT.md).
pub fn relative_path_problem(path: &str) -> Option<&'static str> {
    if path.is_empty() {
        return Some("empty path");
    }
    if path.len() > MAX_PATH_LEN {
        return Some("path longer than 4096 bytes");
    }
    if path.as_bytes().contains(&0) {
        return Some("path contains a NUL byte");
    }
    if path.starts_with('/') {
        return Some("absolute path");
    }
    path.split('/').find_map(|c| match c {
        "" => Some("empty path component"),
        "." | ".." => Some("'.' or '..' path component"),
        _ => None,
    })
}

/// A symlink target must be relative and, resolved from the link's directory,
/// stay inside the build.
pub fn validate_symlink_target(link_path: &str, target: &str) -> Result<()> {
    let bad = |why: &str| invalid(link_path, &format!("symlink target {target:?} {why}"));
    if target.is_empty() || target.len() > MAX_PATH_LEN {
        return Err(bad("is empty or too long"));
    }
    if target.starts_with('/') || target.contains('\0') || target.contains('\\') {
        return Err(bad("is absolute or contains NUL or backslash"));
    }
    let mut depth: i64 = link_path.matches('/').count() as i64;
    for component in target.split('/') {
        match component {
            "" | "." => {}
            ".." => {
                depth -= 1;
                if depth < 0 {
                    return Err(bad("points outside the build"));
                }
            }
            _ => depth += 1,
        }
    }
    Ok(())
}

/// Checks, for entries arriving in sorted order, that paths are valid, unique,
/// and that every parent is a directory entry seen earlier (so no entry can be
/// reached through a symlink).
#[derive(Default)]
pub struct TreeChecker {
    previous: Option<String>,
    directories: std::collections::HashSet<String>,
}

impl TreeChecker {
    pub fn check(&mut self, path: &str, is_directory: bool) -> Result<()> {
        validate_path(path)?;
        if let Some(prev) = &self.previous {
            if prev.as_bytes() >= path.as_bytes() {
                return Err(invalid(path, "entries are not strictly sorted (duplicate or out of order)"));
            }
        }
        if let Some((parent, _)) = path.rsplit_once('/') {
            if !self.directories.contains(parent) {
                return Err(invalid(path, "its parent is not a directory entry listed before it"));
            }
        }
        if is_directory {
            self.directories.insert(path.to_string());
        }
        self.previous = Some(path.to_string());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_that_escape_are_rejected() {
        for bad in ["", "/etc/passwd", "a/../b", "..", "a//b", "a/", "./a", "a\\b", "a\0b"] {
            assert!(validate_path(bad).is_err(), "{bad:?} accepted");
        }
        for good in ["a", "a/b.c", "assets/img/ü.png", "...", "a/..b"] {
            validate_path(good).unwrap();
        }
        assert!(validate_symlink_target("a/link", "../b").is_ok());
        assert!(validate_symlink_target("a/link", "../../b").is_err());
        assert!(validate_symlink_target("link", "/etc").is_err());
        assert!(validate_symlink_target("link", "x/../../y").is_err());
    }

    #[test]
    fn tree_needs_parent_directories() {
        let mut c = TreeChecker::default();
        c.check("a", true).unwrap();
        c.check("a/b", false).unwrap();
        assert!(c.check("a/b", false).is_err());
        let mut c = TreeChecker::default();
        c.check("link", false).unwrap();
        assert!(c.check("link/x", false).is_err());
    }
}
