//! Build paths that cannot be written as they are on every file system players and studios
//! use: names that differ only in case (one file on NTFS, APFS and exFAT by default), names
//! that differ only in Unicode normalization (NFC vs NFD: one file on APFS and HFS+), names
//! Windows refuses (`CON`, `aux.txt`, `a:b`, a trailing dot or space), and components
//! longer than 255 bytes. `edgepatch diff` reports them (and refuses with
//! `--strict-portable`): a build that has them installs differently, or not at all, there.

use std::collections::HashMap;

use unicode_normalization::UnicodeNormalization;

/// The longest file name component most file systems take (ext4, APFS, NTFS: 255).
const MAX_COMPONENT_BYTES: usize = 255;

/// Names Windows reserves for devices, with or without an extension.
const WINDOWS_RESERVED: &[&str] = &[
    "CON", "PRN", "AUX", "NUL", "COM1", "COM2", "COM3", "COM4", "COM5", "COM6", "COM7", "COM8", "COM9", "LPT1", "LPT2", "LPT3", "LPT4", "LPT5", "LPT6", "LPT7",
    "LPT8", "LPT9",
];

/// One problem per message, naming the paths; empty when every path is portable.
pub fn portability_problems<'a>(paths: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut problems = Vec::new();
    // Paths that fold to the same key, per kind of folding.
    let mut by_form: HashMap<String, Vec<&str>> = HashMap::new();
    let mut by_case: HashMap<String, Vec<(String, &str)>> = HashMap::new();
    for path in paths {
        for component in path.split('/') {
            if let Some(why) = component_problem(component) {
                problems.push(format!("{path}: {why}"));
                break;
            }
        }
        let nfc: String = path.nfc().collect();
        by_case.entry(nfc.chars().flat_map(char::to_lowercase).collect()).or_default().push((nfc.clone(), path));
        by_form.entry(nfc).or_default().push(path);
    }
    let mut found: Vec<String> = by_form
        .into_values()
        .filter(|g| g.len() > 1)
        .map(|g| format!("{} differ only in Unicode normalization (one file on APFS and HFS+)", g.join(", ")))
        .collect();
    // Case: paths whose normalized forms still differ (normalization alone is reported above).
    for group in by_case.into_values() {
        let mut forms: Vec<&str> = group.iter().map(|(nfc, _)| nfc.as_str()).collect();
        forms.sort_unstable();
        forms.dedup();
        if forms.len() > 1 {
            let paths: Vec<&str> = group.iter().map(|(_, p)| *p).collect();
            found.push(format!("{} differ only in letter case (one file on NTFS, APFS and exFAT by default)", paths.join(", ")));
        }
    }
    found.sort();
    problems.extend(found);
    problems
}

fn component_problem(c: &str) -> Option<String> {
    if c.len() > MAX_COMPONENT_BYTES {
        return Some(format!("a name of {} bytes (most file systems take at most {MAX_COMPONENT_BYTES})", c.len()));
    }
    if let Some(bad) = c.chars().find(|ch| matches!(ch, '<' | '>' | ':' | '"' | '\\' | '|' | '?' | '*') || (*ch as u32) < 32) {
        return Some(format!("{c:?} contains {bad:?}, which Windows does not allow in names"));
    }
    if c.ends_with('.') || c.ends_with(' ') {
        return Some(format!("{c:?} ends with a dot or a space, which Windows drops"));
    }
    let stem = c.split('.').next().unwrap_or(c).trim_end();
    if WINDOWS_RESERVED.iter().any(|r| r.eq_ignore_ascii_case(stem)) {
        return Some(format!("{c:?} is a device name on Windows"));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn portable_paths_pass() {
        assert!(portability_problems(["index.html", "assets/img/Title.png", "data/levels.json", "fonts/Ünïcode.ttf"]).is_empty());
    }

    #[test]
    fn case_and_normalization_collisions_are_named() {
        let p = portability_problems(["assets/a.PNG", "assets/A.png", "caf\u{e9}.txt", "cafe\u{301}.txt", "other.txt"]);
        assert!(p.iter().any(|m| m.contains("assets/a.PNG") && m.contains("assets/A.png") && m.contains("case")), "{p:?}");
        assert!(p.iter().any(|m| m.contains("café.txt") && m.contains("normalization (one file on APFS")), "{p:?}");
        assert!(!p.iter().any(|m| m.contains("other.txt")), "{p:?}");
    }

    #[test]
    fn windows_names_and_long_components_are_named() {
        let long = "x".repeat(256);
        let p = portability_problems(["CON", "logs/aux.txt", "a:b", "dir./f", "trailing ", "ok/Console.txt", long.as_str()]);
        for bad in ["CON", "logs/aux.txt", "a:b", "dir./f", "trailing "] {
            assert!(p.iter().any(|m| m.starts_with(&format!("{bad}:"))), "{bad}: {p:?}");
        }
        assert!(p.iter().any(|m| m.contains("256 bytes")), "{p:?}");
        assert!(!p.iter().any(|m| m.starts_with("ok/Console.txt")), "{p:?}");
    }
}
