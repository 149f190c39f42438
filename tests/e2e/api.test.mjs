// Browser end-to-end tests of @edgepatch/web's API as a page uses it: an AbortSignal (already
// aborted, or aborted mid-update), progress in bytes written of the build's total, and errors
// that name the file they are about (a wrong old build). Every test in each engine of
// tests/e2e/engines.mjs, real OPFS, real HTTP (web/scripts/serve.mjs) over the site
// web/scripts/build-all.sh --big made. The library is driven directly from the page.
// The event map's types are tested apart: web/test-types (tsc --strict).
import { after, before } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { ENGINES, engineTests, launch } from "./engines.mjs";
import { startServer } from "../../web/scripts/serve.mjs";

const repo = join(dirname(fileURLToPath(import.meta.url)), "../..");
const dist = join(repo, "web/dist");
const { publicKey, games: site } = JSON.parse(readFileSync(join(dist, "updates/site.json"), "utf8"));
const MiB = 1 << 20;

let server;
before(async () => {
  server = await startServer({ root: dist });
});
after(async () => {
  await server?.close();
});

const descriptor = (game, from, to) => site[game].updates.find((u) => u.from === from && u.to === to);
const treeFile = (game, build, path) => readFileSync(join(dist, "trees", game, build, path));
const sha256 = (bytes) => createHash("sha256").update(bytes).digest("hex");

/** The engine the running test uses (tests run one at a time), and the `opfsAccess` it forces (null: "auto"). */
let engine = ENGINES[0];
let opfsAccess = null;

/**
 * Registers `body` as one test per engine; `{ accessModes: true }`: in Chromium and Firefox
 * also with writable streams forced (the way WebKitGTK writes, web/src/build-files.ts).
 */
function engineTest(name, body, { accessModes = false } = {}) {
  engineTests(
    name,
    (t, e, mode) => {
      engine = e;
      opfsAccess = mode;
      return body(t);
    },
    { variants: (e) => [null, ...(accessModes && e !== "webkit" ? ["writable-streams"] : [])], label: (mode) => `opfsAccess ${mode}` },
  );
}

/**
 * A fresh profile and a page on the server's origin with the library as `window.lib`, an
 * updater for `game` as `window.game`, and `window.newUpdater()` making another one.
 */
async function openPage(t, game) {
  const browser = await launch(engine);
  t.after(() => browser.close());
  const { page } = browser;
  await page.goto(`${server.url}demo/`);
  await page.evaluate(async ([key, game, opfsAccess]) => {
    const lib = await import("/lib/edgepatch-web.js");
    window.lib = lib;
    const access = opfsAccess ? { opfsAccess } : {};
    window.newUpdater = () => new lib.GameUpdater({ baseUrl: "/updates/", game, workerUrl: "/lib/edgepatch-worker.js", publicKeys: [key], ...access });
    window.game = window.newUpdater();
  }, [publicKey, game, opfsAccess]);
  return page;
}

/** Runs `body` (an async function body over `game`, `lib` and `arg`) in the page; errors come back as {error: {...}}. */
function run(page, body, arg) {
  return page.evaluate(
    async ([body, arg]) => {
      try {
        return { value: await new Function("game", "lib", "arg", `return (async () => { ${body} })();`)(window.game, window.lib, arg) };
      } catch (e) {
        return { error: { code: e.code, name: e.name, message: e.message, resumable: e.resumable, path: e.path, isEdgepatch: e instanceof window.lib.EdgepatchError } };
      }
    },
    [body, arg],
  );
}

/** What OPFS holds for `game`: null when its directory does not exist, else its top-level names, builds, staging directories and resume record. */
async function opfs(page, game) {
  return (await run(page, `
    const root = await navigator.storage.getDirectory();
    let g;
    try { g = await (await root.getDirectoryHandle("edgepatch")).getDirectoryHandle(arg); } catch { return null; }
    const names = async (d) => { const out = []; for await (const n of d.keys()) out.push(n); return out.sort(); };
    const sub = async (n) => { try { return await names(await g.getDirectoryHandle(n)); } catch { return []; } };
    let update = null;
    try { update = JSON.parse(await (await (await g.getFileHandle("update.json")).getFile()).text()); } catch {}
    return { top: await names(g), builds: await sub("builds"), staging: await sub("staging"), update };`, game)).value;
}

