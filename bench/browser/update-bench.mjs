#!/usr/bin/env node
// bench/browser/update-bench.mjs — a browser update of a ~100 MB game build, per engine,
// against a plain download of the whole new build from the same server into OPFS
// (results in BENCHMARKS.md, "Browsers", "Update per engine").
//
//   node bench/browser/update-bench.mjs [--engines chromium,firefox,webkit] [--runs 1] [--level 9]
//        [--layout many|few] [--mbit N] [--opfs-access auto|access-handles|writable-streams|...]
//        [--work DIR] [--keep] [--json FILE]
//
// --mbit N sends every answer through one link of N Mbit/s (serve.mjs faults.bytesPerSecond);
// without it the server answers at loopback speed, so the download costs next to nothing.
//
// One table row per engine and run (each run a fresh profile); the machine is shared, so
// compare rows of the same run.
//
// Needs web/scripts/build-all.sh's output (web/dist/lib: the library, its worker and the
// apply-only wasm) and target/release/edgepatch. Not a test: it asserts nothing about speed.
//
// 1. Two builds of a synthetic game are generated, deterministically, in --work (default a
//    fresh temporary directory, removed afterwards unless --keep; never in the repository):
//      data/assets.pak   40 MiB packed assets (64 KiB incompressible records, as compressed
//                        textures are); v2 replaces 24 records, inserts 8 in the middle
//                        (everything after them shifts) and drops 4
//      bin/game.wasm     24 MiB code-like bytes (opcodes, small immediates, 32-bit pointers;
//                        compresses ~3x); v2 regenerates 3% of the functions, inserts a few,
//                        and relocates every pointer past a point (+4 KiB): many small
//                        scattered changes, as a recompile makes
//      media/intro.bin   16 MiB incompressible, unchanged
//      levels/*.json     1,500 JSON files of ~8 KiB (12 MiB); v2 edits 80, adds 40, removes 20
//      textures/*.bin    400 incompressible files of ~20 KiB (8 MiB); v2 replaces 20
//    --layout few puts the levels and the textures in one file each (the same bytes): 6
//    files instead of ~1,900, to tell the per-file costs from the per-byte ones.
// 2. `edgepatch keygen` and `edgepatch site add` (v1, then v2 on channel "stable") make the
//    static update site; web/scripts/serve.mjs serves it, the library, and v2's plain files,
//    on 127.0.0.1 (one origin, no CORS in the way).
// 3. Per engine, a fresh profile: install v1 (the patch from nothing), then the measured
//    update v1 -> v2 through the library (GameUpdater.update: download, apply in the worker,
//    verify, switch), then the plain download: every file of v2 fetched and piped into an
//    OPFS file (createWritable), four files at a time, no verification. Wall times are taken
//    in the page (performance.now around the call). OPFS bytes written: the library's
//    newBytesWritten (last progress event) and navigator.storage.estimate() before and after.
//    Patch bytes downloaded: the library's downloadedBytes and what the server sent.
//
// Engines come from the shared launcher tests/e2e/engines.mjs (`launch(engine, { profileDir })`;
// WebKit there is tests/e2e/webkitgtk_browser.py, with no limit on how long a step's
// evaluate() may take). Each step is measured on its own: a failed update is written in the
// table and the plain download is still measured.
import { execFile, execFileSync } from "node:child_process";
import { promisify } from "node:util";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { startServer } from "../../web/scripts/serve.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const repo = join(here, "../..");
const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : dflt;
};
const RUNS = Number(opt("runs", "1"));
const ENGINES = opt("engines", process.env.EDGEPATCH_BROWSERS ?? "chromium,firefox,webkit").split(",").filter(Boolean);
const LEVEL = Number(opt("level", "9"));
const LAYOUT = opt("layout", "many");
// The library's opfsAccess (web/src/build-files.ts): "auto" is what the engine offers.
const ACCESS = opt("opfs-access", "auto");
if (!["many", "few"].includes(LAYOUT)) throw new Error(`--layout ${LAYOUT}: many or few`);
const EDGEPATCH = process.env.EDGEPATCH_BIN ?? join(repo, "target/release/edgepatch");
const MiB = 1 << 20;

