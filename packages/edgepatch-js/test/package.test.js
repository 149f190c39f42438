// node --test: the package as npm would publish it. `npm pack` (its prepack builds the wasm
// if stale) must hold the module; the packed package, unpacked into a node_modules of its
// own, must load and apply through its exports map; `npm publish --dry-run` must pass.

import test from 'node:test';
import assert from 'node:assert';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync, spawnSync } from 'node:child_process';

const HERE = path.dirname(new URL(import.meta.url).pathname);
const PKG = path.resolve(HERE, '..');
const REPO = path.resolve(PKG, '../..');
const NPM = process.platform === 'win32' ? 'npm.cmd' : 'npm';

const work = fs.mkdtempSync(path.join(os.tmpdir(), 'edgepatch-js-pack-'));
test.after(() => fs.rmSync(work, { recursive: true, force: true }));

let packed = null;
/** `npm pack` once: what it reports (name, files, filename). */
function pack() {
  if (packed === null) {
    const out = execFileSync(NPM, ['pack', '--json', '--pack-destination', work], { cwd: PKG, encoding: 'utf8' });
    [packed] = JSON.parse(out.slice(out.indexOf('[')));
  }
  return packed;
}

test('npm pack holds the wasm module, the entry points and the command, and nothing else', () => {
  const packed = pack();
  const files = packed.files.map((f) => f.path).sort();
  for (const f of ['wasm/edgepatch_wasm_bg.wasm', 'wasm/edgepatch_wasm.js', 'wasm/edgepatch_wasm.d.ts', 'lib/node.js', 'lib/node.d.ts', 'lib/workers.js', 'lib/core.js', 'bin/edgepatch-js.js', 'README.md', 'package.json']) {
    assert.ok(files.includes(f), `${f} in ${files.join(', ')}`);
  }
  assert.ok(packed.files.find((f) => f.path === 'wasm/edgepatch_wasm_bg.wasm').size > 100_000, 'the module, not a stub');
  assert.deepStrictEqual(files.filter((f) => !/^(bin|lib|wasm)\/|^(README\.md|package\.json)$/.test(f)), [], 'only what a user needs');
});

test('the packed package, installed on its own, applies a tree through its exports map', () => {
  const packed = pack();
  const consumer = path.join(work, 'consumer');
  const into = path.join(consumer, 'node_modules/@edgepatch/js');
  fs.mkdirSync(into, { recursive: true });
  execFileSync('tar', ['-xzf', path.join(work, packed.filename), '-C', into, '--strip-components=1']);
  const old = path.join(work, 'v1');
  const expected = path.join(work, 'v2');
  for (const [dir, tar] of [[old, 'game-v1.tar'], [expected, 'game-v2.tar']]) {
    fs.mkdirSync(dir);
    execFileSync('tar', ['-xf', path.join(REPO, 'fixtures', tar), '-C', dir]);
  }
  const script = `
    import { applyTree, PatchApplier, wasmMemoryBytes } from '@edgepatch/js';
    import * as core from '@edgepatch/js/core';
    const summary = await applyTree(${JSON.stringify(old)}, ${JSON.stringify(path.join(REPO, 'fixtures/golden/game-v1-to-v2.patch'))}, 'out');
    console.log(JSON.stringify({
      summary,
      sameClass: core.PatchApplier === PatchApplier,
      memory: wasmMemoryBytes() > 0,
      wasm: import.meta.resolve('@edgepatch/js/wasm'),
    }));`;
  fs.writeFileSync(path.join(consumer, 'main.mjs'), script);
  const r = spawnSync(process.execPath, ['main.mjs'], { cwd: consumer, encoding: 'utf8' });
  assert.strictEqual(r.status, 0, r.stderr);
  const got = JSON.parse(r.stdout);
  assert.ok(got.sameClass && got.memory);
  assert.ok(got.wasm.startsWith('file://') && got.wasm.endsWith('node_modules/@edgepatch/js/wasm/edgepatch_wasm_bg.wasm'), got.wasm);
  assert.strictEqual(got.summary.bytesWritten, 546646);
  const diff = spawnSync('diff', ['-r', '--no-dereference', path.join(consumer, 'out'), expected]);
  assert.strictEqual(diff.status, 0, String(diff.stdout));
  const bin = spawnSync(path.join(into, 'bin/edgepatch-js.js'), ['--help'], { encoding: 'utf8' });
  assert.strictEqual(bin.status, 0, bin.stderr);
});

test('npm publish --dry-run passes', () => {
  // An explicit log level: under `npm test --silent` the child would inherit silence.
  const r = spawnSync(NPM, ['publish', '--dry-run', '--loglevel=notice'], { cwd: PKG, encoding: 'utf8' });
  assert.strictEqual(r.status, 0, r.stderr);
  assert.match(r.stdout + r.stderr, /\+ @edgepatch\/js@0\.1\.0/);
});
