#!/usr/bin/env node
// bench/parallel_steps.mjs — a generation split into steps run in parallel, each step in its own
// Node process with its own instance of the Worker's wasm module (what a Queues consumer gets on
// Cloudflare: one isolate per step), then assembled as the Worker assembles (`absorbSegment`).
// `wrangler dev` cannot show this: its local queue hands steps over one after another, in one
// workerd thread (BENCHMARKS.md, "Through `wrangler dev`"). Reports, per parallelism, the wall
// time from the first step's start to the assembled patch, every step's CPU seconds and wasm
// memory, and checks the patch is byte for byte the one-step patch and applies (native CLI).
//
//   bash scripts/build-wasm.sh node && cargo build --release --bin edgepatch
//   node bench/parallel_steps.mjs --pair DIR [--steps 1,2,4] [--level 17]
//
// DIR holds `old` and `new` (single files). Steps split the segments evenly; at most as many
// steps run at once as there are steps. Signing (done at publish in the Worker) is made once
// up front and not timed.
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { arg, signFile } from "./bench_env.mjs";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
// @edgepatch/js's Node entry point: the module loaded and instantiated.
const wasmModule = await import(path.join(repo, "packages/edgepatch-js/lib/node.js"));
const wasm = () => wasmModule;
const level = Number(arg("level", "17"));

const readRanges = (file, ranges) => {
  const out = Buffer.allocUnsafe(ranges.reduce((n, r) => n + r.length, 0));
  const fd = fs.openSync(file, "r");
  let at = 0;
  for (const r of ranges) {
    fs.readSync(fd, out, at, r.length, r.offset);
    at += r.length;
  }
  fs.closeSync(fd);
  return out;
};

if (process.env.EDGEPATCH_STEP_CHILD) {
  // Child: segments [first, end) of the pair into OUT; prints its CPU and wasm memory.
  const [oldPath, newPath, oldSig, newSig, first, end, out] = process.argv.slice(2);
  const w = wasm();
  const gen = new w.PatchGenerator(fs.readFileSync(oldSig), fs.readFileSync(newSig), level);
  // As the Worker's (worker/src/wasm.ts newPatchGenerator).
  gen.setLzmaOpsStreams(true);
  gen.setLzmaWindowsUpTo(w.isolateLzmaWindowLimit());
  const history = readRanges(newPath, gen.historyRanges(Number(first)));
  gen.newBytesTarget(history.length).set(history);
  gen.startAtFilled(Number(first));
  const fd = fs.openSync(out, "w");
  const lengths = [];
  for (let i = Number(first); i < Number(end); i++) {
    const fresh = readRanges(newPath, gen.newRanges(i));
    const bytes = gen.encodeSegment(i, fresh, readRanges(oldPath, gen.planSegment(i, fresh)));
    fs.writeSync(fd, bytes);
    lengths.push(bytes.length);
  }
  fs.closeSync(fd);
  const u = process.cpuUsage();
  console.log(JSON.stringify({ cpuSeconds: (u.user + u.system) / 1e6, wasmMemory: w.wasmMemoryBytes(), lengths }));
  process.exit(0);
}

const dir = arg("pair", null);
if (!dir) {
  console.error("usage: node bench/parallel_steps.mjs --pair DIR [--steps 1,2,4] [--level 17]");
  process.exit(2);
}
const [oldPath, newPath] = [path.join(dir, "old"), path.join(dir, "new")];
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "edgepatch-steps-"));
const w = wasm();
const [oldSig, newSig] = [path.join(tmp, "old.sig"), path.join(tmp, "new.sig")];
fs.writeFileSync(oldSig, signFile(w, oldPath));
fs.writeFileSync(newSig, signFile(w, newPath));
const segments = new w.PatchGenerator(fs.readFileSync(oldSig), fs.readFileSync(newSig), level).segmentCount;
const newMB = fs.statSync(newPath).size / 1e6;

const runStep = (first, end, out) =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [fileURLToPath(import.meta.url), oldPath, newPath, oldSig, newSig, String(first), String(end), out, "--level", String(level)], {
      env: { ...process.env, EDGEPATCH_STEP_CHILD: "1" },
      stdio: ["ignore", "pipe", "inherit"],
    });
    let text = "";
    child.stdout.on("data", (d) => (text += d));
    child.on("exit", (code) => (code === 0 ? resolve(JSON.parse(text)) : reject(new Error(`step ${first}..${end} exited ${code}`))));
  });

console.log(`${path.basename(dir)}: ${newMB.toFixed(1)} MB new, ${segments} segments, level ${level}; ${os.cpus().length} cores`);
console.log("| steps in parallel | segments per step | wall s (steps + assembly) | assembly s | step CPU s | CPU s summed | CPU s per 100 MB | step wasm memory MB (max) | patch bytes | same as 1 step | apply |");
console.log("|---:|---:|---:|---:|---|---:|---:|---:|---:|---|---|");
let reference = null;
for (const steps of arg("steps", "1,2,4").split(",").map(Number)) {
  const per = Math.ceil(segments / steps);
  const cuts = [];
  for (let a = 0; a < segments; a += per) cuts.push([a, Math.min(segments, a + per)]);
  const t0 = performance.now();
  const results = await Promise.all(cuts.map(([a, b], k) => runStep(a, b, path.join(tmp, `step-${k}`))));
  // Assembly, as the Worker's: a generator from the same signatures writes the header, absorbs
  // every step's segments in order, and writes the end.
  const t1 = performance.now();
  const a = new w.PatchGenerator(fs.readFileSync(oldSig), fs.readFileSync(newSig), level);
  a.setLzmaOpsStreams(true);
  a.setLzmaWindowsUpTo(w.isolateLzmaWindowLimit());
  const patchPath = path.join(tmp, `patch-${steps}`);
  const fd = fs.openSync(patchPath, "w");
  fs.writeSync(fd, a.header());
  let i = 0;
  results.forEach((r, k) => {
    const bytes = fs.readFileSync(path.join(tmp, `step-${k}`));
    let at = 0;
    for (const len of r.lengths) {
      const segment = bytes.subarray(at, at + len);
      a.absorbSegment(i++, segment);
      fs.writeSync(fd, segment);
      at += len;
    }
  });
  fs.writeSync(fd, a.finish());
  fs.closeSync(fd);
  const t2 = performance.now();
  const patch = fs.readFileSync(patchPath);
  reference ??= patch;
  const out = path.join(tmp, "out");
  fs.rmSync(out, { force: true });
  const applied = spawnSync(path.join(repo, "target/release/edgepatch"), ["--quiet", "apply", oldPath, patchPath, out]);
  const exact = applied.status === 0 && Buffer.compare(fs.readFileSync(out), fs.readFileSync(newPath)) === 0;
  fs.rmSync(out, { force: true });
  const cpu = results.reduce((n, r) => n + r.cpuSeconds, 0);
  const mem = Math.max(...results.map((r) => r.wasmMemory)) / 1e6;
  console.log(
    `| ${steps} | ${per} | ${((t2 - t0) / 1000).toFixed(1)} | ${((t2 - t1) / 1000).toFixed(2)} | ${results.map((r) => r.cpuSeconds.toFixed(1)).join(", ")} | ${cpu.toFixed(1)} | ${((cpu / newMB) * 100).toFixed(1)} | ${mem.toFixed(1)} | ${patch.length.toLocaleString("en-US")} | ${Buffer.compare(patch, reference) === 0 ? "yes" : "NO"} | ${exact ? "byte-exact" : "FAILED"} |`,
  );
}
fs.rmSync(tmp, { recursive: true, force: true });