// --- Deterministic synthetic builds --------------------------------------------------

/** A small fast PRNG (xorshift32): deterministic bytes without hashing 100 MB. */
function rng(seed) {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x;
  };
}

function randomBytes(seed, n) {
  const r = rng(seed);
  const words = new Uint32Array(Math.ceil(n / 4));
  for (let i = 0; i < words.length; i++) words[i] = r();
  return Buffer.from(words.buffer, 0, n);
}

/** 64 KiB asset records; v2 replaces, inserts and drops some. */
function assetsPak(version) {
  const RECORD = 64 * 1024;
  let ids = Array.from({ length: 640 }, (_, i) => `a${i}`);
  if (version === 2) {
    ids = ids.filter((_, i) => ![100, 200, 300, 400].includes(i)); // dropped
    ids = ids.map((id, i) => (i % 26 === 13 ? `${id}-v2` : id)); // ~24 replaced
    ids.splice(320, 0, ...Array.from({ length: 8 }, (_, i) => `new${i}`)); // inserted mid-file
  }
  const seedOf = (id) => [...id].reduce((h, c) => Math.imul(h ^ c.charCodeAt(0), 16777619) >>> 0, 2166136261);
  return Buffer.concat(ids.map((id) => randomBytes(seedOf(id), RECORD)));
}

/** Code-like bytes: functions of opcodes with small immediates and 32-bit pointers into a data area. */
function gameWasm(version) {
  const out = Buffer.alloc(26 * MiB);
  let at = 0;
  const functions = 24 * MiB / 1000;
  for (let f = 0; at < 24 * MiB - 4096 && f < functions * 2; f++) {
    // v2: 3% of the functions are new code; a few new functions are inserted.
    const changed = version === 2 && f % 33 === 7;
    const r = rng(changed ? f * 7919 + 1 : f + 1);
    if (version === 2 && f % 997 === 500) {
      const extra = rng(f * 31 + 5);
      for (let i = 0; i < 600; i++) out[at++] = extra() & 0x7f;
    }
    const len = 500 + (r() % 1000);
    out[at++] = 0x20;
    out.writeUInt16LE(len, at);
    at += 2;
    for (let end = at + len; at < end; ) {
      const op = r() % 48;
      out[at++] = 0x20 + op;
      if (op < 10) out[at++] = r() % 16; // local index
      else if (op < 14) {
        // A pointer into the data area; a relink moves everything past 8 MiB by 4 KiB.
        let p = 0x10000 + (r() % 4096) * 64;
        if (version === 2 && p >= 0x10000 + 2048 * 64) p += 4096;
        out.writeUInt32LE(p, at);
        at += 4;
      } else if (op < 20) out[at++] = r() % 128; // small constant
    }
  }
  return out.subarray(0, at);
}

function levelJson(i, version) {
  const r = rng(version === 2 && i % 19 === 3 ? i * 101 + 7 : i + 1000);
  const rows = [];
  for (let y = 0; y < 48; y++) rows.push(`    [${Array.from({ length: 40 }, () => r() % 12).join(",")}]`);
  return `{\n  "id": ${i},\n  "name": "level ${i}",\n  "music": "track-${r() % 20}.ogg",\n  "tiles": [\n${rows.join(",\n")}\n  ]\n}\n`;
}

function writeBuild(dir, version) {
  const put = (rel, bytes) => {
    mkdirSync(dirname(join(dir, rel)), { recursive: true });
    writeFileSync(join(dir, rel), bytes);
  };
  put("data/assets.pak", assetsPak(version));
  put("bin/game.wasm", gameWasm(version));
  put("media/intro.bin", randomBytes(424242, 16 * MiB));
  // Levels: v2 edits 80 (i % 19 === 3), removes 20 (1480..1499), adds 40 (1500..1539).
  const levels = version === 2 ? [...Array(1480).keys(), ...Array.from({ length: 40 }, (_, i) => 1500 + i)] : [...Array(1500).keys()];
  const level = (i) => levelJson(i, version);
  const texture = (i) => randomBytes(version === 2 && i % 20 === 9 ? 90000 + i : 50000 + i, 16 * 1024 + (i % 16) * 1024);
  if (LAYOUT === "few") {
    // The same bytes in two files: what the per-file costs are, next to the many-file layout.
    put("levels/levels.json", Buffer.concat(levels.map((i) => Buffer.from(level(i)))));
    put("textures/textures.bin", Buffer.concat(Array.from({ length: 400 }, (_, i) => texture(i))));
  } else {
    for (const i of levels) put(`levels/level-${String(i).padStart(4, "0")}.json`, level(i));
    for (let i = 0; i < 400; i++) put(`textures/tex-${String(i).padStart(3, "0")}.bin`, texture(i));
  }
  put("index.html", `<!doctype html><title>bench game v${version}</title>\n`);
}

