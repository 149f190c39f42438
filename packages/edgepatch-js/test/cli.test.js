// node --test: edgepatch-js diff/apply of single files on the fixture game.wasm pair, against
// the native CLI (EDGEPATCH_BIN, default target/release/edgepatch) and the expected file.

import test from 'node:test';
import assert from 'node:assert';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync, spawnSync } from 'node:child_process';
import zlib from 'node:zlib';
import wasmBytes from '../../../fixtures/wasm_bytes.cjs';

const { mix, sleb, uleb } = wasmBytes;
const HERE = path.dirname(new URL(import.meta.url).pathname);
const REPO = path.resolve(HERE, '../../..');
const BIN = path.join(HERE, '../bin/edgepatch-js.js');
const NATIVE = process.env.EDGEPATCH_BIN || path.join(REPO, 'target/release/edgepatch');

const work = fs.mkdtempSync(path.join(os.tmpdir(), 'edgepatch-js-test-'));
test.after(() => fs.rmSync(work, { recursive: true, force: true }));

/** Extracts one member of a fixture tar with the system tar. */
function fixture(version, member) {
  const dir = path.join(work, `v${version}`);
  if (!fs.existsSync(dir)) {
    fs.mkdirSync(dir);
    execFileSync('tar', ['-xf', path.join(REPO, `fixtures/game-v${version}.tar`), '-C', dir]);
  }
  return path.join(dir, member);
}

function js(...args) {
  return spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8' });
}

function ok(r) {
  assert.strictEqual(r.status, 0, `exit ${r.status}: ${r.stderr}`);
  return r;
}

const OLD = fixture(1, 'game.wasm');
const NEW = fixture(2, 'game.wasm');

for (const level of [3, 19]) {
  test(`diff --level ${level} gives the native CLI's bytes, and both apply to NEW`, () => {
    const jsPatch = path.join(work, `js-${level}.patch`);
    const nativePatch = path.join(work, `native-${level}.patch`);
    ok(js('diff', '--level', String(level), OLD, NEW, jsPatch));
    execFileSync(NATIVE, ['diff', '--quiet', '--threads', '1', '--level', String(level), OLD, NEW, nativePatch]);
    assert.ok(Buffer.compare(fs.readFileSync(jsPatch), fs.readFileSync(nativePatch)) === 0, 'same patch bytes as native --threads 1');
    const nativeMt = path.join(work, `native-mt-${level}.patch`);
    execFileSync(NATIVE, ['diff', '--quiet', '--threads', '2', '--level', String(level), OLD, NEW, nativeMt]);
    assert.ok(Buffer.compare(fs.readFileSync(jsPatch), fs.readFileSync(nativeMt)) === 0, 'same bytes as native --threads 2');

    const out = path.join(work, `js-out-${level}`);
    ok(js('apply', OLD, nativePatch, out));
    assert.ok(Buffer.compare(fs.readFileSync(out), fs.readFileSync(NEW)) === 0, 'js apply of the native patch gives NEW');
    const nativeOut = path.join(work, `native-out-${level}`);
    execFileSync(NATIVE, ['apply', '--quiet', OLD, jsPatch, nativeOut]);
    assert.ok(Buffer.compare(fs.readFileSync(nativeOut), fs.readFileSync(NEW)) === 0, 'native apply of the js patch gives NEW');
  });
}

test('apply refuses an existing OUT and leaves it alone', () => {
  const patch = path.join(work, 'refuse.patch');
  ok(js('diff', '--level', '3', OLD, NEW, patch));
  const out = path.join(work, 'exists');
  fs.writeFileSync(out, 'keep me');
  const r = js('apply', OLD, patch, out);
  assert.notStrictEqual(r.status, 0);
  assert.match(r.stderr, /already exists/);
  assert.strictEqual(fs.readFileSync(out, 'utf8'), 'keep me');
});

test('a corrupt or truncated patch fails with a clear message and leaves no OUT', () => {
  const patch = fs.readFileSync(path.join(work, 'native-19.patch'));
  const cases = [
    ['corrupt', Buffer.from(patch).fill(0x41, patch.length - 100, patch.length - 90), /patch corrupt at byte \d+|BLAKE3/],
    ['truncated', patch.subarray(0, patch.length - 5), /patch truncated at byte \d+/],
  ];
  for (const [name, bytes, re] of cases) {
    const p = path.join(work, `${name}.patch`);
    fs.writeFileSync(p, bytes);
    const out = path.join(work, `${name}-out`);
    const r = js('apply', OLD, p, out);
    assert.strictEqual(r.status, 1, name);
    assert.match(r.stderr, re, name);
    assert.ok(!fs.existsSync(out), `${name}: no OUT`);
    assert.deepStrictEqual(fs.readdirSync(work).filter((f) => f.includes('.edgepatch-')), [], `${name}: no staging or scratch file left`);
  }
});

