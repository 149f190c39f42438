// Browser end-to-end tests of where an update writes (web/src/layout.ts): every attempt writes
// a staging directory of its own, and a build gets its name only once every byte is verified,
// so the game Service Worker (web/src/service-worker.ts) never serves a pinned tab bytes an
// update is writing or left behind. In each engine of tests/e2e/engines.mjs, real OPFS, real
// HTTP (web/scripts/serve.mjs) over a static update site made here with the CLI, exactly as
// make-static-site.mjs makes the shared one (keygen, `site add` per build), plus a forged
// install patch made with `edgepatch diff`.
//
// The attack: a tab runs build v2 (pinned to it by the Service Worker); the client updates to
// v3 (v2 stays as previous), then back to v2 (a channel that went back, or after a rollback).
// The server has no v3 -> v2 patch, so the update is the install patch _ -> v2, and an
// attacker who controls the host serves a forged one of the right size whose late.js is the
// attacker's. One with its own header and tree is refused before anything is written (the
// signed manifest's head BLAKE3); one that keeps the signed header and tree, followed by the
// attacker's segments, is stopped mid-file after a resume point. The pinned tab then loads
// late.js: it must get v2's bytes or an error, never the attacker's; and the honest update back
// to v2 must still work, though it resumes on the attacker's first segment.
import { after, before } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { engineTests, launch } from "./engines.mjs";
import { startServer } from "../../web/scripts/serve.mjs";

const repo = join(dirname(fileURLToPath(import.meta.url)), "../..");
const dist = join(repo, "web/dist");
const EDGEPATCH = process.env.EDGEPATCH_BIN ?? join(repo, "target/release/edgepatch");
const GAME = "pin";
const MARK = "PWNED";

let work, server, site;
const cli = (args) => JSON.parse(execFileSync(EDGEPATCH, ["--json", "--quiet", ...args], { encoding: "utf8" }));

/**
 * A build of the test game: index.html (loads nothing), late.js (a script the game loads
 * later: `window.late = "<tag>";` then a comment of random text, 6 MiB: more than a patch
 * segment's 4 MiB, so that the first segment writes the start of it and a cut in the
 * second leaves it partial, its BLAKE3 not yet checked).
 */
/** Bytes before a patch's first segment: the fixed header and the tree section (docs/FORMAT.md §2). */
function headLength(patch) {
  let at = 12; // magic, version, flags
  const varint = () => {
    let v = 0;
    for (let shift = 0; ; shift += 7) {
      const b = patch[at++];
      v += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) return v;
    }
  };
  varint(); // the tree's decoded size
  const comp = varint(); // its compressed size
  return at + comp;
}

function writeTree(dir, title, tag) {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "index.html"), `<!doctype html><html><head><meta charset="utf-8"><title>${title}</title></head><body><p>${title}</p></body></html>\n`);
  const head = `window.late = ${JSON.stringify(tag)};`.padEnd(32, " ") + "//";
  const body = randomBytes(4608 * 1024).toString("base64");
  writeFileSync(join(dir, "late.js"), head + body + "\n");
}

