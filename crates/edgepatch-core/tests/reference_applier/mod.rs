//! An independent reference applier, written from docs/FORMAT.md §1-§2 alone.
//! It shares no code with the streaming applier in `src/apply.rs` (nor with
//! `patch_format.rs` or `wire.rs`): its own byte reader, varints, tree parser,
//! listing digest, link rules, control-stream decoder and op executor (the
//! byte streams in `streams`, the wasm inverse in `wasm`). It uses only the
//! `zstd` crate to decode frames, `blake3` to hash, the test kit's LEB128
//! writers, and the core's `Build` type to hold builds. It is slow and holds everything in memory on
//! purpose: the point is to be obviously what the document says, so that a
//! parser bug in the fast applier shows up as a difference.
// Each test crate that includes this module uses part of it.
#![allow(dead_code)]

mod deflate;
mod streams;
mod wasm;

use std::collections::{HashMap, HashSet};

use edgepatch_core::{Build, BuildEntry, EntryContent};
use edgepatch_testkit::leb128;
use streams::*;

pub type Outcome<T> = Result<T, String>;

// §2.7 limits, restated from the document.
const MIB: u64 = 1 << 20;
const MAX_TREE: u64 = 64 * MIB;
const MAX_NAMES: u64 = 64 * MIB;
const MAX_COUNT: u64 = 1 << 22;
const MAX_PATH: usize = 4096;
const MAX_SEGMENT: u64 = 16 * MIB;
const MAX_CONTROL: u64 = 32 * MIB;
const MAX_SPANS: u64 = 65536;
const MAX_SPAN_BYTES: u64 = 8 * MIB;
/// A window's back reach without a declared reach, and the most a patch may declare (§2.6).
const BASE_BACK: u64 = 4 * MIB;
const MAX_BACK: u64 = 16 * MIB;
// §2.8 limits.
const MAX_WASM: u64 = 64 * MIB;
const MAX_SIDE: u64 = 4 * MIB;

/// §1 path rules.
fn path_ok(path: &str) -> bool {
    !path.is_empty()
        && path.len() <= MAX_PATH
        && !path.contains('\0')
        && !path.contains('\\')
        && path.split('/').all(|c| !c.is_empty() && c != "." && c != "..")
}

/// §1 symlink target rule: 1..4096 bytes, no NUL; anything else is data.
fn target_ok(_link: &str, target: &str) -> bool {
    !target.is_empty() && target.len() <= MAX_PATH && !target.contains('\0')
}

#[derive(Clone, Debug)]
enum Old {
    File { executable: bool, size: u64 },
    Link(String),
    Dir,
}

/// The old listing (§2.1): every entry sorted by path bytes.
fn old_listing(old: &Build) -> Vec<(String, Old)> {
    let mut list: Vec<(String, Old)> = old
        .entries
        .iter()
        .map(|e| {
            let kind = match &e.content {
                EntryContent::File { executable, data } => Old::File { executable: *executable && !old.is_single_file(), size: data.len() as u64 },
                EntryContent::Symlink { target } => Old::Link(target.clone()),
                EntryContent::Directory => Old::Dir,
            };
            (e.path.clone(), kind)
        })
        .collect();
    list.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    list
}

fn listing_digest(list: &[(String, Old)]) -> [u8; 32] {
    let mut enc = Vec::new();
    leb128::write_u64(&mut enc, list.len() as u64);
    for (path, kind) in list {
        leb128::write_u64(&mut enc, path.len() as u64);
        enc.extend_from_slice(path.as_bytes());
        match kind {
            Old::File { executable, size } => {
                enc.push(0);
                enc.push(u8::from(*executable));
                leb128::write_u64(&mut enc, *size);
            }
            Old::Link(t) => {
                enc.push(1);
                leb128::write_u64(&mut enc, t.len() as u64);
                enc.extend_from_slice(t.as_bytes());
            }
            Old::Dir => enc.push(2),
        }
    }
    *blake3::hash(&enc).as_bytes()
}

#[derive(Clone, Debug)]
enum New {
    Dir,
    Link(String),
    /// Content from the delta stream.
    Delta {
        executable: bool,
        size: u64,
        /// §2.8: the delta holds the normalized form; (file size, side info).
        wasm: Option<(u64, Vec<u8>, Option<usize>)>,
    },
    /// Content of an old file (by path).
    Copy {
        executable: bool,
        from: String,
    },
}

