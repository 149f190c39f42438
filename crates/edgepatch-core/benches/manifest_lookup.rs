//! One-file lookup in a 100,000-entry manifest: the binary manifest (open +
//! MPH lookup, straight from the bytes) against parsing an equivalent JSON
//! manifest with serde_json and then finding the entry.
//!
//! Run: cargo bench -p edgepatch-core --bench manifest_lookup

use edgepatch_core::manifest::{decode, EntryKind, EntrySource, Manifest, ManifestEntry, ManifestKind, ManifestView};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::hint::black_box;
use std::time::{Duration, Instant};

use edgepatch_testkit::Rng;

const N: usize = 100_000;

// ---------------------------------------------------------------- JSON twin

#[derive(Serialize, Deserialize)]
struct JsonManifest {
    kind: String,
    from_build: Option<String>,
    to_build: String,
    patch_size: u64,
    patch_blake3: String,
    segments: Vec<JsonSegment>,
    entries: Vec<JsonEntry>,
}

#[derive(Serialize, Deserialize)]
struct JsonSegment {
    patch_offset: u64,
    patch_len: u64,
    new_offset: u64,
    new_len: u64,
}

#[derive(Serialize, Deserialize)]
struct JsonEntry {
    path: String,
    kind: String,
    executable: bool,
    size: u64,
    blake3: String,
    symlink_target: Option<String>,
    source: JsonSource,
}

