//! Signature of a build: per entry its path, kind, mode, size and BLAKE3; per
//! file block a rolling weak hash (Adler-32, so it can slide over new data one
//! byte at a time) and a fast strong hash (xxh3-64). Used to verify an
//! installed build and name its damaged blocks, and to find block-aligned
//! matches against old data without holding the old data (docs/FORMAT.md §2).

use std::collections::HashMap;
use std::io::{self, Read};

use xxhash_rust::xxh3::xxh3_64;

use crate::build::{Build, EntryContent, MAX_PATH_LEN};
use crate::error::{Error, Input, Result};
use crate::patch_format::{single_file_listing, ListedEntry, ListedKind, KIND_DIRECTORY, KIND_FILE, KIND_SYMLINK, MAX_ENTRIES};
use crate::wire::{put_str, put_varint, SliceReader};

/// First bytes of every signature.
pub const SIGNATURE_MAGIC: [u8; 8] = *b"EDGESIGN";
/// The signature format version this build writes and reads.
pub const SIGNATURE_VERSION: u16 = 1;
/// Chosen by measurement (BENCHMARKS.md, "Block size"): see `block_size` bench.
pub const DEFAULT_BLOCK_SIZE: u32 = 16 << 10;
/// Smallest block size a signature may use.
pub const MIN_BLOCK_SIZE: u32 = 512;
/// Largest block size a signature may use.
pub const MAX_BLOCK_SIZE: u32 = 16 << 20;

/// The two hashes of one block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockHash {
    /// Adler-32 (rolling: it can slide over data a byte at a time).
    pub weak: u32,
    /// xxh3-64, checked when the weak hash matches.
    pub strong: u64,
}

/// What a signed entry is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignedKind {
    /// A regular file.
    File {
        /// The executable bit.
        executable: bool,
        /// Size in bytes.
        size: u64,
        /// BLAKE3 of the content.
        blake3: [u8; 32],
        /// One hash pair per block, the last block possibly short.
        blocks: Vec<BlockHash>,
    },
    /// A symlink.
    Symlink {
        /// Where the link points, as stored.
        target: String,
    },
    /// A directory.
    Directory,
}

/// One entry of a signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedEntry {
    /// Relative, `/`-separated (empty for a single-file build).
    pub path: String,
    /// What the entry is, with its hashes.
    pub kind: SignedKind,
}

/// A build's signature: per entry its kind, mode, size and BLAKE3, per file
/// block its [`BlockHash`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signature {
    /// Bytes a block covers (the last block of a file may be shorter).
    pub block_size: u32,
    /// The entries, sorted by path.
    pub entries: Vec<SignedEntry>,
}

/// The weak and strong hash of `block`.
pub fn block_hash(block: &[u8]) -> BlockHash {
    BlockHash { weak: RollingAdler32::new(block).hash(), strong: xxh3_64(block) }
}

const ADLER_BASE: u32 = 65521;

/// Adler-32 over a sliding window. Hand-written because the `adler32` crate's
/// rolling `remove` is wrong for windows of 65521 bytes or more (it wraps
/// `BASE - size`), which our measured block sizes need.
#[derive(Debug, Clone, Copy)]
pub struct RollingAdler32 {
    a: u32,
    b: u32,
    /// Window length modulo the base.
    len_mod: u32,
}

impl RollingAdler32 {
    /// The hash of `window`, ready to slide.
    pub fn new(window: &[u8]) -> Self {
        let (mut a, mut b) = (1u32, 0u32);
        // 5552 bytes is the most that can be summed before u32 could overflow.
        for chunk in window.chunks(5552) {
            for &x in chunk {
                a += u32::from(x);
                b += a;
            }
            a %= ADLER_BASE;
            b %= ADLER_BASE;
        }
        RollingAdler32 { a, b, len_mod: (window.len() % ADLER_BASE as usize) as u32 }
    }

    /// The Adler-32 of the current window.
    pub fn hash(&self) -> u32 {
        (self.b << 16) | self.a
    }

