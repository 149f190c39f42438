#!/usr/bin/env node
// Whole-isolate memory of the Worker while it generates the largest corpus pair, read from
// inside V8 through the inspector that `wrangler dev` exposes (Chrome DevTools Protocol over
// a WebSocket), not estimated from our own buffers.
//
//   source worker/scripts/node22.sh && cargo build --release --bin edgepatch
//   node bench/worker_memory.mjs [--pair freedoom2-wad|three-tree] [--corpus DIR]
//        [--port 8801] [--inspector-port 9301] [--interval-ms 25] [--step-segments N]
//
// Starts `wrangler dev` on loopback (fresh local state, --inspector-port), publishes the
// pair's old and new file as builds of two games with `edgepatch publish`, and for each game
// requests the update descriptor (which runs the generation in the PatchGeneration Durable
// Object, in the Worker's isolate), the manifest and the patch, while it polls the isolate:
//   as allocated: `Runtime.getHeapUsage` every --interval-ms, nothing else: usedSize/totalSize
//                 (V8 JS heap used/reserved), backingStorageSize (ArrayBuffer backing stores
//                 V8 accounts to the isolate, garbage not yet collected included),
//                 embedderHeapUsedSize (workerd's own objects);
//   live:         `HeapProfiler.takeHeapSnapshot` (a full GC first): what is still referenced,
//                 in one view: every node's own size, JS objects and each ArrayBuffer's backing
//                 store ("system / JSArrayBufferData"), the wasm linear memory (the largest)
//                 among them, so its size is read from V8 itself.
// The wasm linear memory is not in backingStorageSize (checked below); every sample gets it at
// its final size (a linear memory only grows: an upper bound), cross-checked with the
// generation's own statistics (memory.buffer after the run). Samples land between JS turns: the inspector needs the
// isolate's lock, so it waits while a segment's synchronous wasm encode runs (the generation
// yields to the event loop before each encode, worker/src/generate.ts). As an outer bound it
// samples the resident set of every workerd process wrangler started (which also hold the local
// R2/cache simulators and all other isolates). Bounded (8 minutes), loopback only; the wrangler
// process group it starts is ended however it exits.
import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { devVars, REPO, startWrangler } from "../worker/scripts/wrangler-dev.mjs";
import { arg, CORPUS } from "./bench_env.mjs";

const PAIR = arg("pair", "freedoom2-wad");
const PORT = Number(arg("port", 8801));
const INSPECTOR_PORT = Number(arg("inspector-port", 9301));
const INTERVAL_MS = Math.max(5, Number(arg("interval-ms", 25)));
// Fans the generation out in steps of this many 4 MiB segments (GENERATION_STEP_SEGMENTS); default: the wrangler.toml value.
const STEP_SEGMENTS = arg("step-segments", null);
const BIN = process.env.EDGEPATCH_BIN ?? join(REPO, "target/release/edgepatch");
const DEADLINE = Date.now() + 8 * 60_000;
const { token } = devVars();
const MiB = 2 ** 20;
const mib = (x) => (x / MiB).toFixed(1);

/**
 * A Chrome DevTools Protocol session on the Worker's isolate, through the inspector proxy
 * `wrangler dev --inspector-port PORT` runs (shared with bench/fanout.mjs).
 */
export async function openInspector(inspectorPort) {
  const targets = await (await fetch(`http://127.0.0.1:${inspectorPort}/json`)).json();
  const target = targets.find((t) => t.webSocketDebuggerUrl);
  if (!target) throw new Error(`no inspector target on port ${inspectorPort}: ${JSON.stringify(targets)}`);
  return inspect(target.webSocketDebuggerUrl, inspectorPort);
}

