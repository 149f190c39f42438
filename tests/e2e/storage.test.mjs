// Browser end-to-end tests of how @edgepatch/web keeps builds and storage: the previous
// build kept for rollback(), plan(), the storage check before an update (QuotaError) and
// the full install when the server has no patch for the pair. Every test in each engine of
// tests/e2e/engines.mjs, real OPFS, real HTTP (web/scripts/serve.mjs) over the site
// web/scripts/build-all.sh made. The library is driven directly from the page (no demo UI).
// The quota case runs in Firefox only: its quota manager takes a fixed limit from a
// preference, so the browser itself reports a small quota; Chromium's DevTools quota
// override does not reach navigator.storage.estimate() here.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { ENGINES, engineTests, launch } from "./engines.mjs";
import { startServer } from "../../web/scripts/serve.mjs";

const repo = join(dirname(fileURLToPath(import.meta.url)), "../..");
const dist = join(repo, "web/dist");
const { publicKey, games: site } = JSON.parse(readFileSync(join(dist, "updates/site.json"), "utf8"));

let server;
before(async () => {
  server = await startServer({ root: dist });
});
after(async () => {
  await server?.close();
});

const descriptor = (from, to, game = "demo") => site[game].updates.find((u) => u.from === from && u.to === to);
const treeFile = (build, path) => readFileSync(join(dist, "trees/demo", build, path));

/**
 * A fresh profile and a page on the server's origin with the library loaded as `window.lib`
 * and an updater for "demo" as `window.game` (`options` added to its options), in the
 * test's engine (`firefoxPrefs`: Firefox preferences). `navigator.storage.persist` is
 * wrapped to count its calls.
 */
async function openPage(t, { firefoxPrefs = {}, options = {}, game = "demo" } = {}) {
  const browser = await launch(engine, { firefoxPrefs });
  t.after(() => browser.close());
  const { page } = browser;
  await page.goto(`${server.url}demo/`);
  await page.evaluate(async ([key, options, game]) => {
    window.persistCalls = 0;
    const persist = navigator.storage.persist.bind(navigator.storage);
    navigator.storage.persist = () => (window.persistCalls++, persist());
    const lib = await import("/lib/edgepatch-web.js");
    window.lib = lib;
    window.game = new lib.GameUpdater({ baseUrl: "/updates/", game, workerUrl: "/lib/edgepatch-worker.js", publicKeys: [key], ...options });
  }, [publicKey, options, game]);
  return { page };
}

/** Runs `expr` (an async function body over `game` and `lib`) in the page; errors come back as {error: {code, message, ...}}. */
function run(page, body, arg) {
  return page.evaluate(
    async ([body, arg]) => {
      try {
        return { value: await new Function("game", "lib", "arg", `return (async () => { ${body} })();`)(window.game, window.lib, arg) };
      } catch (e) {
        return { error: { code: e.code, name: e.name, message: e.message, needed: e.needed, available: e.available } };
      }
    },
    [body, arg],
  );
}

async function buildNames(page) {
  return (await run(page, `
    const root = await navigator.storage.getDirectory();
    const builds = await (await (await root.getDirectoryHandle("edgepatch")).getDirectoryHandle("demo")).getDirectoryHandle("builds");
    const out = []; for await (const n of builds.keys()) out.push(n); return out.sort();`)).value;
}

/** The engine the running test uses (tests run one at a time). */
let engine = ENGINES[0];

/** Registers `body` as one test per engine (`only`: the engines it applies to). */
function engineTest(name, body, only = null) {
  engineTests(
    name,
    (t, e) => {
      engine = e;
      return body(t);
    },
    { engines: only },
  );
}

const readText = (page, path) => run(page, `return new TextDecoder().decode(await game.readFile(arg));`, path);