    /// Slides the window one byte: `out` leaves at the front, `inp` enters at the back.
    pub fn roll(&mut self, out: u8, inp: u8) {
        let (out, inp) = (u32::from(out), u32::from(inp));
        self.a = (self.a + ADLER_BASE - out + inp) % ADLER_BASE;
        // b loses len*out and the implicit initial 1 carried by that byte, gains the new a.
        let minus = (self.len_mod * out + 1) % ADLER_BASE;
        self.b = (self.b + ADLER_BASE - minus + self.a) % ADLER_BASE;
    }
}

/// Hashes a file's content as a stream: whole-file BLAKE3 plus block hashes.
pub fn sign_content(reader: &mut dyn Read, block_size: u32) -> io::Result<(u64, [u8; 32], Vec<BlockHash>)> {
    let mut hasher = blake3::Hasher::new();
    let mut blocks = Vec::new();
    let mut buf = vec![0u8; block_size as usize];
    let mut size = 0u64;
    loop {
        let n = read_full(reader, &mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        blocks.push(block_hash(&buf[..n]));
        size += n as u64;
        if n < buf.len() {
            break;
        }
    }
    Ok((size, *hasher.finalize().as_bytes(), blocks))
}

fn read_full(r: &mut dyn Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match r.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

impl Signature {
    /// Whether the signed build is one file (one entry with the empty path).
    pub fn is_single_file(&self) -> bool {
        self.entries.len() == 1 && self.entries[0].path.is_empty()
    }

    /// The paths of the signed build's files, in entry order.
    pub fn file_paths(&self) -> Vec<&str> {
        self.entries.iter().filter(|e| matches!(e.kind, SignedKind::File { .. })).map(|e| e.path.as_str()).collect()
    }

    /// The signed build's listing, as a tree patch keeps entries by position
    /// (docs/FORMAT.md §2.1; the same as `diff::build_listing` of the build).
    pub fn listing(&self) -> Vec<ListedEntry> {
        if self.is_single_file() {
            let size = match &self.entries[0].kind {
                SignedKind::File { size, .. } => *size,
                _ => 0,
            };
            return single_file_listing(size);
        }
        self.entries
            .iter()
            .map(|e| ListedEntry {
                path: e.path.clone(),
                kind: match &e.kind {
                    SignedKind::File { executable, size, .. } => ListedKind::File { executable: *executable, size: *size },
                    SignedKind::Symlink { target } => ListedKind::Symlink { target: target.clone() },
                    SignedKind::Directory => ListedKind::Directory,
                },
            })
            .collect()
    }

    /// The signature of a build held in memory.
    pub fn of_build(build: &Build, block_size: u32) -> Signature {
        let entries = build
            .entries
            .iter()
            .map(|e| SignedEntry {
                path: e.path.clone(),
                kind: match &e.content {
                    EntryContent::File { executable, data } => {
                        let (size, blake3, blocks) = sign_content(&mut data.as_slice(), block_size).expect("reading memory");
                        SignedKind::File { executable: *executable, size, blake3, blocks }
                    }
                    EntryContent::Symlink { target } => SignedKind::Symlink { target: target.clone() },
                    EntryContent::Directory => SignedKind::Directory,
                },
            })
            .collect();
        Signature { block_size, entries }
    }

    /// The signature's encoding (docs/FORMAT.md §2).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&SIGNATURE_MAGIC);
        out.extend_from_slice(&SIGNATURE_VERSION.to_le_bytes());
        out.extend_from_slice(&self.block_size.to_le_bytes());
        put_varint(&mut out, self.entries.len() as u64);
        for e in &self.entries {
            put_str(&mut out, &e.path);
            match &e.kind {
                SignedKind::File { executable, size, blake3, blocks } => {
                    out.push(KIND_FILE);
                    out.push(*executable as u8);
                    put_varint(&mut out, *size);
                    out.extend_from_slice(blake3);
                    for b in blocks {
                        out.extend_from_slice(&b.weak.to_le_bytes());
                        out.extend_from_slice(&b.strong.to_le_bytes());
                    }
                }
                SignedKind::Symlink { target } => {
                    out.push(KIND_SYMLINK);
                    put_str(&mut out, target);
                }
                SignedKind::Directory => out.push(KIND_DIRECTORY),
            }
        }
        let checksum = blake3::hash(&out);
        out.extend_from_slice(checksum.as_bytes());
        out
    }

    /// Decodes a signature, checking its structure and limits; errors name the byte.
    pub fn decode(bytes: &[u8]) -> Result<Signature> {
        let sig = Input::Signature;
        if bytes.len() < 8 + 2 + 4 + 32 {
            if bytes.len() >= 8 && bytes[..8] != SIGNATURE_MAGIC {
                return Err(Error::BadMagic { input: sig });
            }
            return Err(Error::Truncated { input: sig, offset: bytes.len() as u64, what: "signature shorter than its header and checksum".into() });
        }
        if bytes[..8] != SIGNATURE_MAGIC {
            return Err(Error::BadMagic { input: sig });
        }
        let version = u16::from_le_bytes([bytes[8], bytes[9]]);
        if version != SIGNATURE_VERSION {
            return Err(Error::UnsupportedVersion { input: sig, found: version, supported: SIGNATURE_VERSION });
        }
        let (body, checksum) = bytes.split_at(bytes.len() - 32);
        if blake3::hash(body).as_bytes() != checksum {
            return Err(Error::Corrupt {
                input: sig,
                offset: body.len() as u64,
                what: "signature checksum (BLAKE3) does not match: truncated or corrupt".into(),
            });
        }
        let block_size = u32::from_le_bytes([bytes[10], bytes[11], bytes[12], bytes[13]]);
        if !(MIN_BLOCK_SIZE..=MAX_BLOCK_SIZE).contains(&block_size) {
            return Err(Error::Corrupt { input: sig, offset: 10, what: format!("block size {block_size} out of range") });
        }
        let mut r = SliceReader::new(&body[14..], 14, sig);
        let count = r.varint_max(MAX_ENTRIES, "entry count")? as usize;
        let mut entries = Vec::with_capacity(count.min(body.len() / 3));
        let mut checker = crate::build::TreeChecker::default();
        for _ in 0..count {
            let path = r.string(MAX_PATH_LEN, "entry path")?.to_string();
            let kind = match r.u8("entry kind")? {
                KIND_FILE => {
                    let executable = match r.u8("file flags")? {
                        0 => false,
                        1 => true,
                        flag => return Err(r.corrupt(format!("file flags {flag} unknown"))),
                    };
                    let size = r.varint("file size")?;
                    let blake3 = r.array::<32>("file hash")?;
                    let n = size.div_ceil(block_size as u64);
                    // Each block takes 12 bytes: a claimed size must fit in what is left.
                    if n.saturating_mul(12) > r.remaining() as u64 {
                        return Err(r.corrupt(format!("file size {size} needs more block hashes than the signature holds")));
                    }
                    let mut blocks = Vec::with_capacity(n as usize);
                    for _ in 0..n {
                        let weak = u32::from_le_bytes(r.array::<4>("weak hash")?);
                        let strong = u64::from_le_bytes(r.array::<8>("strong hash")?);
                        blocks.push(BlockHash { weak, strong });
                    }
                    SignedKind::File { executable, size, blake3, blocks }
                }
                KIND_SYMLINK => {
                    let target = r.string(MAX_PATH_LEN, "symlink target")?;
                    if let Some(why) = crate::build::symlink_target_problem(target) {
                        return Err(r.corrupt(format!("{path:?}: {why}")));
                    }
                    SignedKind::Symlink { target: target.to_string() }
                }
                KIND_DIRECTORY => SignedKind::Directory,
                k => return Err(r.corrupt(format!("entry kind {k} unknown"))),
            };
            if count == 1 && path.is_empty() {
                if !matches!(kind, SignedKind::File { .. }) {
                    return Err(r.corrupt("a single-file signature's entry is not a file"));
                }
            } else {
                checker.check(&path, matches!(kind, SignedKind::Directory))?;
            }
            entries.push(SignedEntry { path, kind });
        }
        if !r.is_empty() {
            return Err(r.corrupt("bytes after the last entry"));
        }
        Ok(Signature { block_size, entries })
    }
}

/// What verifying one path found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Damage {
    /// Not there.
    Missing,
    /// A file where a directory or link was signed, or the other way round.
    WrongKind,
    /// The executable bit differs.
    WrongMode,
    /// The size differs.
    WrongSize {
        /// The signed size.
        expected: u64,
        /// The size found.
        actual: u64,
    },
    /// Content differs; these block indexes differ (all blocks past the end if it shrank).
    DamagedBlocks(Vec<u64>),
    /// The link points elsewhere.
    WrongTarget,
    /// Present in the directory but not in the signature.
    Unexpected,
}