/** A Chrome DevTools Protocol session over the inspector's WebSocket. */
async function inspect(url, inspectorPort) {
  // wrangler's inspector proxy refuses upgrades without an Origin it knows (loopback is one).
  const ws = new WebSocket(url, { headers: { Origin: `http://127.0.0.1:${inspectorPort}` } });
  const pending = new Map();
  let chunks = [];
  let next = 0;
  ws.onmessage = (m) => {
    const d = JSON.parse(m.data);
    if (d.method === "HeapProfiler.addHeapSnapshotChunk") chunks.push(d.params.chunk);
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
  const send = (method, params = {}) =>
    new Promise((resolve, reject) => {
      const id = ++next;
      pending.set(id, { resolve, reject, method });
      ws.send(JSON.stringify({ id, method, params }));
    });
  return {
    send,
    /** One as-allocated sample (`Runtime.getHeapUsage`): JS heap used and reserved, ArrayBuffer backing stores, embedder heap. */
    async heapUsage() {
      const h = await send("Runtime.getHeapUsage");
      return { jsHeap: h.usedSize, reserved: h.totalSize, arrayBuffers: h.backingStorageSize, embedder: h.embedderHeapUsedSize ?? 0 };
    },
    /** A heap snapshot (V8 collects all garbage first), parsed. */
    async snapshot() {
      chunks = [];
      await send("HeapProfiler.takeHeapSnapshot", { reportProgress: false });
      return JSON.parse(chunks.join(""));
    },
    close: () => ws.close(),
  };
}

/**
 * What a heap snapshot holds, all of it live: every node's own size (JS objects, and the
 * backing store of each ArrayBuffer as a "system / JSArrayBufferData" node), the backing
 * stores, and the largest of them (the wasm linear memory).
 */
export function snapshotSizes(snap) {
  const meta = snap.snapshot.meta;
  const n = meta.node_fields.length;
  const iName = meta.node_fields.indexOf("name");
  const iSize = meta.node_fields.indexOf("self_size");
  let total = 0;
  let arrayBuffers = 0;
  let largest = 0;
  for (let i = 0; i < snap.nodes.length; i += n) {
    const size = snap.nodes[i + iSize];
    total += size;
    if (snap.strings[snap.nodes[i + iName]] === "system / JSArrayBufferData") {
      arrayBuffers += size;
      largest = Math.max(largest, size);
    }
  }
  return { total, arrayBuffers, largest };
}

/** pids of the workerd processes in wrangler's process group (Linux /proc). */
export function workerdPids(pgid) {
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
export function rssBytes(pid) {
  try {
    return 1024 * Number(/^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0);
  } catch {
    return 0;
  }
}

const TICKS = 100; // USER_HZ: /proc/<pid>/stat counts CPU time in 1/100 s on Linux.

/** CPU seconds (user + system) of `pids` so far. */
export function cpuSeconds(pids) {
  let ticks = 0;
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      ticks += Number(fields[11]) + Number(fields[12]);
    } catch {}
  }
  return ticks / TICKS;
}

/** Bytes of the regular files under `dir` (symlinks not followed). */
function treeBytes(dir) {
  let total = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    if (e.isDirectory()) total += treeBytes(join(dir, e.name));
    else if (e.isFile()) total += statSync(join(dir, e.name)).size;
  }
  return total;
}

// Run as a script (bench/fanout.mjs imports the reader above).
if (import.meta.url === pathToFileURL(process.argv[1]).href) process.exit(await main());