function listFiles(dir, rel = "", out = []) {
  for (const name of readdirSync(join(dir, rel)).sort()) {
    const p = rel ? `${rel}/${name}` : name;
    const st = statSync(join(dir, p));
    if (st.isDirectory()) listFiles(dir, p, out);
    else out.push({ path: p, size: st.size });
  }
  return out;
}

// --- Browsers ------------------------------------------------------------------------

// The shared launcher of the end-to-end tests: Chromium, Firefox and WebKitGTK, one profile each.
const { launch } = await import(join(repo, "tests/e2e/engines.mjs"));

// --- In the page ---------------------------------------------------------------------

/** Runs `op` ("install" v1 or "update" v1 -> v2) through the library, timed (in the page). */
async function pageLibrary({ op, publicKey, opfsAccess = "auto" }) {
  const estimate = async () => {
    try {
      return (await navigator.storage.estimate()).usage ?? null;
    } catch {
      return null;
    }
  };
  if (!window.benchGame) {
    const lib = await import("/lib/edgepatch-web.js");
    window.benchGame = new lib.GameUpdater({ baseUrl: "/updates/", game: "bench", workerUrl: "/lib/edgepatch-worker.js", publicKeys: [publicKey], opfsAccess });
  }
  const game = window.benchGame;
  let last = null;
  const phases = {}; // phase -> ms after the call when first reported
  const usageBefore = await estimate();
  const t0 = performance.now();
  const onProgress = (p) => {
    last = p;
    phases[p.phase] ??= Math.round(performance.now() - t0);
  };
  const result = op === "install" ? await game.install("v1", { onProgress }) : await game.update("v1", "v2", { onProgress });
  const ms = performance.now() - t0;
  return { ms, result, phases, newBytesWritten: last?.newBytesWritten ?? null, usageBefore, usageAfter: await estimate() };
}

/** Downloads every file of v2 into OPFS `plain/` with fetch -> createWritable, 4 at a time (runs in the page). */
async function pagePlainDownload({ files }) {
  const usage = async () => {
    try {
      return (await navigator.storage.estimate()).usage ?? null;
    } catch {
      return null;
    }
  };
  const root = await (await navigator.storage.getDirectory()).getDirectoryHandle("plain", { create: true });
  const dirs = new Map([["", root]]);
  const dirOf = async (path) => {
    const parent = path.split("/").slice(0, -1).join("/");
    if (!dirs.has(parent)) dirs.set(parent, (await dirOf(parent)).getDirectoryHandle(parent.split("/").at(-1), { create: true }));
    return dirs.get(parent);
  };
  const usageBefore = await usage();
  const t0 = performance.now();
  let bytes = 0;
  // The large files first, then the small ones: how long each part takes is reported too.
  const large = files.filter((f) => f.size >= 1 << 20);
  const small = files.filter((f) => f.size < 1 << 20);
  let list = large;
  let next = 0;
  const worker = async () => {
    while (next < list.length) {
      const { path } = list[next++];
      const handle = await (await dirOf(path)).getFileHandle(path.split("/").at(-1), { create: true });
      const res = await fetch(`/plain/${path}`, { cache: "no-store" });
      if (!res.ok) throw new Error(`GET /plain/${path}: ${res.status}`);
      const counted = res.body.pipeThrough(new TransformStream({ transform(chunk, c) { bytes += chunk.byteLength; c.enqueue(chunk); } }));
      await counted.pipeTo(await handle.createWritable());
    }
  };
  await Promise.all([worker(), worker(), worker(), worker()]);
  const largeMs = performance.now() - t0;
  [list, next] = [small, 0];
  await Promise.all([worker(), worker(), worker(), worker()]);
  const ms = performance.now() - t0;
  return { ms, bytes, largeFiles: large.length, largeMs, smallFiles: small.length, smallMs: ms - largeMs, usageBefore, usageAfter: await usage() };
}

