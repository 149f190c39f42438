#!/usr/bin/env node
// Load and memory benchmark of the Worker under `wrangler dev` (loopback only, bounded):
//   node bench/load/run.mjs [--clients N] [--rounds R] [--games G] [--corpus DIR]
// 1. memory: publishes the largest corpus pair (freedoom2-wad, 29 MB) with `edgepatch
//    publish`, generates its patch in the Worker and reads the generation's wasm memory;
// 2. load: N concurrent clients publish builds (fixtures v1/v2 as tar streams), then run
//    the update flow (descriptor, manifest, patch) R times over a few shared pairs;
//    reports p50/p99 latency per request kind, generations per pair, cache hit ratio.
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, copyFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { devVars, REPO, startWrangler } from "../../worker/scripts/wrangler-dev.mjs";
import { arg, CORPUS } from "../bench_env.mjs";

const CLIENTS = Math.min(200, Math.max(1, Number(arg("clients", 50))));
const ROUNDS = Math.min(10, Math.max(1, Number(arg("rounds", 3))));
const DEADLINE = Date.now() + 9 * 60_000; // everything within 9 minutes
const BIN = process.env.EDGEPATCH_BIN ?? join(REPO, "target/release/edgepatch");
const { token } = devVars();
const auth = { Authorization: `Bearer ${token}` };

const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] : NaN;
};
const ms = (x) => `${x.toFixed(1)} ms`;

async function timed(f) {
  const t = performance.now();
  const r = await f();
  return [performance.now() - t, r];
}

