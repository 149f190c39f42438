#!/usr/bin/env node
// Every corpus pair through the Worker, checked byte for byte: for each pair (a file pair
// under CORPUS/pairs/<name>/{old,new}, published as a one-file build, or a tree under
// CORPUS/trees/<name>/{old,new}) `edgepatch publish` old and new to `wrangler dev`, then
// `edgepatch update` (which asks for the update, so the Worker generates the patch) into a
// fresh directory, and compare it with the new build: `diff -r --no-dereference` for contents
// plus every entry's kind, executable bit and symlink target.
//
//   source worker/scripts/node22.sh && cargo build --release --bin edgepatch
//   node bench/worker_corpus.mjs [--corpus DIR] [--port 8802] [--only NAME] [--level N]
//
// Prints one row per pair: new bytes, patch bytes served, the native CLI's patch of the same
// two builds (`edgepatch diff`, its default level 19) and the ratio, the wasm modules the Worker
// stored normalized and its transform phase's seconds, generation seconds (the Worker's own
// statistics), workerd's CPU seconds over the publishes and over the pair's generation alone
// (asked for by the owner before the pair is released; summed per 100 MB of new builds at the
// end), `edgepatch update` seconds once a channel released the pair (wall, process included:
// download, verify, apply), the same update run again (checked too), OK or FAIL. Earlier
// versions read the generation's CPU from the new build's publish (on a channel) to the update's
// end, which also held the channel move's pre-generation of the whole new build from the empty
// one (BENCHMARKS.md, "Through `wrangler dev`"). Loopback only, fresh local
// state, bounded (25 minutes); the wrangler process group it starts is ended however it exits.
import { spawnSync } from "node:child_process";
import { chmodSync, copyFileSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readlinkSync, realpathSync, rmSync, statSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { devVars, REPO, startWrangler } from "../worker/scripts/wrangler-dev.mjs";
import { arg, CORPUS } from "./bench_env.mjs";
import { cpuSeconds, workerdPids } from "./worker_memory.mjs";

const PORT = Number(arg("port", 8802));
const ONLY = arg("only", null);
// The Worker's zstd level (PATCH_LEVEL); default: wrangler.toml's.
const LEVEL = arg("level", null);
const BIN = process.env.EDGEPATCH_BIN ?? join(REPO, "target/release/edgepatch");
const DEADLINE = Date.now() + 25 * 60_000;
const { token, publicKey } = devVars();

if (!existsSync(BIN)) {
  console.error(`${BIN} missing: cargo build --release --bin edgepatch`);
  process.exit(2);
}
const list = (dir) => (existsSync(dir) ? readdirSync(dir).sort() : []);
const pairs = [
  ...list(join(CORPUS, "pairs")).map((name) => ({ name, kind: "file", dir: join(CORPUS, "pairs", name) })),
  ...list(join(CORPUS, "trees")).map((name) => ({ name, kind: "tree", dir: join(CORPUS, "trees", name) })),
].filter((p) => existsSync(join(p.dir, "old")) && existsSync(join(p.dir, "new")) && (ONLY === null || p.name === ONLY));
if (pairs.length === 0) {
  console.error(`no pairs under ${CORPUS}/pairs or ${CORPUS}/trees`);
  process.exit(2);
}

function edgepatch(args) {
  const t = performance.now();
  const r = spawnSync(BIN, ["--json", ...args], { env: { ...process.env, EDGEPATCH_TOKEN: token }, encoding: "utf8", timeout: Math.max(1, DEADLINE - Date.now()) });
  const seconds = (performance.now() - t) / 1000;
  if (r.status !== 0) throw new Error(`edgepatch ${args[0]}: ${r.error ?? ""}${r.stderr.trim()}`);
  return { seconds, json: JSON.parse(r.stdout) };
}

/**
 * GET of a JSON document on a connection of its own: the CLI runs synchronously in between, so
 * a kept-alive connection could be closed by the server before this process sees it.
 */
function getJson(url, headers = {}, timeoutMs = 60_000) {
  return jsonRequest("GET", url, headers, null, timeoutMs);
}

/** A JSON request (body: a JSON value or null) on a connection of its own (see getJson). */
function jsonRequest(method, url, headers, body, timeoutMs = 60_000) {
  return new Promise((resolve, reject) => {
    const data = body === null ? null : JSON.stringify(body);
    const req = http.request(url, { method, agent: false, headers: { ...headers, ...(data === null ? {} : { "Content-Type": "application/json" }) } }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (c) => (text += c));
      res.on("end", () => (res.statusCode === 200 ? resolve(JSON.parse(text)) : reject(new Error(`${method} ${url}: HTTP ${res.statusCode} ${text}`))));
    });
    req.on("error", reject);
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`${url}: no answer in ${timeoutMs / 1000} s`)));
    req.end(data ?? undefined);
  });
}