before(() => {
  work = mkdtempSync(join(tmpdir(), "edgepatch-staging-"));
  const trees = join(work, "trees");
  const siteDir = join(work, "site");
  const key = join(work, "site.key");
  const { public_key: publicKey } = cli(["keygen", key]);
  const pairs = {};
  for (const v of ["v1", "v2", "v3"]) {
    writeTree(join(trees, v), `pin ${v}`, v);
    for (const p of cli(["site", "add", "--site", siteDir, "--key", key, "--game", GAME, "--build", v, "--level", "3", join(trees, v)]).pairs) pairs[`${p.from}>${v}`] = p;
  }
  const install = pairs["_>v2"];
  assert.ok(install, `the site has _ -> v2: ${Object.keys(pairs)}`);
  assert.equal(install.segments, 2, "the install patch has two segments");
  assert.equal(pairs["v3>v2"], undefined, "no v3 -> v2 patch: going back is the install patch");
  // The forged v2: late.js the attacker's (every file the same size as v2's), diffed from nothing
  // (an install patch), then cut or padded to the size the signed descriptor of _ -> v2 says.
  // The attacker draws its late.js again until its first segment is exactly as long as the
  // signed patch's (they differ by a few bytes), so that segment ends where the signed manifest
  // says one does, and a client takes a resume point after the attacker's bytes.
  const forgedTree = join(trees, "v2-forged");
  mkdirSync(join(work, "empty"));
  const forgedPatch = join(work, "forged.patch");
  const firstSegment = (patch) => JSON.stringify(cli(["inspect", patch]).segments[0]);
  const signedFirst = firstSegment(join(siteDir, "public", install.patch));
  for (let tries = 1; ; tries++) {
    writeTree(forgedTree, "pin v2", MARK);
    cli(["diff", "--level", "3", join(work, "empty"), forgedTree, forgedPatch]);
    if (firstSegment(forgedPatch) === signedFirst) break;
    assert.ok(tries < 500, `no forged first segment as long as the signed one's in ${tries} tries: ${signedFirst}`);
  }
  for (const f of ["index.html", "late.js"]) assert.equal(readFileSync(join(forgedTree, f)).length, readFileSync(join(trees, "v2", f)).length);
  const forged = readFileSync(forgedPatch);
  const sized = (bytes) => {
    const out = Buffer.alloc(install.patch_bytes);
    bytes.copy(out, 0, 0, Math.min(bytes.length, out.length));
    return out;
  };
  writeFileSync(forgedPatch, sized(forged));
  // The signed patch's header and tree, then the forged patch's segments (the same layout: the
  // same paths and sizes), so the head the manifest vouches for is the one served.
  const signedPatch = readFileSync(join(siteDir, "public", install.patch));
  const signedHeadPatch = join(work, "forged-signed-head.patch");
  writeFileSync(signedHeadPatch, sized(Buffer.concat([signedPatch.subarray(0, headLength(signedPatch)), forged.subarray(headLength(forged))])));

  // The served root: the library (web/dist/lib), a blank page, the site as uploaded.
  const root = join(work, "root");
  mkdirSync(join(root, "page"), { recursive: true });
  symlinkSync(join(dist, "lib"), join(root, "lib"));
  symlinkSync(join(siteDir, "public"), join(root, "updates"));
  writeFileSync(join(root, "page/index.html"), "<!doctype html><title>portal</title><p>portal</p>\n");
  site = { publicKey, pairs, install, forgedPatch, signedHeadPatch, lateSha256: (v) => createHash("sha256").update(readFileSync(join(trees, v, "late.js"))).digest("hex") };
});

after(async () => {
  await server?.close();
  if (work) rmSync(work, { recursive: true, force: true });
});

async function serverUp() {
  server ??= await startServer({ root: join(work, "root") });
  return server;
}

/** A page with `window.game` (an updater for the test game) and the game Service Worker active for /play/. */
async function portal(t, engine) {
  const s = await serverUp();
  const b = await launch(engine);
  t.after(() => b.close());
  await b.goto(`${s.url}page/`);
  await b.evaluate(async (key) => {
    const lib = await import("/lib/edgepatch-web.js");
    window.game = new lib.GameUpdater({ baseUrl: "/updates/", game: "pin", workerUrl: "/lib/edgepatch-worker.js", publicKeys: [key], retries: 0, retryDelayMs: 50 });
    await lib.registerGameServiceWorker("/lib/edgepatch-sw.js", { scope: "/play/" });
  }, site.publicKey);
  return b;
}

/** Runs `game.<op>(...args)` in the page: {value} or {error: {code, message, resumable}}. */
function call(b, op, ...args) {
  return b.evaluate(
    async ([op, args]) => {
      try {
        return { value: await window.game[op](...args) };
      } catch (e) {
        return { error: { code: e.code, message: e.message, resumable: e.resumable } };
      }
    },
    [op, args],
  );
}

/** Opens the game in a frame (its client is pinned to the current build). */
async function openGame(b) {
  await b.evaluate(
    () =>
      new Promise((resolve) => {
        const f = document.createElement("iframe");
        f.id = "game";
        f.onload = () => resolve();
        f.src = "/play/pin/index.html";
        document.body.append(f);
      }),
  );
  return b.evaluate(() => document.getElementById("game").contentDocument.title);
}

const SHA256 = async (buf) => [...new Uint8Array(await crypto.subtle.digest("SHA-256", buf))].map((x) => x.toString(16).padStart(2, "0")).join("");

/** SHA-256 of a file of the current build, read through the library. */
function installedSha256(b, path) {
  return b.evaluate(async ([path, sha]) => (0, eval)(sha)(await window.game.readFile(path)), [path, SHA256.toString()]);
}

/** What the running game gets for late.js: fetched from its frame (status, build, its start, SHA-256), and run as a script (window.late). */
function loadLate(b) {
  return b.evaluate(async (sha) => {
    const w = document.getElementById("game").contentWindow;
    const res = await w.fetch("late.js", { cache: "no-store" });
    const buf = await res.arrayBuffer();
    const head = new TextDecoder().decode(buf.slice(0, 64));
    const sha256 = await (0, eval)(sha)(buf);
    w.late = undefined;
    const ran = await new Promise((resolve) => {
      const s = w.document.createElement("script");
      s.src = `late.js?run=${Math.random()}`;
      s.onload = () => resolve(true);
      s.onerror = () => resolve(false);
      w.document.body.append(s);
    });
    return { status: res.status, build: res.headers.get("x-edgepatch-build"), head, sha256, ran, late: w.late ?? null };
  }, SHA256.toString());
}