const server = await startWrangler({ port: Number(arg("port", 8792)) });
const results = { clients: CLIENTS, rounds: ROUNDS };
try {
  // --- 1. memory of the largest corpus pair -------------------------------------------
  const pair = join(CORPUS, "pairs/freedoom2-wad");
  if (existsSync(join(pair, "new")) && existsSync(BIN)) {
    const work = mkdtempSync(join(tmpdir(), "edgepatch-load-"));
    for (const v of ["old", "new"]) {
      mkdirSync(join(work, v));
      copyFileSync(join(pair, v), join(work, v, "freedoom2.wad"));
      // Onto a channel, so that anonymous callers (edgepatch update below) may fetch old -> new.
      const r = spawnSync(BIN, ["publish", "--server", server.url, "--game", "freedoom", "--build", v, "--channel", "main", join(work, v)], { env: { ...process.env, EDGEPATCH_TOKEN: token }, encoding: "utf8" });
      if (r.status !== 0) throw new Error(r.stderr);
    }
    const [t, res] = await timed(() => fetch(`${server.url}/v1/games/freedoom/updates/old/new`, { signal: AbortSignal.timeout(300_000) }));
    const d = await res.json();
    const gens = await (await fetch(`${server.url}/v1/games/freedoom/updates/old/new/generations`, { headers: auth })).json();
    const run = gens.runs[0];
    const out = join(work, "out");
    const [tu, u] = await timed(async () => spawnSync(BIN, ["update", "--json", "--server", server.url, "--game", "freedoom", "--from", "old", "--to", "new", join(work, "old"), out], { encoding: "utf8" }));
    const same = u.status === 0 && readFileSync(join(out, "freedoom2.wad")).equals(readFileSync(join(pair, "new")));
    results.memory = {
      pair: "freedoom2-wad",
      newBytes: readFileSync(join(pair, "new")).length,
      patchBytes: d.patchSize,
      patchPercent: (100 * d.patchSize) / readFileSync(join(pair, "new")).length,
      generationSeconds: run.seconds,
      descriptorMs: t,
      segments: run.segments,
      r2Reads: run.r2Reads,
      oldBytesRead: run.oldBytesRead,
      peakWasmMemoryMiB: run.peakWasmMemoryBytes / 2 ** 20,
      jsBufferMiB: run.jsBufferBytes / 2 ** 20,
      level: run.level,
      cliUpdateMs: tu,
      cliUpdateByteExact: same,
    };
    rmSync(work, { recursive: true, force: true });
  } else {
    results.memory = `skipped: ${pair} or ${BIN} missing (bench/corpus/fetch.sh, cargo build --release)`;
  }

  // --- 2. load: publish -------------------------------------------------------------------
  const tars = { v1: readFileSync(join(REPO, "fixtures/game-v1.tar")), v2: readFileSync(join(REPO, "fixtures/game-v2.tar")) };
  // ~10 clients race for each pair by default; `--games 1`: all of them for one pair.
  const GAMES = Math.min(CLIENTS, Math.max(1, Number(arg("games", Math.ceil(CLIENTS / 10)))));
  const publishLatency = [];
  await Promise.all(
    Array.from({ length: GAMES * 2 }, async (_, k) => {
      const game = `load${k >> 1}`;
      const build = k & 1 ? "v2" : "v1";
      const [t, res] = await timed(() => fetch(`${server.url}/v1/games/${game}/builds/${build}`, { method: "PUT", headers: auth, body: tars[build] }));
      if (res.status !== 201) throw new Error(`publish ${game}/${build}: ${res.status} ${await res.text()}`);
      await res.arrayBuffer();
      publishLatency.push(t);
    }),
  );
  // Release v2 on a channel whose previous head is v1: anonymous callers may then fetch v1 -> v2
  // (and the Worker starts generating it ahead of them, on its queue).
  for (let g = 0; g < GAMES; g++) {
    for (const build of ["v1", "v2"]) {
      const res = await fetch(`${server.url}/v1/games/load${g}/channels/live`, { method: "PUT", headers: auth, body: JSON.stringify({ build }) });
      if (res.status !== 200) throw new Error(`channel load${g}/live -> ${build}: ${res.status} ${await res.text()}`);
      await res.arrayBuffer();
    }
  }

  // --- 3. load: updates ----------------------------------------------------------------
  const lat = { descriptor: [], manifest: [], patch: [] };
  const cache = { hit: 0, miss: 0 };
  let errors = 0;
  // Each client from its own address: the anonymous rate limit counts per address.
  const get = async (kind, url, client) => {
    const [t, [res, body]] = await timed(async () => {
      const r = await fetch(url, { signal: AbortSignal.timeout(60_000), headers: { "CF-Connecting-IP": `10.0.${client >> 8}.${client & 255}` } });
      return [r, await r.arrayBuffer()];
    });
    if (res.status !== 200) errors++;
    lat[kind].push(t);
    cache[res.headers.get("x-edgepatch-cache") === "hit" ? "hit" : "miss"]++;
    return body;
  };
  const started = performance.now();
  for (let round = 0; round < ROUNDS && Date.now() < DEADLINE; round++) {
    await Promise.all(
      Array.from({ length: CLIENTS }, async (_, c) => {
        const url = `${server.url}/v1/games/load${c % GAMES}/updates/v1/v2`;
        const desc = JSON.parse(new TextDecoder().decode(await get("descriptor", url, c)));
        await get("manifest", new URL(desc.manifestUrl, url), c);
        await get("patch", new URL(desc.patchUrl, url), c);
      }),
    );
  }
  const wall = (performance.now() - started) / 1000;
  const generations = await Promise.all(
    Array.from({ length: GAMES }, async (_, g) => (await (await fetch(`${server.url}/v1/games/load${g}/updates/v1/v2/generations`, { headers: auth })).json()).count),
  );
  results.load = {
    games: GAMES,
    publishes: publishLatency.length,
    publish: { p50: pct(publishLatency, 50), p99: pct(publishLatency, 99) },
    requests: lat.descriptor.length + lat.manifest.length + lat.patch.length,
    wallSeconds: wall,
    latencyMs: Object.fromEntries(Object.entries(lat).map(([k, v]) => [k, { n: v.length, p50: pct(v, 50), p99: pct(v, 99) }])),
    generationsPerPair: generations,
    cacheHitRatio: cache.hit / (cache.hit + cache.miss),
    errors,
  };
} finally {
  server.stop();
}

console.log(JSON.stringify(results, null, 2));
if (typeof results.memory === "object") {
  const m = results.memory;
  console.log(`\nmemory: ${m.pair} (${(m.newBytes / 1e6).toFixed(1)} MB new): generation ${m.generationSeconds.toFixed(1)} s at level ${m.level}, ${m.segments} segments, ` +
    `peak wasm memory ${m.peakWasmMemoryMiB.toFixed(1)} MiB + ${m.jsBufferMiB.toFixed(1)} MiB of JS buffers; patch ${m.patchPercent.toFixed(2)}% of new; CLI update byte-exact: ${m.cliUpdateByteExact}`);
}
const l = results.load;
console.log(`load: ${CLIENTS} clients x ${ROUNDS} rounds over ${l.games} pairs: ` +
  Object.entries(l.latencyMs).map(([k, v]) => `${k} p50 ${ms(v.p50)} p99 ${ms(v.p99)}`).join("; ") +
  `; publish p50 ${ms(l.publish.p50)} p99 ${ms(l.publish.p99)}; generations per pair ${JSON.stringify(l.generationsPerPair)}; cache hit ratio ${(100 * l.cacheHitRatio).toFixed(1)}%; errors ${l.errors}`);
