//! The path and tree rules every decoder enforces (docs/FORMAT.md §1, §2.7), so that
//! nothing is ever written outside the target: relative `/`-separated paths, storable
//! symlink targets, and trees whose entries arrive sorted below directory entries.

use crate::error::{Error, Result};

/// The longest path, in bytes, any decoder accepts.
pub const MAX_PATH_LEN: usize = 4096;

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

/// What makes `target` unusable as a symlink target, if anything. A target is
/// data, kept as it is wherever it points (absolute, above the build root,
/// through other links): tar, butler and every peer keep links that way, and
/// game data packages ship them (Debian's lincity-ng-data links its fonts to
/// `../../fonts/truetype/...`). It is only bounded: 1..=`MAX_PATH_LEN` bytes,
/// no NUL (which no file system can store). Appliers never follow a link
/// while writing a build, so where it points cannot matter to them.
pub fn symlink_target_problem(target: &str) -> Option<&'static str> {
    if target.is_empty() {
        return Some("empty symlink target");
    }
    if target.len() > MAX_PATH_LEN {
        return Some("symlink target longer than 4096 bytes");
    }
    if target.as_bytes().contains(&0) {
        return Some("symlink target contains a NUL byte");
    }
    None
}

/// Checks the link at `link_path` has a storable target (see [`symlink_target_problem`]).
pub fn validate_symlink_target(link_path: &str, target: &str) -> Result<()> {
    match symlink_target_problem(target) {
        Some(why) => {
            Err(Error::UnsafeLink { path: link_path.to_string(), target: target.chars().take(64).collect(), why: format!("{why} ({} bytes)", target.len()) })
        }
        None => Ok(()),
    }
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
    /// Checks the next path (entries in sorted order); `is_directory` says whether
    /// later entries may live below it. Errors with [`Error::InvalidPath`].
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
    }

    #[test]
    fn any_link_target_is_data_within_its_bounds() {
        for good in ["../b", "../../fonts/truetype/dejavu/DejaVuSans.ttf", "/etc", "x/../../y", "a\\b", ".", ".."] {
            validate_symlink_target("a/link", good).unwrap();
        }
        let long = "a".repeat(MAX_PATH_LEN + 1);
        for (bad, why) in [("", "empty"), ("a\0b", "NUL"), (long.as_str(), "longer than 4096")] {
            let err = validate_symlink_target("a/link", bad).unwrap_err().to_string();
            assert!(err.contains("\"a/link\"") && err.contains(why), "{err}");
        }
        validate_symlink_target("a/link", &long[1..]).unwrap();
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