engineTest("the previous build is kept after an update, and rollback() switches back and forth", async (t) => {
  const { page } = await openPage(t);
  assert.deepEqual((await run(page, `return (await game.install("v1")).previous;`)).value, null);
  const r = (await run(page, `return await game.update("v1", "v2");`)).value;
  assert.equal(r.previous, "v1");
  assert.equal(r.fullInstall, false);
  assert.deepEqual(await buildNames(page), ["v1", "v2"]);
  assert.equal((await run(page, `return await game.previous();`)).value, "v1");

  assert.deepEqual((await run(page, `return await game.rollback();`)).value, { from: "v2", to: "v1" });
  assert.equal((await run(page, `return await game.current();`)).value, "v1");
  assert.equal((await run(page, `return await game.previous();`)).value, "v2");
  assert.equal((await readText(page, "index.html")).value, treeFile("v1", "index.html").toString());

  // Back to v2 by rollback, then to v1 and v2 again by updates: the previous build of the
  // same name as the target is released and rewritten, never left half-written as previous.
  assert.deepEqual((await run(page, `return await game.rollback();`)).value, { from: "v1", to: "v2" });
  assert.equal((await readText(page, "index.html")).value, treeFile("v2", "index.html").toString());
  assert.equal((await run(page, `return (await game.rollback()).to;`)).value, "v1");
  const again = (await run(page, `return await game.update("v1", "v2");`)).value;
  assert.equal(again.previous, "v1");
  assert.deepEqual(await buildNames(page), ["v1", "v2"]);
  assert.equal((await readText(page, "index.html")).value, treeFile("v2", "index.html").toString());
});

engineTest("rollback() refuses when there is no previous build, or when the previous build was damaged", async (t) => {
  const { page } = await openPage(t);
  await run(page, `await game.install("v1");`);
  const none = await run(page, `return await game.rollback();`);
  assert.equal(none.error?.code, "state", JSON.stringify(none));
  assert.match(none.error.message, /no previous build/);

  await run(page, `await game.update("v1", "v2");`);
  // A file of the kept build shrinks (storage trouble): rollback checks before it switches.
  await run(page, `
    const root = await navigator.storage.getDirectory();
    const f = await (await (await (await (await (await root.getDirectoryHandle("edgepatch")).getDirectoryHandle("demo")).getDirectoryHandle("builds")).getDirectoryHandle("v1")).getDirectoryHandle("files")).getFileHandle("game.js");
    const w = await f.createWritable({ keepExistingData: true }); await w.truncate(10); await w.close();`);
  const damaged = await run(page, `return await game.rollback();`);
  assert.equal(damaged.error?.code, "integrity", JSON.stringify(damaged));
  assert.match(damaged.error.message, /game\.js is 10 bytes/);
  assert.equal((await run(page, `return await game.current();`)).value, "v2");
});

engineTest("plan() reports the download, the writes and the space from the signed documents", async (t) => {
  const { page } = await openPage(t);
  await run(page, `await game.install("v1");`);
  const p = (await run(page, `return await game.plan("v1", "v2");`)).value;
  const d = descriptor("v1", "v2");
  assert.equal(p.patchSize, d.patchSize);
  assert.equal(p.newBytesTotal, d.newBytes);
  assert.equal(p.bytesToWrite, d.newBytes + d.manifestSize);
  assert.equal(p.fullInstall, false);
  assert.equal(p.fits, true);
  assert.ok(p.available > p.spaceNeeded, JSON.stringify(p));
  assert.equal(p.keyId, d.keyId);
  assert.equal((await run(page, `return await game.current();`)).value, "v1", "plan() changes nothing");
});

engineTest("an update that does not fit the quota is refused before a byte is written, naming the bytes (Firefox)", async (t) => {
  // A 1500 KiB quota (Firefox counts about 480 KiB of its own in a fresh profile): v1 (543 KB)
  // installs, v2 (549 KB more: v1 is kept until the switch) does not fit.
  const { page } = await openPage(t, { firefoxPrefs: { "dom.quotaManager.temporaryStorage.fixedLimit": 1500 } });
  assert.equal((await run(page, `return (await navigator.storage.estimate()).quota;`)).value, 1500 * 1024);
  const installed = await run(page, `return (await game.install("v1")).to;`);
  assert.equal(installed.value, "v1", JSON.stringify(installed));
  const d = descriptor("v1", "v2");
  const p = (await run(page, `return await game.plan("v1", "v2");`)).value;
  assert.equal(p.fits, false, JSON.stringify(p));
  assert.equal(p.spaceNeeded, d.newBytes + d.manifestSize);
  const r = await run(page, `return await game.update("v1", "v2");`);
  assert.equal(r.error?.code, "quota", JSON.stringify(r));
  assert.equal(r.error.name, "QuotaError");
  assert.equal(r.error.needed, d.newBytes + d.manifestSize);
  assert.ok(r.error.available < r.error.needed, JSON.stringify(r.error));
  assert.match(r.error.message, new RegExp(`needs ${r.error.needed} bytes of storage, the browser reports ${r.error.available} free`));
  assert.equal((await run(page, `return await game.current();`)).value, "v1");
  assert.deepEqual(await buildNames(page), ["v1"], "nothing of v2 was written");
  assert.equal((await readText(page, "index.html")).value, treeFile("v1", "index.html").toString());
}, ["firefox"]);