/** Waits (at most 10 minutes) until the pair from -> to of `game` has been generated once. */
async function generated(game, from, to) {
  const url = `${server.url}/v1/games/${game}/updates/${from}/${to}/generations`;
  for (const end = Date.now() + 600_000; Date.now() < end; ) {
    const g = await getJson(url, { Authorization: `Bearer ${token}` }).catch(() => null);
    if (g && g.count > 0) return;
    if (g?.failure) throw new Error(`${from} -> ${to}: ${g.failure.error}`);
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`${from} -> ${to} was not generated in 10 minutes`);
}

/**
 * Kind, executable bit and symlink target of every entry under root (contents: diff -r). A patch
 * keeps a file's executable bit, not its other permission bits (docs/FORMAT.md §2.1): a 0750
 * file is updated as 0755, which is not a wrong byte.
 */
function entries(root) {
  const out = new Map();
  const walk = (rel) => {
    for (const name of readdirSync(join(root, rel)).sort()) {
      const path = rel ? `${rel}/${name}` : name;
      const st = lstatSync(join(root, path));
      const kind = st.isSymbolicLink() ? `link -> ${readlinkSync(join(root, path))}` : st.isDirectory() ? "dir" : st.isFile() ? "file" : "other";
      out.set(path, `${kind} ${st.isFile() ? (st.mode & 0o111 ? "executable" : "not executable") : ""}`);
      if (st.isDirectory()) walk(path);
    }
  };
  walk("");
  return out;
}

/** Problems between OUT and the new build, or [] when byte-exact with the same kinds and executable bits. */
function compare(out, expected) {
  const problems = [];
  const d = spawnSync("diff", ["-r", "--no-dereference", "-q", expected, out], { encoding: "utf8" });
  if (d.status !== 0) problems.push(`diff -r: ${(d.stdout + d.stderr).trim().split("\n").slice(0, 5).join("; ")}`);
  const a = entries(out);
  const e = entries(expected);
  for (const [path, what] of e) if (a.get(path) !== what) problems.push(`${path}: ${a.get(path) ?? "missing"}, expected ${what}`);
  for (const path of a.keys()) if (!e.has(path)) problems.push(`${path}: unexpected`);
  return problems;
}

