// The playable fixture game (fixtures/arcade) run from OPFS through the library's Service
// Worker (web/src/service-worker.ts), in every engine of tests/e2e/engines.mjs, real OPFS,
// real HTTP (web/scripts/serve.mjs) over the site web/scripts/build-all.sh made: the page
// installs arcade v1 with GameUpdater, registers the Service Worker for /play/ and opens the
// game in a frame; the game loads its level (a symlink), sprite, wasm and precompressed data
// by URL from the installed build.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { gunzipSync } from "node:zlib";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { ENGINES, engineTests, launch } from "./engines.mjs";
import { startServer } from "../../web/scripts/serve.mjs";

const repo = join(dirname(fileURLToPath(import.meta.url)), "../..");
const dist = join(repo, "web/dist");
const { publicKey, games: site } = JSON.parse(readFileSync(join(dist, "updates/site.json"), "utf8"));
const tree = (build, path, game = "arcade") => readFileSync(join(dist, "trees", game, build, path));

let server;
before(async () => {
  server = await startServer({ root: dist });
});
after(async () => {
  await server?.close();
});

let engine = ENGINES[0];
function engineTest(name, body) {
  engineTests(name, (t, e) => {
    engine = e;
    return body(t);
  });
}

/** A fresh browser on the server's origin with `game` (arcade) v1 installed and the game Service Worker active for /play/. */
async function portal(t, game = "arcade") {
  const b = await launch(engine);
  t.after(() => b.close());
  await b.goto(`${server.url}demo/`);
  await b.evaluate(async ([key, game]) => {
    const lib = await import("/lib/edgepatch-web.js");
    window.game = new lib.GameUpdater({ baseUrl: "/updates/", game, workerUrl: "/lib/edgepatch-worker.js", publicKeys: [key] });
    await window.game.install("v1");
    await lib.registerGameServiceWorker("/lib/edgepatch-sw.js", { scope: "/play/" });
  }, [publicKey, game]);
  return b;
}

/** Opens (or reloads) the game (arcade) in the frame #arcade-frame and waits until it has loaded everything. */
async function play(b, { reload = false, game = "arcade" } = {}) {
  await b.evaluate(([reload, game]) => {
    window.gameReady = new Promise((resolve) => {
      let f = document.getElementById("arcade-frame");
      if (!f) {
        f = document.createElement("iframe");
        f.id = "arcade-frame";
        f.width = "500";
        f.height = "360";
        document.body.append(f);
      }
      f.onload = () => resolve();
      if (reload) f.contentWindow.location.reload();
      else f.src = `/play/${game}/index.html`;
    });
  }, [reload, game]);
  await b.evaluate(() => window.gameReady);
  await b.waitFor(() => {
    const a = document.getElementById("arcade-frame").contentWindow.arcade;
    return a && (a.error || (a.version && a.wasmOk && a.assetsLoaded));
  }, null, 30_000);
  return b.evaluate(() => ({ ...document.getElementById("arcade-frame").contentWindow.arcade }));
}

/** fetch() from inside the game's frame (its client, so its pinned build), summarized. */
function fetchInGame(b, url, init = {}) {
  return b.evaluate(
    async ([url, init]) => {
      const res = await document.getElementById("arcade-frame").contentWindow.fetch(url, init);
      const body = new Uint8Array(await res.arrayBuffer());
      return {
        status: res.status,
        type: res.headers.get("content-type"),
        length: res.headers.get("content-length"),
        range: res.headers.get("content-range"),
        etag: res.headers.get("etag"),
        build: res.headers.get("x-edgepatch-build"),
        coding: res.headers.get("x-edgepatch-content-encoding"),
        body: Array.from(body),
      };
    },
    [url, init],
  );
}

engineTest("arcade v1 plays from OPFS through the Service Worker: MIME, ranges, HEAD, ETag, links, precompressed data, 404s", async (t) => {
  const b = await portal(t);
  const v1 = await play(b);
  assert.equal(v1.error, null, v1.error);
  assert.deepEqual([v1.version, v1.title, v1.level, v1.wasmOk, v1.assetsLoaded, v1.bonus], ["1", "Arcade v1", "Meadow", true, true, 10]);

  const wasm = await fetchInGame(b, "logic.wasm");
  assert.equal(wasm.type, "application/wasm");
  assert.ok(Buffer.from(wasm.body).equals(tree("v1", "logic.wasm")));
  const game = tree("v1", "game.js");
  const part = await fetchInGame(b, "game.js", { headers: { Range: "bytes=10-29" } });
  assert.equal(part.status, 206);
  assert.equal(part.range, `bytes 10-29/${game.length}`);
  assert.ok(Buffer.from(part.body).equals(game.subarray(10, 30)));
  const tail = await fetchInGame(b, "game.js", { headers: { Range: "bytes=-5" } });
  assert.ok(Buffer.from(tail.body).equals(game.subarray(game.length - 5)));
  const outside = await fetchInGame(b, "game.js", { headers: { Range: `bytes=${game.length}-` } });
  assert.equal(outside.status, 416);
  assert.equal(outside.range, `bytes */${game.length}`);
  const head = await fetchInGame(b, "game.js", { method: "HEAD" });
  assert.deepEqual([head.status, head.length, head.body.length], [200, String(game.length), 0]);
  const full = await fetchInGame(b, "game.js");
  assert.match(full.etag, /^"[0-9a-f]{64}"$/);
  const again = await fetchInGame(b, "game.js", { headers: { "If-None-Match": full.etag } });
  assert.equal(again.status, 304);
  const data = await fetchInGame(b, "Build/data.json.gz");
  assert.equal(data.type, "application/json");
  assert.deepEqual(JSON.parse(Buffer.from(data.body).toString()), { title: "Arcade v1", version: "1" });
  const link = await fetchInGame(b, "levels/current.json");
  assert.equal(JSON.parse(Buffer.from(link.body).toString()).name, "Meadow", "the symlink serves its target");
  assert.equal((await fetchInGame(b, "no-such-file.txt")).status, 404);
  // (%2e%2e is a dot segment to URL parsers already; an encoded slash reaches the worker.)
  assert.equal((await fetchInGame(b, "..%2F..%2Fdemo%2Findex.html")).status, 404, "encoded traversal");
  assert.equal((await fetchInGame(b, "/play/demo/index.html")).status, 404, "a game not installed");
});

