// Browser end-to-end tests of key rotation (docs/UPDATE_PROTOCOL.md, "v1/public-key"): a portal
// configured with a site's old key follows the rotation `edgepatch site rotate-key` published
// (signed by the old key), keeps the key it learned per server in OPFS, and refuses a rotation
// an attacker signed with a key it does not trust. In each engine of tests/e2e/engines.mjs,
// real OPFS, real HTTP (web/scripts/serve.mjs) over static update sites made here with the
// CLI, as make-static-site.mjs makes the shared one (keygen, `site add` per build):
//
//   /updates/  game "rot": v1, v2 signed by the old key; then `site rotate-key` to the new
//              key and v3 signed by the new key. Served first as it was before the rotation
//              (after v2), then as it is after.
//   /forged/   game "forged", the attacker's own site: its builds signed by an attacker key
//              that a rotation signed by another attacker key "rotated to" (`site rotate-key`
//              with the attacker's keys): the rotation's signer is not trusted.
//   /claimed/  the same, its rotation relabelled as coming from the portal's trusted key
//              (the signature is still the attacker's): it does not verify.
import { after, before } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { engineTests, launch } from "./engines.mjs";
import { startServer } from "../../web/scripts/serve.mjs";

const repo = join(dirname(fileURLToPath(import.meta.url)), "../..");
const dist = join(repo, "web/dist");
const EDGEPATCH = process.env.EDGEPATCH_BIN ?? join(repo, "target/release/edgepatch");

let work, root, server, site;
const cli = (args) => JSON.parse(execFileSync(EDGEPATCH, ["--json", "--quiet", ...args], { encoding: "utf8" }));

function writeTree(dir, game, v) {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "index.html"), `<!doctype html><title>${game} ${v}</title><p>${game} ${v}</p>\n`);
  writeFileSync(join(dir, "game.js"), `window.build = ${JSON.stringify(v)};\n${"// filler\n".repeat(2000)}`);
}

/** `site add` of `game` `v` (a fresh tree) to `siteDir`, signed by `key`, moving channel stable. */
function siteAdd(siteDir, key, game, v) {
  writeTree(join(work, "trees", game, v), game, v);
  cli(["site", "add", "--site", siteDir, "--key", key, "--game", game, "--build", v, "--channel", "stable", "--level", "3", join(work, "trees", game, v)]);
}

/** Points the served /updates/ at `dir`. */
function serveUpdates(dir) {
  try {
    unlinkSync(join(root, "updates"));
  } catch {}
  symlinkSync(dir, join(root, "updates"));
}

before(() => {
  work = mkdtempSync(join(tmpdir(), "edgepatch-rotation-"));
  const keys = {};
  for (const k of ["old", "new", "evil", "evilSigner"]) keys[k] = { file: join(work, `${k}.key`), ...cli(["keygen", join(work, `${k}.key`)]) };

  // The real site, before and after its rotation.
  const real = join(work, "site");
  siteAdd(real, keys.old.file, "rot", "v1");
  siteAdd(real, keys.old.file, "rot", "v2");
  const beforeRotation = join(work, "before-rotation");
  cpSync(join(real, "public"), beforeRotation, { recursive: true });
  const rotated = cli(["site", "rotate-key", "--site", real, "--key", keys.old.file, "--new-key", keys.new.file]);
  assert.equal(rotated.key_id, keys.new.key_id);
  siteAdd(real, keys.new.file, "rot", "v3");

  // The attacker's site: its own rotation, evilSigner -> evil, and everything signed by evil.
  const forged = join(work, "forged-site");
  siteAdd(forged, keys.evilSigner.file, "forged", "v1");
  cli(["site", "rotate-key", "--site", forged, "--key", keys.evilSigner.file, "--new-key", keys.evil.file]);
  // The same rotation claimed to come from the portal's trusted (old) key.
  const claimed = join(work, "claimed");
  cpSync(join(forged, "public"), claimed, { recursive: true });
  const doc = JSON.parse(readFileSync(join(claimed, "v1/public-key"), "utf8"));
  doc.rotations[0].from = keys.old.key_id;
  writeFileSync(join(claimed, "v1/public-key"), JSON.stringify(doc));

  root = join(work, "root");
  mkdirSync(join(root, "page"), { recursive: true });
  symlinkSync(join(dist, "lib"), join(root, "lib"));
  symlinkSync(join(forged, "public"), join(root, "forged"));
  symlinkSync(claimed, join(root, "claimed"));
  writeFileSync(join(root, "page/index.html"), "<!doctype html><title>portal</title><p>portal</p>\n");
  site = { keys, beforeRotation, after: join(real, "public") };
});

after(async () => {
  await server?.close();
  if (work) rmSync(work, { recursive: true, force: true });
});