test('the wrong old file is refused', () => {
  const r = js('apply', NEW, path.join(work, 'native-19.patch'), path.join(work, 'wrong-old-out'));
  assert.strictEqual(r.status, 1);
  assert.match(r.stderr, /old build|BLAKE3/);
});

test('a directory patch applied to a single old file is refused, and writes nothing', () => {
  const r = js('apply', OLD, path.join(REPO, 'fixtures/golden/game-v1-to-v2.patch'), path.join(work, 'tree-out'));
  assert.strictEqual(r.status, 1);
  assert.match(r.stderr, /the old build is a single file; this is a patch of a directory build/);
  assert.ok(!fs.existsSync(path.join(work, 'tree-out')));
});

test('--stats reports wasm memory and peak RSS', () => {
  const out = path.join(work, 'stats-out');
  const r = ok(js('apply', '--stats', OLD, path.join(work, 'native-19.patch'), out));
  const stats = JSON.parse(r.stderr.trim().split('\n').pop());
  assert.strictEqual(stats.bytesWritten, fs.statSync(NEW).size);
  assert.ok(stats.wasmMemoryBytes > 0 && stats.peakRssBytes > 0);
});

// A made-up module pair whose code a toolchain re-emitted (crates/edgepatch-core/tests/
// wasm_modules, `recompiled_versions`, ported): the native diff stores it in the field-split
// layout, whose apply keeps the old module split and the normalized form in the sink's scratch
// space, here a temporary file beside OUT.
function section(id, contents, out) {
  out.push(id, ...uleb(contents.length));
  for (const b of contents) out.push(b);
}
function recompiled(n, recompiledToo) {
  const first = recompiledToo ? 1n : 0n;
  const count = BigInt(n) + first;
  const out = [0, 0x61, 0x73, 0x6d, 1, 0, 0, 0];
  section(1, [1, 0x60, 0, 0], out);
  const funcs = [];
  funcs.push(...uleb(count));
  for (let f = 0n; f < count; f++) funcs.push(0);
  section(3, funcs, out);
  const code = [];
  code.push(...uleb(count));
  for (let f = 0n; f < count; f++) {
    const id = recompiledToo && f === 0n ? BigInt(n) + 1n : f - first;
    const perm = Array.from({ length: 16 }, (_, i) => BigInt(i));
    if (recompiledToo && id % 3n !== 0n) {
      for (let i = 15; i >= 1; i--) {
        const j = Number(mix(id * 16n + BigInt(i)) % BigInt(i + 1));
        [perm[i], perm[j]] = [perm[j], perm[i]];
      }
    }
    const body = [1, 16, 0x7f];
    for (let k = 0n; k < 24n; k++) {
      const r = mix(id * 64n + k);
      for (const [op, l] of [[0x20, k % 3n], [0x20, 3n + (k % 2n)], [0x6a, 0n], [0x21, 5n + ((r >> 16n) % 2n)]]) {
        body.push(op);
        if (op !== 0x6a) body.push(...uleb(perm[Number(l)]));
      }
      if (recompiledToo && id % 3n !== 0n && mix(r) % 3n === 0n) body.push(0x20, Number(perm[7]), 0x1a);
      if (k % 4n === 0n) {
        body.push(0x41, ...sleb((r >> 24n) % 100000n), 0x1a, 0x10, ...uleb(first + ((r >> 40n) % BigInt(n))));
      }
    }
    body.push(0x0b);
    code.push(...uleb(body.length));
    for (const b of body) code.push(b);
  }
  section(10, code, out);
  return Buffer.from(out);
}