engineTest("a build stored decoded (site add --store-decoded): the game loads Build/data.json.gz and, as Unity's loader does, instantiates Build/logic.wasm.br through the Service Worker from the decoded files, before and after an update", async (t) => {
  const game = "arcade-decoded";
  const b = await portal(t, game);
  for (const [v, version, bonus] of [["v1", "1", 10], ["v2", "2", 25]]) {
    if (v === "v2") assert.equal((await b.evaluate(() => window.game.update("v1", "v2"))).to, "v2");
    const run = await play(b, { game, reload: v === "v2" });
    assert.equal(run.error, null, run.error);
    assert.deepEqual([run.version, run.wasmOk, run.assetsLoaded, run.bonus], [version, true, true, bonus]);
    // What the library stored is the decoded content the signed manifest lists.
    const stored = Buffer.from(await b.evaluate(async () => Array.from(new Uint8Array(await window.game.readFile("Build/data.json.gz")))));
    assert.deepEqual(JSON.parse(stored.toString()), JSON.parse(gunzipSync(tree(v, "Build/data.json.gz", game)).toString()));
    const storedWasm = Buffer.from(await b.evaluate(async () => Array.from(new Uint8Array(await window.game.readFile("Build/logic.wasm.br")))));
    assert.ok(storedWasm.equals(tree(v, "logic.wasm", game)), "the module is stored decoded");
    // Served as a web server with Content-Encoding would deliver them.
    const data = await fetchInGame(b, "Build/data.json.gz");
    assert.deepEqual([data.status, data.type, data.coding, data.build], [200, "application/json", "gzip", v]);
    assert.ok(Buffer.from(data.body).equals(stored));
    const wasm = await fetchInGame(b, "Build/logic.wasm.br");
    assert.deepEqual([wasm.status, wasm.type, wasm.coding], [200, "application/wasm", "br"]);
    assert.ok(Buffer.from(wasm.body).equals(tree(v, "logic.wasm", game)));
    const part = await fetchInGame(b, "Build/logic.wasm.br", { headers: { Range: "bytes=0-3" } });
    assert.deepEqual([part.status, part.body], [206, [0x00, 0x61, 0x73, 0x6d]]);
    const exported = await b.evaluate(async () => {
      const w = document.getElementById("arcade-frame").contentWindow;
      const m = await w.WebAssembly.instantiateStreaming(w.fetch("Build/logic.wasm.br"));
      return m.instance.exports.bonus();
    });
    assert.equal(exported, bonus);
  }
});

engineTest("an update while the game runs keeps serving it v1; after a reload v2 runs; rollback() brings v1 back", async (t) => {
  const b = await portal(t);
  assert.equal((await play(b)).version, "1");
  const r = await b.evaluate(() => window.game.update("v1", "v2"));
  assert.equal(r.to, "v2");
  assert.equal(r.previous, "v1");
  // The running game still gets v1's files (its client is pinned to v1).
  const during = await fetchInGame(b, "Build/data.json.gz");
  assert.equal(during.build, "v1");
  assert.deepEqual(JSON.parse(Buffer.from(during.body).toString()).title, "Arcade v1");
  const v2 = await play(b, { reload: true });
  assert.deepEqual([v2.version, v2.title, v2.level, v2.bonus, v2.wasmOk, v2.assetsLoaded], ["2", "Arcade v2", "Canyon", 25, true, true]);
  assert.ok(Buffer.from((await fetchInGame(b, "logic.wasm")).body).equals(tree("v2", "logic.wasm")));
  await b.evaluate(() => window.game.rollback());
  assert.equal((await play(b, { reload: true })).version, "1");
});

engineTest("a corrupted or forged update leaves v1 installed and playable", async (t) => {
  const b = await portal(t);
  assert.equal((await play(b)).version, "1");
  const d = site.arcade.updates.find((u) => u.from === "v1" && u.to === "v2");
  server.faults.corruptPatchAt = Math.floor(d.patchSize / 2);
  t.after(() => (server.faults.corruptPatchAt = null));
  const err = await b.evaluate(() => window.game.update("v1", "v2").then(() => null, (e) => ({ code: e.code, message: e.message })));
  assert.ok(err && ["patch", "integrity"].includes(err.code), JSON.stringify(err));
  const after = await play(b, { reload: true });
  assert.deepEqual([after.version, after.wasmOk, after.assetsLoaded], ["1", true, true]);
  assert.equal(await b.evaluate(() => window.game.current()), "v1");
});
