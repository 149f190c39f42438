#!/usr/bin/env node
// Whole-isolate memory of the Worker while it generates the largest corpus pair, measured
// from inside V8 through the inspector that `wrangler dev` exposes (Chrome DevTools
// Protocol over a WebSocket), not estimated from our own buffers.
//
//   source worker/scripts/node22.sh && cargo build --release --bin edgepatch
//   node bench/worker_memory.mjs [--pair freedoom2-wad] [--corpus /work/corpus]
//        [--port 8801] [--inspector-port 9301] [--interval-ms 25]
//
// Starts `wrangler dev` on loopback (fresh local state, --inspector-port), publishes the
// pair's old and new file as two builds with `edgepatch publish`, then, while the update
// descriptor, manifest and patch are requested (the descriptor request runs the generation
// in the PatchGeneration Durable Object, in the same isolate as the Worker), polls
// `Runtime.getHeapUsage` every --interval-ms:
//   usedSize / totalSize      V8 JS heap, used / reserved by the heap;
//   backingStorageSize        ArrayBuffer backing stores V8 accounts to this isolate;
//   embedderHeapUsedSize      workerd's own (cppgc) objects of this isolate.
// The wasm linear memory is read from the generation's own statistics (a linear memory only
// grows, so its size afterwards is its peak); whether the backing stores already include it
// is read off the numbers (the table says). As an outer bound it also samples the resident
// set (VmRSS) of every workerd process wrangler started (which also hold the local R2 and
// cache simulators, and all other isolates). Bounded (6 minutes), loopback only, and the
// wrangler process group it starts is ended however it exits.
import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { devVars, REPO, startWrangler } from "../worker/scripts/wrangler-dev.mjs";

const arg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`);
  return i < 0 ? dflt : process.argv[i + 1];
};
const PAIR = arg("pair", "freedoom2-wad");
const CORPUS = arg("corpus", process.env.EDGEPATCH_CORPUS ?? "/work/corpus");
const PORT = Number(arg("port", 8801));
const INSPECTOR_PORT = Number(arg("inspector-port", 9301));
const INTERVAL_MS = Math.max(5, Number(arg("interval-ms", 25)));
const BIN = process.env.EDGEPATCH_BIN ?? join(REPO, "target/release/edgepatch");
const DEADLINE = Date.now() + 6 * 60_000;
const { token } = devVars();
const MiB = 2 ** 20;
const mib = (x) => (x / MiB).toFixed(1);

const pairDir = join(CORPUS, "pairs", PAIR);
for (const p of [join(pairDir, "old"), join(pairDir, "new"), BIN]) {
  if (!existsSync(p)) {
    console.error(`${p} missing (corpus: --corpus DIR; CLI: cargo build --release --bin edgepatch)`);
    process.exit(2);
  }
}

/** A Chrome DevTools Protocol session over the inspector's WebSocket. */
async function inspect(url) {
  // wrangler's inspector proxy refuses upgrades without an Origin it knows (loopback is one).
  const ws = new WebSocket(url, { headers: { Origin: `http://127.0.0.1:${INSPECTOR_PORT}` } });
  const pending = new Map();
  let next = 0;
  ws.onmessage = (m) => {
    const d = JSON.parse(m.data);
    const p = pending.get(d.id);
    if (p) {
      pending.delete(d.id);
      d.error ? p.reject(new Error(`${p.method}: ${d.error.message}`)) : p.resolve(d.result);
    }
  };
  await new Promise((resolve, reject) => {
    ws.onopen = resolve;
    ws.onerror = () => reject(new Error(`inspector ${url}: WebSocket refused`));
  });
  return {
    send: (method, params = {}) =>
      new Promise((resolve, reject) => {
        const id = ++next;
        pending.set(id, { resolve, reject, method });
        ws.send(JSON.stringify({ id, method, params }));
      }),
    close: () => ws.close(),
  };
}

