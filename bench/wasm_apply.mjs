#!/usr/bin/env node
// bench/wasm_apply.mjs — apply throughput and peak wasm memory of the WebAssembly
// build, in Node and in headless Chromium, next to the native CLI on the same
// pairs in the same run (results in BENCHMARKS.md, "WebAssembly apply next to the native CLI").
//
//   node bench/wasm_apply.mjs [--runs N] [--pairs a,b] [--no-browser]
//
// Needs: target/release/edgepatch, packages/edgepatch-js/wasm (@edgepatch/js; scripts/setup.sh),
// crates/edgepatch-wasm/pkg/web-apply (scripts/test.sh or web/scripts/build-all.sh),
// Debian chromium, and the patches bench/run.sh made under EDGEPATCH_BENCH_WORK
// (default ~/.cache/edgepatch-bench/runs/<pair>/edgepatch.patch).
//
// Per pair:
//   native     `edgepatch apply` wall time (process included), fastest of N
//   node cli   `node edgepatch-js apply` wall time (process, module compile, fsync included)
//   node apply applyFile() inside one Node process (files read and written, fsync included)
//   chromium   PatchApplier in a page, old build and patch in memory, output hashed
//              by nothing (counted only): the wasm's own work
//   wasm mem   the module's linear memory after the apply (it only grows: the peak)
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

import { arg, filePairs, WORK as work } from './bench_env.mjs';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);
const runs = Number(arg('runs', '5'));
const native = path.join(repo, 'target/release/edgepatch');
const jsBin = path.join(repo, 'packages/edgepatch-js/bin/edgepatch-js.js');

const pairs = filePairs()
  .map(([name, dir]) => ({ name, old: path.join(dir, 'old'), new: path.join(dir, 'new'), patch: path.join(work, 'runs', name, 'edgepatch.patch') }))
  .filter((p) => {
    const ok = [p.old, p.new, p.patch].every((f) => fs.existsSync(f));
    if (!ok) console.error(`skip ${p.name}: run bench/run.sh first (needs ${p.patch})`);
    return ok;
  });

function fastest(cmd, argv, out) {
  let best = Infinity;
  for (let i = 0; i < runs; i++) {
    fs.rmSync(out, { force: true });
    const t = process.hrtime.bigint();
    const r = spawnSync(cmd, argv, { stdio: ['ignore', 'ignore', 'pipe'] });
    const ms = Number(process.hrtime.bigint() - t) / 1e6;
    if (r.status !== 0) throw new Error(`${cmd} ${argv.join(' ')}: ${r.stderr}`);
    best = Math.min(best, ms);
  }
  return best;
}

function sameFile(a, b) {
  return Buffer.compare(fs.readFileSync(a), fs.readFileSync(b)) === 0;
}

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'edgepatch-wasm-bench-'));
const results = [];
const js = await import(path.join(repo, 'packages/edgepatch-js/lib/node.js'));
for (const p of pairs) {
  const out = path.join(tmp, 'out');
  const newBytes = fs.statSync(p.new).size;
  const nativeMs = fastest(native, ['--quiet', 'apply', p.old, p.patch, out], out);
  const cliMs = fastest(process.execPath, [jsBin, 'apply', p.old, p.patch, out], out);
  if (!sameFile(out, p.new)) throw new Error(`${p.name}: edgepatch-js output differs`);
  let inProcess = Infinity;
  for (let i = 0; i < runs; i++) {
    fs.rmSync(out, { force: true });
    const t = process.hrtime.bigint();
    await js.applyFile(p.old, p.patch, out);
    inProcess = Math.min(inProcess, Number(process.hrtime.bigint() - t) / 1e6);
  }
  results.push({ name: p.name, newBytes, nativeMs, cliMs, inProcess, nodeMem: js.wasmMemoryBytes() });
  fs.rmSync(out, { force: true });
  console.error(`${p.name}: native ${nativeMs.toFixed(0)} ms, node cli ${cliMs.toFixed(0)} ms, in-process ${inProcess.toFixed(0)} ms`);
}
// Node's module memory only grows: measure each pair's peak in a fresh process.
for (const r of results) {
  const p = pairs.find((x) => x.name === r.name);
  const code = `const js=await import(${JSON.stringify(path.join(repo, 'packages/edgepatch-js/lib/node.js'))});` +
    `await js.applyFile(${JSON.stringify(p.old)},${JSON.stringify(p.patch)},${JSON.stringify(path.join(tmp, 'm'))});` +
    `console.log(js.wasmMemoryBytes())`;
  fs.rmSync(path.join(tmp, 'm'), { force: true });
  r.nodeMem = Number(spawnSync(process.execPath, ['--input-type=module', '-e', code], { encoding: 'utf8' }).stdout.trim());
}