test('a module stored in the field-split layout applies through the scratch file and leaves nothing', () => {
  const dir = fs.mkdtempSync(path.join(work, 'split-'));
  const [oldPath, newPath, patch] = ['old.wasm', 'new.wasm', 'w.patch'].map((f) => path.join(work, `${path.basename(dir)}-${f}`));
  fs.writeFileSync(oldPath, recompiled(600, false));
  fs.writeFileSync(newPath, recompiled(600, true));
  execFileSync(NATIVE, ['diff', '--quiet', oldPath, newPath, patch]);
  const inspected = execFileSync(NATIVE, ['inspect', patch], { encoding: 'utf8' });
  assert.match(inspected, /1 of them in the field-split layout/);
  ok(js('apply', oldPath, patch, path.join(dir, 'applied.wasm')));
  assert.ok(Buffer.compare(fs.readFileSync(path.join(dir, 'applied.wasm')), fs.readFileSync(newPath)) === 0, 'byte-exact');
  assert.deepStrictEqual(fs.readdirSync(dir), ['applied.wasm'], 'no scratch or temporary file left');
  // The wrong old module (its first body's local type damaged: it no longer splits): refused, nothing left.
  const damaged = fs.readFileSync(oldPath);
  damaged[damaged.indexOf(0x7f) + 1] = 0xff;
  fs.writeFileSync(oldPath, damaged);
  const refused = js('apply', oldPath, patch, path.join(dir, 'refused.wasm'));
  assert.notStrictEqual(refused.status, 0);
  assert.deepStrictEqual(fs.readdirSync(dir), ['applied.wasm'], 'nothing left by the refused apply');
});

// `module` (its code section last) as a debug build: a `.debug_line` custom section with a
// line sequence per body, starting at the body's code address (DW_LNE_set_address), as LLVM's
// DWARF for wasm does (docs/FORMAT.md §2.8.3, "Line addresses"). The rest of each sequence
// depends on the body's place in the module only through its length.
function withDebugLine(module) {
  const m = [...module];
  let at = 8;
  let code = -1;
  while (at < m.length) {
    const id = m[at];
    let size = 0;
    let shift = 0;
    let p = at + 1;
    for (;;) {
      const b = m[p++];
      size |= (b & 0x7f) << shift;
      shift += 7;
      if (b < 0x80) break;
    }
    if (id === 10) code = p;
    at = p + size;
  }
  const leb = (p) => {
    let v = 0;
    let shift = 0;
    for (;;) {
      const b = m[p.at++];
      v |= (b & 0x7f) << shift;
      shift += 7;
      if (b < 0x80) return v;
    }
  };
  const p = { at: code };
  const program = [];
  for (let n = leb(p); n > 0; n--) {
    const len = leb(p);
    const address = p.at - code;
    program.push(0, 5, 2, address & 0xff, (address >> 8) & 0xff, (address >> 16) & 0xff, address >>> 24);
    program.push(0x20 + (len % 16), 2);
    program.push(...uleb(len));
    program.push(0, 1, 1);
    p.at += len;
  }
  const header = [1, 1, 1, 0xfb, 14, 13, 0, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 1, 0, 0];
  const unit = [4, 0, header.length, 0, 0, 0, ...header, ...program];
  const len = unit.length;
  const contents = [11, ...Buffer.from('.debug_line'), len & 0xff, (len >> 8) & 0xff, (len >> 16) & 0xff, len >>> 24, ...unit];
  section(0, contents, m);
  return Buffer.from(m);
}

test('a debug build whose line addresses moved applies byte-exact through the wasm applier', () => {
  const dir = fs.mkdtempSync(path.join(work, 'dwarf-'));
  const [oldPath, newPath, patch] = ['old.wasm', 'new.wasm', 'w.patch'].map((f) => path.join(work, `${path.basename(dir)}-${f}`));
  fs.writeFileSync(oldPath, withDebugLine(recompiled(600, false)));
  fs.writeFileSync(newPath, withDebugLine(recompiled(600, true)));
  execFileSync(NATIVE, ['diff', '--quiet', oldPath, newPath, patch]);
  assert.match(execFileSync(NATIVE, ['inspect', patch], { encoding: 'utf8' }), /1 with DWARF addresses rewritten/);
  ok(js('apply', oldPath, patch, path.join(dir, 'applied.wasm')));
  assert.ok(Buffer.compare(fs.readFileSync(path.join(dir, 'applied.wasm')), fs.readFileSync(newPath)) === 0, 'byte-exact');
  assert.deepStrictEqual(fs.readdirSync(dir), ['applied.wasm'], 'no scratch or temporary file left');
  // edgepatch-js's own diff (the generator in wasm) makes a patch the native CLI applies.
  const jsPatch = path.join(work, `${path.basename(dir)}-js.patch`);
  ok(js('diff', oldPath, newPath, jsPatch));
  execFileSync(NATIVE, ['apply', '--quiet', oldPath, jsPatch, path.join(dir, 'native.wasm')]);
  assert.ok(Buffer.compare(fs.readFileSync(path.join(dir, 'native.wasm')), fs.readFileSync(newPath)) === 0, 'byte-exact');
});