/** pids of the workerd processes in wrangler's process group (Linux /proc). */
function workerdPids(pgid) {
  const out = [];
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, "utf8");
      const comm = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (comm === "workerd" && Number(fields[2]) === pgid) out.push(Number(d));
    } catch {}
  }
  return out;
}
function rssBytes(pid) {
  try {
    return 1024 * Number(/^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0);
  } catch {
    return 0;
  }
}

const server = await startWrangler({ port: PORT, args: ["--inspector-port", String(INSPECTOR_PORT)] });
const work = mkdtempSync(join(tmpdir(), "edgepatch-memory-"));
let session;
try {
  // --- publish both builds ------------------------------------------------------------
  for (const v of ["old", "new"]) {
    mkdirSync(join(work, v));
    copyFileSync(join(pairDir, v), join(work, v, PAIR));
    const r = spawnSync(BIN, ["publish", "--server", server.url, "--game", "mem", "--build", v, join(work, v)], { env: { ...process.env, EDGEPATCH_TOKEN: token }, encoding: "utf8" });
    if (r.status !== 0) throw new Error(`publish ${v}: ${r.stderr}`);
  }

  // --- the inspector: the Worker's isolate ----------------------------------------------
  const targets = await (await fetch(`http://127.0.0.1:${INSPECTOR_PORT}/json`)).json();
  const target = targets.find((t) => t.webSocketDebuggerUrl);
  if (!target) throw new Error(`no inspector target on port ${INSPECTOR_PORT}: ${JSON.stringify(targets)}`);
  session = await inspect(target.webSocketDebuggerUrl);
  const pids = workerdPids(server.pid);
  const sample = async () => {
    const t = performance.now();
    const h = await session.send("Runtime.getHeapUsage");
    return { t, answeredMs: performance.now() - t, rss: pids.reduce((s, p) => s + rssBytes(p), 0), ...h };
  };
  const baseline = await sample();
  if (baseline.backingStorageSize === undefined) throw new Error(`this V8 reports no backingStorageSize: ${JSON.stringify(baseline)}`);

  // --- poll while the generation and the downloads run ------------------------------------
  const samples = [];
  let polling = true;
  const poller = (async () => {
    while (polling && Date.now() < DEADLINE) {
      samples.push(await sample());
      await new Promise((r) => setTimeout(r, INTERVAL_MS));
    }
  })();
  const t0 = performance.now();
  const descUrl = `${server.url}/v1/games/mem/updates/old/new`;
  const res = await fetch(descUrl, { signal: AbortSignal.timeout(DEADLINE - Date.now()) });
  if (res.status !== 200) throw new Error(`descriptor: ${res.status} ${await res.text()}`);
  const d = await res.json();
  const tGenerated = performance.now();
  const manifest = Buffer.from(await (await fetch(new URL(d.manifestUrl, descUrl))).arrayBuffer());
  const patch = Buffer.from(await (await fetch(new URL(d.patchUrl, descUrl))).arrayBuffer());
  if (manifest.length !== d.manifestSize || patch.length !== d.patchSize) throw new Error("manifest or patch size differs from the descriptor");
  await new Promise((r) => setTimeout(r, 500)); // one more second of samples after the downloads
  polling = false;
  await poller;
  const after = await sample();
  await session.send("HeapProfiler.collectGarbage");
  const afterGc = await sample();

  const gens = await (await fetch(`${descUrl}/generations`, { headers: { Authorization: `Bearer ${token}` } })).json();
  const run = gens.runs[0];

  // --- report ---------------------------------------------------------------------------
  const peak = (f) => samples.reduce((best, s) => (f(s) > f(best) ? s : best), samples[0]);
  const gaps = samples.slice(1).map((s, i) => s.t - samples[i].t);
  const pUsedBacking = peak((s) => s.usedSize + s.backingStorageSize);
  const pTotalBacking = peak((s) => s.totalSize + s.backingStorageSize + s.embedderHeapUsedSize);
  const wasm = run.peakWasmMemoryBytes;
  const wasmInBacking = afterGc.backingStorageSize >= wasm;
  const row = (what, s) =>
    `| ${what} | ${mib(s.usedSize)} | ${mib(s.totalSize)} | ${mib(s.backingStorageSize)} | ${mib(s.embedderHeapUsedSize)} | ${mib(s.usedSize + s.backingStorageSize)} | ${mib(s.rss)} |`;
  const newBytes = statSync(join(pairDir, "new")).size;
  console.log(`pair ${PAIR}: new ${(newBytes / 1e6).toFixed(1)} MB, patch ${d.patchSize} bytes; generation ${run.seconds.toFixed(1)} s in the Worker ` +
    `(descriptor request ${((tGenerated - t0) / 1000).toFixed(1)} s), level ${run.level}, ${run.segments} segments, ${run.r2Reads} R2 reads`);
  console.log(`${samples.length} samples of Runtime.getHeapUsage, asked every ${INTERVAL_MS} ms; median gap ${gaps.sort((a, b) => a - b)[gaps.length >> 1]?.toFixed(0)} ms, ` +
    `longest ${Math.max(...gaps).toFixed(0)} ms (the inspector answers between JS/wasm turns, not during one synchronous wasm call)`);
  console.log("\n| moment | JS heap used MiB | JS heap total MiB | backing stores MiB | embedder heap MiB | used + backing MiB | workerd RSS MiB (all processes) |");
  console.log("|---|---:|---:|---:|---:|---:|---:|");
  console.log(row("before the descriptor request (both builds published)", baseline));
  console.log(row("peak of used + backing, during generation/downloads", pUsedBacking));
  console.log(row("peak of total + backing + embedder", pTotalBacking));
  console.log(row("peak backing stores", peak((s) => s.backingStorageSize)));
  console.log(row("peak JS heap used", peak((s) => s.usedSize)));
  console.log(row("peak workerd RSS", peak((s) => s.rss)));
  console.log(row("after the downloads", after));
  console.log(row("after a forced GC", afterGc));
  console.log(`\nwasm linear memory (the generation's statistics: memory.buffer after the run, = its peak): ${mib(wasm)} MiB; ` +
    `the generator's JS segment buffers by its own count: ${mib(run.peakJsBufferBytes)} MiB`);
  console.log(`backing stores after GC (${mib(afterGc.backingStorageSize)} MiB) ${wasmInBacking ? "include" : "do NOT include"} the wasm memory (${mib(wasm)} MiB)`);
  const isolatePeak = pTotalBacking.totalSize + pTotalBacking.backingStorageSize + pTotalBacking.embedderHeapUsedSize + (wasmInBacking ? 0 : wasm);
  const usedPeak = pUsedBacking.usedSize + pUsedBacking.backingStorageSize + (wasmInBacking ? 0 : wasm);
  console.log(`isolate peak, JS heap used + backing stores${wasmInBacking ? "" : " + wasm memory"}: ${mib(usedPeak)} MiB (${(usedPeak / 1e6).toFixed(1)} MB)`);
  console.log(`isolate peak, JS heap reserved + backing stores + embedder heap${wasmInBacking ? "" : " + wasm memory"}: ${mib(isolatePeak)} MiB (${(isolatePeak / 1e6).toFixed(1)} MB); limit 128 MB`);
  console.log(JSON.stringify({ pair: PAIR, patchBytes: d.patchSize, generationSeconds: run.seconds, samples: samples.length, intervalMs: INTERVAL_MS, longestGapMs: Math.max(...gaps), baseline, peakUsedPlusBacking: pUsedBacking, peakReservedPlusBacking: pTotalBacking, afterGc, wasmMemoryBytes: wasm, wasmInBacking, isolatePeakUsedBytes: usedPeak, isolatePeakReservedBytes: isolatePeak }));
} finally {
  session?.close();
  server.stop();
  rmSync(work, { recursive: true, force: true });
}
