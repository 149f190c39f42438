#!/usr/bin/env python3
"""File-to-file front end for the in-memory `hdiffpatch` wrapper (PyPI), so that
bench/compare.py can time it and read its peak RSS like the other peers.

    hdiffpatch_cli.py diff  OLD NEW PATCH    # HDiffPatch, covers compressed with zstd -19
    hdiffpatch_cli.py apply OLD PATCH OUT

The wrapper works on `bytes`, so the measured peak RSS includes old, new and patch
held in memory plus the Python interpreter (~10 MB); that is the cost of this peer
as packaged, not of HDiffPatch's streaming C API.
"""
import sys

import hdiffpatch

# "HDiffPatch (zstd 19)" in bench/corpus/README.md. The window is left to zstd's
# level default: on the corpus a 2^27 window gives byte-identical patches.
COMPRESSION = hdiffpatch.ZStdConfig(level=19)


def read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def write(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)


def main(argv: list[str]) -> int:
    if len(argv) == 4 and argv[0] == "diff":
        _, old, new, patch = argv
        # validate=False: the harness verifies the round trip itself, and the wrapper's
        # built-in check would add an apply to the diff time.
        write(patch, hdiffpatch.diff(read(old), read(new), COMPRESSION, validate=False))
        return 0
    if len(argv) == 4 and argv[0] == "apply":
        _, old, patch, out = argv
        write(out, hdiffpatch.apply(read(old), read(patch)))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
