#!/usr/bin/env python3
"""Benchmark edgepatch against peer delta tools on the real corpus, in one run.

For every pair and every tool: patch size, diff wall time and peak RSS, apply wall
time and peak RSS (GNU /usr/bin/time), and a byte-exact round-trip check of what
apply produced. Prints markdown tables and the issue's scores (edgepatch size over the
best peer's, geometric mean and maximum; apply time over `zstd -d --patch-from`'s) and
writes the raw numbers as JSON to --out.

Normally started by bench/run.sh, which installs the peers, fetches the corpus and
builds edgepatch first. Python 3.11 standard library only (hdiffpatch is imported by
bench/hdiffpatch_cli.py, in its own measured process).
"""
from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import math
import os
import platform
import re
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

BENCH_DIR = Path(__file__).resolve().parent
HDIFFPATCH_CLI = BENCH_DIR / "hdiffpatch_cli.py"

MB = 1_000_000                      # sizes and RSS are reported in decimal MB
SIZE_FLOOR = 1024                   # patches under 1 KiB count as 1 KiB when scoring
APPLY_RSS_LIMIT = 32 * MB           # issue: apply peak RSS <= 32 MB on every pair
LARGE_DIFF_SECONDS_LIMIT = 60.0     # issue: diff of the ~101 MB pair within 60 s ...
LARGE_DIFF_RSS_LIMIT = 1000 * MB    # ... and 1 GB
GEOMEAN_LIMIT = 1.10                # issue: geometric mean of size ratios <= 1.10
MAX_RATIO_LIMIT = 1.5               # issue: no pair above 1.5
XDELTA3_DEFAULT_SOURCE_WINDOW = 64 << 20

LARGE_PAIR_NAME = "concat-101mib"
# The large pair: old = these old files concatenated in this order, new = the same
# with the new versions. Whole files from the corpus (paths relative to CORPUS_DIR),
# chosen so that new is 105,913,424 bytes (101.0 MiB, 105.9 MB). Mixed content on
# purpose: wasm, JS, a shifted Go wasm, two game archives and a package tarball.
LARGE_PAIR_PARTS: list[tuple[str, str]] = [
    ("pairs/havok-wasm/old", "pairs/havok-wasm/new"),
    ("pairs/phaser-js/old", "pairs/phaser-js/new"),
    ("pairs/esbuild-wasm-adj/old", "pairs/esbuild-wasm-adj/new"),
    ("pairs/freedoom2-wad/old", "pairs/freedoom2-wad/new"),
    ("trees/three-tree/old.tar", "trees/three-tree/new.tar"),
    ("src/freedoom@0.12.1-2/usr/share/games/doom/freedoom1.wad",
     "src/freedoom@0.13.0-2/usr/share/games/doom/freedoom1.wad"),
    ("src/phaser@4.2.0/dist/phaser.min.js", "src/phaser@4.2.1/dist/phaser.min.js"),
]


FEW_CHANGES_PAIR_NAME = "three-tree-10-changed"
# A synthetic tree pair where little changes, as between two patch releases of a
# game's asset tree: old = three-tree's new side, new = the same with 10 of its .js
# files edited (a comment inserted mid-file). It measures what unchanged entries cost.
FEW_CHANGES_BASE = "trees/three-tree/new"
FEW_CHANGES_FILES = 10


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- pairs

@dataclass
class Pair:
    name: str
    kind: str            # "file" or "tree"
    old: Path            # what edgepatch diffs: a file, or a directory for trees
    new: Path
    old_file: Path       # what the peers diff: the same file, or the tree's tar
    new_file: Path
    scored: bool         # a real version pair from the corpus (counts toward the score)


def corpus_pairs(corpus: Path) -> list[Pair]:
    """Every pair the corpus holds: single files first (by size), then trees."""
    files, trees = [], []
    for d in sorted((corpus / "pairs").glob("*")):
        if (d / "old").is_file() and (d / "new").is_file():
            files.append(Pair(d.name, "file", d / "old", d / "new", d / "old", d / "new", True))
    for d in sorted((corpus / "trees").glob("*")):
        if (d / "old").is_dir() and (d / "old.tar").is_file():
            # old/new are symlinks into src/; resolve so every tool sees a real directory
            trees.append(Pair(d.name, "tree", (d / "old").resolve(), (d / "new").resolve(),
                              d / "old.tar", d / "new.tar", True))
    files.sort(key=lambda p: p.new.stat().st_size)
    return files + trees