if (!process.argv.includes('--no-browser')) await browser(results);
fs.rmSync(tmp, { recursive: true, force: true });

const mb = (b) => (b / 1e6).toFixed(1);
console.log(`| pair | new MB | native apply ms | edgepatch-js CLI ms (x native) | Node in-process ms (MB/s) | Node wasm memory MB | Chromium ms (MB/s) | Chromium wasm memory MB |`);
console.log(`|---|---:|---:|---:|---:|---:|---:|---:|`);
for (const r of results) {
  const rate = (ms) => (r.newBytes / 1e6 / (ms / 1000)).toFixed(0);
  const chrome = r.chromeMs ? `${r.chromeMs.toFixed(0)} (${rate(r.chromeMs)})` : 'n/a';
  console.log(`| ${r.name} | ${mb(r.newBytes)} | ${r.nativeMs.toFixed(0)} | ${r.cliMs.toFixed(0)} (${(r.cliMs / r.nativeMs).toFixed(2)}x) | ${r.inProcess.toFixed(0)} (${rate(r.inProcess)}) | ${mb(r.nodeMem)} | ${chrome} | ${r.chromeMem ? mb(r.chromeMem) : 'n/a'} |`);
}

async function browser(results) {
  const pkg = path.join(repo, 'crates/edgepatch-wasm/pkg/web-apply');
  if (!fs.existsSync(path.join(pkg, 'edgepatch_wasm_bg.wasm'))) {
    console.error('skip Chromium: crates/edgepatch-wasm/pkg/web-apply missing');
    return;
  }
  const files = new Map();
  const server = http.createServer((req, res) => {
    const url = decodeURIComponent(req.url.split('?')[0]);
    let file = null;
    if (url === '/') {
      res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>bench</title>');
      return;
    }
    if (url.startsWith('/pkg/')) file = path.join(pkg, path.basename(url));
    else if (files.has(url)) file = files.get(url);
    if (!file || !fs.existsSync(file)) return res.writeHead(404).end();
    const type = file.endsWith('.js') ? 'text/javascript' : file.endsWith('.wasm') ? 'application/wasm' : 'application/octet-stream';
    res.writeHead(200, { 'content-type': type });
    fs.createReadStream(file).pipe(res);
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${server.address().port}`;
  const { chromium } = require(require.resolve('playwright-core', { paths: [path.join(repo, 'web')] }));
  for (const r of results) {
    const p = pairs.find((x) => x.name === r.name);
    files.set('/old', p.old);
    files.set('/patch', p.patch);
    // A fresh browser per pair: the module's memory only grows.
    const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: ['--no-sandbox', '--disable-gpu', '--no-first-run'] });
    const page = await browser.newPage();
    await page.goto(`${base}/`);
    const m = await page.evaluate(async ({ runs }) => {
      const wasm = await import('/pkg/edgepatch_wasm.js');
      await wasm.default();
      const old = new Uint8Array(await (await fetch('/old')).arrayBuffer());
      const patch = new Uint8Array(await (await fetch('/patch')).arrayBuffer());
      let best = Infinity;
      let written = 0;
      for (let i = 0; i < runs; i++) {
        written = 0;
        const source = {
          fileSize: () => old.length,
          readAt: (p, o, n) => old.subarray(o, o + n),
          readInto: (p, o, t) => t.set(old.subarray(o, o + t.length)),
        };
        const sink = { createDirectory() {}, createSymlink() {}, beginFile() {}, writeFile(b) { written += b.length; }, finishFile() {} };
        const t = performance.now();
        const a = new wasm.PatchApplier(source, sink);
        for (let at = 0; at < patch.length; at += 1 << 20) a.push(patch.subarray(at, at + (1 << 20)));
        a.finish();
        best = Math.min(best, performance.now() - t);
      }
      return { best, written, memory: wasm.wasmMemoryBytes() };
    }, { runs });
    await browser.close();
    if (m.written !== r.newBytes) throw new Error(`${r.name}: Chromium wrote ${m.written} bytes, expected ${r.newBytes}`);
    r.chromeMs = m.best;
    r.chromeMem = m.memory;
    console.error(`${r.name}: chromium ${m.best.toFixed(0)} ms, wasm memory ${m.memory}`);
  }
  server.close();
}