/// Checks a file's content against its signed entry, streaming.
pub fn check_file_content(signed: &SignedKind, block_size: u32, reader: &mut dyn Read) -> io::Result<Option<Damage>> {
    let SignedKind::File { size, blake3, blocks, .. } = signed else {
        return Ok(Some(Damage::WrongKind));
    };
    let (actual_size, actual_hash, actual_blocks) = sign_content(reader, block_size)?;
    if actual_size == *size && actual_hash == *blake3 {
        return Ok(None);
    }
    if actual_size != *size && blocks.len() != actual_blocks.len() {
        return Ok(Some(Damage::WrongSize { expected: *size, actual: actual_size }));
    }
    let damaged = blocks.iter().zip(&actual_blocks).enumerate().filter(|(_, (a, b))| a != b).map(|(i, _)| i as u64).collect::<Vec<_>>();
    if damaged.is_empty() {
        // Blocks agree but the whole-file hash does not: a block hash collision
        // or a size change within the last block. Name the last block.
        return Ok(Some(Damage::DamagedBlocks(vec![blocks.len().saturating_sub(1) as u64])));
    }
    Ok(Some(Damage::DamagedBlocks(damaged)))
}

/// Rsync-style alignment: slides a `block_size` window over `new` with the
/// rolling weak hash; where `lookup(weak, window)` names a match (it checks the
/// strong hash), records (offset in `new`, what it returned) and jumps a whole
/// block ahead. Returns the matches in order.
pub fn find_block_matches<T>(new: &[u8], block_size: usize, mut lookup: impl FnMut(u32, &[u8]) -> Option<T>) -> Vec<(u64, T)> {
    let mut found = Vec::new();
    if block_size == 0 || new.len() < block_size {
        return found;
    }
    let mut i = 0usize;
    let mut rolling = RollingAdler32::new(&new[..block_size]);
    loop {
        if let Some(hit) = lookup(rolling.hash(), &new[i..i + block_size]) {
            found.push((i as u64, hit));
            i += block_size;
            if i + block_size > new.len() {
                break;
            }
            rolling = RollingAdler32::new(&new[i..i + block_size]);
        } else {
            if i + block_size >= new.len() {
                break;
            }
            rolling.roll(new[i], new[i + block_size]);
            i += 1;
        }
    }
    found
}

