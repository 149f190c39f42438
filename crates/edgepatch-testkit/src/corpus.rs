//! The corpus of real version pairs, which CI does not have: each pair is a
//! directory holding `old` and `new`. Tests that use it skip, with the reason
//! from here, when it is absent.

use std::path::{Path, PathBuf};

/// One pair of versions of a file.
#[derive(Clone, Debug)]
pub struct Pair {
    /// The pair's name (its directory's name, or its path for [`wasm_pairs`]).
    pub name: String,
    pub old: Vec<u8>,
    pub new: Vec<u8>,
}

/// The corpus directory (it holds `pairs/<name>/{old,new}`): `EDGEPATCH_CORPUS`
/// when set, else the first that exists of `~/.cache/edgepatch-corpus` (where
/// the benchmarks fetch it) and `/work/corpus`. `Err` says why there is none.
pub fn dir() -> Result<PathBuf, String> {
    if let Some(dir) = std::env::var_os("EDGEPATCH_CORPUS") {
        let dir = PathBuf::from(dir);
        return if dir.is_dir() { Ok(dir) } else { Err(format!("EDGEPATCH_CORPUS={} is not a directory", dir.display())) };
    }
    let home = std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache/edgepatch-corpus"));
    home.into_iter()
        .chain([PathBuf::from("/work/corpus")])
        .find(|d| d.is_dir())
        .ok_or_else(|| "no corpus: EDGEPATCH_CORPUS unset and neither ~/.cache/edgepatch-corpus nor /work/corpus exists (CI has none)".into())
}

/// The corpus pair `name`, or why it cannot be read.
pub fn pair(name: &str) -> Result<Pair, String> {
    read_pair(name, &dir()?.join("pairs").join(name))
}

/// The pairs in the directory `EDGEPATCH_WASM_PAIRS` names (real modules:
/// Go, Emscripten, Rust), each subdirectory one pair named by its path; none
/// when it is unset. Panics when a pair there cannot be read.
pub fn wasm_pairs() -> Vec<Pair> {
    let Some(dir) = std::env::var_os("EDGEPATCH_WASM_PAIRS") else {
        return Vec::new();
    };
    let mut pairs: Vec<Pair> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("EDGEPATCH_WASM_PAIRS={}: {e}", Path::new(&dir).display()))
        .map(|entry| {
            let path = entry.expect("a directory entry").path();
            read_pair(&path.display().to_string(), &path).unwrap_or_else(|e| panic!("{e}"))
        })
        .collect();
    pairs.sort_by(|a, b| a.name.cmp(&b.name));
    pairs
}

fn read_pair(name: &str, dir: &Path) -> Result<Pair, String> {
    let read = |file: &str| std::fs::read(dir.join(file)).map_err(|e| format!("{}: {e}", dir.join(file).display()));
    Ok(Pair { name: name.to_string(), old: read("old")?, new: read("new")? })
}
