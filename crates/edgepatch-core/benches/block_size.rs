//! Measures the block-size trade of signatures on the real corpus: smaller
//! blocks find more block-aligned matches (rsync-style rolling search) but make
//! bigger signatures and more per-block work. Prints a table for BENCHMARKS.md.
//!
//!     EDGEPATCH_CORPUS=~/.cache/edgepatch-corpus cargo bench -p edgepatch-core --bench block_size

use std::time::Instant;

use edgepatch_core::signature::{block_matched_bytes, sign_content};
use edgepatch_testkit::corpus;

fn main() {
    let pairs = ["havok-wasm", "phaser-js", "esbuild-wasm-adj", "freedoom2-wad"];
    println!("| pair | block size | signature bytes per MB of old | new bytes found by block matching | sign + match time |");
    println!("|---|---:|---:|---:|---:|");
    for pair in pairs {
        let (old, new) = match corpus::pair(pair) {
            Ok(p) => (p.old, p.new),
            Err(skip) => {
                eprintln!("skipping {pair}: {skip} (run bench/corpus/fetch.sh)");
                continue;
            }
        };
        for block in [1024u32, 4096, 16384, 65536, 262144] {
            let t = Instant::now();
            let (_, _, blocks) = sign_content(&mut old.as_slice(), block).unwrap();
            let covered = block_matched_bytes(&blocks, block as usize, &new);
            let secs = t.elapsed().as_secs_f64();
            let sig_per_mb = (blocks.len() * 12) as f64 / (old.len() as f64 / 1e6);
            println!("| {pair} | {block} | {sig_per_mb:.0} | {:.1}% | {secs:.2}s |", 100.0 * covered as f64 / new.len() as f64);
        }
    }
}
