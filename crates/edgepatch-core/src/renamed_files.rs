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
//!
//! A writer that holds the files' content (the CLI's in-memory diff) then pairs what is left
//! of a directory and extension by content ([`renamed_counterparts_by_content`]): names that
//! are hashes alone ("5b0c1f7e.wasm" and "9d8a4b6c.wasm" beside "e1f0a9b8.wasm") say nothing,
//! but a module's next version still shares most of its byte strings with it. Each file's
//! [`ContentSketch`] samples them; the pairs that resemble each other most are taken first.
//! The bounded diff and the Worker pair by name alone (they hold signatures, not content).

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
    renamed_counterparts_with(old_paths, new_paths, None)
}

/// [`renamed_counterparts`], and then, of the files a directory and extension leaves unpaired,
/// the pairs whose content resembles most: `old_content[i]` and `new_content[i]` are the files
/// of `old_paths[i]` and `new_paths[i]`.
pub fn renamed_counterparts_by_content(old: &[(&str, &[u8])], new: &[(&str, &[u8])]) -> Vec<(usize, usize)> {
    let (old_paths, new_paths): (Vec<&str>, Vec<&str>) = (old.iter().map(|f| f.0).collect(), new.iter().map(|f| f.0).collect());
    renamed_counterparts_with(&old_paths, &new_paths, Some((old, new)))
}

/// The files of each side, by index, for the content pass.
type Contents<'a, 'b> = Option<(&'b [(&'a str, &'a [u8])], &'b [(&'a str, &'a [u8])])>;

fn renamed_counterparts_with(old_paths: &[&str], new_paths: &[&str], contents: Contents<'_, '_>) -> Vec<(usize, usize)> {
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
        } else if let Some((old, new)) = contents {
            pairs.extend(most_alike(&left_new, &left_old, |n| new[n].1, |o| old[o].1));
        }
    }
    // The same pairs whatever order the maps iterate in.
    pairs.sort_unstable();
    pairs
}

/// Files of one side of a place beyond which the content pass is not tried: it compares every
/// new file with every old one.
const MAX_CONTENT_CANDIDATES: usize = 64;

/// Below this resemblance (estimated share of byte strings in common) two files are not
/// taken for versions of each other.
const MIN_RESEMBLANCE: f64 = 0.05;

/// Pairs of `new` and `old` files, most alike first, each file at most once.
fn most_alike<'a>(new: &[usize], old: &[usize], new_content: impl Fn(usize) -> &'a [u8], old_content: impl Fn(usize) -> &'a [u8]) -> Vec<(usize, usize)> {
    if new.is_empty() || old.is_empty() || new.len() > MAX_CONTENT_CANDIDATES || old.len() > MAX_CONTENT_CANDIDATES {
        return Vec::new();
    }
    let new_sketches: Vec<ContentSketch> = new.iter().map(|&n| ContentSketch::of(new_content(n))).collect();
    let old_sketches: Vec<ContentSketch> = old.iter().map(|&o| ContentSketch::of(old_content(o))).collect();
    let mut candidates: Vec<(f64, usize, usize)> = Vec::new();
    for (a, ns) in new_sketches.iter().enumerate() {
        for (b, os) in old_sketches.iter().enumerate() {
            let r = ns.resemblance(os);
            if r >= MIN_RESEMBLANCE {
                candidates.push((r, a, b));
            }
        }
    }
    // Most alike first; ties by index, so the pairs do not depend on anything else.
    candidates.sort_by(|x, y| y.0.total_cmp(&x.0).then((x.1, x.2).cmp(&(y.1, y.2))));
    let (mut new_taken, mut old_taken) = (vec![false; new.len()], vec![false; old.len()]);
    let mut pairs = Vec::new();
    for (_, a, b) in candidates {
        if !new_taken[a] && !old_taken[b] {
            new_taken[a] = true;
            old_taken[b] = true;
            pairs.push((new[a], old[b]));
        }
    }
    pairs
}

/// A sample of a file's byte strings: the [`SKETCH_SIZE`] smallest hashes of its 32-byte
/// strings (bottom-k MinHash). Two versions of a file share most strings wherever they sit,
/// so the share of common hashes among the smallest of both estimates how much of their
/// content they share, whatever moved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContentSketch(Vec<u64>);

/// Hashes a sketch keeps.
const SKETCH_SIZE: usize = 256;
/// Bytes of each string hashed.
const STRING_LEN: usize = 32;