/** The SHA-256 of a file of the current build, read through the library. */
async function currentSha(page, path) {
  return (await run(page, `
    const bytes = await game.readFile(arg);
    return [...new Uint8Array(await crypto.subtle.digest("SHA-256", bytes))].map((x) => x.toString(16).padStart(2, "0")).join("");`, path)).value;
}

/** Replaces (or truncates, `bytes` null and `truncate` set) a file of the installed build `build` straight in OPFS. */
async function alterStored(page, game, build, path, { bytes = null, truncate = null }) {
  const r = await run(page, `
    let d = await (await (await (await (await navigator.storage.getDirectory()).getDirectoryHandle("edgepatch")).getDirectoryHandle(arg.game)).getDirectoryHandle("builds")).getDirectoryHandle(arg.build);
    d = await d.getDirectoryHandle("files");
    const parts = arg.path.split("/");
    for (const p of parts.slice(0, -1)) d = await d.getDirectoryHandle(p);
    const fh = await d.getFileHandle(parts.at(-1));
    const w = await fh.createWritable({ keepExistingData: arg.truncate !== null });
    if (arg.truncate !== null) await w.truncate(arg.truncate);
    else await w.write(new Uint8Array(arg.bytes));
    await w.close();`, { game, build, path, bytes: bytes && [...bytes], truncate });
  assert.equal(r.error, undefined, JSON.stringify(r.error));
}

engineTest("an AbortSignal already aborted rejects at once with code \"aborted\": nothing is fetched or written", async (t) => {
  const page = await openPage(t, "demo");
  server.resetStats();
  // Nothing installed: the install is refused before any request.
  const r = await run(page, `
    const ac = new AbortController();
    ac.abort();
    let settled = null;
    const p = game.install("v1", { signal: ac.signal }).then(() => "resolved", (e) => e);
    p.then((v) => { settled = v; });
    // At once: settled after a few microtasks, before any message to the worker could come back.
    for (let i = 0; i < 5; i++) await Promise.resolve();
    const e = settled;
    return { settled: e !== null, code: e?.code, name: e?.name, isError: e instanceof lib.EdgepatchError, message: e?.message };`);
  assert.equal(r.value?.settled, true, `rejected at once: ${JSON.stringify(r)}`);
  assert.equal(r.value.code, "aborted", JSON.stringify(r));
  assert.equal(r.value.name, "AbortedError");
  assert.equal(r.value.isError, true);
  assert.deepEqual(server.stats.requests.filter((q) => q.path.startsWith("/updates/")), [], "no request for an update document or patch");
  assert.equal(await opfs(page, "demo"), null, "nothing of the game was written");

  // Installed v1, an aborted update to v2: v1 stays, nothing fetched, no resume record or staging.
  assert.equal((await run(page, `return (await game.install("v1")).to;`)).value, "v1");
  const before = await opfs(page, "demo");
  server.resetStats();
  const u = await run(page, `const ac = new AbortController(); ac.abort(new Error("user cancelled")); return await game.update("v1", "v2", { signal: ac.signal });`);
  assert.equal(u.error?.code, "aborted", JSON.stringify(u));
  assert.equal(server.stats.requests.filter((q) => q.path.includes("/patches/")).length, 0, "no patch request");
  assert.deepEqual(server.stats.requests, [], "no request at all");
  assert.deepEqual(await opfs(page, "demo"), before, "OPFS unchanged");
  assert.equal((await run(page, `return await game.current();`)).value, "v1");
});