/** A page with `window.updaters[name]` made by `make(name, baseUrl, game)`, configured with the old key only. */
async function portal(t, engine) {
  server ??= await startServer({ root });
  const b = await launch(engine);
  t.after(() => b.close());
  await b.goto(`${server.url}page/`);
  await b.evaluate(async () => {
    window.lib = await import("/lib/edgepatch-web.js");
    window.updaters = {};
  });
  return b;
}

function updater(b, name, baseUrl, game) {
  return b.evaluate(
    ([name, baseUrl, game, key]) => {
      window.updaters[name] = new window.lib.GameUpdater({ baseUrl, game, workerUrl: "/lib/edgepatch-worker.js", publicKeys: [key], retries: 0, retryDelayMs: 50 });
    },
    [name, baseUrl, game, site.keys.old.public_key],
  );
}

/** Runs `updaters[name].<op>(...args)` in the page: {value} or {error: {code, message}}. */
function call(b, name, op, ...args) {
  return b.evaluate(
    async ([name, op, args]) => {
      try {
        return { value: await window.updaters[name][op](...args) };
      } catch (e) {
        return { error: { code: e.code, message: e.message } };
      }
    },
    [name, op, args],
  );
}

/** edgepatch/.keys/rotations.json, read straight from OPFS (null when absent). */
function storedRotations(b) {
  return b.evaluate(async () => {
    try {
      const d = await (await (await navigator.storage.getDirectory()).getDirectoryHandle("edgepatch")).getDirectoryHandle(".keys");
      return JSON.parse(await (await (await d.getFileHandle("rotations.json")).getFile()).text());
    } catch {
      return null;
    }
  });
}

engineTests("a site rotated by `edgepatch site rotate-key` is followed from the old key, and the learned key is kept; a forged rotation is refused", async (t, engine) => {
  const b = await portal(t, engine);
  t.after(() => {
    server.faults.replace.clear();
    serveUpdates(site.beforeRotation);
  });
  serveUpdates(site.beforeRotation);
  await updater(b, "rot", "/updates/", "rot");
  assert.equal((await call(b, "rot", "install", "v1")).value?.to, "v1");

  // The site rotates its key and publishes v3 signed by the new key: followed.
  serveUpdates(site.after);
  server.resetStats();
  const r = await call(b, "rot", "updateToLatest", "stable");
  assert.equal(r.error, undefined, JSON.stringify(r));
  assert.equal(r.value.to, "v3");
  assert.equal((await call(b, "rot", "current")).value, "v3");
  assert.ok(server.stats.requests.some((q) => q.path === "/updates/v1/public-key"), "the rotation was read from v1/public-key");
  const stored = await storedRotations(b);
  const list = Object.values(stored?.servers ?? {}).flat();
  assert.deepEqual(list.map((x) => [x.from, x.keyId]), [[site.keys.old.key_id, site.keys.new.key_id]], JSON.stringify(stored));

  // The learned key is kept: a new updater (a new worker) checks the new key's documents
  // while v1/public-key answers 404.
  server.faults.replace.set("/updates/v1/public-key", join(work, "no-such-file"));
  await updater(b, "rot2", "/updates/", "rot");
  const latest = await call(b, "rot2", "latest", "stable");
  assert.equal(latest.value, "v3", `the stored rotation suffices: ${JSON.stringify(latest)}`);
  server.faults.replace.clear();

  // The attacker's own rotation: its signer is not a key this portal trusts.
  await updater(b, "forged", "/forged/", "forged");
  const forged = await call(b, "forged", "install", "v1");
  assert.equal(forged.error?.code, "signature", JSON.stringify(forged));
  assert.match(forged.error.message, new RegExp(`signed by key ${site.keys.evil.key_id}, which is not an accepted key`));
  assert.match(forged.error.message, new RegExp(`signed by key ${site.keys.evilSigner.key_id}, and that signer is not trusted`));
  assert.equal((await call(b, "forged", "current")).value, null, "nothing installed");
  t.diagnostic(`forged rotation: ${forged.error.message}`);

  // The same rotation claimed to come from the trusted key: its signature does not verify.
  await updater(b, "claimed", "/claimed/", "forged");
  const claimed = await call(b, "claimed", "install", "v1");
  assert.equal(claimed.error?.code, "signature", JSON.stringify(claimed));
  assert.match(claimed.error.message, new RegExp(`is signed by key ${site.keys.evil.key_id}, which is not an accepted key .*; the key rotation ${site.keys.old.key_id} -> ${site.keys.evil.key_id} .*does not verify under key ${site.keys.old.key_id}`));
  assert.equal((await call(b, "claimed", "current")).value, null, "nothing installed");
  t.diagnostic(`rotation claimed from the trusted key: ${claimed.error.message}`);
  // Nothing of the attacker's was stored as a learned key.
  assert.ok(!JSON.stringify(await storedRotations(b)).includes(site.keys.evil.key_id), "no attacker key stored");
});
