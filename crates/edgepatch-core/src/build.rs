//! The in-memory model of a build (a game's file tree, or one file), checked by the path
//! rules every decoder enforces so that nothing is ever written outside the target (those
//! rules are the formats', in `edgepatch_format::path_rules`, re-exported here).

use crate::error::Result;
/// The path and tree rules, defined by the formats (every decoder enforces them).
pub use edgepatch_format::path_rules::{relative_path_problem, symlink_target_problem, validate_path, validate_symlink_target, TreeChecker, MAX_PATH_LEN};

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