engineTest("an update whose scratch space does not fit is refused once the patch's header is read, naming the bytes (Firefox)", async (t) => {
  // arcade's logic.wasm is stored transformed in the field-split layout: the update writes the
  // split old module and the normalized new one to a scratch file beside the build.
  const { page } = await openPage(t, { game: "arcade", firefoxPrefs: { "dom.quotaManager.temporaryStorage.fixedLimit": 4096 } });
  assert.equal((await run(page, `return (await game.install("v1")).to;`)).value, "v1");
  const d = descriptor("v1", "v2", "arcade");
  const build = d.newBytes + d.manifestSize;
  const oldModule = readFileSync(join(dist, "trees/arcade/v1/logic.wasm")).length;
  const newModule = readFileSync(join(dist, "trees/arcade/v2/logic.wasm")).length;
  // A file of the page's own leaves room for the build and half the scratch space.
  const fill = async (bytes) =>
    run(page, `const root = await navigator.storage.getDirectory();
      const w = await (await root.getFileHandle("filler", { create: true })).createWritable();
      await w.write(new Uint8Array(arg)); await w.close();
      const e = await navigator.storage.estimate(); return e.quota - e.usage;`, bytes);
  const free = (await fill(0)).value;
  const left = (await fill(free - build - Math.floor((oldModule + newModule) / 2))).value;
  assert.ok(left > build && left < build + oldModule + newModule, `${left} free, the build needs ${build}`);
  const r = await run(page, `return await game.update("v1", "v2");`);
  assert.equal(r.error?.code, "quota", JSON.stringify(r));
  assert.match(r.error.message, /with \d+ bytes of scratch space/);
  // The scratch space: the old module split, and the normalized new one (about its size).
  const scratch = r.error.needed - build;
  assert.ok(scratch > oldModule && scratch < oldModule + 2 * newModule, `scratch ${scratch}: ${JSON.stringify(r.error)}`);
  assert.equal((await run(page, `return await game.current();`)).value, "v1");
  // With the filler gone the same update goes through: space was all it lacked.
  await fill(0);
  assert.equal((await run(page, `return (await game.update("v1", "v2")).to;`)).value, "v2");
}, ["firefox"]);

engineTest("with no patch for the pair on the server, the update installs the new build whole", async (t) => {
  const { page } = await openPage(t);
  await run(page, `await game.install("v1");`);
  // The site dropped its v1 -> v2 patch (a static site keeps the last N builds' patches).
  server.faults.replace.set("/updates/v1/games/demo/updates/v1/v2", join(dist, "no-such-file"));
  t.after(() => server.faults.replace.clear());
  const p = (await run(page, `return await game.plan("v1", "v2");`)).value;
  assert.equal(p.fullInstall, true);
  assert.equal(p.patchSize, descriptor("_", "v2").patchSize);
  const r = (await run(page, `return await game.update("v1", "v2");`)).value;
  assert.equal(r.fullInstall, true);
  assert.equal(r.patchSize, descriptor("_", "v2").patchSize);
  assert.equal(r.previous, "v1");
  for (const path of ["index.html", "game.js", "game.wasm", "assets/img/title.png"]) {
    const bytes = (await run(page, `return Array.from(await game.readFile(arg));`, path)).value;
    assert.ok(Buffer.from(bytes).equals(treeFile("v2", path)), `${path} is v2's`);
  }
});

engineTest("the library asks for persistent storage once, unless told not to", async (t) => {
  const { page } = await openPage(t);
  assert.equal(typeof (await run(page, `return (await game.storage()).quota;`)).value, "number");
  await run(page, `await game.install("v1"); await game.update("v1", "v2");`);
  assert.equal((await run(page, `return window.persistCalls;`)).value, 1);

  const { page: quiet } = await openPage(t, { options: { persistentStorage: false } });
  await run(quiet, `await game.install("v1");`);
  assert.equal((await run(quiet, `return window.persistCalls;`)).value, 0);
});
