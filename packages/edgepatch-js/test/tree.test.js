// node --test: tree patches (old build directory -> new build directory) through the
// library and the command, against the committed golden patch, a patch the native CLI
// makes (EDGEPATCH_BIN, default target/release/edgepatch, when it is built), and every
// hostile vector of fixtures/hostile: each refused with its error kind, nothing written.

import test from 'node:test';
import assert from 'node:assert';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { execFileSync, spawnSync } from 'node:child_process';
import { applyTree } from '@edgepatch/js';

const HERE = path.dirname(new URL(import.meta.url).pathname);
const REPO = path.resolve(HERE, '../../..');
const BIN = path.join(HERE, '../bin/edgepatch-js.js');
const NATIVE = process.env.EDGEPATCH_BIN || path.join(REPO, 'target/release/edgepatch');
const GOLDEN = path.join(REPO, 'fixtures/golden/game-v1-to-v2.patch');

const work = fs.mkdtempSync(path.join(os.tmpdir(), 'edgepatch-js-tree-'));
test.after(() => fs.rmSync(work, { recursive: true, force: true }));

function untar(version) {
  const dir = path.join(work, `v${version}`);
  fs.mkdirSync(dir);
  execFileSync('tar', ['-xpf', path.join(REPO, `fixtures/game-v${version}.tar`), '-C', dir]);
  return dir;
}
const V1 = untar(1);
const V2 = untar(2);

/** Every entry of a tree: kind, mode, content or link target; what byte-exact means for a build. */
function snapshot(root) {
  const out = {};
  const walk = (dir, prefix) => {
    for (const name of fs.readdirSync(dir).sort()) {
      const full = path.join(dir, name);
      const p = prefix ? `${prefix}/${name}` : name;
      const s = fs.lstatSync(full);
      if (s.isSymbolicLink()) out[p] = `link -> ${fs.readlinkSync(full)}`;
      else if (s.isDirectory()) {
        out[p] = 'dir';
        walk(full, p);
      } else out[p] = `file ${(s.mode & 0o777).toString(8)} ${fs.readFileSync(full).toString('base64')}`;
    }
  };
  walk(root, '');
  return out;
}

/** What a failed apply must leave in `dir`: the entries there before, nothing staged. */
function assertNothingWritten(dir, before, what) {
  assert.deepStrictEqual(fs.readdirSync(dir).sort(), before, `${what}: nothing staged or left beside OUT`);
}

test('applyTree: the golden patch turns game-v1 into game-v2 byte-exact (contents, modes, links, empty directories)', async () => {
  const out = path.join(work, 'golden-out');
  const progress = [];
  const summary = await applyTree(V1, GOLDEN, out, { onProgress: (p) => progress.push(p) });
  assert.deepStrictEqual(snapshot(out), snapshot(V2));
  assert.strictEqual(summary.patchBytes, fs.statSync(GOLDEN).size);
  assert.ok(progress.length > 0 && progress.at(-1).patchBytesRead === summary.patchBytes);
});

test('applyTree takes the patch as a stream: a Node Readable and a web ReadableStream in small chunks', async () => {
  const bytes = fs.readFileSync(GOLDEN);
  const small = () => Array.from({ length: Math.ceil(bytes.length / 997) }, (_, i) => bytes.subarray(i * 997, (i + 1) * 997));
  const streams = { readable: Readable.from(small()), web: ReadableStream.from(small()) };
  for (const [name, stream] of Object.entries(streams)) {
    const out = path.join(work, `stream-${name}`);
    await applyTree(V1, stream, out);
    assert.deepStrictEqual(snapshot(out), snapshot(V2), name);
  }
});

test('edgepatch-js apply with a directory OLD applies a tree patch the native CLI made', { skip: !fs.existsSync(NATIVE) && `no native CLI at ${NATIVE}` }, () => {
  const patch = path.join(work, 'native-tree.patch');
  execFileSync(NATIVE, ['diff', '--quiet', V1, V2, patch]);
  const out = path.join(work, 'cli-out');
  const r = spawnSync(process.execPath, [BIN, 'apply', V1, patch, out], { encoding: 'utf8' });
  assert.strictEqual(r.status, 0, r.stderr);
  assert.match(r.stdout, /applied: \d+ entries, \d+ files, \d+ bytes written, all verified/);
  assert.deepStrictEqual(snapshot(out), snapshot(V2));
});

