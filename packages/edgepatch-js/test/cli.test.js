'use strict';
// node --test: edgepatch-js diff/apply on the fixture game.wasm pair, against the
// native CLI (EDGEPATCH_BIN, default target/release/edgepatch) and the expected file.

const test = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync, spawnSync } = require('node:child_process');

const REPO = path.resolve(__dirname, '../../..');
const BIN = path.join(__dirname, '../bin/edgepatch-js.js');
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
    assert.deepStrictEqual(fs.readdirSync(work).filter((f) => f.endsWith('.tmp')), [], `${name}: no temp file left`);
  }
});

test('the wrong old file is refused', () => {
  const r = js('apply', NEW, path.join(work, 'native-19.patch'), path.join(work, 'wrong-old-out'));
  assert.strictEqual(r.status, 1);
  assert.match(r.stderr, /old build|BLAKE3/);
});

test('a directory patch is refused with a pointer to the native CLI', () => {
  const r = js('apply', OLD, path.join(REPO, 'fixtures/golden/game-v1-to-v2.patch'), path.join(work, 'tree-out'));
  assert.strictEqual(r.status, 1);
  assert.match(r.stderr, /single-file patches; use the native edgepatch CLI/);
});

test('--stats reports wasm memory and peak RSS', () => {
  const out = path.join(work, 'stats-out');
  const r = ok(js('apply', '--stats', OLD, path.join(work, 'native-19.patch'), out));
  const stats = JSON.parse(r.stderr.trim().split('\n').pop());
  assert.strictEqual(stats.bytesWritten, fs.statSync(NEW).size);
  assert.ok(stats.wasmMemoryBytes > 0 && stats.peakRssBytes > 0);
});
