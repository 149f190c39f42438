#!/usr/bin/env python3
"""Patch size of builds that ship compressed files (`Build/x.wasm.gz`, `x.data.br`, as Unity,
Emscripten and Godot hosts do), stored as shipped and stored decoded (`site add
--store-decoded`), against the same builds uncompressed.

Usage: python3 bench/compressed_assets.py --corpus CORPUS --bin EDGEPATCH [--work DIR]
                                          [--pairs a,b] [--forms gzip-9,brotli-11,brotli-5]

For each corpus pair (bench/corpus/fetch.sh) and each form, a one-file build `Build/<name>`
(raw) or `Build/<name>.gz` / `.br` (compressed by the reference command-line tools: GNU gzip -9
-n, brotli -q 11 / -q 5), old and new, is published on a fresh static site with `edgepatch
site add` (old, then new: the patch old -> new is measured). Prints the patch bytes, the ratio
to the raw pair's patch, and the time of the second `site add`. Needs gzip and brotli on PATH.

       python3 bench/compressed_assets.py --bin EDGEPATCH --tree-pair OLD_DIR NEW_DIR
measures one real build pair as it ships (e.g. two versions of an npm package carrying .tar.gz
bundles) instead: its patch published as shipped and with --store-decoded.

       python3 bench/compressed_assets.py --bin EDGEPATCH --cli [--pairs ..] [--forms ..]
measures the CLI on the single files instead: `edgepatch diff OLD NEW P` and `edgepatch apply`
(checked byte for byte against the new file), with the compressed-asset transform (the
default) and without it (`--reader current,-deflate-transform,-brotli-transform`), times from
one run each.
"""
import argparse, json, os, shutil, subprocess, sys, time

PAIRS = {
    'havok-wasm': 'havok.wasm',
    'phaser-js': 'phaser.js',
    'esbuild-wasm-adj': 'esbuild.wasm',
    'freedoom2-wad': 'freedoom2.wad',
}
FORMS = {
    'raw': ('', None),
    'gzip-9': ('.gz', ['gzip', '-9', '-n', '-c']),
    'brotli-11': ('.br', ['brotli', '-q', '11', '-c']),
    'brotli-5': ('.br', ['brotli', '-q', '5', '-c']),
}


def compressed(src, out, cmd):
    """`src` compressed by `cmd` into `out`, made once (the work directory is a cache)."""
    if not os.path.exists(out):
        with open(out + '.tmp', 'wb') as w:
            subprocess.run(cmd + [src], stdout=w, check=True)
        os.rename(out + '.tmp', out)
    return out