const server = await startWrangler({ port: PORT, args: LEVEL === null ? [] : ["--var", `PATCH_LEVEL:${Number(LEVEL)}`] });
const work = mkdtempSync(join(tmpdir(), "edgepatch-worker-corpus-"));
const rows = [];
try {
  for (const p of pairs) {
    if (Date.now() > DEADLINE) {
      rows.push({ ...p, status: "SKIPPED (time)" });
      continue;
    }
    const game = p.name.replace(/[^A-Za-z0-9._-]/g, "_").slice(0, 64);
    const builds = {};
    for (const v of ["old", "new"]) {
      if (p.kind === "tree") {
        builds[v] = realpathSync(join(p.dir, v));
      } else {
        // A one-file build; the file keeps its permission bits.
        builds[v] = join(work, p.name, v);
        mkdirSync(builds[v], { recursive: true });
        copyFileSync(join(p.dir, v), join(builds[v], p.name));
        chmodSync(join(builds[v], p.name), statSync(join(p.dir, v)).mode & 0o7777);
      }
    }
    const row = { ...p, newBytes: 0, files: 0 };
    try {
      for (const e of entries(builds.new).keys()) {
        const st = lstatSync(join(builds.new, e));
        if (st.isFile()) {
          row.newBytes += st.size;
          row.files++;
        }
      }
      // workerd's CPU (all its processes, user + system) over the publishes, then over the pair's
      // generation alone: both builds are published on no channel (nothing is pre-generated),
      // and the owner asks for old -> new, which generates it (transform phase included). Then
      // the channel "stable" moves to old and to new, so old -> new is released and `edgepatch
      // update` fetches it as a player does. The moves pre-generate _ -> old and _ -> new (full
      // builds from the empty one), which are waited for before the next pair, so that they never
      // run in another pair's window.
      const pids = workerdPids(server.pid);
      const cpu0 = cpuSeconds(pids);
      row.publishSeconds = ["old", "new"].map((v) => edgepatch(["publish", "--server", server.url, "--game", game, "--build", v, builds[v]]).seconds);
      const cpu1 = cpuSeconds(pids);
      await getJson(`${server.url}/v1/games/${game}/updates/old/new`, { Authorization: `Bearer ${token}` }, Math.max(1, DEADLINE - Date.now()));
      row.generationCpuSeconds = cpuSeconds(pids) - cpu1;
      row.publishCpuSeconds = cpu1 - cpu0;
      for (const build of ["old", "new"]) await jsonRequest("PUT", `${server.url}/v1/games/${game}/channels/stable`, { Authorization: `Bearer ${token}` }, { build });
      const out = join(work, `${p.name}-out`);
      const u = edgepatch(["update", "--server", server.url, "--game", game, "--from", "old", "--to", "new", "--public-key", publicKey, builds.old, out]);
      for (const build of ["old", "new"]) await generated(game, "_", build);
      row.updateSeconds = u.seconds;
      row.patchBytes = u.json.patch_bytes;
      row.manifestBytes = u.json.manifest_bytes;
      // Asked twice at most: right after a long generation the first request may stall under
      // wrangler dev (worker/README.md, "Known issues"); the second has been answered at once.
      const gensUrl = `${server.url}/v1/games/${game}/updates/old/new/generations`;
      const gens = await getJson(gensUrl, { Authorization: `Bearer ${token}` }).catch((e) => {
        console.error(`${p.name}: ${e.message}; asking again`);
        return getJson(gensUrl, { Authorization: `Bearer ${token}` });
      });
      row.generations = gens.count;
      row.generationSeconds = gens.runs[0]?.seconds;
      row.segments = gens.runs[0]?.segments;
      // What the generation read from R2 (MB): the new build, the old ranges, old files verified whole.
      const run = gens.runs[0] ?? {};
      if (run.newBytesRead !== undefined) row.reads = `${[run.newBytesRead, run.oldBytesRead, run.oldBytesVerified].map((b) => (b / 1e6).toFixed(0)).join(" / ")} (${run.r2Reads} reads)`;
      // The transform phase (worker/src/transform.ts): modules stored normalized, its seconds
      // (a fanned-out run reports only the count).
      const t = gens.runs[0]?.transform;
      row.normalized = t?.modules ?? gens.runs[0]?.transformedModules;
      row.transformSeconds = t?.seconds;
      row.problems = compare(out, builds.new);
      rmSync(out, { recursive: true, force: true });
      // The native CLI's patch of the same two builds, for the ratio.
      const cliPatch = join(work, `${p.name}.patch`);
      edgepatch(["diff", builds.old, builds.new, cliPatch]);
      row.cliPatchBytes = statSync(cliPatch).size;
      rmSync(cliPatch, { force: true });
      // Again, now that the patch exists: download, verify and apply alone.
      const again = edgepatch(["update", "--server", server.url, "--game", game, "--from", "old", "--to", "new", "--public-key", publicKey, builds.old, out]);
      row.againSeconds = again.seconds;
      row.problems.push(...compare(out, builds.new).map((x) => `second update: ${x}`));
      rmSync(out, { recursive: true, force: true });
      row.status = row.problems.length === 0 && u.json.signature_verified === true && again.json.signature_verified === true ? "OK" : "FAIL";
    } catch (e) {
      row.status = "FAIL";
      row.problems = [`${e.message ?? e}${e.cause ? ` (${e.cause.code ?? ""} ${e.cause.message ?? e.cause})` : ""}`];
    }
    rows.push(row);
    console.error(`${p.name}: ${row.status}${row.problems?.length ? ` (${row.problems.slice(0, 3).join("; ")})` : ""}`);
  }
} finally {
  server.stop();
  rmSync(work, { recursive: true, force: true });
}

