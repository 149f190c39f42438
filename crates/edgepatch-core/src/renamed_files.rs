//! Which old file a new file replaced under another name.
//!
//! Web builds name their files after their content ("game-3f9a1c2e.wasm" and
//! "index-b71d04aa.js" from Vite, Unity's "name files as hashes", webpack's `[contenthash]`):
//! a changed file then has no old file at its path. Its old version is still the best guide
//! to where its bytes came from, and for a wasm module the one to transform against: the
//! normalized form does not care which old module it was made against (the side info holds
//! all the inverse needs, docs/FORMAT.md §2.8). Stored in the field-split layout (§2.8.7), a
//! renamed module's patch names that old file as the one it reads split (§2.8.1).
//!
//! The rule, one for every writer (the CLI's in-memory and bounded diffs, the Worker through
//! the wasm bindings): among the files of one directory that only the new build has and those
//! that only the old build has, a new file is paired with the old one whose name is the same
//! once the hash-like parts are taken out (see [`name_key`]; the extension stays), where exactly
//! one old and one new file have that name; a directory left with exactly one such file of an
//! extension on each side pairs those two.

use std::collections::{HashMap, HashSet};

/// A name part at least this long that holds a digit is taken for a hash.
const MIN_HASH_PART: usize = 6;

/// The file name of `path` with its hash-like parts taken out: the parts between `-`, `_` and
/// `.` that are at least `MIN_HASH_PART` characters long and hold a digit; the extension
/// stays. "game-3f9a1c2e.wasm" and "game-b71d04aa.wasm" both give "game.wasm";
/// "a1b2c3d4e5f6.wasm" gives ".wasm".
fn name_key(path: &str) -> String {
    let name = path.rsplit('/').next().unwrap_or(path);
    let (stem, extension) = name.rsplit_once('.').unwrap_or((name, ""));
    let is_hash = |part: &str| part.len() >= MIN_HASH_PART && part.bytes().any(|b| b.is_ascii_digit());
    let kept: Vec<&str> = stem.split(['-', '_', '.']).filter(|part| !is_hash(part)).collect();
    format!("{}.{}", kept.join("-"), extension.to_ascii_lowercase())
}

/// The directory and extension of `path`: files are paired only within one of these.
fn place(path: &str) -> (&str, String) {
    let dir = path.rsplit_once('/').map_or("", |(dir, _)| dir);
    let name = path.rsplit('/').next().unwrap_or(path);
    (dir, name.rsplit_once('.').map_or(String::new(), |(_, e)| e.to_ascii_lowercase()))
}

/// Pairs of (index in `new_paths`, index in `old_paths`) of renamed files, by the rule in the
/// module doc. Paths in both builds are not renamed and are left out.
pub fn renamed_counterparts(old_paths: &[&str], new_paths: &[&str]) -> Vec<(usize, usize)> {
    let old_set: HashSet<&str> = old_paths.iter().copied().collect();
    let new_set: HashSet<&str> = new_paths.iter().copied().collect();
    // (directory, extension) -> (only-new files, only-old files), as indices.
    type Sides = (Vec<usize>, Vec<usize>);
    let mut places: HashMap<(&str, String), Sides> = HashMap::new();
    for (i, p) in new_paths.iter().enumerate().filter(|(_, p)| !old_set.contains(*p)) {
        places.entry(place(p)).or_default().0.push(i);
    }
    for (i, p) in old_paths.iter().enumerate().filter(|(_, p)| !new_set.contains(*p)) {
        if let Some(d) = places.get_mut(&place(p)) {
            d.1.push(i);
        }
    }
    let mut pairs = Vec::new();
    for (added, removed) in places.into_values() {
        let by_key = |paths: &[&str], list: &[usize]| {
            let mut keys: HashMap<String, Vec<usize>> = HashMap::new();
            for &i in list {
                keys.entry(name_key(paths[i])).or_default().push(i);
            }
            keys
        };
        let (new_keys, old_keys) = (by_key(new_paths, &added), by_key(old_paths, &removed));
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
    // The same pairs whatever order the maps iterate in.
    pairs.sort_unstable();
    pairs
}

/// [`renamed_counterparts`] by path: new path -> the old path it was renamed from. A
/// single-file build's one path is the same on both sides: nothing is renamed.
pub fn renamed_paths<'a>(old_paths: &[&'a str], new_paths: &[&'a str]) -> HashMap<&'a str, &'a str> {
    renamed_counterparts(old_paths, new_paths).into_iter().map(|(n, o)| (new_paths[n], old_paths[o])).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_parts_are_taken_out_of_names() {
        assert_eq!(name_key("assets/game-3f9a1c2e.wasm"), "game.wasm");
        assert_eq!(name_key("assets/game-b71d04aa.wasm"), "game.wasm");
        assert_eq!(name_key("Build/5b0c1f7e9d8a4b6c2e1f0a9b8c7d6e5f.wasm"), ".wasm");
        assert_eq!(name_key("pkg/my_lib_bg.wasm"), "my-lib-bg.wasm");
        assert_eq!(name_key("assets/index.B71d04aa.JS"), "index.js");
        // Short or digit-free parts are kept: "v2" and "engine" are names, not hashes.
        assert_eq!(name_key("engine.v2.wasm"), "engine-v2.wasm");
    }

    #[test]
    fn renamed_files_pair_within_a_directory_and_extension() {
        let old = ["assets/game-3f9a1c2e.wasm", "assets/physics-00aa11bb.wasm", "assets/index-1234567.js", "index.html", "same.wasm", "other/x-123456.wasm"];
        let new = ["assets/game-b71d04aa.wasm", "assets/physics-99ff88ee.wasm", "assets/index-7654321.js", "index.html", "same.wasm", "lib/x-654321.wasm"];
        // Same-path files are not renamed; different directories do not pair.
        assert_eq!(renamed_counterparts(&old, &new), vec![(0, 0), (1, 1), (2, 2)]);
        // One left on each side pairs whatever the names, within an extension.
        assert_eq!(renamed_counterparts(&["a/old.wasm"], &["a/new.wasm"]), vec![(0, 0)]);
        assert!(renamed_counterparts(&["a/old.js"], &["a/new.wasm"]).is_empty());
        // Two unnamed hashes on each side: ambiguous, no pair.
        let old = ["a/1a2b3c4d5e.wasm", "a/9f8e7d6c5b.wasm"];
        let new = ["a/0a0b0c0d0e.wasm", "a/1f1e1d1c1b.wasm"];
        assert!(renamed_counterparts(&old, &new).is_empty());
    }
}