def build_large_pair(corpus: Path, work: Path) -> Pair:
    """Concatenate LARGE_PAIR_PARTS into WORK/derived/concat-101mib/{old,new}.

    Rebuilt only when the recipe (part paths and sizes) changed, so reruns are cheap."""
    pair_dir = work / "derived" / LARGE_PAIR_NAME
    recipe_lines = []
    for old_rel, new_rel in LARGE_PAIR_PARTS:
        for rel in (old_rel, new_rel):
            path = corpus / rel
            if not path.is_file():
                raise SystemExit(f"large pair: corpus file missing: {path}")
            recipe_lines.append(f"{path.stat().st_size} {rel}")
    recipe = "\n".join(recipe_lines) + "\n"
    recipe_file = pair_dir / "RECIPE"
    if not (recipe_file.is_file() and recipe_file.read_text() == recipe
            and (pair_dir / "old").is_file() and (pair_dir / "new").is_file()):
        log(f"building {LARGE_PAIR_NAME} in {pair_dir}")
        pair_dir.mkdir(parents=True, exist_ok=True)
        for side, index in (("old", 0), ("new", 1)):
            partial = pair_dir / f"{side}.partial"
            with open(partial, "wb") as out:
                for parts in LARGE_PAIR_PARTS:
                    with open(corpus / parts[index], "rb") as part:
                        shutil.copyfileobj(part, out, 1 << 20)
            partial.replace(pair_dir / side)
        recipe_file.write_text(recipe)
    old, new = pair_dir / "old", pair_dir / "new"
    return Pair(LARGE_PAIR_NAME, "file", old, new, old, new, False)


def deterministic_tar(directory: Path, out: Path) -> None:
    """The corpus's own tar recipe (bench/corpus/fetch.sh dtar), so peers see what they see there."""
    subprocess.run(["tar", "--sort=name", "--owner=0", "--group=0", "--numeric-owner", "--mtime=@0",
                    "--format=gnu", "--exclude=.unpacked", "-C", str(directory), "-cf", str(out), "."], check=True)