const n = (x, d = 0) => (x === undefined ? "-" : x.toLocaleString("en-US", { minimumFractionDigits: d, maximumFractionDigits: d }));
console.log(`\n\`node bench/worker_corpus.mjs\` (wrangler dev on 127.0.0.1:${PORT}, PATCH_LEVEL ${LEVEL ?? "from wrangler.toml"}), ${new Date().toISOString()}\n`);
console.log("| pair | kind | files | new bytes | patch bytes served | CLI patch bytes | Worker / CLI | patch % of new | segments | R2 MB read, new / old / verified | wasm modules normalized | transform phase s | generation s (Worker) | workerd CPU s, publishes / the pair's generation | `edgepatch update` s | update again s (patch exists) | publish old / new s | result |");
console.log("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
for (const r of rows) {
  const pct = r.patchBytes === undefined ? "-" : ((100 * r.patchBytes) / r.newBytes).toFixed(2);
  const ratio = r.patchBytes === undefined || r.cliPatchBytes === undefined ? "-" : (r.patchBytes / r.cliPatchBytes).toFixed(3);
  console.log(`| ${r.name} | ${r.kind} | ${n(r.files)} | ${n(r.newBytes)} | ${n(r.patchBytes)} | ${n(r.cliPatchBytes)} | ${ratio} | ${pct} | ${n(r.segments)} | ${r.reads ?? "-"} | ${n(r.normalized)} | ${n(r.transformSeconds, 1)} | ${n(r.generationSeconds, 1)} | ${n(r.publishCpuSeconds, 1)} / ${n(r.generationCpuSeconds, 1)} | ${n(r.updateSeconds, 1)} | ${n(r.againSeconds, 2)} | ${r.publishSeconds ? r.publishSeconds.map((s) => s.toFixed(1)).join(" / ") : "-"} | ${r.status}${r.generations > 1 ? ` (${r.generations} generations)` : ""} |`);
}
const timed = rows.filter((r) => r.generationCpuSeconds !== undefined);
const [cpu, bytes] = timed.reduce(([c, b], r) => [c + r.generationCpuSeconds, b + r.newBytes], [0, 0]);
if (bytes > 0) console.log(`\nworkerd CPU of the pairs' generations, summed over ${timed.length} pairs: ${cpu.toFixed(1)} s for ${(bytes / 1e6).toFixed(1)} MB of new builds = ${((cpu / bytes) * 1e8).toFixed(1)} s per 100 MB`);
const failed = rows.filter((r) => r.status !== "OK");
for (const r of failed) console.log(`\n${r.name}: ${r.status}\n  ${(r.problems ?? []).slice(0, 20).join("\n  ")}`);
console.log(`\n${rows.length - failed.length} of ${rows.length} pairs byte-exact (contents, kinds, executable bits, symlink targets)`);
process.exit(failed.length ? 1 : 0);