async function main() {
// A file pair (CORPUS/pairs/PAIR/{old,new}, published as a one-file build) or a tree
// (CORPUS/trees/PAIR/{old,new}, published as it is).
const tree = existsSync(join(CORPUS, "trees", PAIR, "new"));
const pairDir = join(CORPUS, tree ? "trees" : "pairs", PAIR);
for (const p of [join(pairDir, "old"), join(pairDir, "new"), BIN]) {
  if (!existsSync(p)) {
    console.error(`${p} missing (corpus: --corpus DIR; CLI: cargo build --release --bin edgepatch)`);
    return 2;
  }
}

const server = await startWrangler({ port: PORT, args: ["--inspector-port", String(INSPECTOR_PORT), ...(STEP_SEGMENTS === null ? [] : ["--var", `GENERATION_STEP_SEGMENTS:${Number(STEP_SEGMENTS)}`])] });
const work = mkdtempSync(join(tmpdir(), "edgepatch-memory-"));
let session;
let failed = false;
try {
  // A tree is published from where it is; a file from a directory of its own.
  const builds = {};
  for (const v of ["old", "new"]) {
    if (tree) {
      builds[v] = realpathSync(join(pairDir, v));
    } else {
      builds[v] = join(work, v);
      mkdirSync(builds[v]);
      copyFileSync(join(pairDir, v), join(builds[v], PAIR));
    }
  }
  const publish = (game) => {
    for (const v of ["old", "new"]) {
      const r = spawnSync(BIN, ["publish", "--server", server.url, "--game", game, "--build", v, builds[v]], { env: { ...process.env, EDGEPATCH_TOKEN: token }, encoding: "utf8" });
      if (r.status !== 0) throw new Error(`publish ${game}/${v}: ${r.stderr}`);
    }
  };

  // The Worker's isolate, through wrangler's inspector proxy.
  session = await openInspector(INSPECTOR_PORT);
  const pids = workerdPids(server.pid);
  const rss = () => pids.reduce((s, p) => s + rssBytes(p), 0);

  /** One generation of the pair as game `game`, sampled by `sample()` until the downloads end. */
  async function generate(game, sample) {
    publish(game);
    const baseline = await sample();
    const samples = [];
    let polling = true;
    const poller = (async () => {
      while (polling && Date.now() < DEADLINE) {
        samples.push(await sample());
        await new Promise((r) => setTimeout(r, INTERVAL_MS));
      }
    })();
    const descUrl = `${server.url}/v1/games/${game}/updates/old/new`;
    // The owner's token: the pair is on no channel, so anonymous callers may not fetch it.
    const headers = { Authorization: `Bearer ${token}` };
    const firstTimeout = STEP_SEGMENTS === null ? Math.max(1, DEADLINE - Date.now()) : 60_000;
    let res = await fetch(descUrl, { headers, signal: AbortSignal.timeout(firstTimeout) }).catch((e) => {
      if (STEP_SEGMENTS === null) throw e;
      console.error(`${game}: descriptor: ${e.message}; asking again`);
      return { status: 503, text: async () => "" };
    });
    // A fanned-out generation (--step-segments) answers 503 until its steps and assembly are done.
    // A poll that stalls (wrangler dev, as below) is given up after 60 s and asked again.
    while (res.status === 503 && STEP_SEGMENTS !== null && Date.now() < DEADLINE) {
      await res.text();
      await new Promise((r) => setTimeout(r, 2000));
      res = await fetch(descUrl, { headers, signal: AbortSignal.timeout(60_000) }).catch((e) => {
        console.error(`${game}: descriptor: ${e.message}; asking again`);
        return { status: 503, text: async () => "" };
      });
    }
    if (res.status !== 200) throw new Error(`descriptor: ${res.status} ${await res.text()}`);
    const d = await res.json();
    // Each asked twice at most (60 s each): right after a long generation a request may stall
    // under wrangler dev (worker/README.md, "Known issues"), as bench/worker_corpus.mjs does.
    const getBytes = async (url) => {
      const once = async () => Buffer.from(await (await fetch(url, { headers, signal: AbortSignal.timeout(60_000) })).arrayBuffer());
      return once().catch((e) => {
        console.error(`${game}: ${url}: ${e.message}; asking again`);
        return once();
      });
    };
    const manifest = await getBytes(new URL(d.manifestUrl, descUrl));
    const patch = await getBytes(new URL(d.patchUrl, descUrl));
    if (manifest.length !== d.manifestSize || patch.length !== d.patchSize) throw new Error("manifest or patch size differs from the descriptor");
    await new Promise((r) => setTimeout(r, 500));
    polling = false;
    await poller;
    const askGenerations = async () => (await fetch(`${descUrl}/generations`, { headers: { Authorization: `Bearer ${token}` }, signal: AbortSignal.timeout(60_000) })).json();
    const gens = await askGenerations().catch((e) => {
      console.error(`${game}: generations: ${e.message}; asking again`);
      return askGenerations();
    });
    const gaps = samples.slice(1).map((s, i) => s.t - samples[i].t);
    return { d, run: gens.runs[0], baseline, samples, longestGapMs: Math.max(...gaps) };
  }

  // --- as allocated: getHeapUsage only -------------------------------------------------
  const allocated = await generate("mem-allocated", async () => {
    const t = performance.now();
    return { t, rss: rss(), ...(await session.heapUsage()), wasm: null };
  });
  // --- live: a heap snapshot (full GC first) each time -------------------------------------
  const live = await generate("mem-live", async () => {
    const t = performance.now();
    const z = snapshotSizes(await session.snapshot());
    return { t, rss: rss(), jsHeap: z.total - z.arrayBuffers, reserved: null, arrayBuffers: z.arrayBuffers - z.largest, embedder: null, wasm: z.largest };
  });

  // The wasm memory, from V8's own snapshot, once idle; then whether getHeapUsage counts it.
  const finalSizes = snapshotSizes(await session.snapshot());
  const finalUsage = await session.send("Runtime.getHeapUsage");
  const wasmStats = Math.max(allocated.run.peakWasmMemoryBytes, live.run.peakWasmMemoryBytes);
  const wasm = finalSizes.largest;
  const wasmInBacking = finalUsage.backingStorageSize >= wasm;

  // --- report ---------------------------------------------------------------------------
  // Every sample with the wasm memory at its final size (it only grows): an upper bound.
  const isolate = (s) => s.jsHeap + s.arrayBuffers + (s.embedder ?? 0) + (s.wasm === null && wasmInBacking ? 0 : wasm);
  const peakOf = (samples, f) => samples.reduce((best, s) => (f(s) > f(best) ? s : best), samples[0]);
  const newBytes = tree ? treeBytes(realpathSync(join(pairDir, "new"))) : statSync(join(pairDir, "new")).size;
  console.log(`pair ${PAIR}: new ${(newBytes / 1e6).toFixed(1)} MB, patch ${allocated.d.patchSize} bytes, level ${allocated.run.level}, ${allocated.run.segments} segments`);
  const t = allocated.run.transform;
  if (t) console.log(`transform phase (worker/src/transform.ts): ${t.modules} module(s) normalized, ${t.untransformed} stored as they are, ${(t.bytesRead / 1e6).toFixed(1)} MB read whole, ${t.seconds.toFixed(1)} s, wasm memory after it ${mib(t.wasmMemoryBytes)} MiB`);
  for (const [name, r] of [["as allocated", allocated], ["live", live]]) {
    console.log(`${name}: generation ${r.run.seconds.toFixed(1)} s, ${r.samples.length} samples, longest gap ${r.longestGapMs.toFixed(0)} ms (a segment's wasm encode)`);
  }
  console.log(`wasm linear memory: ${mib(wasm)} MiB by V8's heap snapshot (the largest ArrayBuffer backing store), ${mib(wasmStats)} MiB by the generation's statistics; ` +
    `getHeapUsage's backingStorageSize ${wasmInBacking ? "includes" : "does not include"} it (${mib(finalUsage.backingStorageSize)} MiB after a full GC)`);
  console.log("\n| moment | JS heap used MiB | JS heap reserved MiB | ArrayBuffer backing stores (no wasm) MiB | embedder heap MiB | wasm memory then MiB | isolate, wasm at its final size MiB | workerd RSS MiB (all processes) |");
  console.log("|---|---:|---:|---:|---:|---:|---:|---:|");
  const opt = (x) => (x === null ? "-" : mib(x));
  const row = (what, s) =>
    console.log(`| ${what} | ${mib(s.jsHeap)} | ${opt(s.reserved)} | ${mib(s.arrayBuffers)} | ${opt(s.embedder)} | ${opt(s.wasm)} | ${mib(isolate(s))} | ${mib(s.rss)} |`);
  row("as allocated (getHeapUsage): before the descriptor request", allocated.baseline);
  row("as allocated (getHeapUsage): peak during generation + downloads", peakOf(allocated.samples, isolate));
  row("live (heap snapshot): before the descriptor request", live.baseline);
  row("live (heap snapshot): peak during generation + downloads", peakOf(live.samples, isolate));
  row("live (heap snapshot): after both runs", { jsHeap: finalSizes.total - finalSizes.arrayBuffers, reserved: null, arrayBuffers: finalSizes.arrayBuffers - wasm, embedder: null, wasm, rss: rss() });
  const peakAllocated = isolate(peakOf(allocated.samples, isolate));
  const peakLive = isolate(peakOf(live.samples, isolate));
  console.log(`\npeak isolate memory, as allocated: ${mib(peakAllocated)} MiB = ${(peakAllocated / 1e6).toFixed(1)} MB; live: ${mib(peakLive)} MiB = ${(peakLive / 1e6).toFixed(1)} MB (limit 128 MB)`);
  console.log(JSON.stringify({
    pair: PAIR,
    patchBytes: allocated.d.patchSize,
    wasmMemoryBytes: { snapshot: wasm, generationStats: wasmStats },
    wasmInBackingStorage: wasmInBacking,
    allocated: { seconds: allocated.run.seconds, samples: allocated.samples.length, peak: peakOf(allocated.samples, isolate), peakIsolateBytes: peakAllocated },
    live: { seconds: live.run.seconds, samples: live.samples.length, peak: peakOf(live.samples, isolate), peakIsolateBytes: peakLive },
  }));
} catch (e) {
  failed = true;
  console.error(e);
} finally {
  session?.close();
  server.stop();
  rmSync(work, { recursive: true, force: true });
}
return failed ? 1 : 0;
}
