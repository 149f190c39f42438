#!/usr/bin/env python3
# bench/synthetic_fanout.py DIR — writes DIR/old and DIR/new (about 1.1 GB each) for the fanned-out
# generation benchmark (bench/fanout.mjs, BENCHMARKS.md "Through `wrangler dev`").
# Not part of the tests. Seeded pseudo-random bytes (incompressible, like packed game data):
#   data/world.pak   560 MiB, one file over 500 MB: new = old with 300 scattered 16-byte edits,
#                    1 MiB inserted in the middle and 512 KiB removed near the end;
#   assets/aNNN.bin  500 files of 1 MiB: 50 edited (a few 16-byte runs each), 5 removed, 5 added.
# The patch's delta stream is world.pak plus the edited and added assets (~616 MiB, 154 segments).
import os, random, sys

out = sys.argv[1] if len(sys.argv) > 1 else "."
r = random.Random(13)
for v in ("old", "new"):
    os.makedirs(os.path.join(out, v, "data"), exist_ok=True)
    os.makedirs(os.path.join(out, v, "assets"), exist_ok=True)

def noise(n):
    # randbytes of more than 256 MiB overflows a C int inside Python: in 16 MiB pieces.
    return b"".join(r.randbytes(min(16 << 20, n - i)) for i in range(0, n, 16 << 20))

def write(v, path, data):
    with open(os.path.join(out, v, path), "wb") as f:
        f.write(data)

size = 560 << 20
old = bytearray(noise(size))
write("old", "data/world.pak", old)
new = old
for _ in range(300):
    at = r.randrange(size - 64)
    new[at:at + 16] = r.randbytes(16)
mid = size // 2
new[mid:mid] = r.randbytes(1 << 20)
cut = len(new) - (64 << 20)
del new[cut:cut + (512 << 10)]
write("new", "data/world.pak", new)
del old, new

for i in range(500):
    data = bytearray(r.randbytes(1 << 20))
    write("old", f"assets/a{i:03}.bin", data)
    if i % 100 < 1:  # removed: a000, a100, ...
        continue
    if i % 10 == 5:  # edited
        for _ in range(4):
            at = r.randrange(len(data) - 16)
            data[at:at + 16] = r.randbytes(16)
    write("new", f"assets/a{i:03}.bin", data)
for i in range(5):
    write("new", f"assets/n{i:03}.bin", r.randbytes(1 << 20))