impl ContentSketch {
    /// The sketch of `bytes`: one pass, a rolling hash of each 32-byte string (buzhash),
    /// mixed, the smallest kept.
    pub fn of(bytes: &[u8]) -> ContentSketch {
        let table: [u64; 256] = std::array::from_fn(|i| mix64(i as u64 + 1));
        let mut heap = std::collections::BinaryHeap::with_capacity(SKETCH_SIZE + 1);
        let mut seen = HashSet::new();
        let mut h = 0u64;
        for (i, &b) in bytes.iter().enumerate() {
            h = h.rotate_left(1) ^ table[b as usize];
            if i >= STRING_LEN {
                h ^= table[bytes[i - STRING_LEN] as usize].rotate_left(STRING_LEN as u32);
            }
            if i + 1 < STRING_LEN {
                continue;
            }
            let v = mix64(h);
            if (heap.len() < SKETCH_SIZE || v < *heap.peek().expect("full")) && seen.insert(v) {
                heap.push(v);
                if heap.len() > SKETCH_SIZE {
                    let out = heap.pop().expect("over full");
                    seen.remove(&out);
                }
            }
        }
        let mut v = heap.into_vec();
        v.sort_unstable();
        ContentSketch(v)
    }

    /// The estimated share of byte strings the two files have in common (0 to 1): of the
    /// smallest hashes of both together, the share that is in each.
    pub fn resemblance(&self, other: &ContentSketch) -> f64 {
        let (a, b) = (&self.0, &other.0);
        let (mut i, mut j, mut common, mut union) = (0, 0, 0usize, 0usize);
        while union < SKETCH_SIZE && (i < a.len() || j < b.len()) {
            match (a.get(i), b.get(j)) {
                (Some(x), Some(y)) if x == y => {
                    common += 1;
                    i += 1;
                    j += 1;
                }
                (Some(x), Some(y)) if x < y => i += 1,
                (Some(_), None) => i += 1,
                _ => j += 1,
            }
            union += 1;
        }
        if union == 0 {
            0.0
        } else {
            common as f64 / union as f64
        }
    }
}

/// A 64-bit finalizer (splitmix64's): spreads a rolling hash's bits over the whole word.
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
    z ^ (z >> 31)
}

/// [`renamed_counterparts`] by path: new path -> the old path it was renamed from. A
/// single-file build's one path is the same on both sides: nothing is renamed.
pub fn renamed_paths<'a>(old_paths: &[&'a str], new_paths: &[&'a str]) -> HashMap<&'a str, &'a str> {
    renamed_counterparts(old_paths, new_paths).into_iter().map(|(n, o)| (new_paths[n], old_paths[o])).collect()
}

/// [`renamed_counterparts_by_content`] by path: new path -> the old path it was renamed from.
pub fn renamed_paths_by_content<'a>(old: &[(&'a str, &'a [u8])], new: &[(&'a str, &'a [u8])]) -> HashMap<&'a str, &'a str> {
    renamed_counterparts_by_content(old, new).into_iter().map(|(n, o)| (new[n].0, old[o].0)).collect()
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

    /// Versions of two files, each the other's with a few bytes changed and some moved.
    fn versions(seed: u64) -> (Vec<u8>, Vec<u8>) {
        let old = edgepatch_testkit::noise(seed, 200_000);
        let mut new = old[1000..].to_vec();
        new.extend_from_slice(&old[..1000]);
        for k in (0..new.len()).step_by(5000) {
            new[k] ^= 0x55;
        }
        (old, new)
    }

    #[test]
    fn names_that_are_hashes_alone_pair_by_content() {
        let (a_old, a_new) = versions(1);
        let (b_old, b_new) = versions(2);
        let old: [(&str, &[u8]); 3] = [("b/1a2b3c4d5e.wasm", &b_old), ("b/9f8e7d6c5b.wasm", &a_old), ("b/index.html", b"<html>")];
        let new: [(&str, &[u8]); 3] = [("b/0a0b0c0d0e.wasm", &a_new), ("b/1f1e1d1c1b.wasm", &b_new), ("b/index.html", b"<html>")];
        let (old_paths, new_paths): (Vec<&str>, Vec<&str>) = (old.iter().map(|x| x.0).collect(), new.iter().map(|x| x.0).collect());
        assert!(renamed_counterparts(&old_paths, &new_paths).is_empty(), "names say nothing");
        assert_eq!(renamed_counterparts_by_content(&old, &new), vec![(0, 1), (1, 0)]);
        // Unrelated content does not pair.
        let other = edgepatch_testkit::noise(9, 200_000);
        let unrelated: [(&str, &[u8]); 2] = [("b/0a0b0c0d0e.wasm", &other), ("b/1f1e1d1c1b.wasm", &other[..1000])];
        assert!(renamed_counterparts_by_content(&old[..2], &unrelated).is_empty());
    }

    #[test]
    fn sketches_estimate_the_share_of_content_in_common() {
        let (old, new) = versions(3);
        let (a, b) = (ContentSketch::of(&old), ContentSketch::of(&new));
        assert_eq!(a.resemblance(&a), 1.0);
        assert!(a.resemblance(&b) > 0.5, "{}", a.resemblance(&b));
        assert!(a.resemblance(&ContentSketch::of(&edgepatch_testkit::noise(4, 200_000))) < 0.02);
        assert_eq!(ContentSketch::of(b"short").resemblance(&ContentSketch::of(b"short")), 0.0, "no 32-byte string");
    }
}
