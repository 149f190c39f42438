//! Which old module a new wasm file's transform is made against, when the build renamed it.
//!
//! Web builds name their files after their content ("game-3f9a1c2e.wasm" from Vite, Unity's
//! "name files as hashes", webpack's `[contenthash]`): a changed module then has no old file
//! at its path, and would be diffed as it is. The normalized form does not care which old
//! module it was made against (the side info holds all the inverse needs, docs/FORMAT.md
//! §2.8), so a writer may pair a new module with the old one it replaced. The field-split
//! layout (§2.8.7) reads the old file at the same path, so a renamed pair is stored
//! normalized, never split.
//!
//! The rule, one for every writer (the CLI's diffs and the Worker, through the wasm bindings):
//! among the `.wasm` files of one directory that only the new build has and those that only
//! the old build has, a new file is paired with the old one whose name is the same once the
//! hash-like parts are taken out (see [`name_key`]), where exactly one old and one new file
//! have that name; a directory left with exactly one such file on each side pairs those two.

use std::collections::{HashMap, HashSet};

/// A name part at least this long that holds a digit is taken for a hash.
const MIN_HASH_PART: usize = 6;

/// The file name of `path` with its extension and hash-like parts taken out: the parts between
/// `-`, `_` and `.` that are at least `MIN_HASH_PART` characters long and hold a digit.
/// "game-3f9a1c2e.wasm" and "game-b71d04aa.wasm" both give "game"; "a1b2c3d4e5f6.wasm" gives "".
fn name_key(path: &str) -> String {
    let name = path.rsplit('/').next().unwrap_or(path);
    let stem = name.strip_suffix(".wasm").unwrap_or(name);
    let is_hash = |part: &str| part.len() >= MIN_HASH_PART && part.bytes().any(|b| b.is_ascii_digit());
    stem.split(['-', '_', '.']).filter(|part| !is_hash(part)).collect::<Vec<_>>().join("-")
}

fn directory(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(dir, _)| dir)
}

fn is_wasm_name(path: &str) -> bool {
    path.to_ascii_lowercase().ends_with(".wasm")
}

/// Pairs of (index in `new_paths`, index in `old_paths`) of renamed `.wasm` files, by the rule
/// in the module doc. Files with a path in both builds are not renamed and are left out.
pub fn renamed_counterparts(old_paths: &[&str], new_paths: &[&str]) -> Vec<(usize, usize)> {
    let old_set: HashSet<&str> = old_paths.iter().copied().collect();
    let new_set: HashSet<&str> = new_paths.iter().copied().collect();
    // directory -> (only-new files, only-old files), as indices.
    let mut dirs: HashMap<&str, (Vec<usize>, Vec<usize>)> = HashMap::new();
    for (i, p) in new_paths.iter().enumerate().filter(|(_, p)| is_wasm_name(p) && !old_set.contains(*p)) {
        dirs.entry(directory(p)).or_default().0.push(i);
    }
    for (i, p) in old_paths.iter().enumerate().filter(|(_, p)| is_wasm_name(p) && !new_set.contains(*p)) {
        if let Some(d) = dirs.get_mut(directory(p)) {
            d.1.push(i);
        }
    }
    let mut pairs = Vec::new();
    let mut dirs: Vec<_> = dirs.into_values().collect();
    // The same pairs whatever order the maps iterate in.
    dirs.sort_unstable();
    for (added, removed) in dirs {
        let count = |paths: &[&str], list: &[usize]| {
            let mut keys: HashMap<String, Vec<usize>> = HashMap::new();
            for &i in list {
                keys.entry(name_key(paths[i])).or_default().push(i);
            }
            keys
        };
        let (new_keys, old_keys) = (count(new_paths, &added), count(old_paths, &removed));
        let mut paired = (HashSet::new(), HashSet::new());
        for (key, news) in &new_keys {
            if let (&[n], Some(&[o])) = (news.as_slice(), old_keys.get(key).map(Vec::as_slice)) {
                pairs.push((n, o));
                paired.0.insert(n);
                paired.1.insert(o);
            }
        }
        let left_new: Vec<usize> = added.iter().copied().filter(|i| !paired.0.contains(i)).collect();
        let left_old: Vec<usize> = removed.iter().copied().filter(|i| !paired.1.contains(i)).collect();
        if let (&[n], &[o]) = (left_new.as_slice(), left_old.as_slice()) {
            pairs.push((n, o));
        }
    }
    pairs.sort_unstable();
    pairs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_parts_are_taken_out_of_names() {
        assert_eq!(name_key("assets/game-3f9a1c2e.wasm"), "game");
        assert_eq!(name_key("assets/game-b71d04aa.wasm"), "game");
        assert_eq!(name_key("Build/5b0c1f7e9d8a4b6c2e1f0a9b8c7d6e5f.wasm"), "");
        assert_eq!(name_key("pkg/my_lib_bg.wasm"), "my-lib-bg");
        // Short or digit-free parts are kept: "v2" and "engine" are names, not hashes.
        assert_eq!(name_key("engine.v2.wasm"), "engine-v2");
    }

    #[test]
    fn renamed_modules_pair_within_a_directory() {
        let old = ["assets/game-3f9a1c2e.wasm", "assets/physics-00aa11bb.wasm", "index.html", "same.wasm", "other/x-123456.wasm"];
        let new = ["assets/game-b71d04aa.wasm", "assets/physics-99ff88ee.wasm", "index.html", "same.wasm", "lib/x-654321.wasm"];
        // Same-path files are not renamed; different directories do not pair.
        assert_eq!(renamed_counterparts(&old, &new), vec![(0, 0), (1, 1)]);
        // One left on each side pairs whatever the names.
        assert_eq!(renamed_counterparts(&["a/old.wasm"], &["a/new.wasm"]), vec![(0, 0)]);
        // Two unnamed hashes on each side: ambiguous, no pair.
        let old = ["a/1a2b3c4d5e.wasm", "a/9f8e7d6c5b.wasm"];
        let new = ["a/0a0b0c0d0e.wasm", "a/1f1e1d1c1b.wasm"];
        assert!(renamed_counterparts(&old, &new).is_empty());
        // Not wasm by name: not paired.
        assert!(renamed_counterparts(&["a/x-123456.bin"], &["a/x-654321.bin"]).is_empty());
    }
}