test('a gzip-compressed module patched as its content applies byte for byte through the wasm module, trusted only', () => {
  const dir = fs.mkdtempSync(path.join(work, 'gzip-'));
  const [oldPath, newPath, patch] = ['old.wasm.gz', 'new.wasm.gz', 'g.patch'].map((f) => path.join(work, `${path.basename(dir)}-${f}`));
  // GNU gzip, as a build pipeline writes it.
  fs.writeFileSync(oldPath, execFileSync('gzip', ['-9', '-n', '-c', OLD]));
  fs.writeFileSync(newPath, execFileSync('gzip', ['-9', '-n', '-c', NEW]));
  execFileSync(NATIVE, ['diff', '--quiet', oldPath, newPath, patch]);
  const needs = JSON.parse(execFileSync(NATIVE, ['--json', 'inspect', patch], { encoding: 'utf8' })).reader_needs;
  assert.match(needs, /deflate-transform/);
  assert.ok(fs.statSync(patch).size * 4 < fs.statSync(newPath).size, 'the patch is far smaller than the file');
  // A patch from anywhere: refused before anything is written (preflate would trust its side info).
  const refused = js('apply', oldPath, patch, path.join(dir, 'refused.wasm.gz'));
  assert.notStrictEqual(refused.status, 0);
  assert.match(refused.stderr, /--trust-patch/);
  assert.deepStrictEqual(fs.readdirSync(dir), [], 'nothing left by the refused apply');
  // A trusted copy damaged since it was made (a byte of its tree section, where the side info
  // lives): checked whole before any of it reaches preflate.
  const damaged = fs.readFileSync(patch);
  damaged[20] ^= 1;
  const damagedPatch = `${patch}.damaged`;
  fs.writeFileSync(damagedPatch, damaged);
  const broken = js('apply', '--trust-patch', oldPath, damagedPatch, path.join(dir, 'damaged.wasm.gz'));
  assert.notStrictEqual(broken.status, 0);
  assert.match(broken.stderr, /checked before applying/);
  assert.deepStrictEqual(fs.readdirSync(dir), [], 'nothing left by the damaged apply');
  ok(js('apply', '--trust-patch', oldPath, patch, path.join(dir, 'applied.wasm.gz')));
  assert.ok(Buffer.compare(fs.readFileSync(path.join(dir, 'applied.wasm.gz')), fs.readFileSync(newPath)) === 0, 'byte-exact');
  assert.deepStrictEqual(fs.readdirSync(dir), ['applied.wasm.gz'], 'no scratch or temporary file left');
});

test('a patch that rebuilds a Brotli file is refused by the wasm module, which has no Brotli encoder, naming the capability', () => {
  const dir = fs.mkdtempSync(path.join(work, 'brotli-'));
  const [oldPath, newPath, patch] = ['old.wasm.br', 'new.wasm.br', 'b.patch'].map((f) => path.join(work, `${path.basename(dir)}-${f}`));
  // Node's own Brotli at its defaults (quality 11, window 22), as bundler plugins write .br files.
  fs.writeFileSync(oldPath, zlib.brotliCompressSync(fs.readFileSync(OLD)));
  fs.writeFileSync(newPath, zlib.brotliCompressSync(fs.readFileSync(NEW)));
  execFileSync(NATIVE, ['diff', '--quiet', oldPath, newPath, patch]);
  const needs = JSON.parse(execFileSync(NATIVE, ['--json', 'inspect', patch], { encoding: 'utf8' })).reader_needs;
  assert.match(needs, /brotli-transform/, 'the native diff reproduced the file with the reference encoder');
  const refused = js('apply', '--trust-patch', oldPath, patch, path.join(dir, 'refused.wasm.br'));
  assert.notStrictEqual(refused.status, 0);
  assert.match(refused.stderr, /brotli-transform/);
  assert.deepStrictEqual(fs.readdirSync(dir), [], 'nothing left by the refused apply');
  // The native CLI applies it byte for byte.
  execFileSync(NATIVE, ['apply', '--quiet', '--trust-patch', oldPath, patch, path.join(dir, 'native.wasm.br')]);
  assert.ok(Buffer.compare(fs.readFileSync(path.join(dir, 'native.wasm.br')), fs.readFileSync(newPath)) === 0, 'byte-exact');
});
