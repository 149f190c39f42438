//! Shared by the integration tests: loads the fixture game builds
//! (fixtures/game-v{1,2}.tar) into memory, and makes file entries.
// Each test crate includes this module and uses part of it.
#![allow(dead_code)]

use std::path::PathBuf;

use edgepatch_core::{Build, BuildEntry, EntryContent};

pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

pub fn load_tar(name: &str) -> Build {
    let bytes = std::fs::read(fixtures_dir().join(name)).expect("fixture tar");
    let mut archive = tar::Archive::new(bytes.as_slice());
    let mut entries = Vec::new();
    for e in archive.entries().expect("tar entries") {
        let mut e = e.expect("tar entry");
        let path = e.path().expect("tar path").to_string_lossy().trim_start_matches("./").trim_end_matches('/').to_string();
        if path.is_empty() {
            continue;
        }
        let header = e.header().clone();
        let content = match header.entry_type() {
            tar::EntryType::Directory => EntryContent::Directory,
            tar::EntryType::Symlink => EntryContent::Symlink { target: e.link_name().unwrap().unwrap().to_string_lossy().into_owned() },
            tar::EntryType::Regular => {
                let mut data = Vec::new();
                std::io::Read::read_to_end(&mut e, &mut data).unwrap();
                EntryContent::File { executable: header.mode().unwrap() & 0o111 != 0, data }
            }
            other => panic!("unexpected tar entry type {other:?}"),
        };
        entries.push(BuildEntry { path, content });
    }
    Build::from_entries(entries).expect("fixture build is valid")
}

/// A regular, non-executable file entry.
pub fn file(path: &str, data: Vec<u8>) -> BuildEntry {
    BuildEntry { path: path.into(), content: EntryContent::File { executable: false, data } }
}