def build_few_changes_pair(corpus: Path, work: Path) -> Pair:
    """WORK/derived/three-tree-10-changed/{old,new} and their tars (rebuilt when missing)."""
    base = (corpus / FEW_CHANGES_BASE).resolve()
    pair_dir = work / "derived" / FEW_CHANGES_PAIR_NAME
    done = pair_dir / "DONE"
    if not done.is_file() or done.read_text() != str(base) + "\n":
        log(f"building {FEW_CHANGES_PAIR_NAME} in {pair_dir}")
        remove(pair_dir)
        pair_dir.mkdir(parents=True)
        ignore = shutil.ignore_patterns(".unpacked")
        shutil.copytree(base, pair_dir / "old", symlinks=True, ignore=ignore)
        shutil.copytree(base, pair_dir / "new", symlinks=True, ignore=ignore)
        scripts = sorted(p for p in (pair_dir / "new").rglob("*.js") if p.is_file() and not p.is_symlink())
        step = max(1, len(scripts) // FEW_CHANGES_FILES)
        for path in scripts[::step][:FEW_CHANGES_FILES]:
            data = path.read_bytes()
            path.write_bytes(data[:len(data) // 2] + b"/* edited */" + data[len(data) // 2:])
        for side in ("old", "new"):
            deterministic_tar(pair_dir / side, pair_dir / f"{side}.tar")
        done.write_text(str(base) + "\n")
    return Pair(FEW_CHANGES_PAIR_NAME, "tree", pair_dir / "old", pair_dir / "new",
                pair_dir / "old.tar", pair_dir / "new.tar", False)


# --------------------------------------------------------------------------- tools

# A command is an argv list; multi-step tools run `sh -c SCRIPT sh ARGS...` so that one
# /usr/bin/time covers all steps (wall time summed, peak RSS of the largest step).
Command = list[str]


def sh(script: str, *args: Path | str) -> Command:
    return ["sh", "-c", script, "sh", *map(str, args)]


@dataclass
class DeltaTool:
    name: str                                            # id in JSON and --tools
    label: str                                           # what the tables show
    is_peer: bool                                        # competes for "best peer"
    diff: Callable[[Path, Path, Path, Path], Command]    # (old, new, patch, scratch)
    apply: Callable[[Path, Path, Path, Path], Command]   # (old, patch, out, scratch)


def xdelta3_source_window(old: Path) -> int:
    # -B must cover the whole source, or matches beyond the default 64 MiB window are
    # lost (only matters for the large pair); same spirit as zstd --long=31.
    size = max(old.stat().st_size, XDELTA3_DEFAULT_SOURCE_WINDOW)
    return 1 << (size - 1).bit_length()


def make_tools(edgepatch: Path, edgepatch_diff_args: list[str]) -> list[DeltaTool]:
    python = sys.executable
    return [
        DeltaTool(
            "edgepatch", "edgepatch", False,
            diff=lambda old, new, patch, _: [str(edgepatch), "diff", str(old), str(new), str(patch),
                                             *edgepatch_diff_args],
            apply=lambda old, patch, out, _: [str(edgepatch), "apply", str(old), str(patch), str(out)],
        ),
        DeltaTool(
            "xdelta3", "xdelta3 -9", True,
            diff=lambda old, new, patch, _: ["xdelta3", "-9", "-e", "-f", "-B", str(xdelta3_source_window(old)),
                                             "-s", str(old), str(new), str(patch)],
            apply=lambda old, patch, out, _: ["xdelta3", "-d", "-f", "-B", str(xdelta3_source_window(old)),
                                              "-s", str(old), str(patch), str(out)],
        ),
        DeltaTool(
            "bsdiff", "bsdiff", True,
            diff=lambda old, new, patch, _: ["bsdiff", str(old), str(new), str(patch)],
            apply=lambda old, patch, out, _: ["bspatch", str(old), str(out), str(patch)],
        ),
        DeltaTool(
            "zstd", "zstd -19 --long --patch-from", True,
            diff=lambda old, new, patch, _: ["zstd", "-q", "-f", "-19", "--long=31", f"--patch-from={old}",
                                             str(new), "-o", str(patch)],
            apply=lambda old, patch, out, _: ["zstd", "-q", "-f", "-d", "--long=31", f"--patch-from={old}",
                                              str(patch), "-o", str(out)],
        ),
        DeltaTool(
            "hdiffpatch", "HDiffPatch (zstd 19)", True,
            diff=lambda old, new, patch, _: [python, str(HDIFFPATCH_CLI), "diff", str(old), str(new), str(patch)],
            apply=lambda old, patch, out, _: [python, str(HDIFFPATCH_CLI), "apply", str(old), str(patch), str(out)],
        ),
        DeltaTool(
            "rdiff-zstd", "rdiff -b256 + zstd -19", True,
            diff=lambda old, new, patch, scratch: sh(
                'rdiff -b 256 signature "$1" "$4/signature" && rdiff delta "$4/signature" "$2" "$4/delta"'
                ' && zstd -q -f -19 "$4/delta" -o "$3"', old, new, patch, scratch),
            apply=lambda old, patch, out, scratch: sh(
                'zstd -q -f -d "$2" -o "$4/delta" && rdiff patch "$1" "$4/delta" "$3"',
                old, patch, out, scratch),
        ),
    ]


# --------------------------------------------------------------------------- measuring

@dataclass
class Run:
    wall_s: float | None = None
    peak_rss_bytes: int | None = None
    exit_code: int | None = None
    error: str | None = None       # why the command failed, if it did


def measure(command: Command, log_path: Path, timeout_s: float) -> Run:
    """Run command under GNU time; wall time from a monotonic clock around it, peak RSS
    (the largest process in the command, in KiB) from time's %M."""
    time_file = log_path.with_suffix(".time")
    argv = ["/usr/bin/time", "-f", "%e %M", "-o", str(time_file), *command]
    timed_out = threading.Event()
    with open(log_path, "wb") as log_file:
        started = time.perf_counter()
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log_file,
                                   stderr=subprocess.STDOUT, start_new_session=True)

        def kill() -> None:
            timed_out.set()
            os.killpg(process.pid, signal.SIGKILL)

        # Not wait(timeout=...): that polls with sleeps of 0.5, 1, 2, ... 50 ms, so
        # every wall time would be rounded up to the next poll (8, 16, 32, 64, 114 ms).
        # A blocking waitpid returns when the process ends; a timer kills it if late.
        killer = threading.Timer(timeout_s, kill)
        killer.start()
        try:
            exit_code = process.wait()
        finally:
            killer.cancel()
        wall_s = time.perf_counter() - started
        if timed_out.is_set():
            return Run(error=f"timed out after {timeout_s:.0f} s")
    run = Run(wall_s=round(wall_s, 4), exit_code=exit_code)
    try:
        # time prints "Command exited with non-zero status N" before the format line
        _elapsed, max_rss_kib = time_file.read_text().split()[-2:]
        run.peak_rss_bytes = int(max_rss_kib) * 1024
    except (OSError, ValueError):
        pass
    if exit_code != 0:
        tail = log_path.read_bytes()[-400:].decode("utf-8", "replace").strip().splitlines()
        run.error = f"exit {exit_code}: " + (tail[-1] if tail else "(no output)")
    return run


def remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def tree_entries(root: Path) -> dict[str, tuple[str, str]]:
    """relative path -> (type, octal mode or symlink target) for everything under root."""
    entries = {}
    for directory, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(directory) / name
            info = path.lstat()
            rel = str(path.relative_to(root))
            if stat.S_ISLNK(info.st_mode):
                entries[rel] = ("symlink", os.readlink(path))
            elif stat.S_ISDIR(info.st_mode):
                entries[rel] = ("dir", f"{stat.S_IMODE(info.st_mode):04o}")
            else:
                entries[rel] = ("file", f"{stat.S_IMODE(info.st_mode):04o}")
    return entries


def round_trip_problem(expected: Path, produced: Path) -> str | None:
    """None if produced is byte-exact (and for trees mode-exact) to expected."""
    if not produced.exists():
        return "no output"
    if expected.is_dir():
        if not produced.is_dir():
            return "output is not a directory"
        contents = subprocess.run(["diff", "-r", "-q", "--no-dereference", str(expected), str(produced)],
                                  capture_output=True, text=True)
        if contents.returncode != 0:
            lines = contents.stdout.strip().splitlines()
            return f"diff -r: {len(lines)} differences, first: {lines[0] if lines else contents.stderr.strip()}"
        want, got = tree_entries(expected), tree_entries(produced)
        wrong = sorted(p for p in want.keys() | got.keys() if want.get(p) != got.get(p))
        if wrong:
            return f"{len(wrong)} entries differ in type/mode/link, first: {wrong[0]} " \
                   f"expected {want.get(wrong[0])} got {got.get(wrong[0])}"
        return None
    if subprocess.run(["cmp", "-s", str(expected), str(produced)]).returncode != 0:
        return "cmp: content differs"
    return None


@dataclass
class ToolResult:
    tool: str
    patch_bytes: int | None = None
    diff: Run = field(default_factory=Run)
    apply: Run = field(default_factory=Run)
    round_trip: str = "not run"    # "ok" or "FAIL: why"
    # zstd on a tree pair only: `zstd -d --patch-from ... | tar -x`, the tree itself
    tree_pipeline_apply_s: float | None = None

    @property
    def ok(self) -> bool:
        return self.round_trip == "ok"


def warm_page_cache(pair: Pair) -> None:
    """Read every input once so the first tool does not pay for cold disk reads."""
    paths = [pair.old_file, pair.new_file]
    if pair.kind == "tree":
        paths += [p for root in (pair.old, pair.new) for p in root.rglob("*") if p.is_file()]
    for path in paths:
        with open(path, "rb") as f:
            while f.read(1 << 20):
                pass


def tool_inputs(tool: DeltaTool, pair: Pair) -> tuple[Path, Path]:
    """What the tool diffs: edgepatch takes a tree's directories, the peers its tars."""
    on_tree = pair.kind == "tree" and tool.name == "edgepatch"
    return (pair.old, pair.new) if on_tree else (pair.old_file, pair.new_file)


def apply_output(tool_name: str, pair: Pair, work: Path, apply_out: Path | None) -> Path:
    return (apply_out / pair.name if apply_out else work / "runs" / pair.name) / f"{tool_name}.out"


def run_tool(tool: DeltaTool, pair: Pair, work: Path, timeout_s: float, repeat: int,
             apply_out: Path | None) -> ToolResult:
    result = ToolResult(tool.name)
    old, new = tool_inputs(tool, pair)
    pair_dir = work / "runs" / pair.name
    scratch = pair_dir / f"{tool.name}.scratch"
    patch = pair_dir / f"{tool.name}.patch"
    out = apply_output(tool.name, pair, work, apply_out)
    out.parent.mkdir(parents=True, exist_ok=True)
    for path in (scratch, patch, out):
        remove(path)
    scratch.mkdir(parents=True)

    log(f"{pair.name}: {tool.name} diff")
    result.diff = measure(tool.diff(old, new, patch, scratch), pair_dir / f"{tool.name}.diff.log", timeout_s)
    if result.diff.error or not patch.is_file():
        result.round_trip = f"FAIL: diff {result.diff.error or 'wrote no patch'}"
        return result
    result.patch_bytes = patch.stat().st_size

    # Apply `repeat` times; keep the fastest wall time and the largest peak RSS.
    for attempt in range(repeat):
        log(f"{pair.name}: {tool.name} apply" + (f" ({attempt + 1}/{repeat})" if repeat > 1 else ""))
        remove(out)
        for leftover in scratch.iterdir():
            remove(leftover)
        run = measure(tool.apply(old, patch, out, scratch), pair_dir / f"{tool.name}.apply.log", timeout_s)
        if run.error:
            result.apply = run
            result.round_trip = f"FAIL: apply {run.error}"
            return result
        if attempt == 0:
            result.apply = run
        else:
            result.apply.wall_s = min(result.apply.wall_s, run.wall_s)
            result.apply.peak_rss_bytes = max(result.apply.peak_rss_bytes or 0, run.peak_rss_bytes or 0)
    problem = round_trip_problem(new, out)
    result.round_trip = f"FAIL: {problem}" if problem else "ok"
    remove(out)                      # outputs are as big as the inputs; patches are kept
    remove(scratch)
    return result


def time_applies_interleaved(pair: Pair, tools: list[DeltaTool], results: dict[str, ToolResult], work: Path,
                             timeout_s: float, repeat: int, apply_out: Path | None) -> None:
    """Re-times edgepatch's and zstd's apply alternately, `repeat` rounds, fastest counts.

    Run one after the other, each tool's runs would fall into a different stretch of
    the machine's (noisy, shared) time; alternating puts both into the same stretch.
    For a tree pair it also times what a tar-based peer needs to produce the tree
    itself: `zstd -d --patch-from=old.tar ... -c | tar -x`."""
    by_name = {t.name: t for t in tools}
    timed = [name for name in ("edgepatch", "zstd") if name in by_name and results.get(name) and results[name].ok]
    if len(timed) < 2:
        return
    commands: dict[str, Callable[[Path], list[str]]] = {}
    for name in timed:
        tool = by_name[name]
        old, _ = tool_inputs(tool, pair)
        patch = work / "runs" / pair.name / f"{name}.patch"
        scratch = work / "runs" / pair.name / f"{name}.scratch"
        commands[name] = lambda out, tool=tool, old=old, patch=patch, scratch=scratch: tool.apply(old, patch, out, scratch)
    if pair.kind == "tree":
        zstd_patch = work / "runs" / pair.name / "zstd.patch"
        commands["zstd+tar"] = lambda out: sh('mkdir "$3" && zstd -q -d -c --long=31 --patch-from="$1" "$2" | tar -x -C "$3"',
                                               pair.old_file, zstd_patch, out)
    best: dict[str, Run] = {}
    for attempt in range(repeat):
        for name, command in commands.items():
            out = apply_output(name, pair, work, apply_out)
            remove(out)
            log(f"{pair.name}: {name} apply, interleaved ({attempt + 1}/{repeat})")
            if name in by_name:     # a tool's own apply may use its scratch directory
                (work / "runs" / pair.name / f"{name}.scratch").mkdir(parents=True, exist_ok=True)
            run = measure(command(out), work / "runs" / pair.name / f"{name}.interleaved.log", timeout_s)
            remove(out)
            if run.error:
                log(f"{pair.name}: {name} interleaved apply failed: {run.error}")
                return
            if name not in best or run.wall_s < best[name].wall_s:
                best[name] = run
    for name in timed:
        results[name].apply.wall_s = best[name].wall_s
    if "zstd+tar" in best:
        results["zstd"].tree_pipeline_apply_s = best["zstd+tar"].wall_s
    for name in timed:
        remove(work / "runs" / pair.name / f"{name}.scratch")


# --------------------------------------------------------------------------- scoring

def floored(size: int) -> int:
    return max(size, SIZE_FLOOR)


@dataclass
class PairScore:
    pair: str
    scored: bool
    best_peer: str | None
    best_peer_bytes: int | None
    edgepatch_bytes: int | None
    size_ratio: float | None               # floored edgepatch / floored best peer
    apply_time_ratio_vs_zstd: float | None  # edgepatch apply wall / zstd -d --patch-from wall
    apply_time_ratio_vs_zstd_tar: float | None  # trees: edgepatch / (zstd -d --patch-from | tar -x)
    edgepatch_apply_rss_bytes: int | None
    edgepatch_round_trip: str


def score_pair(pair: Pair, results: dict[str, ToolResult], peers: list[str]) -> PairScore:
    valid_peers = [results[name] for name in peers if name in results and results[name].ok]
    best = min(valid_peers, key=lambda r: r.patch_bytes, default=None)
    ours = results.get("edgepatch")
    size_ratio = apply_ratio = None
    if ours and ours.patch_bytes is not None and best:
        size_ratio = floored(ours.patch_bytes) / floored(best.patch_bytes)
    zstd = results.get("zstd")
    tar_ratio = None
    if ours and ours.ok and zstd and zstd.ok and zstd.apply.wall_s:
        apply_ratio = ours.apply.wall_s / zstd.apply.wall_s
        if zstd.tree_pipeline_apply_s:
            tar_ratio = ours.apply.wall_s / zstd.tree_pipeline_apply_s
    return PairScore(
        pair=pair.name, scored=pair.scored,
        best_peer=best.tool if best else None,
        best_peer_bytes=best.patch_bytes if best else None,
        edgepatch_bytes=ours.patch_bytes if ours else None,
        size_ratio=size_ratio, apply_time_ratio_vs_zstd=apply_ratio, apply_time_ratio_vs_zstd_tar=tar_ratio,
        edgepatch_apply_rss_bytes=ours.apply.peak_rss_bytes if ours and ours.ok else None,
        edgepatch_round_trip=ours.round_trip if ours else "not run",
    )


def geometric_mean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


@dataclass
class Check:
    requirement: str
    measured: str
    passed: bool | None   # None: not measured in this run


def requirement_checks(pairs: list[Pair], results: dict[str, dict[str, ToolResult]],
                       scores: list[PairScore], repeat: int) -> list[Check]:
    checks = []
    ours = [(p, results[p.name]["edgepatch"]) for p in pairs if "edgepatch" in results[p.name]]
    if not ours:
        return [Check("edgepatch measured", "edgepatch was not in --tools", None)]

    failed = [p.name for p, r in ours if not r.ok]
    checks.append(Check("every pair round-trips byte-exact (trees: contents and modes)",
                        "all ok" if not failed else "FAIL on " + ", ".join(failed), not failed))

    ratios = [s.size_ratio for s in scores if s.scored and s.size_ratio is not None]
    if ratios:
        gm, worst = geometric_mean(ratios), max(ratios)
        checks.append(Check(f"size: geomean(edgepatch / best peer) <= {GEOMEAN_LIMIT} over corpus pairs",
                            f"{gm:.3f} over {len(ratios)} pairs", gm <= GEOMEAN_LIMIT))
        checks.append(Check(f"size: no corpus pair above {MAX_RATIO_LIMIT}", f"max {worst:.3f}",
                            worst <= MAX_RATIO_LIMIT))

    rss = [(p.name, r.apply.peak_rss_bytes) for p, r in ours if r.ok and r.apply.peak_rss_bytes]
    if rss:
        name, worst_rss = max(rss, key=lambda x: x[1])
        checks.append(Check(f"apply peak RSS <= {APPLY_RSS_LIMIT // MB} MB on every pair",
                            f"max {worst_rss / MB:.1f} MB ({name})", worst_rss <= APPLY_RSS_LIMIT))

    slower = [(s.pair, s.apply_time_ratio_vs_zstd) for s in scores if s.apply_time_ratio_vs_zstd is not None]
    if slower:
        name, worst_time = max(slower, key=lambda x: x[1])
        checks.append(Check("apply no slower than zstd -d --patch-from on every pair",
                            f"max ratio {worst_time:.2f} ({name}); "
                            + ("single runs" if repeat == 1 else f"fastest of {repeat} interleaved runs"),
                            worst_time <= 1.0))

    large = results.get(LARGE_PAIR_NAME, {}).get("edgepatch")
    requirement = (f"diff of the {LARGE_PAIR_NAME} pair within {LARGE_DIFF_SECONDS_LIMIT:.0f} s "
                   f"and {LARGE_DIFF_RSS_LIMIT // MB} MB")
    if large is None:
        checks.append(Check(requirement, "pair not in this run", None))
    elif large.diff.error:
        checks.append(Check(requirement, f"diff failed ({large.diff.error})", False))
    else:
        rss_b = large.diff.peak_rss_bytes or 0
        checks.append(Check(requirement, f"{large.diff.wall_s:.1f} s, {rss_b / MB:.0f} MB",
                            large.diff.wall_s <= LARGE_DIFF_SECONDS_LIMIT and rss_b <= LARGE_DIFF_RSS_LIMIT))
    return checks


# --------------------------------------------------------------------------- report

def fmt_seconds(run: Run) -> str:
    return "-" if run.wall_s is None else f"{run.wall_s:.2f}"


def fmt_rss(run: Run) -> str:
    return "-" if run.peak_rss_bytes is None else f"{run.peak_rss_bytes / MB:.0f}"


def fmt_percent(size: int, of: int) -> str:
    percent = 100 * size / of
    return f"{percent:.3f}" if percent < 1 else f"{percent:.2f}"


def markdown_table(header: list[str], rows: list[list[str]], align: str) -> str:
    """align: one letter per column, l (text) or r (numbers)."""
    assert len(align) == len(header)
    align = ["---:" if a == "r" else "---" for a in align]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def render_report(pairs: list[Pair], tools: list[DeltaTool], results: dict[str, dict[str, ToolResult]],
                  scores: list[PairScore], checks: list[Check], context: dict) -> str:
    labels = {t.name: t.label for t in tools}
    by_pair = {s.pair: s for s in scores}
    out = [f"## Results ({context['date']}, {context['machine']['cpus']} cores, "
           f"{context['machine']['cpu_model']})", ""]

    out += ["### Patch size, % of the new file (best peer in bold; trees: peers diff the tars)", ""]
    rows = []
    for pair in pairs:
        new_size = pair.new_file.stat().st_size
        row = [pair.name + ("" if pair.scored else " (synthetic)"), f"{new_size / MB:.1f} MB"]
        for tool in tools:
            r = results[pair.name].get(tool.name)
            if r is None or r.patch_bytes is None:
                row.append("-" if r is None else "FAIL")
                continue
            cell = fmt_percent(r.patch_bytes, new_size)
            if not r.ok:
                cell += " FAIL"
            elif by_pair[pair.name].best_peer == tool.name:
                cell = f"**{cell}**"
            row.append(cell)
        rows.append(row)
    out += [markdown_table(["pair", "new size", *[t.label for t in tools]], rows, "l" + "r" * (len(tools) + 1)), ""]

    out += ["### Every run (MB = 10^6 bytes; RSS is the peak of the largest process)", ""]
    rows = []
    for pair in pairs:
        new_size = pair.new_file.stat().st_size
        for tool in tools:
            r = results[pair.name].get(tool.name)
            if r is None:
                continue
            best = by_pair[pair.name].best_peer_bytes
            vs_best = "-" if r.patch_bytes is None or not best else f"{floored(r.patch_bytes) / floored(best):.3f}"
            rows.append([pair.name, labels[tool.name],
                         "-" if r.patch_bytes is None else f"{r.patch_bytes:,}",
                         "-" if r.patch_bytes is None else fmt_percent(r.patch_bytes, new_size),
                         vs_best, fmt_seconds(r.diff), fmt_rss(r.diff),
                         fmt_seconds(r.apply), fmt_rss(r.apply), r.round_trip])
    out += [markdown_table(["pair", "tool", "patch bytes", "% of new", "vs best peer", "diff s", "diff MB",
                            "apply s", "apply MB", "round trip"], rows, "llrrrrrrrl"), ""]

    if "edgepatch" in {t.name for t in tools}:
        out += ["### Score: edgepatch vs best peer (sizes under 1 KiB count as 1 KiB)", ""]
        rows = []
        for s in scores:
            rows.append([s.pair + ("" if s.scored else " (synthetic, not scored)"),
                         labels.get(s.best_peer, "-") if s.best_peer else "-",
                         "-" if s.best_peer_bytes is None else f"{s.best_peer_bytes:,}",
                         "-" if s.edgepatch_bytes is None else f"{s.edgepatch_bytes:,}",
                         "-" if s.size_ratio is None else f"{s.size_ratio:.3f}",
                         "-" if s.apply_time_ratio_vs_zstd is None else f"{s.apply_time_ratio_vs_zstd:.2f}",
                         "-" if s.apply_time_ratio_vs_zstd_tar is None else f"{s.apply_time_ratio_vs_zstd_tar:.2f}",
                         "-" if s.edgepatch_apply_rss_bytes is None else f"{s.edgepatch_apply_rss_bytes / MB:.1f}",
                         s.edgepatch_round_trip])
        out += [markdown_table(["pair", "best peer", "best peer bytes", "edgepatch bytes", "size ratio",
                                "apply time vs zstd -d", "vs zstd -d \\| tar -x (trees)", "apply MB", "round trip"],
                               rows, "llrrrrrrl"), ""]
        ratios = [s.size_ratio for s in scores if s.scored and s.size_ratio is not None]
        all_ratios = [s.size_ratio for s in scores if s.size_ratio is not None]
        if ratios:
            out.append(f"Size ratio over the {len(ratios)} corpus pairs: geometric mean "
                       f"**{geometric_mean(ratios):.3f}**, max **{max(ratios):.3f}**.")
        if len(all_ratios) > len(ratios):
            out.append(f"Including the synthetic pairs: geometric mean {geometric_mean(all_ratios):.3f}, "
                       f"max {max(all_ratios):.3f}.")
        out += ["", "### Issue requirements", ""]
        rows = [[c.requirement, c.measured, {True: "PASS", False: "FAIL", None: "not measured"}[c.passed]]
                for c in checks]
        out += [markdown_table(["requirement", "measured", "verdict"], rows, "lll"), ""]

    versions = "; ".join(f"{k} {v}" for k, v in context["tool_versions"].items())
    out += [f"Tool versions: {versions}.", ""]
    return "\n".join(out)


# --------------------------------------------------------------------------- context

def version_of(argv: list[str]) -> str:
    """The first version-looking token the command prints, else its first line."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    text = (done.stdout or done.stderr).strip()
    version = re.search(r"\bv?(\d+\.\d+[\w.+~-]*)", text)
    return version.group(1) if version else (text.splitlines()[0] if text else "unknown")


def run_context(edgepatch: Path) -> dict:
    cpu_model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        hdiffpatch_version = importlib.metadata.version("hdiffpatch")
    except importlib.metadata.PackageNotFoundError:
        hdiffpatch_version = "not installed"
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": {"cpus": os.cpu_count(), "cpu_model": cpu_model, "platform": platform.platform(),
                    "memory_mb": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // MB},
        "tool_versions": {
            "edgepatch": version_of([str(edgepatch), "--version"]),
            "xdelta3": version_of(["xdelta3", "-V"]),
            "bsdiff": version_of(["dpkg-query", "-W", "-f", "${Version}", "bsdiff"]),
            "zstd": version_of(["zstd", "--version"]),
            "rdiff": version_of(["rdiff", "--version"]),
            "hdiffpatch (PyPI)": hdiffpatch_version,
            "python": platform.python_version(),
        },
    }


# --------------------------------------------------------------------------- main

def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, required=True, help="corpus dir made by bench/corpus/fetch.sh")
    parser.add_argument("--work", type=Path, required=True,
                        help="scratch dir for the large pair, patches and outputs (outside the repo)")
    parser.add_argument("--out", type=Path, default=BENCH_DIR / "out", help="where JSON and markdown go")
    parser.add_argument("--edgepatch", type=Path, required=True, help="edgepatch binary")
    parser.add_argument("--edgepatch-diff-args", default="",
                        help="extra arguments for `edgepatch diff`, e.g. '--level 19 --threads 2'")
    parser.add_argument("--pairs", default="", help="comma-separated subset of pairs (default: all)")
    parser.add_argument("--tools", default="", help="comma-separated subset of tools (default: all)")
    parser.add_argument("--no-large", action="store_true", help=f"skip the {LARGE_PAIR_NAME} pair")
    parser.add_argument("--repeat", type=int, default=1, help="apply runs per tool; the fastest counts")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per command before it is killed")
    parser.add_argument("--apply-out", type=Path, default=None,
                        help="directory for apply outputs (default: under --work); e.g. a tmpfs, to time "
                             "the tools rather than the disk")
    return parser.parse_args(argv)


def select(names_csv: str, available: list[str], what: str) -> list[str]:
    if not names_csv:
        return available
    wanted = [n.strip() for n in names_csv.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in available]
    if unknown:
        raise SystemExit(f"unknown {what}: {', '.join(unknown)} (available: {', '.join(available)})")
    return wanted


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    corpus, work = args.corpus.resolve(), args.work.resolve()
    all_tools = make_tools(args.edgepatch.resolve(), args.edgepatch_diff_args.split())
    tool_names = select(args.tools, [t.name for t in all_tools], "tools")
    tools = [t for t in all_tools if t.name in tool_names]
    if any(t.name == "edgepatch" for t in tools) and not os.access(args.edgepatch, os.X_OK):
        raise SystemExit(f"edgepatch binary not found or not executable: {args.edgepatch}")

    available = [p.name for p in corpus_pairs(corpus)] + [FEW_CHANGES_PAIR_NAME] + ([] if args.no_large else [LARGE_PAIR_NAME])
    pair_names = select(args.pairs, available, "pairs")
    pairs = [p for p in corpus_pairs(corpus) if p.name in pair_names]
    if FEW_CHANGES_PAIR_NAME in pair_names:
        pairs.append(build_few_changes_pair(corpus, work))
    if LARGE_PAIR_NAME in pair_names:
        pairs.append(build_large_pair(corpus, work))

    context = run_context(args.edgepatch)
    results: dict[str, dict[str, ToolResult]] = {}
    for pair in pairs:
        warm_page_cache(pair)
        results[pair.name] = {t.name: run_tool(t, pair, work, args.timeout, args.repeat, args.apply_out) for t in tools}
        time_applies_interleaved(pair, tools, results[pair.name], work, args.timeout, args.repeat, args.apply_out)

    peers = [t.name for t in tools if t.is_peer]
    scores = [score_pair(p, results[p.name], peers) for p in pairs]
    checks = requirement_checks(pairs, results, scores, args.repeat)
    report = render_report(pairs, tools, results, scores, checks, context)
    print(report)

    args.out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    raw = {
        **context,
        "command": sys.argv,
        "edgepatch_diff_args": args.edgepatch_diff_args,
        "units": {"sizes": "bytes", "times": "seconds (wall)", "rss": "bytes (peak of the largest process)"},
        "pairs": [{
            "name": p.name, "kind": p.kind, "scored": p.scored,
            "old": str(p.old), "new": str(p.new), "peers_old": str(p.old_file), "peers_new": str(p.new_file),
            "old_bytes": p.old_file.stat().st_size, "new_bytes": p.new_file.stat().st_size,
            "results": {name: asdict(r) for name, r in results[p.name].items()},
        } for p in pairs],
        "scores": [asdict(s) for s in scores],
        "checks": [asdict(c) for c in checks],
    }
    for name in (f"results-{stamp}", "latest"):
        (args.out / f"{name}.json").write_text(json.dumps(raw, indent=2) + "\n")
        (args.out / f"{name}.md").write_text(report + "\n")
    log(f"raw numbers: {args.out / f'results-{stamp}.json'} (and latest.json / latest.md)")
    failed_round_trips = [f"{p}/{t}" for p, rs in results.items() for t, r in rs.items() if not r.ok]
    if failed_round_trips:
        log("round trip failed: " + ", ".join(failed_round_trips))
    return 1 if failed_round_trips else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
