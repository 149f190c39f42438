#!/usr/bin/env python3
"""What a reader's capabilities cost, and whether a refactored build writes the same patches.

For each corpus pair (CORPUS_DIR/pairs/*, trees/*) this runs `edgepatch diff --reader R` for
each reader set R, and prints a markdown table: the patch size per reader (as a ratio to the
patch for this build's own set) and the apply time of the default patch. With --before BIN,
the default patch of an earlier binary is made too and compared byte for byte (same SHA-256 or
not), with both binaries' diff and apply times (best of --repeat runs).

  bench/readers.py --corpus ~/.cache/edgepatch-corpus --bin target/release/edgepatch \
      [--before /path/to/old/edgepatch] [--repeat 3] [--work DIR]

Python 3.11 standard library only; GNU /usr/bin/time for peak RSS.
"""
from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

READERS = [
    ("current", "current"),
    ("v0.1", "v0.1"),
    ("no LZMA, no split reference, no function keys or DWARF", "current,-lzma-segments,-wasm-split-reference,-wasm-function-keys,-wasm-dwarf-addresses"),
    ("wasm transform only", "wasm-transform"),
    ("baseline", "baseline"),
]


def run(argv: list[str]) -> tuple[float, int]:
    """Wall seconds and peak RSS (KB) of `argv`, which must succeed."""
    with tempfile.NamedTemporaryFile() as t:
        start = time.perf_counter()
        p = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", t.name, *argv], capture_output=True, text=True)
        wall = time.perf_counter() - start
        if p.returncode != 0:
            sys.exit(f"failed: {' '.join(argv)}\n{p.stderr}")
        return wall, int(Path(t.name).read_text().split()[-1])


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def best(argv: list[str], repeat: int) -> tuple[float, int]:
    runs = [run(argv) for _ in range(repeat)]
    return min(r[0] for r in runs), max(r[1] for r in runs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, required=True)
    ap.add_argument("--bin", type=Path, required=True)
    ap.add_argument("--before", type=Path)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--work", type=Path)
    a = ap.parse_args()
    work = a.work or Path(tempfile.mkdtemp(prefix="edgepatch-readers-"))
    work.mkdir(parents=True, exist_ok=True)
    pairs = sorted(p for kind in ("pairs", "trees") for p in (a.corpus / kind).glob("*") if (p / "old").exists())
    sizes: dict[str, dict[str, int]] = {}
    same_rows = []
    for pair in pairs:
        name = pair.name
        old, new = pair / "old", pair / "new"
        sizes[name] = {}
        for label, reader in READERS:
            out = work / f"{name}.{reader.replace(',', '_')}.patch"
            run([str(a.bin), "--quiet", "diff", "--reader", reader, str(old), str(new), str(out)])
            sizes[name][label] = out.stat().st_size
        if a.before:
            now_patch, before_patch = work / f"{name}.now.patch", work / f"{name}.before.patch"
            now_diff = best([str(a.bin), "--quiet", "diff", str(old), str(new), str(now_patch)], 1)
            before_diff = best([str(a.before), "--quiet", "diff", str(old), str(new), str(before_patch)], 1)
            outs = []
            apply_times = []
            for binary, patch in ((a.before, before_patch), (a.bin, now_patch)):
                dest = work / f"{name}.out"
                def apply() -> list[str]:
                    shutil.rmtree(dest, ignore_errors=True)
                    if dest.exists():
                        dest.unlink()
                    return [str(binary), "--quiet", "apply", str(old), str(patch), str(dest)]
                runs = []
                for _ in range(a.repeat):
                    argv = apply()
                    runs.append(run(argv))
                apply_times.append((min(r[0] for r in runs), max(r[1] for r in runs)))
                outs.append(dest)
            same_rows.append((name, before_patch.stat().st_size, now_patch.stat().st_size, sha(before_patch) == sha(now_patch), before_diff, now_diff, apply_times[0], apply_times[1]))
    labels = [l for l, _ in READERS]
    print("| pair | " + " | ".join(labels) + " |")
    print("|---|" + "---:|" * len(labels))
    for name, row in sizes.items():
        base = row["current"]
        cells = [f"{row[l]:,} ({row[l] / base:.3f}x)" if l != "current" else f"{row[l]:,}" for l in labels]
        print(f"| {name} | " + " | ".join(cells) + " |")
    if same_rows:
        print()
        print("| pair | before bytes | now bytes | same bytes | diff s before / now | diff peak MB before / now | apply s before / now | apply peak MB before / now |")
        print("|---|---:|---:|---|---:|---:|---:|---:|")
        for name, bb, nb, same, bd, nd, ba, na in same_rows:
            print(f"| {name} | {bb:,} | {nb:,} | {'yes' if same else 'NO'} | {bd[0]:.2f} / {nd[0]:.2f} | {bd[1] / 1000:.1f} / {nd[1] / 1000:.1f} | {ba[0]:.3f} / {na[0]:.3f} | {ba[1] / 1000:.1f} / {na[1] / 1000:.1f} |")


if __name__ == "__main__":
    main()