/** The running game got v2's late.js or an error, and nothing of the attacker's ran. */
function assertNotForged(got, what) {
  assert.ok(!got.head.includes(MARK), `${what}: the pinned tab was served the attacker's bytes (status ${got.status}: ${got.head}...)`);
  assert.notEqual(got.late, MARK, `${what}: the attacker's JavaScript ran in the game`);
  if (got.status === 200) {
    assert.equal(got.sha256, site.lateSha256("v2"), `${what}: a 200 must be v2's late.js, whole`);
    assert.equal(got.late, "v2");
  } else {
    assert.ok(got.status >= 400, `${what}: status ${got.status}`);
    assert.equal(got.ran, false);
  }
}

/** The entries of edgepatch/pin/<top>, read straight from OPFS. */
function opfsNames(b, top) {
  return b.evaluate(async (top) => {
    const g = await (await (await navigator.storage.getDirectory()).getDirectoryHandle("edgepatch")).getDirectoryHandle("pin");
    const out = [];
    try {
      for await (const n of (await g.getDirectoryHandle(top)).keys()) out.push(n);
    } catch {}
    return out.sort();
  }, top);
}

function readCurrentPointer(b) {
  return b.evaluate(async () => {
    const g = await (await (await navigator.storage.getDirectory()).getDirectoryHandle("edgepatch")).getDirectoryHandle("pin");
    return JSON.parse(await (await (await g.getFileHandle("current")).getFile()).text());
  });
}

