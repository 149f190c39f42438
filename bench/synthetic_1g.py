#!/usr/bin/env python3
# bench/synthetic_1g.py [PACKS] — writes old/ and new/ in the current directory for the
# bounded-memory diff measurement (BENCHMARKS.md "Bounded-memory diff"). Not part of the tests.
# A synthetic build pair of PACKS (default 8: 1.07-1.09 GB each; 32: 4.3 GB) game-data-like files
# of 128 MiB of pseudo-random bytes (seeded), new = old with scattered edits, a 1 MiB insertion per
# file, and one new 8 MiB file.
import os, random, sys
packs = int(sys.argv[1]) if len(sys.argv) > 1 else 8
r = random.Random(7)
os.makedirs("old/data", exist_ok=True); os.makedirs("new/data", exist_ok=True)
for i in range(packs):
    size = 128 << 20
    old = bytearray(r.randbytes(size))
    with open(f"old/data/pack{i}.bin", "wb") as f: f.write(old)
    new = old
    for _ in range(200):
        at = r.randrange(size - 64); new[at:at+16] = r.randbytes(16)
    at = r.randrange(size); new[at:at] = r.randbytes(1 << 20)
    del new[r.randrange(size // 2): r.randrange(size // 2, size)][: 0]
    with open(f"new/data/pack{i}.bin", "wb") as f: f.write(new)
with open("new/data/extra.bin", "wb") as f: f.write(r.randbytes(8 << 20))
