// node --test: the examples of docs/EMBEDDING.md. Each code block the page marks with
// `<!-- example: examples/NAME -->` must be the file packages/edgepatch-js/examples/NAME,
// and each file runs here: the Node tree apply (from a file and over http), the core API
// loaded by hand (as in Deno), and the Worker's fetch handler over an in-memory R2 bucket.

import test from 'node:test';
import assert from 'node:assert';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { execFile, execFileSync, spawnSync } from 'node:child_process';
import { diffFiles } from '@edgepatch/js';

const HERE = path.dirname(new URL(import.meta.url).pathname);
const PKG = path.resolve(HERE, '..');
const REPO = path.resolve(PKG, '../..');
const GOLDEN = path.join(REPO, 'fixtures/golden/game-v1-to-v2.patch');

const work = fs.mkdtempSync(path.join(os.tmpdir(), 'edgepatch-js-embedding-'));
test.after(() => fs.rmSync(work, { recursive: true, force: true }));
for (const v of [1, 2]) {
  fs.mkdirSync(path.join(work, `v${v}`));
  execFileSync('tar', ['-xf', path.join(REPO, `fixtures/game-v${v}.tar`), '-C', path.join(work, `v${v}`)]);
}
const OLD_WASM = fs.readFileSync(path.join(work, 'v1/game.wasm'));
const NEW_WASM = fs.readFileSync(path.join(work, 'v2/game.wasm'));
const WASM_PATCH = diffFiles(OLD_WASM, NEW_WASM, 3);

test('every example block of docs/EMBEDDING.md is the example file the tests run', () => {
  const doc = fs.readFileSync(path.join(REPO, 'docs/EMBEDDING.md'), 'utf8');
  const blocks = [...doc.matchAll(/<!-- example: (examples\/[\w.-]+) -->\n```\w*\n([\s\S]*?)```\n/g)];
  assert.deepStrictEqual(blocks.map((m) => m[1]).sort(), fs.readdirSync(path.join(PKG, 'examples')).map((f) => `examples/${f}`).sort(), 'each example shown once');
  for (const [, file, code] of blocks) assert.strictEqual(code, fs.readFileSync(path.join(PKG, file), 'utf8'), `${file}: the page and the file differ`);
});

test('examples/apply-tree.mjs applies the golden patch from a file and over http', async () => {
  const server = http.createServer((req, res) => fs.createReadStream(GOLDEN).pipe(res));
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    for (const [name, patch] of [['file', GOLDEN], ['http', `http://127.0.0.1:${server.address().port}/game-v1-to-v2.patch`]]) {
      const out = path.join(work, `example-${name}`);
      const r = await run(path.join(PKG, 'examples/apply-tree.mjs'), path.join(work, 'v1'), patch, out);
      assert.strictEqual(r.status, 0, r.stderr);
      assert.match(r.stdout, /16 files, 546646 bytes written, all verified/);
      assert.strictEqual(spawnSync('diff', ['-r', '--no-dereference', out, path.join(work, 'v2')]).status, 0, name);
    }
  } finally {
    server.close();
  }
});

/** Runs a script in a child process without blocking this one (the http server answers meanwhile). */
function run(script, ...args) {
  return new Promise((resolve) => {
    execFile(process.execPath, [script, ...args], (error, stdout, stderr) => resolve({ status: error ? error.code ?? 1 : 0, stdout, stderr }));
  });
}

test('examples/apply-in-memory.mjs: the core API, the module loaded by hand', async () => {
  const { applyInMemory } = await import('../examples/apply-in-memory.mjs');
  const out = await applyInMemory(OLD_WASM, [WASM_PATCH]);
  assert.ok(Buffer.compare(Buffer.from(out), NEW_WASM) === 0, 'byte-exact');
  await assert.rejects(applyInMemory(OLD_WASM, [WASM_PATCH.subarray(0, WASM_PATCH.length - 3)]), (e) => e.kind === 'truncated');
});

/** An R2 bucket in memory: what the example's Worker calls of the binding. */
class MemoryBucket {
  objects = new Map();
  async get(key) {
    const bytes = this.objects.get(key);
    return bytes && { body: ReadableStream.from([bytes]), arrayBuffer: async () => bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length) };
  }
  async put(key, value) {
    this.objects.set(key, new Uint8Array(await new Response(value).arrayBuffer()));
  }
}

test('examples/worker.mjs: the fetch handler applies a patch from R2 into R2, and refuses a corrupt one', async () => {
  const { default: worker } = await import('../examples/worker.mjs');
  const env = { BUILDS: new MemoryBucket() };
  env.BUILDS.objects.set('game-v1.wasm', new Uint8Array(OLD_WASM));
  env.BUILDS.objects.set('v1-to-v2.patch', new Uint8Array(WASM_PATCH));
  const ok = await worker.fetch(new Request('https://w.example/apply?old=game-v1.wasm&patch=v1-to-v2.patch&new=game-v2.wasm', { method: 'POST' }), env);
  assert.strictEqual(ok.status, 200, await ok.clone().text());
  assert.strictEqual((await ok.json()).bytesWritten, NEW_WASM.length);
  assert.ok(Buffer.compare(Buffer.from(env.BUILDS.objects.get('game-v2.wasm')), NEW_WASM) === 0, 'byte-exact');

  const corrupt = new Uint8Array(WASM_PATCH);
  corrupt.fill(0x41, corrupt.length - 60, corrupt.length - 50);
  env.BUILDS.objects.set('corrupt.patch', corrupt);
  const refused = await worker.fetch(new Request('https://w.example/apply?old=game-v1.wasm&patch=corrupt.patch&new=bad.wasm', { method: 'POST' }), env);
  assert.strictEqual(refused.status, 422);
  assert.match((await refused.json()).kind, /corrupt|digest/);
  assert.ok(!env.BUILDS.objects.has('bad.wasm'), 'nothing stored');
});