engineTests("a tab pinned to v2; update to v3, then back to v2 by a forged install patch stopped mid-file: the tab gets v2's bytes or an error, never the attacker's; the honest update back to v2 resumes on the forged segment, fails its check and starts over by itself", async (t, engine) => {
  const b = await portal(t, engine);
  assert.equal((await call(b, "install", "v1")).value?.to, "v1");
  assert.equal((await call(b, "update", "v1", "v2")).value?.to, "v2");
  assert.equal(await openGame(b), "pin v2");
  const r3 = await call(b, "update", "v2", "v3");
  assert.equal(r3.value?.previous, "v2", JSON.stringify(r3));
  // The running game keeps v2 after the update (previous, still stored).
  const before = await loadLate(b);
  assert.equal(before.build, "v2");
  assertNotForged(before, "after the update to v3");

  t.after(() => {
    server.faults.replace.clear();
    server.faults.stallPatchAt = null;
  });
  // Back to v2 by a forged install patch of the signed size with its own header and tree:
  // refused before anything of it is written or kept.
  server.faults.replace.set(`/updates/${site.install.patch}`, site.forgedPatch);
  const refused = await call(b, "update", "v3", "v2");
  assert.equal(refused.error?.code, "integrity", JSON.stringify(refused));
  assert.match(refused.error.message, /header and tree/);
  assert.equal(refused.error.resumable, false);
  assert.equal((await call(b, "pending")).value, null, "no resume record");
  assert.equal((await call(b, "current")).value, "v3");
  assertNotForged(await loadLate(b), "after the forged head was refused");

  // Back to v2: the signed header and tree, then the attacker's segments; the connection stalls
  // in the second segment, after the first (the start of the forged late.js, never finished, so
  // never checked) was written and a resume point made durable, and the player leaves (abort).
  server.faults.replace.set(`/updates/${site.install.patch}`, site.signedHeadPatch);
  server.faults.stallPatchAt = Math.floor(site.install.patch_bytes * 0.9);
  await b.evaluate(() => {
    window.ac = new AbortController();
    window.events = [];
    window.outcome = null;
    window.game.update("v3", "v2", { signal: window.ac.signal, onProgress: (p) => window.events.push(p) }).then(
      (value) => (window.outcome = { value }),
      (e) => (window.outcome = { error: { code: e.code, message: e.message, resumable: e.resumable } }),
    );
  });
  await b.waitFor(() => window.events.some((p) => p.segmentsDone >= 1) || window.outcome !== null, null, 60_000);
  await b.evaluate(() => window.ac.abort());
  await b.waitFor(() => window.outcome !== null, null, 30_000);
  const forged = await b.evaluate(() => window.outcome);
  assert.equal(forged.error?.code, "aborted", JSON.stringify(forged));
  assert.equal(forged.error.resumable, true, "a stopped update stays resumable");
  assert.ok(server.stats.requests.some((r) => r.path.endsWith(site.install.patch) && r.status === "stalled"), "the forged patch was served and stalled");
  const pending = (await call(b, "pending")).value;
  assert.deepEqual([pending?.from, pending?.to], ["v3", "v2"], "the resume record is kept");
  assert.ok(pending.segmentsDone >= 1, `the resume point is past the forged first segment: ${JSON.stringify(pending)}`);
  t.diagnostic(`forged update stalled at ${server.faults.stallPatchAt} of ${site.install.patch_bytes}: resume record at patch offset ${pending.patchOffset}, ${pending.segmentsDone} segments`);
  assert.equal((await call(b, "current")).value, "v3");
  assertNotForged(await loadLate(b), "after the forged update was stopped");

  // The honest update of the same kind: back to v2 by the real install patch.
  // It resumes from the forged attempt's point; its result fails the patch's check, so what
  // that attempt wrote is dropped and the update runs again from the start, unasked.
  server.faults.replace.clear();
  server.faults.stallPatchAt = null;
  const honest = await call(b, "update", "v3", "v2");
  assert.equal(honest.error, undefined, JSON.stringify(honest));
  assert.deepEqual([honest.value.to, honest.value.previous, honest.value.fullInstall, honest.value.resumed], ["v2", "v3", true, false]);
  assert.equal(honest.value.downloadedBytes, site.install.patch_bytes, "the whole patch, from its first byte");
  assert.equal((await call(b, "pending")).value, null);
  assert.equal(await installedSha256(b, "late.js"), site.lateSha256("v2"), "v2 is installed byte-exact");
  assertNotForged(await loadLate(b), "after the honest update back to v2");
  // Only what the pointer names is kept: the forged attempt's staging directory is gone.
  const pointer = await readCurrentPointer(b);
  const named = [pointer.dir, pointer.previous?.dir].filter(Boolean);
  const kept = [...(await opfsNames(b, "builds")).map((n) => `builds/${n}`), ...(await opfsNames(b, "staging")).map((n) => `staging/${n}`)];
  assert.deepEqual(kept.sort(), named.sort(), `kept ${kept}, the pointer names ${JSON.stringify(pointer)}`);
  t.diagnostic(`pointer after going back: ${JSON.stringify({ current: pointer.dir, previous: pointer.previous?.dir })}`);

  // Rollback to v3, then the update back to v2 again: the previous build by the same manifest.
  assert.deepEqual((await call(b, "rollback")).value, { from: "v2", to: "v3" });
  const again = await call(b, "update", "v3", "v2");
  assert.deepEqual([again.value?.to, again.value?.previous], ["v2", "v3"], JSON.stringify(again));
  assert.equal(again.value.downloadedBytes, 0, "the stored previous build was switched back in, nothing downloaded");
  assert.equal(await installedSha256(b, "late.js"), site.lateSha256("v2"));
  assertNotForged(await loadLate(b), "after rollback and the update back to v2");
});

engineTests("an update that never completes is never served: a tab opened on v1, the update to v2 cut mid-file and abandoned; the next attempt writes its own staging directory and prunes it", async (t, engine) => {
  const b = await portal(t, engine);
  assert.equal((await call(b, "install", "v1")).value?.to, "v1");
  assert.equal(await openGame(b), "pin v1");
  server.faults.cutPatchAt = Math.floor(site.pairs["v1>v2"].patch_bytes * 0.6);
  t.after(() => (server.faults.cutPatchAt = null));
  // v1 -> v2 cut mid-way: what it wrote is in its staging directory, which nothing serves.
  const cut = await call(b, "update", "v1", "v2");
  assert.equal(cut.error?.code, "network", JSON.stringify(cut));
  const staged = await opfsNames(b, "staging");
  assert.equal(staged.length, 1, `one staging directory: ${staged}`);
  assert.match(staged[0], /^v2-[0-9a-f]{16}$/);
  assert.deepEqual(await opfsNames(b, "builds"), ["v1"], "nothing is written under a build's name");
  const got = await loadLate(b);
  assert.deepEqual([got.status, got.sha256, got.late], [200, site.lateSha256("v1"), "v1"], "the running game keeps v1");
  // The next attempt writes a staging directory of its own and prunes the old one.
  server.faults.cutPatchAt = null;
  const done = await call(b, "update", "v1", "v2");
  assert.equal(done.value?.to, "v2", JSON.stringify(done));
  const pointer = await readCurrentPointer(b);
  assert.equal(pointer.build, "v2");
  assert.ok(!(await opfsNames(b, "staging")).includes(staged[0]), "the abandoned attempt's directory is pruned");
});