// --- Main ----------------------------------------------------------------------------

const work = opt("work", null) ?? mkdtempSync(join(tmpdir(), "edgepatch-browser-bench-"));
if (!relative(repo, work).startsWith("..")) throw new Error(`--work ${work} is inside the repository; use a directory outside it`);
if (!args.includes("--keep")) process.on("exit", () => rmSync(work, { recursive: true, force: true }));
const at = (name) => join(work, `${name}-${LAYOUT}`); // each layout its own builds, site and root
const builds = { v1: join(at("builds"), "v1"), v2: join(at("builds"), "v2") };
let t = performance.now();
if (!existsSync(join(at("builds"), "done"))) {
  rmSync(at("builds"), { recursive: true, force: true });
  writeBuild(builds.v1, 1);
  writeBuild(builds.v2, 2);
  writeFileSync(join(at("builds"), "done"), "");
}
const v2Files = listFiles(builds.v2);
const newBytes = v2Files.reduce((n, f) => n + f.size, 0);
console.error(`bench: builds in ${work}: v1 ${(listFiles(builds.v1).reduce((n, f) => n + f.size, 0) / 1e6).toFixed(1)} MB, v2 ${(newBytes / 1e6).toFixed(1)} MB in ${v2Files.length} files (${((performance.now() - t) / 1000).toFixed(1)} s)`);

// The site, made with the CLI (a fresh key each run; kept with --keep and reused).
const site = at("site");
const siteInfo = `${at("site-pairs")}.json`;
if (!existsSync(siteInfo)) {
  rmSync(site, { recursive: true, force: true });
  const key = `${at("site")}.key`;
  rmSync(key, { force: true });
  execFileSync(EDGEPATCH, ["--quiet", "keygen", key]);
  const info = {};
  for (const [build, channel] of [["v1", []], ["v2", ["--channel", "stable"]]]) {
    t = performance.now();
    const add = ["--json", "--quiet", "site", "add", "--site", site, "--key", key, "--game", "bench", "--build", build, "--level", String(LEVEL), ...channel, builds[build]];
    const { pairs } = JSON.parse(execFileSync(EDGEPATCH, add, { encoding: "utf8" }));
    for (const p of pairs) info[`${p.from}->${build}`] = { ...p, seconds: 0 };
    console.error(`bench: site add ${build} (level ${LEVEL}): ${pairs.map((p) => `${p.from} -> ${build} ${(p.patch_bytes / 1e6).toFixed(2)} MB`).join(", ")} in ${((performance.now() - t) / 1000).toFixed(1)} s`);
  }
  writeFileSync(siteInfo, JSON.stringify(info, null, 2));
}
const sitePairs = JSON.parse(readFileSync(siteInfo, "utf8"));
const { publicKey } = JSON.parse(readFileSync(join(site, "public/v1/public-key"), "utf8"));
const update = sitePairs["v1->v2"];

// What the server serves: the library, the site, v2's files for the plain download, a blank page.
const root = at("root");
if (!existsSync(root)) {
  mkdirSync(root);
  symlinkSync(join(repo, "web/dist/lib"), join(root, "lib"));
  symlinkSync(join(site, "public"), join(root, "updates"));
  symlinkSync(builds.v2, join(root, "plain"));
  writeFileSync(join(root, "index.html"), "<!doctype html><title>edgepatch browser bench</title>\n");
}
if (!existsSync(join(repo, "web/dist/lib/edgepatch-web.js"))) throw new Error("web/dist/lib is missing: run web/scripts/build-all.sh first");
const server = await startServer({ root });
const MBIT = Number(opt("mbit", "0"));
if (MBIT > 0) server.faults.bytesPerSecond = (MBIT * 1e6) / 8;
console.error(`bench: engines ${ENGINES.join(", ")} via tests/e2e/engines.mjs; server ${server.url}`);

