// Browser end-to-end tests of web/: real Chromium (Debian's, headless, through
// playwright-core), real OPFS, real HTTP (web/scripts/serve.mjs). Run by
// web/scripts/test.sh after it has built web/dist (library, demo, update site --big).
//
// Every test starts from a fresh browser profile, so OPFS starts empty.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { createHash, generateKeyPairSync } from "node:crypto";
import { lstatSync, mkdtempSync, readFileSync, readdirSync, readlinkSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";
import { startServer } from "../../web/scripts/serve.mjs";

const repo = join(dirname(fileURLToPath(import.meta.url)), "../..");
const dist = join(repo, "web/dist");
const { publicKey, games: site } = JSON.parse(readFileSync(join(dist, "updates/site.json"), "utf8"));
const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";

let server;
before(async () => {
  server = await startServer({ root: dist });
});
after(async () => {
  await server?.close();
});

function descriptor(game, from, to) {
  const d = site[game].updates.find((u) => u.from === from && u.to === to);
  assert.ok(d, `site has no ${game} ${from} -> ${to}`);
  return d;
}

/** A fresh profile (so an empty OPFS) and a page on the demo for `game`. */
async function openDemo(t, game, query = "") {
  const profile = mkdtempSync(join(tmpdir(), "edgepatch-e2e-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  t.after(async () => {
    await context.close();
    rmSync(profile, { recursive: true, force: true });
  });
  const page = context.pages()[0] ?? (await context.newPage());
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
  const url = `${server.url}demo/?game=${game}&install=v1${query}`;
  await page.goto(url);
  return { page, url, errors };
}

/** Waits until the demo page reaches one of `states` (it sets body[data-state]). */
async function waitState(page, states, timeout = 60_000) {
  await page.waitForFunction((s) => s.includes(document.body.dataset.state), states, { timeout });
  return page.evaluate(() => document.body.dataset.state);
}

/** Regular files (path -> sha256), directories, symlinks and executable files of a tree on disk. */
function diskTree(dir) {
  const out = { files: {}, dirs: [], symlinks: {}, executables: [] };
  const walk = (rel) => {
    for (const name of readdirSync(join(dir, rel)).sort()) {
      const p = rel ? `${rel}/${name}` : name;
      const st = lstatSync(join(dir, p));
      if (st.isSymbolicLink()) out.symlinks[p] = readlinkSync(join(dir, p));
      else if (st.isDirectory()) { out.dirs.push(p); walk(p); }
      else {
        out.files[p] = createHash("sha256").update(readFileSync(join(dir, p))).digest("hex");
        if (st.mode & 0o100) out.executables.push(p);
      }
    }
  };
  walk("");
  out.dirs.sort();
  out.executables.sort();
  return out;
}

/** What OPFS holds for `game`, read in the page straight from the file system (not through the library). */
async function opfsState(page, game) {
  return page.evaluate(async (game) => {
    const root = await navigator.storage.getDirectory();
    let g;
    try { g = await (await root.getDirectoryHandle("edgepatch")).getDirectoryHandle(game); } catch { return null; }
    const text = async (d, n) => { try { return await (await (await d.getFileHandle(n)).getFile()).text(); } catch { return null; } };
    const current = JSON.parse((await text(g, "current")) ?? "null");
    const update = await text(g, "update.json");
    const builds = [];
    let bdir = null;
    try { bdir = await g.getDirectoryHandle("builds"); for await (const n of bdir.keys()) builds.push(n); } catch {}
    const trees = {};
    for (const b of builds) {
      const tree = { files: {}, dirs: [] };
      const walk = async (d, rel) => {
        for await (const [name, h] of d.entries()) {
          const p = rel ? `${rel}/${name}` : name;
          if (h.kind === "directory") { tree.dirs.push(p); await walk(h, p); }
          else {
            const buf = await (await h.getFile()).arrayBuffer();
            tree.files[p] = [...new Uint8Array(await crypto.subtle.digest("SHA-256", buf))].map((x) => x.toString(16).padStart(2, "0")).join("");
          }
        }
      };
      try { await walk(await (await bdir.getDirectoryHandle(b)).getDirectoryHandle("files"), ""); } catch {}
      tree.dirs.sort();
      trees[b] = tree;
    }
    return { current, update: update && JSON.parse(update), builds: builds.sort(), trees };
  }, game);
}

/** Asserts that `build` is current and byte-exact against the tree it was made from. */
async function assertBuild(page, game, build) {
  const st = await opfsState(page, game);
  assert.equal(st.current?.build, build, `current build of ${game}`);
  const want = diskTree(join(dist, "trees", game, build));
  const got = st.trees[build];
  assert.ok(got, `OPFS has builds/${build}`);
  assert.deepEqual(Object.keys(got.files).sort(), Object.keys(want.files).sort(), "same regular files");
  for (const [p, h] of Object.entries(want.files)) assert.equal(got.files[p], h, `${p} byte-exact`);
  assert.deepEqual(got.dirs, want.dirs, "same directories");
  // Symlinks and executable bits live in the build's manifest (OPFS has neither).
  const entries = await page.evaluate(() => globalThis.edgepatchDemo.updater.entries());
  const symlinks = Object.fromEntries(entries.filter((e) => e.kind === "symlink").map((e) => [e.path, e.symlinkTarget]));
  assert.deepEqual(symlinks, want.symlinks, "symlinks");
  assert.deepEqual(entries.filter((e) => e.executable).map((e) => e.path).sort(), want.executables, "executable bits");
  return st;
}

test("fresh profile installs v1, updates to v2; OPFS byte-exact", async (t) => {
  // With the server's public key: every manifest's ed25519 signature is checked.
  const { page, errors } = await openDemo(t, "demo", `&publicKey=${encodeURIComponent(publicKey)}`);
  assert.equal(await waitState(page, ["idle", "error"]), "idle");
  assert.equal(await page.textContent("#current"), "none");

  await page.click("#install");
  assert.equal(await waitState(page, ["done", "error"]), "done", await page.textContent("#error"));
  let st = await assertBuild(page, "demo", "v1");
  assert.equal(st.update, null, "no update record left");
  assert.equal(await page.textContent("#game-title"), "Star Hopper v1");
  assert.ok(await page.isVisible("#title-img"));
  const v1Img = await page.getAttribute("#title-img", "src");

  server.resetStats();
  await page.click("#update");
  assert.equal(await waitState(page, ["done", "error"]), "done", await page.textContent("#error"));
  st = await assertBuild(page, "demo", "v2");
  assert.deepEqual(st.builds, ["v2"], "the old build is removed after the switch");
  assert.equal(await page.textContent("#game-title"), "Star Hopper v2");
  assert.notEqual(await page.getAttribute("#title-img", "src"), v1Img);
  const d = descriptor("demo", "v1", "v2");
  assert.equal(server.stats.patchBytesServed, d.patchSize, "the patch was downloaded exactly once");
  for (const r of server.stats.requests.filter((r) => r.path.includes("/patches/"))) assert.match(r.range ?? "", /^bytes=\d+-\d+$/, "single-range requests only");
  const text = await page.textContent("#progress-text");
  assert.match(text, /downloaded .* of .*, saved \d+\.\d%/);
  assert.deepEqual(errors, []);
});

test("a corrupted patch is refused with a visible error; v1 stays current and intact", async (t) => {
  const { page } = await openDemo(t, "demo");
  await waitState(page, ["idle"]);
  await page.click("#install");
  assert.equal(await waitState(page, ["done", "error"]), "done");
  await assertBuild(page, "demo", "v1");

  const d = descriptor("demo", "v1", "v2");
  server.faults.corruptPatchAt = Math.floor(d.patchSize / 2);
  t.after(() => { server.faults.corruptPatchAt = null; });
  await page.click("#update");
  assert.equal(await waitState(page, ["done", "error"]), "error");
  assert.ok(await page.isVisible("#error"));
  const code = await page.getAttribute("#error", "data-code");
  assert.ok(["patch", "integrity"].includes(code), `error code ${code}: ${await page.textContent("#error")}`);
  const st = await assertBuild(page, "demo", "v1");
  assert.deepEqual(st.builds, ["v1"], "nothing of v2 is kept");
  assert.equal(st.update, null, "no resume record for a refused patch");
  assert.equal(await page.textContent("#game-title"), "Star Hopper v1");
});

test("the connection is cut mid-update and the page reloaded: the update resumes, downloading less than the whole patch again", async (t) => {
  const { page } = await openDemo(t, "big");
  await waitState(page, ["idle"]);
  await page.click("#install");
  assert.equal(await waitState(page, ["done", "error"]), "done", await page.textContent("#error"));
  await assertBuild(page, "big", "v1");

  // Every patch response dies at 60% of the v1 -> v2 patch (retries too).
  const d = descriptor("big", "v1", "v2");
  assert.ok(d.segments >= 3, `the big patch has ${d.segments} segments`);
  const cutAt = Math.floor(d.patchSize * 0.6);
  server.faults.cutPatchAt = cutAt;
  t.after(() => { server.faults.cutPatchAt = null; });
  server.resetStats();
  await page.click("#update");
  assert.equal(await waitState(page, ["done", "error"]), "error");
  assert.equal(await page.getAttribute("#error", "data-code"), "network", await page.textContent("#error"));
  const firstSession = server.stats.patchBytesServed;
  let st = await assertBuild(page, "big", "v1"); // still current and intact
  const point = st.update?.point;
  assert.ok(point && point.segmentsDone >= 1, `a resume point was persisted: ${JSON.stringify(st.update)}`);

  // The connection is back; the reloaded page continues the interrupted update.
  server.faults.cutPatchAt = null;
  server.resetStats();
  await page.reload();
  assert.equal(await waitState(page, ["done", "error"]), "done", await page.textContent("#error"));
  const again = server.stats.patchBytesServed;
  const patchRequests = server.stats.requests.filter((r) => r.path.includes("/patches/"));
  const header = patchRequests.find((r) => r.range?.startsWith("bytes=0-"));
  assert.ok(header, "the header and tree are fetched again");
  assert.equal(again, header.bytes + (d.patchSize - point.patchOffset), "exactly the header+tree and the bytes after the resume point");
  assert.ok(again < d.patchSize, `re-downloaded ${again} < patch ${d.patchSize}`);
  st = await assertBuild(page, "big", "v2");
  assert.deepEqual(st.builds, ["v2"]);
  assert.equal(st.update, null);
  assert.match(await page.textContent("#phase"), /resumed at/);
  t.diagnostic(`patch ${d.patchSize} B in ${d.segments} segments; cut at ${cutAt}; ` +
    `first session got ${firstSession} B, persisted point ${point.patchOffset} (${point.segmentsDone} segments); after reload downloaded ${again} B (header+tree ${header.bytes} B)`);
});

test("the page is reloaded while the update is writing: it resumes from the persisted point and completes byte-exact", async (t) => {
  const { page } = await openDemo(t, "big");
  await waitState(page, ["idle"]);
  await page.click("#install");
  assert.equal(await waitState(page, ["done", "error"]), "done", await page.textContent("#error"));

  // Patch responses stop (without closing) at 60%: the update hangs there, mid-flight.
  const d = descriptor("big", "v1", "v2");
  server.faults.stallPatchAt = Math.floor(d.patchSize * 0.6);
  t.after(() => { server.faults.stallPatchAt = null; });
  await page.click("#update");
  // Wait (by condition, not by time) until the worker has persisted a resume point past segment 1.
  await page.waitForFunction(() => Number(document.body.dataset.segmentsPersisted ?? 0) >= 2, null, { timeout: 60_000 });
  assert.equal(await page.evaluate(() => document.body.dataset.state), "updating");
  const before = await opfsState(page, "big");
  assert.equal(before.current.build, "v1");
  assert.ok(before.update.point.segmentsDone >= 2, JSON.stringify(before.update));

  // Reload kills the worker with its access handles open and a download in flight.
  server.faults.stallPatchAt = null;
  server.resetStats();
  await page.reload();
  assert.equal(await waitState(page, ["done", "error"]), "done", await page.textContent("#error"));
  const again = server.stats.patchBytesServed;
  assert.ok(again < d.patchSize, `re-downloaded ${again} < patch ${d.patchSize}`);
  assert.equal(again, d.patchSize - before.update.point.patchOffset + server.stats.requests.find((r) => r.range?.startsWith("bytes=0-")).bytes);
  const st = await assertBuild(page, "big", "v2");
  assert.deepEqual(st.builds, ["v2"]);
  t.diagnostic(`reload mid-update: point ${JSON.stringify(before.update.point)}, downloaded ${again} of ${d.patchSize} B again`);
});

test("a manifest signed by another key is refused when a public key is configured", async (t) => {
  const otherKey = Buffer.from(generateKeyPairSync("ed25519").publicKey.export({ format: "jwk" }).x, "base64url").toString("base64");
  assert.notEqual(otherKey, publicKey);
  const { page } = await openDemo(t, "demo", `&publicKey=${encodeURIComponent(otherKey)}`);
  await waitState(page, ["idle"]);
  server.resetStats();
  await page.click("#install");
  assert.equal(await waitState(page, ["done", "error"]), "error");
  assert.equal(await page.getAttribute("#error", "data-code"), "integrity");
  assert.match(await page.textContent("#error"), /signature does not match/);
  const st = await opfsState(page, "demo");
  assert.equal(st.current, null, "nothing installed");
  assert.deepEqual(st.builds, []);
  assert.equal(server.stats.patchBytesServed, 0, "refused before any patch byte was fetched");
});

test("the same library against the Worker (wrangler dev): install v1, update to the channel's v2, signed manifests, byte-exact", async (t) => {
  // The generator issue's Worker: builds published with the native CLI, patches generated on demand.
  const { startWrangler, devVars } = await import("../../worker/scripts/wrangler-dev.mjs");
  const { execFileSync } = await import("node:child_process");
  const worker = await startWrangler({ port: 8794 });
  t.after(() => worker.stop());
  const { token, publicKey: workerKey } = devVars();
  const bin = process.env.EDGEPATCH_BIN ?? join(repo, "target/release/edgepatch");
  for (const build of ["v1", "v2"]) {
    execFileSync(bin, ["--quiet", "publish", "--server", worker.url, "--game", "demo", "--build", build, "--channel", "stable", join(dist, "trees/demo", build)], {
      env: { ...process.env, EDGEPATCH_TOKEN: token },
    });
    // The Worker serves anonymous callers only what a channel releases: a channel that keeps
    // v1 as its head lets the page install v1 (_ -> v1); stable releases v1 -> v2.
    if (build === "v1") {
      const res = await fetch(`${worker.url}/v1/games/demo/channels/first`, { method: "PUT", headers: { Authorization: `Bearer ${token}` }, body: JSON.stringify({ build: "v1" }) });
      assert.equal(res.status, 200, await res.text());
    }
  }
  const { page, errors } = await openDemo(t, "demo", `&base=${encodeURIComponent(worker.url + "/")}&publicKey=${encodeURIComponent(workerKey)}`);
  assert.equal(await waitState(page, ["idle", "error"]), "idle");
  await page.click("#install");
  assert.equal(await waitState(page, ["done", "error"]), "done", await page.textContent("#error"));
  await assertBuild(page, "demo", "v1");
  await page.click("#update");
  assert.equal(await waitState(page, ["done", "error"]), "done", await page.textContent("#error"));
  const st = await assertBuild(page, "demo", "v2");
  assert.deepEqual(st.builds, ["v2"]);
  assert.match(await page.textContent("#progress-text"), /downloaded .* of .*, saved \d+\.\d%/);
  assert.deepEqual(errors, []);
});
