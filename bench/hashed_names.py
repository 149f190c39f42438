#!/usr/bin/env python3
"""Patch size of builds whose file names carry content hashes, against the same builds with
stable names.

Usage: python3 bench/hashed_names.py --corpus CORPUS --bin EDGEPATCH [--work DIR]

Builds from the corpus (bench/corpus/fetch.sh):
  three-tree      the npm package tree three 0.186.1 -> 0.187.0 (1,277 files)
  wasm-build      one directory, Build/, holding havok.wasm, esbuild.wasm and phaser.js (the
                  corpus pairs havok-wasm, esbuild-wasm-adj, phaser-js)
each in three namings: stable (as they are), dotted (`name.<hash8>.ext`, as Vite and webpack's
`[name].[contenthash]` name them) and pure (`<hash8>.ext`, as Unity's "name files as hashes"
and webpack's `[contenthash]` do). The hash is of the file's content, so an unchanged file
keeps its name and a changed one gets a new name. Prints patch bytes and the ratio to stable.
"""
import argparse, hashlib, os, shutil, subprocess, sys, time


def hashed_name(name, data, style):
    h = hashlib.sha256(data).hexdigest()[:8]
    stem, dot, ext = name.rpartition('.')
    if not dot:
        stem, ext = name, ''
    if style == 'dotted':
        return f'{stem}.{h}.{ext}' if ext else f'{stem}.{h}'
    return f'{h}.{ext}' if ext else h


def copy_renamed(src, out, style):
    for dirpath, _, files in os.walk(src):
        rel = os.path.relpath(dirpath, src)
        os.makedirs(os.path.join(out, rel), exist_ok=True)
        for f in files:
            p = os.path.join(dirpath, f)
            if os.path.islink(p):
                continue
            data = open(p, 'rb').read()
            name = f if style == 'stable' else hashed_name(f, data, style)
            with open(os.path.join(out, rel, name), 'wb') as w:
                w.write(data)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--corpus', required=True)
    ap.add_argument('--bin', required=True)
    ap.add_argument('--work', default='/tmp/edgepatch-hashed-names')
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    sources = {'three-tree': {side: os.path.join(a.corpus, 'trees/three-tree', side) for side in ('old', 'new')}}
    for side in ('old', 'new'):
        build = os.path.join(a.work, 'src/wasm-build', side, 'Build')
        os.makedirs(build)
        for pair, name in (('havok-wasm', 'havok.wasm'), ('esbuild-wasm-adj', 'esbuild.wasm'), ('phaser-js', 'phaser.js')):
            shutil.copyfile(os.path.join(a.corpus, 'pairs', pair, side), os.path.join(build, name))
    sources['wasm-build'] = {side: os.path.join(a.work, 'src/wasm-build', side) for side in ('old', 'new')}
    print('| build | naming | patch bytes | / stable | diff s |')
    print('|---|---|---:|---:|---:|')
    for build, sides in sources.items():
        stable = None
        for style in ('stable', 'dotted', 'pure'):
            dirs = {}
            for side, src in sides.items():
                dirs[side] = os.path.join(a.work, build, style, side)
                copy_renamed(src, dirs[side], style)
            patch = os.path.join(a.work, build, style + '.patch')
            t = time.monotonic()
            subprocess.run([a.bin, 'diff', '--quiet', dirs['old'], dirs['new'], patch], check=True, stdout=subprocess.DEVNULL)
            took = time.monotonic() - t
            size = os.path.getsize(patch)
            stable = stable or size
            print(f'| {build} | {style} | {size:,} | {size / stable:.3f} | {took:.1f} |')
            sys.stdout.flush()


if __name__ == '__main__':
    main()
