#!/usr/bin/env node
// Wasm memory of the Worker's transform phase for one module pair, in Node with the Worker's own
// wasm build (crates/edgepatch-wasm/pkg/web, `bash worker/scripts/build-wasm.sh`): the two
// modules filled into ModuleBuffers, `normalizeWasmModuleFilled`, then `finishFilled` with the
// old module again, as worker/src/transform.ts does (without its 64 MiB arena). A wasm memory
// only grows, so the size printed after each step is the peak so far: one pair per process.
//
//   node bench/transform_phase_memory.mjs PAIR_DIR   # holding old and new
//   EDGEPATCH_WASM_PKG=DIR node bench/transform_phase_memory.mjs PAIR_DIR   # another build of the package
import { readFileSync } from "node:fs";
import { basename, join } from "node:path";
import { REPO } from "../worker/scripts/wrangler-dev.mjs";

const pkg = process.env.EDGEPATCH_WASM_PKG ?? join(REPO, "crates/edgepatch-wasm/pkg/web");
const w = await import(join(pkg, "edgepatch_wasm.js"));
w.initSync({ module: readFileSync(join(pkg, "edgepatch_wasm_bg.wasm")) });
const mib = (x) => (x / 2 ** 20).toFixed(1);

/** A ModuleBuffer holding `bytes` (its view is taken again if the allocation grew the memory). */
function filled(bytes) {
  const b = new w.ModuleBuffer(bytes.length);
  let view = b.view();
  if (view.byteLength === 0) view = b.view();
  view.set(bytes);
  return b;
}

const dirs = process.argv.slice(2);
if (dirs.length !== 1) {
  console.error("usage: node bench/transform_phase_memory.mjs PAIR_DIR (one pair per process: the memory only grows)");
  process.exit(2);
}
console.log("| pair | new MiB | wasm MiB after normalize | after finish | layout | seconds |");
console.log("|---|---:|---:|---:|---|---:|");
for (const dir of dirs) {
  const [old, neu] = [readFileSync(join(dir, "old")), readFileSync(join(dir, "new"))];
  const started = Date.now();
  const normalized = w.normalizeWasmModuleFilled("module.wasm", filled(old), filled(neu));
  const afterNormalize = w.wasmMemoryBytes();
  let layout = "stored as it is";
  if (normalized !== undefined) {
    const prepared = normalized.finishFilled(filled(old));
    normalized.free();
    if (prepared !== undefined) layout = prepared.oldSplitBlake3 !== undefined ? "split" : "normalized";
    prepared?.free();
  }
  const seconds = (Date.now() - started) / 1000;
  console.log(`| ${basename(dir)} | ${mib(neu.length)} | ${mib(afterNormalize)} | ${mib(w.wasmMemoryBytes())} | ${layout} | ${seconds.toFixed(1)} |`);
}