// Native, in the same run against the same server: `edgepatch update` v1 -> v2 into a fresh
// directory, timed around the process (start, documents, download, apply, verify). Run as a
// child process without blocking: the server answering it lives in this process.
const natives = [];
for (let run = 0; run < RUNS; run++) {
  const out = join(work, `native-out-${LAYOUT}`);
  rmSync(out, { recursive: true, force: true });
  const t0 = performance.now();
  try {
    await promisify(execFile)(EDGEPATCH, ["--quiet", "update", "--server", `${server.url}updates`, "--game", "bench", "--public-key", publicKey, "--from", "v1", "--to", "v2", builds.v1, out]);
    natives.push({ ms: performance.now() - t0 });
    console.error(`bench: native edgepatch update: ${((performance.now() - t0) / 1000).toFixed(2)} s`);
  } catch (e) {
    natives.push({ error: String(e?.stderr || e?.message || e).split("\n")[0] });
    console.error(`bench: native edgepatch update FAILED: ${natives.at(-1).error}`);
  }
  rmSync(out, { recursive: true, force: true });
}

const oneLine = (e) => String(e?.message ?? e).split("\n")[0];
const results = [];
for (const engine of ENGINES.flatMap((e) => Array(RUNS).fill(e))) {
  const profileDir = mkdtempSync(join(tmpdir(), `edgepatch-bench-${engine}-`));
  const row = { engine };
  let browser = null;
  server.resetStats();
  try {
    browser = await launch(engine, { profileDir, webkitEvaluateTimeoutMs: 0 });
    row.version = browser.version ?? browser.browserVersion ?? "";
    await browser.goto(`${server.url}index.html`);
    // Each step on its own: a failed update still leaves the plain download measured.
    const step = async (name, fn) => {
      try {
        row[name] = await fn();
      } catch (e) {
        row[name] = { error: oneLine(e) };
      }
      return !row[name].error;
    };
    if (await step("install", () => browser.evaluate(pageLibrary, { op: "install", publicKey, opfsAccess: ACCESS }))) await step("update", () => browser.evaluate(pageLibrary, { op: "update", publicKey, opfsAccess: ACCESS }));
    await step("plain", () => browser.evaluate(pagePlainDownload, { files: v2Files }));
    // What the server sent of the v1 -> v2 patch.
    if (row.update && !row.update.error) row.update.patchBytesServed = server.stats.requests.filter((r) => r.path === `/updates/${update.patch}`).reduce((n, r) => n + r.bytes, 0);
    const secs = (x) => (x == null ? "not run" : x.error ? `FAILED (${x.error})` : `${(x.ms / 1000).toFixed(2)} s`);
    console.error(`bench: ${engine}: install ${secs(row.install)}, update ${secs(row.update)}, plain download ${secs(row.plain)}`);
  } catch (e) {
    row.error = oneLine(e);
    console.error(`bench: ${engine}: FAILED: ${row.error}`);
  } finally {
    await browser?.close().catch(() => {});
    rmSync(profileDir, { recursive: true, force: true });
  }
  results.push(row);
}
await server.close();