def site_add(edgepatch, site, key, build, build_dir, decoded):
    cmd = [edgepatch, '--json', 'site', 'add', '--site', site, '--key', key, '--game', 'g', '--build', build, '--history', '1']
    if decoded:
        cmd.append('--store-decoded')
    t0 = time.perf_counter()
    out = subprocess.run(cmd + [build_dir], capture_output=True, text=True)
    secs = time.perf_counter() - t0
    if out.returncode != 0:
        sys.exit(f'site add failed: {out.stderr}')
    return json.loads(out.stdout), secs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--corpus', default=os.path.expanduser('~/.cache/edgepatch-corpus'))
    ap.add_argument('--bin', required=True)
    ap.add_argument('--work', default='/tmp/edgepatch-compressed-assets')
    ap.add_argument('--pairs', default=','.join(PAIRS))
    ap.add_argument('--forms', default='gzip-9,brotli-11,brotli-5')
    ap.add_argument('--tree-pair', nargs=2, metavar=('OLD', 'NEW'))
    ap.add_argument('--cli', action='store_true')
    a = ap.parse_args()
    edgepatch = os.path.abspath(a.bin)
    os.makedirs(a.work, exist_ok=True)
    key = os.path.join(a.work, 'site.key')
    if not os.path.exists(key):
        subprocess.run([edgepatch, 'keygen', key], check=True, capture_output=True)
    if a.tree_pair:
        coded = [os.path.join(d, f) for d, _, fs in os.walk(a.tree_pair[1]) for f in fs if f.endswith(('.gz', '.br'))]
        print(f'new build: {sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(a.tree_pair[1]) for f in fs):,} bytes, '
              f'{len(coded)} .gz/.br files of {sum(map(os.path.getsize, coded)):,} bytes')
        for decoded in (False, True):
            site = os.path.join(a.work, 'site')
            shutil.rmtree(site, ignore_errors=True)
            site_add(edgepatch, site, key, 'old', a.tree_pair[0], decoded)
            res, secs = site_add(edgepatch, site, key, 'new', a.tree_pair[1], decoded)
            pair = next(p for p in res['pairs'] if p['from'] == 'old')
            print(f'{"decoded" if decoded else "shipped":8} patch {pair["patch_bytes"]:12,}  build {pair["new_bytes"]:12,}  site add {secs:6.1f} s', flush=True)
        return
    if a.cli:
        return cli_pairs(edgepatch, a)
    print(f'{"pair":18} {"form":10} {"stored":8} {"new file":>11} {"patch":>10} {"x raw":>7} {"add s":>7}')
    for pair in a.pairs.split(','):
        name = PAIRS[pair]
        raw_patch = None
        for form in ['raw'] + a.forms.split(','):
            ext, cmd = FORMS[form]
            builds = {}
            for v in ('old', 'new'):
                src = os.path.join(a.corpus, 'pairs', pair, v)
                d = os.path.join(a.work, 'builds', pair, form, v, 'Build')
                os.makedirs(d, exist_ok=True)
                target = os.path.join(d, name + ext)
                if not os.path.exists(target):
                    if cmd is None:
                        shutil.copyfile(src, target)
                    else:
                        shutil.copyfile(compressed(src, os.path.join(a.work, f'{pair}.{v}.{form}'), cmd), target)
                builds[v] = os.path.dirname(d)
            for decoded in ([False] if form == 'raw' else [False, True]):
                site = os.path.join(a.work, 'site')
                shutil.rmtree(site, ignore_errors=True)
                site_add(edgepatch, site, key, 'old', builds['old'], decoded)
                res, secs = site_add(edgepatch, site, key, 'new', builds['new'], decoded)
                patch = next(p['patch_bytes'] for p in res['pairs'] if p['from'] == 'old')
                if form == 'raw':
                    raw_patch = patch
                new_size = os.path.getsize(os.path.join(builds['new'], 'Build', name + ext))
                stored = 'decoded' if decoded else 'shipped'
                print(f'{pair:18} {form:10} {stored:8} {new_size:11,} {patch:10,} {patch / raw_patch:7.2f} {secs:7.1f}', flush=True)


def timed(cmd):
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f'{cmd[1]} failed: {out.stderr}')
    return time.perf_counter() - t0


def cli_pairs(edgepatch, a):
    print(f'{"pair":18} {"form":10} {"transform":9} {"new file":>11} {"patch":>10} {"x raw":>7} {"diff s":>7} {"apply s":>7}')
    for pair in a.pairs.split(','):
        raw = None
        for form in ['raw'] + a.forms.split(','):
            ext, cmd = FORMS[form]
            files = {}
            for v in ('old', 'new'):
                src = os.path.join(a.corpus, 'pairs', pair, v)
                files[v] = src if cmd is None else compressed(src, os.path.join(a.work, f'{pair}.{v}.{form}'), cmd)
            for transform in ([True] if form == 'raw' else [True, False]):
                patch, out = os.path.join(a.work, 'cli.patch'), os.path.join(a.work, 'cli.out')
                reader = [] if transform else ['--reader', 'current,-deflate-transform,-brotli-transform']
                for f in (patch, out):
                    if os.path.exists(f):
                        os.remove(f)
                diff_s = timed([edgepatch, 'diff', *reader, files['old'], files['new'], patch])
                apply_s = timed([edgepatch, 'apply', '--trust-patch', files['old'], patch, out])
                with open(out, 'rb') as x, open(files['new'], 'rb') as y:
                    if x.read() != y.read():
                        sys.exit(f'{pair} {form}: apply is not byte-exact')
                size = os.path.getsize(patch)
                raw = raw or size
                print(f'{pair:18} {form:10} {"yes" if transform else "no":9} {os.path.getsize(files["new"]):11,} {size:10,} '
                      f'{size / raw:7.2f} {diff_s:7.1f} {apply_s:7.2f}', flush=True)


if __name__ == '__main__':
    main()