/// Applies `patch` to `old` as docs/FORMAT.md §2 says; the new build or why not. The patch is
/// trusted (a test's own): its compressed assets are rebuilt.
pub fn apply(patch: &[u8], old: &Build) -> Outcome<Build> {
    apply_with(patch, old, true)
}

/// [`apply`] of a patch from anywhere: one with a compressed asset is refused (§2.8.8: no
/// signed manifest vouches for its side infos), as the fuzz targets give it.
pub fn apply_as_received(patch: &[u8], old: &Build) -> Outcome<Build> {
    apply_with(patch, old, false)
}

fn apply_with(patch: &[u8], old: &Build, trust_side_infos: bool) -> Outcome<Build> {
    // Checksum first: the last 32 bytes are the BLAKE3 of the rest.
    if patch.len() < 8 || &patch[..8] != b"EDGEPTCH" {
        return Err("magic".into());
    }
    let mut r = Bytes::new(patch);
    r.take(8)?;
    let version = u16::from_le_bytes(r.take(2)?.try_into().unwrap());
    if version != 2 {
        return Err(format!("version {version}"));
    }
    let flags = u16::from_le_bytes(r.take(2)?.try_into().unwrap());
    if flags > 127 {
        return Err("unknown flags".into());
    }
    let run_coded_allowed = flags & 8 == 8;
    let single = flags & 1 == 1;
    let has_transforms = flags & 2 == 2;
    let declares_reach = flags & 4 == 4;
    let mode_blind = flags & 16 == 16;
    let split_references = flags & 32 == 32;
    let lzma_allowed = flags & 64 == 64;
    if split_references && (single || !has_transforms) {
        return Err("split references without a tree's transform table".into());
    }
    if single != old.is_single_file() {
        return Err("single-file patch for a tree or the reverse".into());
    }
    let tree_size = r.varint()?;
    let tree_comp = r.varint()?;
    if tree_size == 0 || tree_size > MAX_TREE || tree_comp == 0 || tree_comp > tree_size + tree_size / 64 + 1024 {
        return Err("tree sizes out of range".into());
    }
    let tree_bytes = one_frame(r.take(tree_comp)?, tree_size, None, 24)?;

    // §2.1 tree section.
    let listing = old_listing(old);
    let mut t = Bytes::new(&tree_bytes);
    if single {
        let size = t.varint()?;
        let actual = match listing.as_slice() {
            [(_, Old::File { size, .. })] => *size,
            _ => return Err("old build is not one file".into()),
        };
        if size != actual {
            return Err("old file size differs".into());
        }
    } else if t.take(32)? != listing_digest(&listing) {
        return Err("old listing digest differs".into());
    }
    let runs_n = t.at_most(MAX_COUNT.min(t.left() / 2), "runs")?;
    let mut runs = Vec::new();
    for _ in 0..runs_n {
        runs.push((t.at_most(MAX_COUNT, "keep")?, t.at_most(MAX_COUNT, "drop")?));
    }
    let count = t.at_most((1 << 20u64).min(t.left() / 3), "entries")?;
    let name_limit = MAX_NAMES.min(MIB + 64 * tree_size);
    let mut names = 0u64;
    let mut paths: Vec<String> = Vec::new();
    for _ in 0..count {
        let prev = paths.last().map(|p| p.as_bytes().to_vec()).unwrap_or_default();
        let shared = t.varint()?;
        if shared > prev.len() as u64 {
            return Err("front coding shares more than the previous path".into());
        }
        let rest_len = t.at_most(MAX_PATH as u64, "path length")?;
        let mut bytes = prev[..shared as usize].to_vec();
        bytes.extend_from_slice(t.take(rest_len)?);
        if bytes.len() > MAX_PATH {
            return Err("path over 4096 bytes".into());
        }
        // A `shared` that splits a character leaves invalid UTF-8 (or a different character).
        if std::str::from_utf8(&prev[..shared as usize]).is_err() {
            return Err("front coding splits a character".into());
        }
        let path = String::from_utf8(bytes).map_err(|_| "path not UTF-8".to_string())?;
        names += path.len() as u64;
        if names > name_limit {
            return Err("paths over their limit".into());
        }
        if !single && !path_ok(&path) {
            return Err(format!("bad path {path:?}"));
        }
        paths.push(path);
    }
    let mut codes = Vec::new();
    for _ in 0..count {
        let c = t.byte()?;
        if c > 5 {
            return Err("entry code".into());
        }
        codes.push(c);
    }
    let mut targets = HashMap::new();
    for (i, _) in codes.iter().enumerate().filter(|(_, c)| **c == 1) {
        let target = t.text(MAX_PATH)?;
        names += target.len() as u64;
        if names > name_limit || !target_ok(&paths[i], &target) {
            return Err(format!("bad symlink target {target:?}"));
        }
        targets.insert(i, target);
    }
    let mut sizes = HashMap::new();
    let mut delta_total = 0u64;
    for (i, _) in codes.iter().enumerate().filter(|(_, c)| matches!(**c, 2 | 3)) {
        let size = t.varint()?;
        delta_total = delta_total.checked_add(size).ok_or("delta sizes overflow")?;
        sizes.insert(i, size);
    }
    let mut copy_of = HashMap::new();
    for (i, _) in codes.iter().enumerate().filter(|(_, c)| **c >= 4) {
        copy_of.insert(i, t.varint()?);
    }
    let old_count = t.at_most(MAX_COUNT.min(t.left()), "old files")?;
    let listed_files: Vec<usize> = listing.iter().enumerate().filter(|(_, e)| matches!(e.1, Old::File { .. })).map(|(i, _)| i).collect();
    let mut table: Vec<(usize, bool)> = Vec::new();
    let mut previous: i128 = -1;
    for _ in 0..old_count {
        let number = previous + 1 + i128::from(t.varint()?);
        let &at = listed_files.get(usize::try_from(number).map_err(|_| "old file number")?).ok_or("old file beyond the listing")?;
        table.push((at, false));
        previous = number;
    }
    for entry in table.iter_mut() {
        entry.1 = match t.byte()? {
            0 => false,
            1 => true,
            _ => return Err("in_reference flag".into()),
        };
    }
    let files_digest: [u8; 32] = t.take(32)?.try_into().unwrap();
    // §2.8.1 transform table: named entry -> (file size, side info, the old table's index of
    // the old file read split when the row names one).
    let mut transformed: HashMap<usize, (u64, Vec<u8>, Option<usize>)> = HashMap::new();
    if has_transforms {
        let delta_files: Vec<usize> = codes.iter().enumerate().filter(|(_, c)| matches!(**c, 2 | 3)).map(|(i, _)| i).collect();
        let rows = t.varint()?;
        if rows == 0 || rows > delta_files.len() as u64 || rows > t.left() / 4 {
            return Err("transform table row count".into());
        }
        let mut previous: i128 = -1;
        for _ in 0..rows {
            let number = previous + 1 + i128::from(t.varint()?);
            let &i = delta_files.get(usize::try_from(number).map_err(|_| "transformed file number")?).ok_or("transformed file beyond the delta files")?;
            previous = number;
            let size = t.varint()?;
            if size == 0 || size > MAX_WASM || !(8..=MAX_WASM).contains(&sizes[&i]) {
                return Err("transformed file size".into());
            }
            let side_len = t.varint()?;
            if side_len == 0 || side_len > MAX_SIDE {
                return Err("side info size".into());
            }
            let side = t.take(side_len)?.to_vec();
            let named = if split_references { t.varint()?.checked_sub(1) } else { None };
            let named = match named {
                None => None,
                Some(k) if table.get(k as usize).is_some_and(|f| f.1) && (wasm::has_layout(&side) || deflate::is_compressed(&side)) => Some(k as usize),
                Some(_) => return Err("split reference: no old file of the reference, or a row not in the split layout".into()),
            };
            transformed.insert(i, (size, side, named));
        }
        if split_references && transformed.values().all(|w| w.2.is_none()) {
            return Err("split references flagged, none named".into());
        }
    }
    // §2.6: the window reach, when declared.
    let reach = if declares_reach {
        let reach = t.varint()?;
        if reach <= BASE_BACK || reach > MAX_BACK {
            return Err("window reach".into());
        }
        reach
    } else {
        BASE_BACK
    };
    // §2.1: the mode-blind digest, only when an old file is executable (and left out for a
    // reader without it, §5). This applier knows the old build's modes, so it checks the
    // digest against them.
    let has_executable = listing.iter().any(|(_, o)| matches!(o, Old::File { executable: true, .. }));
    if mode_blind && (single || !has_executable) {
        return Err("mode-blind digest flag and the old build's executable files disagree".into());
    }
    if mode_blind {
        let blind: Vec<(String, Old)> = listing
            .iter()
            .map(|(p, o)| match o {
                Old::File { size, .. } => (p.clone(), Old::File { executable: false, size: *size }),
                other => (p.clone(), other.clone()),
            })
            .collect();
        if t.take(32)? != listing_digest(&blind) {
            return Err("mode-blind listing digest differs".into());
        }
    }
    if !t.done() {
        return Err("bytes after the files digest (or the transform table, the window reach, the mode-blind digest)".into());
    }

    // The new tree: kept old entries merged with the named ones.
    let mut kept = Vec::new();
    let mut at = 0u64;
    for (keep, drop) in runs {
        let end = at + keep;
        if end > listing.len() as u64 {
            return Err("run beyond the listing".into());
        }
        kept.extend(at..end);
        at = end + drop;
        if at > listing.len() as u64 {
            return Err("run beyond the listing".into());
        }
    }
    let mut tree: Vec<(String, New)> = Vec::new();
    for k in kept {
        let (path, kind) = &listing[k as usize];
        tree.push((
            path.clone(),
            match kind {
                Old::Dir => New::Dir,
                Old::Link(t) => New::Link(t.clone()),
                Old::File { executable, .. } => New::Copy { executable: *executable, from: path.clone() },
            },
        ));
    }
    // The named entries are merged by path (§2.1): they ascend like any tree (§1).
    if paths.windows(2).any(|w| w[0].as_bytes() >= w[1].as_bytes()) {
        return Err("named entries out of order".into());
    }
    for (i, path) in paths.into_iter().enumerate() {
        let kind = match codes[i] {
            0 => New::Dir,
            1 => New::Link(targets[&i].clone()),
            2 | 3 => New::Delta { executable: codes[i] == 3, size: sizes[&i], wasm: transformed.remove(&i) },
            _ => {
                let &(at, _) = table.get(copy_of[&i] as usize).ok_or("copy index beyond the old table")?;
                New::Copy { executable: codes[i] == 5, from: listing[at].0.clone() }
            }
        };
        tree.push((path, kind));
    }
    tree.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    if tree.len() as u64 > MAX_COUNT {
        return Err("too many entries".into());
    }

    // §1 tree rules, or the single-file shape.
    if single {
        let ok = matches!(tree.as_slice(), [(p, New::Delta { .. } | New::Copy { .. })] if p.is_empty()) && table.len() <= 1;
        if !ok {
            return Err("single-file patch is not one file".into());
        }
    } else {
        let mut dirs = HashSet::new();
        for (i, (path, kind)) in tree.iter().enumerate() {
            if i > 0 && tree[i - 1].0.as_bytes() >= path.as_bytes() {
                return Err(format!("{path:?} repeats"));
            }
            if let Some((parent, _)) = path.rsplit_once('/') {
                if !dirs.contains(parent) {
                    return Err(format!("{path:?}: parent not a directory listed before"));
                }
            }
            if matches!(kind, New::Dir) {
                dirs.insert(path.clone());
            }
        }
    }

    // Old data: the files the patch reads.
    let old_data: HashMap<&str, &[u8]> = old
        .entries
        .iter()
        .filter_map(|e| match &e.content {
            EntryContent::File { data, .. } => Some((e.path.as_str(), data.as_slice())),
            _ => None,
        })
        .collect();
    // §2.8.7: the old module of a file in the split layout (at its path, the one old file, or
    // the one its row names) is read split; no old file for two.
    let mut split_paths: HashMap<&str, &[u8]> = HashMap::new();
    for (path, kind) in &tree {
        let New::Delta { wasm: Some((_, side, named)), .. } = kind else { continue };
        if !wasm::has_layout(side) && !deflate::is_compressed(side) {
            continue;
        }
        let old_path = match named {
            Some(k) => listing[table[*k].0].0.as_str(),
            None if single => listing.first().map_or("", |l| l.0.as_str()),
            None => path.as_str(),
        };
        if split_paths.insert(old_path, side).is_some() {
            return Err(format!("{old_path:?} is read split for two files"));
        }
    }
    let mut reference = Vec::new();
    for &(at, in_reference) in &table {
        if in_reference {
            let path = listing[at].0.as_str();
            match split_paths.get(path) {
                // §2.8.8: a compressed asset's old file is read decoded.
                Some(side) if deflate::is_compressed(side) => reference.extend_from_slice(&deflate::decoded_old(old_data[path], side)?),
                Some(side) => {
                    reference.extend_from_slice(&wasm::split_as(old_data[path], side).map_err(|e| format!("{path}: the old module does not split: {e}"))?)
                }
                None => reference.extend_from_slice(old_data[path]),
            }
        }
    }

    // §2.3-§2.6 segments.
    let mut delta: Vec<u8> = Vec::new();
    let mut segments = 0u64;
    loop {
        match r.byte()? {
            tag @ (b'S' | b'R' | b'M') => {
                // §2.3: 'M' is 'S' (form 0) or 'R' (form 1) with some streams raw LZMA.
                let lzma = tag == b'M';
                if lzma && !lzma_allowed {
                    return Err("LZMA ops segment without flag 64".into());
                }
                let run_coded = match (tag, if lzma { r.byte()? } else { 0 }) {
                    (b'R', _) | (b'M', 1) => true,
                    (b'M', 0) | (b'S', _) => false,
                    _ => return Err("LZMA ops segment form".into()),
                };
                if run_coded && !run_coded_allowed {
                    return Err("run-coded segment without flag 8".into());
                }
                let mut f = [0u64; 7];
                let mut coded_len = 0u64;
                for (k, v) in f.iter_mut().enumerate() {
                    *v = r.varint()?;
                    if run_coded && k == 3 {
                        // §2.3: 'R' has the coded diff size after diff_raw.
                        coded_len = r.varint()?;
                    }
                }
                let mut props = [None; 3];
                if lzma {
                    let mask = r.byte()?;
                    if mask == 0 || mask > 7 {
                        return Err("LZMA streams byte".into());
                    }
                    for (i, p) in props.iter_mut().enumerate() {
                        if mask >> i & 1 == 1 {
                            *p = Some(r.byte()?);
                        }
                    }
                }
                let [new_len, ctrl_raw, ctrl_comp, diff_raw, diff_comp, extra_raw, extra_comp] = f;
                if run_coded && (coded_len == 0 || coded_len > diff_raw) {
                    return Err("run-coded diff size".into());
                }
                if new_len == 0 || new_len > MAX_SEGMENT || ctrl_raw == 0 || ctrl_raw > MAX_CONTROL || diff_raw.checked_add(extra_raw) != Some(new_len) {
                    return Err("segment sizes".into());
                }
                if new_len > delta_total - delta.len() as u64 {
                    return Err("segment beyond the files".into());
                }
                let mut streams = Vec::new();
                let diff_frame_raw = if run_coded { coded_len } else { diff_raw };
                for ((raw, comp), props) in [(ctrl_raw, ctrl_comp), (diff_frame_raw, diff_comp), (extra_raw, extra_comp)].into_iter().zip(props) {
                    if (raw == 0) != (comp == 0) || comp > raw + raw / 64 + 1024 {
                        return Err("stream compressed size".into());
                    }
                    streams.push(match (raw, props) {
                        (0, None) => Vec::new(),
                        (0, Some(_)) => return Err("an empty stream marked LZMA".into()),
                        (_, Some(p)) => raw_lzma(r.take(comp)?, p, &[], raw, raw.min(1 << 20))?,
                        (_, None) => one_frame(r.take(comp)?, raw, None, 24)?,
                    });
                }
                if run_coded {
                    streams[1] = expand_runs(&streams[1], diff_raw)?;
                }
                let out = run_ops(&streams[0], &streams[1], &streams[2], new_len, &reference)?;
                delta.extend_from_slice(&out);
            }
            tag @ (b'W' | b'L') => {
                let lzma = tag == b'L';
                if lzma && !lzma_allowed {
                    return Err("LZMA window segment without flag 64".into());
                }
                let new_len = r.varint()?;
                if new_len == 0 || new_len > MAX_SEGMENT || new_len > delta_total - delta.len() as u64 {
                    return Err("window segment size".into());
                }
                let spans = r.at_most(MAX_SPANS, "spans")?;
                let mut old_spans = Vec::new();
                let mut end = 0u64;
                for _ in 0..spans {
                    let start = end.checked_add(r.varint()?).ok_or("span overflows")?;
                    let len = r.varint()?;
                    end = start.checked_add(len).ok_or("span overflows")?;
                    if len == 0 || end > reference.len() as u64 {
                        return Err("span outside the reference".into());
                    }
                    old_spans.extend_from_slice(&reference[start as usize..end as usize]);
                    if old_spans.len() as u64 > MAX_SPAN_BYTES {
                        return Err("spans over 8 MiB".into());
                    }
                }
                let back = r.varint()?;
                if back > reach || back > delta.len() as u64 {
                    return Err("back_len".into());
                }
                // The back bytes beyond the last 4 MiB, the spans, the last 4 MiB.
                let back_start = delta.len() - back as usize;
                let near_start = delta.len() - back.min(BASE_BACK) as usize;
                let mut window = delta[back_start..near_start].to_vec();
                window.extend_from_slice(&old_spans);
                window.extend_from_slice(&delta[near_start..]);
                let props = if lzma { Some(r.byte()?) } else { None };
                let comp = r.varint()?;
                if comp == 0 || comp > new_len + new_len / 64 + 1024 {
                    return Err("window frame size".into());
                }
                let out = match props {
                    Some(props) => {
                        if window.len() as u64 + new_len > 32 * MIB {
                            return Err("LZMA window and data over 32 MiB".into());
                        }
                        raw_lzma(r.take(comp)?, props, &window, new_len, window.len() as u64 + new_len)?
                    }
                    None => one_frame(r.take(comp)?, new_len, Some(&window), 25)?,
                };
                delta.extend_from_slice(&out);
            }
            b'E' => break,
            _ => return Err("segment tag".into()),
        }
        segments += 1;
    }
    if r.varint()? != segments || r.varint()? != delta.len() as u64 {
        return Err("end marker counts".into());
    }
    let body_len = r.at;
    let sum = r.take(32)?;
    if !r.done() {
        return Err("bytes after the checksum".into());
    }
    if sum != blake3::hash(&patch[..body_len]).as_bytes() {
        return Err("checksum".into());
    }
    if delta.len() as u64 != delta_total {
        return Err("delta stream length".into());
    }

    // Files, and the files digest: the copies' BLAKE3s in entry order, then the delta files' (§2.1).
    let mut entries = Vec::new();
    let (mut copy_hashes, mut delta_hashes) = (Vec::new(), Vec::new());
    let mut taken = 0usize;
    for (path, kind) in tree {
        let content = match kind {
            New::Dir => EntryContent::Directory,
            New::Link(target) => EntryContent::Symlink { target },
            New::Copy { executable, from } => {
                let data = old_data.get(from.as_str()).ok_or("copied old file missing")?.to_vec();
                copy_hashes.extend_from_slice(blake3::hash(&data).as_bytes());
                EntryContent::File { executable, data }
            }
            New::Delta { executable, size, wasm } => {
                let mut data = delta[taken..taken + size as usize].to_vec();
                taken += size as usize;
                if let Some((file_size, side, _)) = wasm {
                    if deflate::is_compressed(&side) && !trust_side_infos {
                        return Err(format!("{path}: a compressed asset's side info nobody vouched for"));
                    }
                    data = if deflate::is_compressed(&side) {
                        deflate::inverse(&data, &side).map_err(|e| format!("{path}: compressed-asset inverse: {e}"))?
                    } else {
                        wasm::inverse(&data, &side).map_err(|e| format!("{path}: wasm inverse: {e}"))?
                    };
                    if data.len() as u64 != file_size {
                        return Err(format!("{path}: the inverse gives {} bytes, the table says {file_size}", data.len()));
                    }
                }
                delta_hashes.extend_from_slice(blake3::hash(&data).as_bytes());
                EntryContent::File { executable, data }
            }
        };
        entries.push(BuildEntry { path, content });
    }
    copy_hashes.extend_from_slice(&delta_hashes);
    if blake3::hash(&copy_hashes).as_bytes() != &files_digest {
        return Err("files digest differs".into());
    }
    Ok(Build { entries })
}
