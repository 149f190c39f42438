//! Patch sizes of compiled-wasm pairs with and without the wasm transform,
//! against bsdiff, zstd --patch-from and HDiffPatch measured in the same run.
//!
//!     cargo run --release -p edgepatch-core --example wasm_transform_bench -- [PAIR_DIR...]
//!
//! Each PAIR_DIR holds `old` and `new` (default: the corpus' wasm pairs under
//! /work/corpus/pairs). A peer whose tool is not installed prints "-".

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use edgepatch_core::wasm_transform::{forward, forward_with_stats, inverse, reference};
use edgepatch_core::{diff_builds, Build, DiffOptions};

fn edgepatch_size(old: &[u8], new: &[u8]) -> usize {
    let (patch, _) = diff_builds(&Build::single_file(old.to_vec()), &Build::single_file(new.to_vec()), &DiffOptions::default(), &|_, _| {}).expect("diff");
    patch.len()
}

/// Runs a peer on files in `dir`; the patch's size, or None if the tool is missing or fails.
fn peer_size(dir: &Path, old: &[u8], new: &[u8], tool: &str) -> Option<usize> {
    let (o, n, p) = (dir.join("peer-old"), dir.join("peer-new"), dir.join("peer-patch"));
    std::fs::write(&o, old).ok()?;
    std::fs::write(&n, new).ok()?;
    let _ = std::fs::remove_file(&p);
    let status = match tool {
        "bsdiff" => Command::new("bsdiff").arg(&o).arg(&n).arg(&p).status(),
        "zstd" => Command::new("zstd").args(["-q", "-f", "-19", "--long=27"]).arg(format!("--patch-from={}", o.display())).arg(&n).arg("-o").arg(&p).status(),
        "hdiffpatch" => {
            let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/hdiffpatch_cli.py");
            Command::new("python3").arg(script).arg("diff").arg(&o).arg(&n).arg(&p).status()
        }
        _ => return None,
    };
    let size = match status {
        Ok(s) if s.success() => std::fs::metadata(&p).ok().map(|m| m.len() as usize),
        _ => None,
    };
    for f in [&o, &n, &p] {
        let _ = std::fs::remove_file(f);
    }
    size
}

fn show(v: Option<usize>) -> String {
    v.map_or("-".into(), |v| v.to_string())
}

fn main() {
    let mut dirs: Vec<PathBuf> = std::env::args().skip(1).map(PathBuf::from).collect();
    if dirs.is_empty() {
        dirs = ["havok-wasm", "esbuild-wasm-adj"].iter().map(|p| Path::new("/work/corpus/pairs").join(p)).collect();
    }
    let scratch = std::env::temp_dir().join(format!("wasm-transform-bench-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).expect("scratch dir");
    println!("| pair | new bytes | edgepatch plain | edgepatch wasm-transform (diff + side info) | transform / plain | bsdiff | zstd -19 --patch-from | HDiffPatch | best peer | transform / best peer | bsdiff on normalized | forward old+new ms | inverse ms | functions matched | refs renumbered (call / PC / address) | address pieces | exceptions | raw bodies |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for dir in dirs {
        let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let (Ok(old), Ok(new)) = (std::fs::read(dir.join("old")), std::fs::read(dir.join("new"))) else {
            eprintln!("{}: no old/new, skipped", dir.display());
            continue;
        };
        let plain = edgepatch_size(&old, &new);

        let t = Instant::now();
        let old_norm = forward(None, &old).expect("old is wasm");
        let old_ref = reference(&old).expect("old is wasm");
        let (new_norm, stats) = forward_with_stats(Some(&old_ref), &new).expect("new is wasm");
        let forward_ms = t.elapsed().as_secs_f64() * 1e3;
        let t = Instant::now();
        let rebuilt = inverse(&new_norm.bytes, &new_norm.side_info).expect("inverse");
        let inverse_ms = t.elapsed().as_secs_f64() * 1e3;
        assert!(rebuilt == new, "{name}: inverse did not rebuild the new module");
        assert!(inverse(&old_norm.bytes, &old_norm.side_info).expect("inverse old") == old, "{name}: old round trip");

        if let Some(dump) = std::env::var_os("WASM_TRANSFORM_DUMP") {
            // For analysis: the normalized forms, to diff section by section.
            let dump = Path::new(&dump).join(&name);
            std::fs::create_dir_all(&dump).expect("dump dir");
            std::fs::write(dump.join("old"), &old_norm.bytes).expect("dump");
            std::fs::write(dump.join("new"), &new_norm.bytes).expect("dump");
        }
        let side = zstd::bulk::compress(&new_norm.side_info, 19).expect("zstd").len();
        let transformed = edgepatch_size(&old_norm.bytes, &new_norm.bytes) + side;
        let bsdiff = peer_size(&scratch, &old, &new, "bsdiff");
        let zstd_peer = peer_size(&scratch, &old, &new, "zstd");
        let hdiff = peer_size(&scratch, &old, &new, "hdiffpatch");
        let bsdiff_norm = peer_size(&scratch, &old_norm.bytes, &new_norm.bytes, "bsdiff").map(|s| s + side);
        let best = [bsdiff, zstd_peer, hdiff].into_iter().flatten().min();
        println!(
            "| {name} | {} | {plain} | {transformed} (side {side}) | {:.3} | {} | {} | {} | {} | {} | {} | {forward_ms:.0} | {inverse_ms:.0} | {}/{} | {} / {} / {} | {} | {} | {} |",
            new.len(),
            transformed as f64 / plain as f64,
            show(bsdiff),
            show(zstd_peer),
            show(hdiff),
            show(best),
            best.map_or("-".into(), |b| format!("{:.3}", transformed as f64 / b as f64)),
            show(bsdiff_norm),
            stats.matched_functions,
            stats.functions,
            stats.function_refs,
            stats.pc_refs,
            stats.address_refs,
            stats.address_pieces,
            stats.exceptions,
            stats.raw_bodies,
        );
    }
    let _ = std::fs::remove_dir_all(&scratch);
}