#[derive(Serialize, Deserialize)]
enum JsonSource {
    Unchanged,
    CopyOf { old_path: String },
    Delta { new_offset: u64 },
    None,
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn to_json(m: &Manifest) -> Vec<u8> {
    let j = JsonManifest {
        kind: format!("{:?}", m.kind),
        from_build: m.from_build.clone(),
        to_build: m.to_build.clone(),
        patch_size: m.patch_size,
        patch_blake3: hex(&m.patch_blake3),
        segments: m
            .segments
            .iter()
            .map(|s| JsonSegment { patch_offset: s.patch_offset, patch_len: s.patch_len, new_offset: s.new_offset, new_len: s.new_len })
            .collect(),
        entries: m
            .entries
            .iter()
            .map(|e| JsonEntry {
                path: e.path.clone(),
                kind: format!("{:?}", e.kind).to_lowercase(),
                executable: e.executable,
                size: e.size,
                blake3: hex(&e.blake3),
                symlink_target: e.symlink_target.clone(),
                source: match &e.source {
                    EntrySource::Unchanged => JsonSource::Unchanged,
                    EntrySource::CopyOf { old_path } => JsonSource::CopyOf { old_path: old_path.clone() },
                    EntrySource::Delta { new_offset } => JsonSource::Delta { new_offset: *new_offset },
                    EntrySource::None => JsonSource::None,
                },
            })
            .collect(),
    };
    serde_json::to_vec(&j).expect("json")
}

// ---------------------------------------------------------------- data

/// A patch manifest for a game build of N files: 80% unchanged, 15% delta, 5% moved.
fn game_manifest() -> Manifest {
    const DIRS: [(&str, &str, &str); 5] =
        [("textures", "tile", "png"), ("textures", "sprite", "webp"), ("audio", "sfx", "ogg"), ("meshes", "prop", "glb"), ("scripts", "logic", "js")];
    let mut rng = Rng::xorshift64_star(0x9E37_79B9);
    let mut delta_at = 0u64;
    let entries = (0..N)
        .map(|i| {
            let (dir, stem, ext) = DIRS[i % DIRS.len()];
            let path = format!("assets/level-{:03}/{dir}/{stem}_{:05}.{ext}", i / 1000, i);
            let size = 200 + rng.below(400_000) as u64;
            let source = match rng.below(100) {
                0..=79 => EntrySource::Unchanged,
                80..=94 => {
                    let s = EntrySource::Delta { new_offset: delta_at };
                    delta_at += size;
                    s
                }
                _ => EntrySource::CopyOf { old_path: format!("assets/old/{dir}/{stem}_{i:05}.{ext}") },
            };
            ManifestEntry {
                blake3: *blake3::hash(path.as_bytes()).as_bytes(),
                path,
                kind: EntryKind::File,
                executable: false,
                decoded: false,
                size,
                symlink_target: None,
                source,
            }
        })
        .collect();
    Manifest {
        kind: ManifestKind::Patch,
        from_build: Some("game-1.4.2+b1187".into()),
        to_build: "game-1.4.3+b1203".into(),
        patch_size: 48_123_456,
        patch_blake3: *blake3::hash(b"patch").as_bytes(),
        head_blake3: Some(*blake3::hash(b"head").as_bytes()),
        segments: (0..64)
            .map(|k| edgepatch_core::manifest::SegmentRef {
                patch_offset: 4096 + k * 750_000,
                patch_len: 750_000,
                new_offset: k * 2_000_000,
                new_len: 2_000_000,
            })
            .collect(),
        entries,
    }
}

// ---------------------------------------------------------------- timing

/// Median over `repeats` runs of (time of `batch` calls of `f`) / `batch`.
fn median_per_call(repeats: usize, batch: usize, mut f: impl FnMut(usize)) -> Duration {
    let mut times: Vec<Duration> = (0..repeats)
        .map(|r| {
            let t = Instant::now();
            for i in 0..batch {
                f(r * batch + i);
            }
            t.elapsed() / batch as u32
        })
        .collect();
    times.sort();
    times[repeats / 2]
}

fn fmt(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns < 10_000 {
        format!("{ns} ns")
    } else if ns < 10_000_000 {
        format!("{:.1} µs", ns as f64 / 1e3)
    } else {
        format!("{:.1} ms", ns as f64 / 1e6)
    }
}

fn main() {
    let m = game_manifest();
    let t = Instant::now();
    let bin = m.encode().expect("encode");
    let encode_time = t.elapsed();
    let json = to_json(&m);

    // Probe paths: random entries, 1 in 8 absent.
    let mut rng = Rng::xorshift64_star(12345);
    let probes: Vec<String> = (0..4096)
        .map(|k| {
            let i = rng.below(N);
            if k % 8 == 7 {
                format!("assets/level-{:03}/textures/missing_{i:05}.png", i / 1000)
            } else {
                m.entries[i].path.clone()
            }
        })
        .collect();
    let probe = |i: usize| probes[i % probes.len()].as_str();

    // Sanity: both sides find the same thing.
    {
        let v = ManifestView::open(&bin).unwrap();
        let j: JsonManifest = serde_json::from_slice(&json).unwrap();
        for p in &probes {
            let a = v.lookup(p).unwrap();
            let b = j.entries.iter().find(|e| e.path == *p);
            assert_eq!(a.map(|e| e.size), b.map(|e| e.size));
        }
    }

    // (a) open + lookup, from the bytes in memory.
    let a = median_per_call(31, 20_000, |i| {
        let v = ManifestView::open(black_box(&bin)).unwrap();
        black_box(v.lookup(probe(i)).unwrap());
    });
    // (a') lookup in an already opened view.
    let view = ManifestView::open(&bin).unwrap();
    let a2 = median_per_call(31, 20_000, |i| {
        black_box(view.lookup(probe(i)).unwrap());
    });
    // (a'') full decode with checksum and index verification (what a tool does, not a client).
    let a3 = median_per_call(7, 1, |_| {
        black_box(decode(black_box(&bin)).unwrap());
    });
    // (b) serde_json parse, then find in the Vec.
    let b = median_per_call(11, 1, |i| {
        let j: JsonManifest = serde_json::from_slice(black_box(&json)).unwrap();
        let p = probe(i);
        black_box(j.entries.iter().find(|e| e.path == p).map(|e| e.size));
    });
    // (b') serde_json parse, build a HashMap by path, then get.
    let b2 = median_per_call(11, 1, |i| {
        let j: JsonManifest = serde_json::from_slice(black_box(&json)).unwrap();
        let map: HashMap<String, JsonEntry> = j.entries.into_iter().map(|e| (e.path.clone(), e)).collect();
        black_box(map.get(probe(i)).map(|e| e.size));
    });

    let zb = zstd::bulk::compress(&bin, 3).unwrap().len();
    let zj = zstd::bulk::compress(&json, 3).unwrap().len();

    println!();
    println!("manifest lookup: {N} file entries (patch manifest, 64 segments), one lookup per run");
    println!("{:-<78}", "");
    println!("{:<52} {:>12} {:>12}", "case", "median", "vs (a)");
    println!("{:-<78}", "");
    let row = |name: &str, d: Duration| {
        let r = d.as_secs_f64() / a.as_secs_f64();
        let r = if r < 10.0 { format!("{r:.2}x") } else { format!("{r:.0}x") };
        println!("{:<52} {:>12} {:>12}", name, fmt(d), r);
    };
    row("(a)   binary: open() + lookup()", a);
    row("(a')  binary: lookup() on an open view", a2);
    row("(a'') binary: full decode() incl. BLAKE3 + index check", a3);
    row("(b)   JSON: serde_json parse + Vec find", b);
    row("(b')  JSON: serde_json parse + HashMap build + get", b2);
    println!("{:-<78}", "");
    println!("speedup of (a) over (b): {:.0}x; over (b'): {:.0}x", b.as_secs_f64() / a.as_secs_f64(), b2.as_secs_f64() / a.as_secs_f64());
    println!("{:<52} {:>12} {:>12}", "size", "raw bytes", "zstd -3");
    println!("{:<52} {:>12} {:>12}", "(c) binary manifest", bin.len(), zb);
    println!("{:<52} {:>12} {:>12}", "(c) JSON manifest", json.len(), zj);
    let idx = view.index_range().len();
    println!("binary index (header + ids + pilots + slots): {idx} bytes ({:.1} per entry)", idx as f64 / N as f64);
    println!("encode() of the binary manifest (incl. MPH build): {}", fmt(encode_time));
    println!();
}
