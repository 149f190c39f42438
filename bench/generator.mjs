#!/usr/bin/env node
// bench/generator.mjs — the bounded-memory generator (PatchGenerator, what the Worker
// runs) on the corpus pairs, in the same wasm module as the Worker, in Node: patch size
// next to the native `edgepatch diff` patch (made in the same run, at the CLI's default
// level 19), time (signing, which the Worker does at publish, apart from generating), and
// the module's peak linear memory. Every patch is applied back (native CLI) and compared
// byte-exact.
//
//   node bench/generator.mjs [--pairs a,b] [--pair-dirs DIR,DIR] [--level N (default 17, the
//                            Worker's PATCH_LEVEL)] [--no-wasm-transform] [--zstd-only (no
//                            LZMA ops streams, the Worker's earlier form)] [--no-native (no
//                            native diff to compare with)] [--lzma-windows-up-to MIB (split
//                            parts as LZMA window segments where window and part take at most
//                            MIB MiB; default: as the Worker)]
//
// Each pair runs in a fresh process (a linear memory only grows: its size at the end is
// the peak). Old and new files are read by range from disk, as the Worker reads R2.
// A wasm module pair is first normalized (prepareWasmTransform, docs/FORMAT.md §2.8) in a
// process of its own, as the Worker's transform phase is an invocation of its own: the
// normalized form goes to a file the generator reads by range; "transform wasm MB" is that
// process's peak, "wasm memory MB" the generator's. --pair-dirs adds pairs (DIR/{old,new}).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { arg, filePairs, signFile } from './bench_env.mjs';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const level = Number(arg('level', '17'));

if (process.env.EDGEPATCH_GENERATOR_CHILD === 'transform') {
  // Child: the transform phase of one module pair; prints JSON.
  const [oldPath, newPath, normalizedPath, recordPath, oldSplitPath] = args;
  const w = await import(path.join(repo, 'packages/edgepatch-js/lib/node.js'));
  const t0 = performance.now();
  // The modules are copied into the module's memory for the call and freed after it.
  const prepared = w.prepareWasmTransform('', fs.readFileSync(oldPath), fs.readFileSync(newPath));
  if (prepared) {
    fs.writeFileSync(recordPath, prepared.record);
    fs.writeFileSync(normalizedPath, prepared.takeNormalized());
    // In the field-split layout the old module is read split too (old ranges with oldSplit).
    if (prepared.oldSplitBlake3) fs.writeFileSync(oldSplitPath, prepared.oldSplitView());
    prepared.free();
  }
  console.log(JSON.stringify({ transformed: !!prepared, ms: performance.now() - t0, memory: w.wasmMemoryBytes() }));
  process.exit(0);
}

if (process.env.EDGEPATCH_GENERATOR_CHILD) {
  // Child: generate one patch, print JSON.
  const [oldPath, newPath, out, recordPath, normalizedPath, oldSplitPath] = args;
  const w = await import(path.join(repo, 'packages/edgepatch-js/lib/node.js'));
  const sign = (file) => signFile(w, file);
  const readRanges = (file, ranges) => {
    const total = ranges.reduce((n, r) => n + r.length, 0);
    const out = Buffer.allocUnsafe(total);
    let at = 0;
    for (const r of ranges) {
      const fd = fs.openSync(r.normalized ? normalizedPath : r.oldSplit ? oldSplitPath : file, 'r');
      fs.readSync(fd, out, at, r.length, r.offset);
      fs.closeSync(fd);
      at += r.length;
    }
    return out;
  };
  const t0 = performance.now();
  const gen = new w.PatchGenerator(sign(oldPath), sign(newPath), level);
  // As the Worker's (worker/src/wasm.ts newPatchGenerator), unless measuring without.
  gen.setLzmaOpsStreams(!process.env.EDGEPATCH_GENERATOR_ZSTD_ONLY);
  gen.setLzmaWindowsUpTo(process.env.EDGEPATCH_GENERATOR_LZMA_WINDOWS ? Number(process.env.EDGEPATCH_GENERATOR_LZMA_WINDOWS) : process.env.EDGEPATCH_GENERATOR_ZSTD_ONLY ? 0 : w.isolateLzmaWindowLimit());
  if (recordPath && fs.existsSync(recordPath)) gen.addWasmTransform(fs.readFileSync(recordPath));
  const t1 = performance.now();
  const fd = fs.openSync(out, 'w');
  fs.writeSync(fd, gen.header());
  for (let i = 0; i < gen.segmentCount; i++) {
    const fresh = readRanges(newPath, gen.newRanges(i));
    const old = readRanges(oldPath, gen.planSegment(i, fresh));
    fs.writeSync(fd, gen.encodeSegment(i, fresh, old));
  }
  fs.writeSync(fd, gen.finish());
  fs.closeSync(fd);
  console.log(JSON.stringify({ signMs: t1 - t0, generateMs: performance.now() - t1, memory: w.wasmMemoryBytes(), rss: process.memoryUsage().rss }));
  process.exit(0);
}