test('a truncated or corrupt tree patch is refused with a clear error and writes nothing', async () => {
  const patch = fs.readFileSync(GOLDEN);
  const cases = [
    ['truncated', patch.subarray(0, patch.length - 5), 'truncated', /patch truncated at byte \d+/],
    ['corrupt', Buffer.from(patch).fill(0x41, patch.length - 100, patch.length - 90), 'corrupt', /patch corrupt at byte \d+/],
  ];
  const dir = fs.mkdtempSync(path.join(work, 'broken-'));
  for (const [name, bytes, kind, message] of cases) {
    const before = fs.readdirSync(dir).sort();
    await assert.rejects(applyTree(V1, [bytes], path.join(dir, `${name}-out`)), (e) => {
      assert.strictEqual(e.kind, kind, `${name}: ${e.message}`);
      assert.match(e.message, message);
      return true;
    });
    assertNothingWritten(dir, before, name);
  }
});

test('the wrong old build is refused before anything is written', async () => {
  const dir = fs.mkdtempSync(path.join(work, 'wrong-old-'));
  await assert.rejects(applyTree(V2, GOLDEN, path.join(dir, 'out')), (e) => e.kind === 'old_build');
  assertNothingWritten(dir, [], 'wrong old build');
});

test('an existing OUT is refused and left alone', async () => {
  const out = fs.mkdtempSync(path.join(work, 'exists-'));
  fs.writeFileSync(path.join(out, 'keep'), 'me');
  await assert.rejects(applyTree(V1, GOLDEN, out), /already exists/);
  assert.deepStrictEqual(fs.readdirSync(out), ['keep']);
});

test('an aborted apply rejects with the reason and leaves nothing', async () => {
  const dir = fs.mkdtempSync(path.join(work, 'abort-'));
  const controller = new AbortController();
  const bytes = fs.readFileSync(GOLDEN);
  const chunks = Array.from({ length: 8 }, (_, i) => bytes.subarray((i * bytes.length) >> 3, ((i + 1) * bytes.length) >> 3));
  const onProgress = () => controller.abort(new Error('stopped by the test'));
  await assert.rejects(applyTree(V1, chunks, path.join(dir, 'out'), { onProgress, signal: controller.signal }), /stopped by the test/);
  assertNothingWritten(dir, [], 'aborted');
});

test('every hostile patch vector is refused with its error kind, and nothing is written anywhere', async () => {
  const { vectors } = JSON.parse(fs.readFileSync(path.join(REPO, 'fixtures/hostile/vectors.json'), 'utf8'));
  const patches = vectors.filter((v) => v.input === 'patch');
  assert.ok(patches.length > 50, `${patches.length} patch vectors`);
  // OUT sits two levels down: a path that escaped the staging directory would land in `dir` or above.
  const dir = fs.mkdtempSync(path.join(work, 'hostile-'));
  const old = path.join(dir, 'empty-tree');
  fs.mkdirSync(old);
  const parent = path.join(dir, 'outputs');
  fs.mkdirSync(parent);
  for (const v of patches) {
    assert.strictEqual(v.old, 'empty-tree', v.name);
    const out = path.join(parent, 'out');
    await assert.rejects(applyTree(old, path.join(REPO, 'fixtures/hostile', v.file), out), (e) => {
      assert.strictEqual(e.kind, v.kind, `${v.name} (${v.attacks}): ${e.message}`);
      return true;
    });
    assertNothingWritten(parent, [], v.name);
    assert.deepStrictEqual(fs.readdirSync(dir).sort(), ['empty-tree', 'outputs'], `${v.name}: nothing beside OUT's parent`);
    assert.deepStrictEqual(fs.readdirSync(old), [], `${v.name}: the old build untouched`);
  }
});

test('the sink itself refuses a path that would leave the new build (behind the core, which refuses it first)', async () => {
  const { StagedOutput } = await import('../lib/staged-output.js');
  const dir = fs.mkdtempSync(path.join(work, 'sink-'));
  const output = new StagedOutput(path.join(dir, 'out'));
  try {
    output.createDirectory('assets');
    for (const p of ['../escape', 'assets/../../escape', '/etc/escape', 'assets//x', 'assets/./x', 'a\\..\\x', 'nul\0x']) {
      assert.throws(() => output.beginFile(p, false, 0), /not a relative build path/, JSON.stringify(p));
      assert.throws(() => output.createSymlink(p, 'target'), /not a relative build path/, JSON.stringify(p));
    }
  } finally {
    output.close();
  }
  assert.deepStrictEqual(fs.readdirSync(dir), [], 'the staging directory removed, nothing escaped');
  assert.ok(!fs.existsSync(path.join(work, 'escape')));
});
