// node bench/wasm_scratch_memory.cjs OLD PATCH scratch|memory : the wasm module's linear memory
// after applying the single-file PATCH to OLD (BENCHMARKS.md, "Transformed wasm
// modules"), with the Node build (packages/edgepatch-js/wasm, scripts/setup.sh), the output
// counted only, with or without scratch space (BuildSink.writeScratch: a nameless temp file).
// Run once per process: a linear memory only grows.
'use strict';
const fs = require('node:fs');
const path = require('node:path');
// @edgepatch/js's Node entry point (ES modules: imported, which CommonJS does asynchronously).
import(path.join(__dirname, '../packages/edgepatch-js/lib/node.js')).then((wasm) => {
const [oldPath, patchPath, mode] = process.argv.slice(2);
const oldFd = fs.openSync(oldPath, 'r');
const old = {
  fileSize() { return fs.fstatSync(oldFd).size; },
  readInto(p, offset, target) { let f = 0; while (f < target.length) f += fs.readSync(oldFd, target, f, target.length - f, offset + f); return target.length; },
  readAt(p, offset, length) { const b = Buffer.alloc(length); this.readInto(p, offset, b); return b; },
  listing() { throw new Error('single file'); },
};
let written = 0;
const sink = { createDirectory() {}, createSymlink() {}, beginFile() {}, writeFile(b) { written += b.length; }, finishFile() {} };
let scratchFd = null;
if (mode === 'scratch') {
  const p = path.join(require('node:os').tmpdir(), `edgepatch-scratch-bench-${process.pid}`);
  scratchFd = fs.openSync(p, 'w+'); fs.unlinkSync(p);
  sink.writeScratch = (offset, b) => { let d = 0; while (d < b.length) d += fs.writeSync(scratchFd, b, d, b.length - d, offset + d); return true; };
  sink.readScratch = (offset, t) => { let f = 0; while (f < t.length) f += fs.readSync(scratchFd, t, f, t.length - f, offset + f); };
}
const before = wasm.wasmMemoryBytes();
const t0 = performance.now();
const a = new wasm.PatchApplier(old, sink);
const patch = fs.readFileSync(patchPath);
for (let at = 0; at < patch.length; at += 1 << 20) a.push(patch.subarray(at, at + (1 << 20)));
a.finish();
const s = (performance.now() - t0) / 1000;
console.log(JSON.stringify({ mode, written, wasmMiB: +(wasm.wasmMemoryBytes() / 2 ** 20).toFixed(1), grewMiB: +((wasm.wasmMemoryBytes() - before) / 2 ** 20).toFixed(1), seconds: +s.toFixed(2) }));
});
