//! The in-memory model of a build (a game's file tree, or one file) and the path
//! rules every decoder enforces so that nothing is ever written outside the target.

use crate::error::{Error, Result};

/// The longest path, in bytes, any decoder accepts.
pub const MAX_PATH_LEN: usize = 4096;

/// What an entry of a build is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryContent {
    /// A regular file: its bytes and whether it is executable.
    File {
        /// The executable bit.
        executable: bool,
        /// The content.
        data: Vec<u8>,
    },
    /// A symlink; `target` is stored as is and never followed.
    Symlink {
        /// Where the link points, as stored.
        target: String,
    },
    /// A directory.
    Directory,
}

/// One entry of a build: a path and what is there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildEntry {
    /// Relative, `/`-separated. The empty path is the root itself and only
    /// appears in a single-file build.
    pub path: String,
    /// What the entry is.
    pub content: EntryContent,
}

/// A build: either one file (a single entry with the empty path) or a tree whose
/// entries are sorted by path bytes, parents before children.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Build {
    /// The entries, sorted by path bytes.
    pub entries: Vec<BuildEntry>,
}

impl Build {
    /// A single-file build: one entry with the empty path.
    pub fn single_file(data: Vec<u8>) -> Build {
        Build { entries: vec![BuildEntry { path: String::new(), content: EntryContent::File { executable: false, data } }] }
    }

    /// Whether this is a single-file build.
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

    /// The sum of the regular files' sizes.
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

/// How many links resolving one target may pass through before it counts as
/// not resolving (Linux's own limit, `MAXSYMLINKS`).
const MAX_LINK_HOPS: usize = 40;

/// Whether the link at `link_path` with `target`, resolved from the link's
/// directory through the build's own links (`link_targets`: every link's
/// path and target), stays inside the build. An absolute target, a walk
/// above the root (`../..`, or `x -> .` then `x/..`) or more than 40 links
/// in a row (a loop) leaves it. A target naming nothing in the build stays.
fn link_stays_inside(link_targets: &std::collections::HashMap<&str, &str>, link_path: &str, target: &str) -> bool {
    let mut at: Vec<&str> = link_path.split('/').collect();
    at.pop();
    // Components still to walk, the next one last.
    let mut pending: Vec<&str> = target.split('/').rev().collect();
    let mut hops = 0;
    if target.starts_with('/') {
        return false;
    }
    while let Some(component) = pending.pop() {
        match component {
            "" | "." => {}
            ".." => {
                if at.pop().is_none() {
                    return false;
                }
            }
            name => {
                at.push(name);
                if let Some(next) = link_targets.get(at.join("/").as_str()) {
                    hops += 1;
                    if hops > MAX_LINK_HOPS || next.starts_with('/') {
                        return false;
                    }
                    at.pop();
                    pending.extend(next.split('/').rev());
                }
            }
        }
    }
    true
}

impl Build {
    /// The links (path, target) whose target resolves outside the build:
    /// kept as they are, but worth a warning where the build is made, since
    /// what they point at is not part of the update.
    pub fn links_leaving_build(&self) -> Vec<(&str, &str)> {
        let link_targets: std::collections::HashMap<&str, &str> = self
            .entries
            .iter()
            .filter_map(|e| match &e.content {
                EntryContent::Symlink { target } => Some((e.path.as_str(), target.as_str())),
                _ => None,
            })
            .collect();
        let mut leaving: Vec<(&str, &str)> =
            link_targets.iter().filter(|(path, target)| !link_stays_inside(&link_targets, path, target)).map(|(p, t)| (*p, *t)).collect();
        leaving.sort_unstable();
        leaving
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
    fn links_leaving_the_build_are_found_through_chains() {
        let link = |path: &str, target: &str| BuildEntry { path: path.into(), content: EntryContent::Symlink { target: target.into() } };
        let dir = |path: &str| BuildEntry { path: path.into(), content: EntryContent::Directory };
        let build = Build::from_entries(vec![
            dir("fonts"),
            // lincity-ng-data: into the system's fonts.
            link("fonts/sans.ttf", "../../fonts/truetype/dejavu/DejaVuSans.ttf"),
            link("fonts/inside.ttf", "../data/x.ttf"),
            link("abs", "/usr/share/x"),
            // A chain: each step lexically inside, together one level above the root.
            link("x", "."),
            link("s", "x/.."),
            link("via_s", "s/y"),
            link("to_dir", "fonts"),
            link("through_dir_link", "to_dir/../data"),
            link("loop_a", "loop_b"),
            link("loop_b", "loop_a"),
            link("dangling", "no/such/file"),
        ])
        .unwrap();
        let leaving: Vec<&str> = build.links_leaving_build().into_iter().map(|(p, _)| p).collect();
        assert_eq!(leaving, ["abs", "fonts/sans.ttf", "loop_a", "loop_b", "s", "via_s"]);
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