/// Bytes of `new` covered by blocks of the signed old file found by rolling
/// the weak hash over `new` (rsync-style alignment). Used to measure block sizes.
pub fn block_matched_bytes(old_blocks: &[BlockHash], block_size: usize, new: &[u8]) -> u64 {
    let mut by_weak: HashMap<u32, Vec<u64>> = HashMap::new();
    for b in old_blocks {
        by_weak.entry(b.weak).or_default().push(b.strong);
    }
    let matches = find_block_matches(new, block_size, |weak, window| by_weak.get(&weak).filter(|s| s.contains(&xxh3_64(window))).map(|_| ()));
    matches.len() as u64 * block_size as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rolling_adler_matches_direct_for_all_window_sizes() {
        let data: Vec<u8> = (0..300_000u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
        for window in [1usize, 16, 5552, 65520, 65521, 65536, 200_000] {
            let mut r = RollingAdler32::new(&data[..window]);
            for i in 0..50 {
                r.roll(data[i], data[i + window]);
                assert_eq!(r.hash(), RollingAdler32::new(&data[i + 1..i + 1 + window]).hash(), "window {window} step {i}");
            }
        }
        // RFC 1950's value for "Wikipedia".
        assert_eq!(RollingAdler32::new(b"Wikipedia").hash(), 0x11E6_0398);
    }
}