// --- Report --------------------------------------------------------------------------
const mb = (n) => (n == null ? "n/a" : (n / 1e6).toFixed(1));
const rate = (bytes, ms) => (bytes / 1e6 / (ms / 1000)).toFixed(0);
console.log(`\nnew build (layout ${LAYOUT}): ${mb(newBytes)} MB in ${v2Files.length} files; patch v1 -> v2: ${(update.patch_bytes / 1e6).toFixed(2)} MB (${update.segments} segments, level ${LEVEL}); link: ${MBIT > 0 ? `${MBIT} Mbit/s` : "loopback"}; opfsAccess: ${ACCESS}; install patch _ -> v1: ${mb(sitePairs["_->v1"].patch_bytes)} MB; ${cpus().length} cores (${cpus()[0]?.model ?? "?"})\n`);
console.log("| engine | update v1 -> v2 s | output MB/s | patch MB sent by the server | OPFS MB written (library) | estimate() growth MB | plain download s | plain MB/s | update / plain time | install v1 s (MB/s) |");
console.log("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
const okMs = [...results.filter((r) => !r.error && r.update && !r.update.error).map((r) => r.update.ms)];
const fastest = okMs.length ? Math.min(...okMs) : null;
for (const n of natives) {
  const cells = n.error ? [`failed: ${n.error}`, ""] : [(n.ms / 1000).toFixed(2), rate(newBytes, n.ms)];
  console.log(`| native CLI (edgepatch update) | ${cells.join(" | ")} | | | | | | | |`);
}
for (const r of results) {
  if (r.error) {
    console.log(`| ${r.engine} ${r.version ?? ""} | failed: ${r.error} | | | | | | | | |`);
    continue;
  }
  const [u, p, i] = [r.update, r.plain, r.install];
  const ok = (x) => x && !x.error;
  const failed = (x) => (x ? `failed: ${x.error}` : "not run");
  const growth = ok(u) && u.usageBefore != null && u.usageAfter != null ? mb(u.usageAfter - u.usageBefore) : "n/a";
  const updateCells = ok(u) ? [(u.ms / 1000).toFixed(2), rate(u.result.newBytesTotal, u.ms), mb(u.patchBytesServed), mb(u.newBytesWritten), growth] : [failed(u), "", "", "", ""];
  const plainCells = ok(p) ? [(p.ms / 1000).toFixed(2), rate(p.bytes, p.ms)] : [failed(p), ""];
  const ratio = ok(u) && ok(p) ? `${(u.ms / p.ms).toFixed(2)}x` : "";
  const installCell = ok(i) ? `${(i.ms / 1000).toFixed(2)} (${rate(i.result.newBytesTotal, i.ms)})` : failed(i);
  console.log(`| ${r.engine} ${r.version} | ${[...updateCells, ...plainCells, ratio, installCell].join(" | ")} |`);
}
console.log("");
// The targets: every engine's update at 50 MB/s of output or more, within 1.5x of the fastest engine.
const nativeMs = natives.filter((n) => !n.error).map((n) => n.ms);
const nativeBest = nativeMs.length ? Math.min(...nativeMs) : null;
for (const r of results.filter((r) => !r.error && r.update && !r.update.error)) {
  const mbps = newBytes / 1e6 / (r.update.ms / 1000);
  const vsNative = nativeBest ? `, ${(r.update.ms / nativeBest).toFixed(1)}x native's time` : "";
  console.log(`- ${r.engine}: ${mbps.toFixed(0)} MB/s of output (${mbps >= 50 ? "meets" : "below"} 50 MB/s), ${(r.update.ms / fastest).toFixed(2)}x the fastest engine's time (${r.update.ms / fastest <= 1.5 ? "within" : "over"} 1.5x)${vsNative}`);
}
for (const r of results.filter((r) => !r.error)) {
  const parts = [];
  if (r.update && !r.update.error) {
    const ph = Object.entries(r.update.phases).map(([p, ms]) => `${p} ${(ms / 1000).toFixed(2)}`).join(", ");
    parts.push(`update phases first reported at (s): ${ph}; library seconds ${r.update.result.seconds.toFixed(2)}`);
    const t = r.update.result.timings;
    if (t) parts.push(`library phases (s): ${Object.entries(t).map(([p, s]) => `${p} ${s.toFixed(2)}`).join(", ")}`);
  }
  if (r.plain && !r.plain.error) {
    parts.push(`plain download: ${r.plain.largeFiles} large files ${(r.plain.largeMs / 1000).toFixed(2)} s, ${r.plain.smallFiles} small files ${(r.plain.smallMs / 1000).toFixed(2)} s; ` +
      `estimate() growth of the plain download ${r.plain.usageBefore != null && r.plain.usageAfter != null ? mb(r.plain.usageAfter - r.plain.usageBefore) : "n/a"} MB`);
  }
  console.log(`- ${r.engine}: ${parts.join("; ") || "nothing measured"}`);
}
const out = opt("json", null);
if (out) writeFileSync(out, JSON.stringify({ date: new Date().toISOString(), newBytes, files: v2Files.length, level: LEVEL, layout: LAYOUT, mbit: MBIT || null, pairs: sitePairs, results }, null, 2));