engineTest("aborting mid-update rejects with \"aborted\", resumable; a later update resumes and completes byte-exact", async (t) => {
  const page = await openPage(t, "big");
  assert.equal((await run(page, `return (await game.install("v1")).to;`)).value, "v1");

  // Aborted right after the call: the worker never gets to work on it.
  const early = await run(page, `const ac = new AbortController(); const p = game.update("v1", "v2", { signal: ac.signal }); ac.abort(); return await p;`);
  assert.equal(early.error?.code, "aborted", JSON.stringify(early));

  // Patch responses stop (the connection open) at 60%: the update waits there, mid-flight,
  // after resume points were persisted.
  const d = descriptor("big", "v1", "v2");
  server.faults.stallPatchAt = Math.floor(d.patchSize * 0.6);
  t.after(() => { server.faults.stallPatchAt = null; });
  await run(page, `
    window.ac = new AbortController();
    window.events = [];
    window.outcome = null;
    game.update("v1", "v2", { signal: window.ac.signal, onProgress: (p) => window.events.push(p) })
      .then((v) => { window.outcome = { value: v }; }, (e) => { window.outcome = { error: { code: e.code, name: e.name, resumable: e.resumable, message: e.message } }; });`);
  await page.waitForFunction(() => window.events.some((p) => p.segmentsDone >= 1) || window.outcome !== null, null, { timeout: 60_000 });
  assert.equal(await page.evaluate(() => window.outcome), null, "still updating");
  const writtenAtAbort = await page.evaluate(() => window.events.at(-1).bytesWritten);
  assert.ok(writtenAtAbort > 0 && writtenAtAbort < d.newBytes, `bytes written before the abort: ${writtenAtAbort}`);
  await page.evaluate(() => window.ac.abort());
  await page.waitForFunction(() => window.outcome !== null, null, { timeout: 30_000 });
  const outcome = await page.evaluate(() => window.outcome);
  assert.equal(outcome.error?.code, "aborted", JSON.stringify(outcome));
  assert.equal(outcome.error.name, "AbortedError");
  assert.equal(outcome.error.resumable, true, "a resume point was persisted: the update can continue");
  const pending = (await run(page, `return await game.pending();`)).value;
  assert.ok(pending && pending.to === "v2" && pending.segmentsDone >= 1, JSON.stringify(pending));
  assert.equal((await run(page, `return await game.current();`)).value, "v1", "v1 stays current");

  // Later, the connection fine: the same call continues from the resume point.
  server.faults.stallPatchAt = null;
  const r = await run(page, `
    const events = [];
    const result = await game.update("v1", "v2", { onProgress: (p) => events.push(p) });
    return { result, first: events[0], last: events.at(-1) };`);
  assert.equal(r.error, undefined, JSON.stringify(r.error));
  assert.equal(r.value.result.resumed, true);
  assert.equal(r.value.result.resumedFrom, pending.patchOffset);
  // Progress counts what was written before the abort: it starts there, not at 0.
  assert.ok(r.value.first.bytesWritten > 0, `first event of the resumed update: ${r.value.first.bytesWritten} bytes written`);
  assert.equal(r.value.last.bytesWritten, d.newBytes);
  assert.equal((await run(page, `return await game.current();`)).value, "v2");
  assert.equal(await currentSha(page, "data/big.bin"), sha256(treeFile("big", "v2", "data/big.bin")), "data/big.bin byte-exact");
  assert.equal(await currentSha(page, "version.txt"), sha256(treeFile("big", "v2", "version.txt")), "version.txt byte-exact");
  assert.equal((await opfs(page, "big")).update, null, "no resume record left");
}, { accessModes: true });

engineTest("progress events rise steadily in bytes written to the build's total, with a write rate", async (t) => {
  const page = await openPage(t, "big");
  assert.equal((await run(page, `return (await game.install("v1")).to;`)).value, "v1");
  const d = descriptor("big", "v1", "v2");
  const r = await run(page, `
    const events = [];
    const fromCallback = [];
    const listener = (e) => events.push(e.detail);
    game.addEventListener("progress", listener);
    try {
      await game.update("v1", "v2", { onProgress: (p) => fromCallback.push(p.bytesWritten) });
    } finally {
      game.removeEventListener("progress", listener);
    }
    return { events, fromCallback };`);
  assert.equal(r.error, undefined, JSON.stringify(r.error));
  const { events, fromCallback } = r.value;
  const written = events.map((p) => p.bytesWritten);
  t.diagnostic(`events (phase bytesWritten writeBytesPerSecond): ${events.map((p) => `${p.phase[0]} ${p.bytesWritten} ${Math.round(p.writeBytesPerSecond)}`).join(", ")}`);
  assert.deepEqual(fromCallback, written, "onProgress sees the events the listeners see");
  for (const p of events) {
    assert.equal(p.bytesTotal, d.newBytes, "bytesTotal is the new build's size");
    assert.equal(p.newBytesTotal, d.newBytes);
    assert.equal(p.newBytesWritten, p.bytesWritten, "newBytesWritten (kept) is bytesWritten");
    assert.ok(Number.isFinite(p.writeBytesPerSecond) && p.writeBytesPerSecond >= 0, JSON.stringify(p));
  }
  for (let i = 1; i < written.length; i++) assert.ok(written[i] >= written[i - 1], `bytesWritten never goes back: ${written.join(", ")}`);
  assert.equal(written[0], 0);
  assert.equal(written.at(-1), d.newBytes, "ends at the total");
  assert.equal(events.at(-1).phase, "done");
  // Steadily: several values between 0 and the end, and no step larger than a few MiB
  // (the patch is 4 segments of ~1 MiB each; the build 16 MiB).
  const between = new Set(written.filter((w) => w > 0 && w < d.newBytes));
  assert.ok(between.size >= 5, `intermediate values: ${[...between].join(", ")}`);
  const steps = written.slice(1).map((w, i) => w - written[i]);
  assert.ok(Math.max(...steps) <= 4 * MiB, `largest step ${Math.max(...steps)} bytes: ${written.join(", ")}`);
  assert.ok(events.some((p) => p.writeBytesPerSecond > 0), "a write rate is reported");
  t.diagnostic(`${events.length} events, ${between.size} values between 0 and ${d.newBytes}; largest step ${Math.max(...steps)} B`);
  assert.equal(await currentSha(page, "data/big.bin"), sha256(treeFile("big", "v2", "data/big.bin")));
}, { accessModes: true });