const pairs = filePairs();
for (const dir of arg('pair-dirs', '').split(',').filter(Boolean)) pairs.push([path.basename(dir), dir]);
const transform = !args.includes('--no-wasm-transform');
const isWasm = (file) => {
  const fd = fs.openSync(file, 'r');
  const magic = Buffer.alloc(4);
  fs.readSync(fd, magic, 0, 4, 0);
  fs.closeSync(fd);
  return magic.equals(Buffer.from([0, 0x61, 0x73, 0x6d]));
};

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'edgepatch-generator-'));
console.log(
  `level ${level}, wasm transform ${transform ? 'on' : 'off'}, LZMA ops streams ${args.includes('--zstd-only') ? 'off' : 'on'}, LZMA window segments ${arg('lzma-windows-up-to', '') ? `up to ${arg('lzma-windows-up-to', '')} MiB` : 'as the Worker'}`,
);
console.log(`| pair | new MB | generator patch bytes | native diff patch bytes | generator / native | sign s | transform s | generate s | generate s per 100 MB | transform wasm MB | wasm memory MB |`);
console.log(`|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|`);
let [totalMB, totalGenerateS] = [0, 0];
for (const [name, dir] of pairs) {
  const [oldPath, newPath] = [path.join(dir, 'old'), path.join(dir, 'new')];
  if (!fs.existsSync(oldPath)) continue;
  const patch = path.join(tmp, 'patch');
  const [normalizedPath, recordPath, oldSplitPath] = [path.join(tmp, 'normalized'), path.join(tmp, 'record'), path.join(tmp, 'old-split')];
  fs.rmSync(recordPath, { force: true });
  fs.rmSync(oldSplitPath, { force: true });
  let tm = null;
  if (transform && isWasm(oldPath) && isWasm(newPath)) {
    const t = spawnSync(process.execPath, [fileURLToPath(import.meta.url), oldPath, newPath, normalizedPath, recordPath, oldSplitPath], {
      env: { ...process.env, EDGEPATCH_GENERATOR_CHILD: 'transform' },
      encoding: 'utf8',
    });
    if (t.status !== 0) throw new Error(`${name}: transform: ${t.stderr}`);
    tm = JSON.parse(t.stdout);
  }
  const r = spawnSync(process.execPath, [fileURLToPath(import.meta.url), oldPath, newPath, patch, recordPath, normalizedPath, oldSplitPath, '--level', String(level)], {
    env: {
      ...process.env,
      EDGEPATCH_GENERATOR_CHILD: '1',
      ...(args.includes('--zstd-only') ? { EDGEPATCH_GENERATOR_ZSTD_ONLY: '1' } : {}),
      ...(arg('lzma-windows-up-to', '') ? { EDGEPATCH_GENERATOR_LZMA_WINDOWS: String(Number(arg('lzma-windows-up-to', '')) * 2 ** 20) } : {}),
    },
    encoding: 'utf8',
  });
  if (r.status !== 0) throw new Error(`${name}: ${r.stderr}`);
  const m = JSON.parse(r.stdout);
  const out = path.join(tmp, 'out');
  fs.rmSync(out, { force: true });
  const a = spawnSync(path.join(repo, 'target/release/edgepatch'), ['--quiet', 'apply', oldPath, patch, out], { encoding: 'utf8' });
  if (a.status !== 0 || Buffer.compare(fs.readFileSync(out), fs.readFileSync(newPath)) !== 0) throw new Error(`${name}: generator patch does not reproduce new: ${a.stderr}`);
  let nativeBytes = NaN;
  if (!args.includes('--no-native')) {
    const nativePatch = path.join(tmp, 'native.patch');
    const d = spawnSync(path.join(repo, 'target/release/edgepatch'), ['--quiet', 'diff', oldPath, newPath, nativePatch], { encoding: 'utf8' });
    if (d.status !== 0) throw new Error(`${name}: native diff failed: ${d.stderr}`);
    nativeBytes = fs.statSync(nativePatch).size;
  }
  const bytes = fs.statSync(patch).size;
  const mb = fs.statSync(newPath).size / 1e6;
  [totalMB, totalGenerateS] = [totalMB + mb, totalGenerateS + m.generateMs / 1000];
  console.log(`| ${name} | ${mb.toFixed(1)} | ${bytes.toLocaleString('en')} | ${nativeBytes.toLocaleString('en')} | ${(bytes / nativeBytes).toFixed(3)} | ${(m.signMs / 1000).toFixed(1)} | ${tm ? (tm.ms / 1000).toFixed(1) : '-'} | ${(m.generateMs / 1000).toFixed(1)} | ${((m.generateMs / 10) / mb).toFixed(1)} | ${tm ? `${(tm.memory / 1e6).toFixed(1)}${tm.transformed ? '' : ' (not used)'}` : '-'} | ${(m.memory / 1e6).toFixed(1)} |`);
}
console.log(`all pairs: ${totalMB.toFixed(1)} MB generated in ${totalGenerateS.toFixed(1)} s: ${((100 * totalGenerateS) / totalMB).toFixed(1)} s per 100 MB`);
fs.rmSync(tmp, { recursive: true, force: true });