engineTest("an update whose patch needs format features the library does not read is refused before the patch is fetched", async (t) => {
  const page = await openPage(t, "demo");
  assert.equal((await run(page, `return (await game.install("v1")).to;`)).value, "v1");
  // The descriptor as a site for newer clients would serve it (readerNeeds is unsigned).
  const path = "/updates/v1/games/demo/updates/v1/v2";
  const doc = JSON.parse(readFileSync(join(dist, path), "utf8"));
  doc.readerNeeds = "8000000000000001";
  const file = join(tmpdir(), `edgepatch-newer-reader-${process.pid}.json`);
  writeFileSync(file, JSON.stringify(doc));
  server.faults.replace.set(path, file);
  t.after(() => server.faults.replace.delete(path));
  server.resetStats();
  const u = await run(page, `return await game.update("v1", "v2");`);
  assert.equal(u.error?.code, "protocol", JSON.stringify(u));
  assert.match(u.error.message, /does not read .*newer version/, u.error.message);
  assert.equal(server.stats.requests.filter((q) => q.path.includes("/patches/")).length, 0, "no patch request");
  assert.equal((await run(page, `return await game.current();`)).value, "v1");
});

engineTest("a wrong old build (a stored file altered) gives an error whose path names that file", async (t) => {
  const page = await openPage(t, "demo");
  assert.equal((await run(page, `return (await game.install("v1")).to;`)).value, "v1");
  const original = treeFile("demo", "v1", "game.js");

  // Same size, other bytes: the patch, made for v1's game.js, cannot rebuild v2 from it.
  const altered = Buffer.from(original);
  for (let i = 0; i < altered.length; i++) altered[i] ^= 0x5a;
  await alterStored(page, "demo", "v1", "game.js", { bytes: altered });
  const a = await run(page, `return await game.update("v1", "v2");`);
  assert.ok(a.error, JSON.stringify(a));
  assert.ok(["integrity", "patch"].includes(a.error.code), JSON.stringify(a.error));
  assert.equal(a.error.isEdgepatch, true);
  assert.equal(a.error.path, "game.js", JSON.stringify(a.error));
  assert.match(a.error.message, /game\.js/);
  t.diagnostic(a.error.message);
  assert.equal((await run(page, `return await game.current();`)).value, "v1");
  assert.deepEqual((await opfs(page, "demo")).builds, ["v1"], "nothing of v2 kept");

  // Another size: the file named again.
  await alterStored(page, "demo", "v1", "game.js", { bytes: original });
  await alterStored(page, "demo", "v1", "data/levels.json", { truncate: 100 });
  const b = await run(page, `return await game.update("v1", "v2");`);
  assert.ok(["integrity", "patch"].includes(b.error?.code), JSON.stringify(b));
  assert.equal(b.error.path, "data/levels.json", JSON.stringify(b.error));
  assert.match(b.error.message, /data\/levels\.json/);
  t.diagnostic(b.error.message);

  // Put back as installed, the update goes through.
  await alterStored(page, "demo", "v1", "data/levels.json", { bytes: treeFile("demo", "v1", "data/levels.json") });
  assert.equal((await run(page, `return (await game.update("v1", "v2")).to;`)).value, "v2");
  assert.equal(await currentSha(page, "game.js"), sha256(treeFile("demo", "v2", "game.js")));
}, { accessModes: true });
