#!/usr/bin/env node
// Makes a signed static update site (docs/UPDATE_PROTOCOL.md v2) with the native CLI
// (patches, manifests) and the core's statement encoding (wasm `updateStatement`,
// `channelStatement`, `keyId`), plus hostile variants of it for the browser tests:
//
//   node web/scripts/make-static-site.mjs [--out web/dist/updates] [--trees web/dist/trees]
//        [--hostile web/dist/hostile] [--big] [--edgepatch target/release/edgepatch]
//
// Game "demo": fixture builds v1 and v2 (fixtures/game-v*.tar); updates _ -> v1,
// v1 -> v2, _ -> v2; channel "stable" moved to v1 (sequence 1), then to v2 (sequence 2).
// With --big, game "big" too: a ~16 MiB file of deterministic pseudo-random bytes with
// scattered changes, so the v1 -> v2 patch has several 4 MiB segments (resume tests).
// Every descriptor carries a signature over its update statement, every channel
// document one over its channel statement (sequence, expires = now + 7 days), under a
// fixed test key (not a secret) published at v1/public-key. Extracted builds land in
// --trees/<game>/<build>/ for byte comparisons.
//
// --hostile gets what an attacker who controls the host, a CDN or the network would
// serve instead of some of the site's files, and hostile.json says which (per variant,
// site-relative URL path -> file below --hostile); the tests swap them in with
// serve.mjs's `faults.replace`:
//   forged-patch   a self-consistent patch v1 -> a v2 with another index.html title
//                  (every file the same size), made with the CLI and re-tried with
//                  variations until it is exactly the real patch's size, at the real
//                  patch's URL
//   wrong-game     demo's v1 -> v2 descriptor replaced by one signed (real key) for game
//                  "other" (relabelled "demo"), with that game's manifest and patch
//   unsigned       demo's v1 -> v2 descriptor without keyId and signature
//   oversized-manifest  demo's v1 -> v2 manifest with 8 MiB appended
//   rolled-back    demo's channel document replaced by its sequence-1 version (build v1),
//                  signed by the real key and not expired: a replay
//   same-sequence  demo's channel document at sequence 2 (the real one's) naming build v1
//   expired        demo's channel document (build v2, sequence 2) signed with an expiry
//                  a day in the past: a freeze
import { execFileSync } from "node:child_process";
import { createHash, createPrivateKey, sign as ed25519Sign } from "node:crypto";
import { cpSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { blake3Hex, channelStatement, initSync, keyId, updateStatement } from "../../crates/edgepatch-wasm/pkg/web-apply/edgepatch_wasm.js";

const web = join(dirname(fileURLToPath(import.meta.url)), "..");
const repo = join(web, "..");
initSync({ module: readFileSync(join(repo, "crates/edgepatch-wasm/pkg/web-apply/edgepatch_wasm_bg.wasm")) });

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
};
const out = resolve(opt("--out", join(web, "dist/updates")));
const trees = resolve(opt("--trees", join(web, "dist/trees")));
const hostileOut = resolve(opt("--hostile", join(web, "dist/hostile")));
const edgepatch = resolve(opt("--edgepatch", join(repo, "target/release/edgepatch")));
const big = args.includes("--big");

// A fixed ed25519 key (32-byte seed; a test key, not a secret).
const SEED = Buffer.alloc(32, 7);
const signingKey = createPrivateKey({ key: Buffer.concat([Buffer.from("302e020100300506032b657004220420", "hex"), SEED]), format: "der", type: "pkcs8" });
const rawPublicKey = Buffer.from(signingKey.export({ format: "jwk" }).x, "base64url");
const publicKey = rawPublicKey.toString("base64");
const kid = keyId(rawPublicKey);
const sign = (statement) => ed25519Sign(null, statement, signingKey).toString("base64");
const now = Math.floor(Date.now() / 1000);
const DAY = 86400;

for (const d of [out, trees, hostileOut]) rmSync(d, { recursive: true, force: true });
const games = join(out, "v1/games");
mkdirSync(join(games, "manifests"), { recursive: true });
mkdirSync(join(games, "patches"), { recursive: true });
const tmp = join(trees, ".work");
mkdirSync(join(tmp, "empty"), { recursive: true });

const index = {};
const publicKeyDoc = { algorithm: "ed25519", publicKey, keyId: kid, keys: [{ keyId: kid, publicKey }] };
writeFileSync(join(out, "v1/public-key"), JSON.stringify(publicKeyDoc) + "\n");

/** Patch and manifest of `from` -> `to`, made with the CLI. */
function makePatch(name, from, to, oldDir, newDir, level) {
  const patch = join(tmp, `${name}.patch`);
  const manifest = join(tmp, `${name}.manifest`);
  const diff = JSON.parse(execFileSync(edgepatch, ["--json", "--quiet", "diff", "--level", String(level), oldDir, newDir, patch], { encoding: "utf8" }));
  execFileSync(edgepatch, ["--json", "--quiet", "manifest", "--old", oldDir, "--new", newDir, "--from", from, "--to", to, patch, manifest]);
  return { patch: readFileSync(patch), manifest: readFileSync(manifest), diff };
}

/** The signed update descriptor (docs/UPDATE_PROTOCOL.md) of `game` for a manifest and patch. */
function descriptorOf(game, from, to, manifest, patch) {
  const mHash = blake3Hex(manifest);
  return {
    game, from, to,
    manifestUrl: `../../../manifests/${mHash}`,
    manifestSize: manifest.length,
    manifestBlake3: mHash,
    patchUrl: `../../../patches/${blake3Hex(patch)}`,
    patchSize: patch.length,
    keyId: kid,
    signature: sign(updateStatement(kid, game, from, to, manifest.length, mHash)),
  };
}

function channelDocOf(game, channel, build, sequence, expires) {
  return { game, channel, build, sequence, expires, keyId: kid, signature: sign(channelStatement(kid, game, channel, build, sequence, expires)) };
}

const json = (v) => JSON.stringify(v, null, 2) + "\n";

function publish(game, from, to, oldDir, newDir, level) {
  const { patch, manifest, diff } = makePatch(`${game}-${from}-${to}`, from, to, oldDir, newDir, level);
  const descriptor = descriptorOf(game, from, to, manifest, patch);
  writeFileSync(join(games, "patches", blake3Hex(patch)), patch);
  writeFileSync(join(games, "manifests", descriptor.manifestBlake3), manifest);
  const dir = join(games, game, "updates", from);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, to), json(descriptor));
  (index[game] ??= { updates: [] }).updates.push({ ...descriptor, segments: diff.segments, newBytes: diff.new_bytes, patchBlake3: blake3Hex(patch) });
  console.error(`site: ${game} ${from} -> ${to}: patch ${patch.length} bytes (${diff.segments} segments), ${diff.new_bytes} bytes of build`);
  return { patch, manifest, descriptor };
}

/** Moves a channel through `history` (builds in order; sequence 1, 2, ...); publishes the last document. */
function channel(game, name, history) {
  const dir = join(games, game, "channels");
  mkdirSync(dir, { recursive: true });
  const docs = history.map((build, i) => channelDocOf(game, name, build, i + 1, now + 7 * DAY));
  writeFileSync(join(dir, name), json(docs.at(-1)));
  index[game].channels = { ...(index[game].channels ?? {}), [name]: { build: docs.at(-1).build, sequence: docs.at(-1).sequence } };
  return docs;
}

// demo: the fixture game.
for (const v of ["v1", "v2"]) {
  const d = join(trees, "demo", v);
  mkdirSync(d, { recursive: true });
  execFileSync("tar", ["-xf", join(repo, `fixtures/game-${v}.tar`), "-C", d]);
}
publish("demo", "_", "v1", join(tmp, "empty"), join(trees, "demo/v1"), 19);
const demoV1V2 = publish("demo", "v1", "v2", join(trees, "demo/v1"), join(trees, "demo/v2"), 19);
publish("demo", "_", "v2", join(tmp, "empty"), join(trees, "demo/v2"), 19);
const stableDocs = channel("demo", "stable", ["v1", "v2"]);

if (big) {
  // Deterministic bytes: SHA-256 in counter mode (fast enough, ~0.1 s for 16 MiB).
  const stream = (seed, n) => {
    const b = Buffer.alloc(n);
    for (let i = 0, c = 0; i < n; c++) {
      const h = createHash("sha256").update(`${seed}:${c}`).digest();
      i += h.copy(b, i);
    }
    return b;
  };
  const MiB = 1 << 20;
  const v1 = stream("big-v1", 16 * MiB);
  const v2 = Buffer.from(v1);
  // 16 scattered changes of 256 KiB of fresh bytes: ~4 MiB of patch over 4 segments.
  const fresh = stream("big-v2", 16 * 256 * 1024);
  for (let i = 0; i < 16; i++) fresh.copy(v2, i * MiB + 300 * 1024, i * 256 * 1024, (i + 1) * 256 * 1024);
  for (const [v, data] of [["v1", v1], ["v2", v2]]) {
    const d = join(trees, "big", v);
    mkdirSync(join(d, "data"), { recursive: true });
    writeFileSync(join(d, "data/big.bin"), data);
    writeFileSync(join(d, "version.txt"), `big ${v}\n`);
  }
  publish("big", "_", "v1", join(tmp, "empty"), join(trees, "big/v1"), 3);
  publish("big", "v1", "v2", join(trees, "big/v1"), join(trees, "big/v2"), 3);
  channel("big", "stable", ["v2"]);
}

// --- Hostile variants -------------------------------------------------------------
const hostile = {};
function variant(name, description, files, extra = {}) {
  const replace = {};
  for (const [sitePath, bytes] of Object.entries(files)) {
    const rel = `${name}/${sitePath.replaceAll("/", "_")}`;
    mkdirSync(join(hostileOut, name), { recursive: true });
    writeFileSync(join(hostileOut, rel), bytes);
    replace[sitePath] = rel;
  }
  hostile[name] = { description, replace, ...extra };
}

/**
 * A copy of demo `build` whose index.html <title> reads `title` and whose other mentions of
 * the real title (heading, alt text) start with `noise` instead: same length, so every size
 * stays the same. The noise is the knob an attacker turns until the compressed patch has
 * exactly the size it needs.
 */
function retitled(build, dirName, title, noise = "") {
  const d = join(tmp, dirName);
  rmSync(d, { recursive: true, force: true });
  cpSync(join(trees, "demo", build), d, { recursive: true, verbatimSymlinks: true });
  const html = readFileSync(join(d, "index.html"), "latin1");
  const real = /<title>([^<]*)<\/title>/.exec(html)[1];
  if (title.length !== real.length || noise.length > 2 * real.length) throw new Error(`forged title must have ${real.length} characters`);
  let forged = html.replace(`<title>${real}</title>`, `<title>${title}</title>`);
  let i = 0;
  forged = forged.replaceAll(real, () => {
    const n = noise.slice(i * real.length, (i + 1) * real.length);
    i++;
    return n + real.slice(n.length);
  });
  if (forged.length !== html.length) throw new Error("forged index.html changed size");
  writeFileSync(join(d, "index.html"), forged, "latin1");
  return d;
}

// forged-patch: deterministic "random" noise of growing length and a few zstd levels, until
// the patch is exactly as long as the real one (an attacker's loop; ~30 tries here).
{
  const target = demoV1V2.patch.length;
  const title = "FORGED Hopper!";
  let found = null;
  let tries = 0;
  const rand = (seed) => createHash("sha256").update(seed).digest("base64").replace(/[^A-Za-z0-9]/g, "").slice(0, 28);
  search: for (const level of [21, 22, 19, 20]) {
    noise:
    for (let k = 0; k <= 28; k++) {
      for (let s = 0; s < (k === 0 ? 1 : 3); s++) {
        tries++;
        const dir = retitled("v2", "demo-forged", title, rand(`forged ${level} ${k} ${s}`).slice(0, k));
        const p = makePatch("demo-forged", "v1", "v2", join(trees, "demo/v1"), dir, level);
        if (p.patch.length === target) {
          found = p;
          break search;
        }
        if (p.patch.length > target + 4) break noise; // more noise only grows it
      }
    }
  }
  if (!found) throw new Error(`no forged patch of exactly ${target} bytes after ${tries} tries`);
  console.error(`site: hostile forged-patch: ${target} bytes after ${tries} tries`);
  variant("forged-patch", "a self-consistent v1 -> v2 patch with another index.html title, the real patch's size, at its URL",
    { [`v1/games/patches/${blake3Hex(demoV1V2.patch)}`]: found.patch }, { forgedTitle: title, patchSize: target });
}

// wrong-game: game "other" publishes v1 -> v2 (another title); its descriptor, signed for
// "other" with the real key, relabelled "demo" and served as demo's.
{
  const dir = retitled("v2", "other-v2", "Other Game v2!");
  const p = makePatch("other-v1-v2", "v1", "v2", join(trees, "demo/v1"), dir, 19);
  const d = descriptorOf("other", "v1", "v2", p.manifest, p.patch);
  variant("wrong-game", "demo's v1 -> v2 descriptor replaced by game other's (signed for other), with its manifest and patch", {
    "v1/games/demo/updates/v1/v2": json({ ...d, game: "demo" }),
    [`v1/games/manifests/${d.manifestBlake3}`]: p.manifest,
    [`v1/games/patches/${blake3Hex(p.patch)}`]: p.patch,
  });
}

// unsigned: demo's real v1 -> v2 descriptor without its keyId and signature.
{
  const { keyId: _k, signature: _s, ...unsigned } = demoV1V2.descriptor;
  variant("unsigned", "demo's v1 -> v2 descriptor with its keyId and signature removed", { "v1/games/demo/updates/v1/v2": json(unsigned) });
}

// oversized-manifest: the real v1 -> v2 manifest followed by 8 MiB of zeros, at its URL.
variant("oversized-manifest", "demo's v1 -> v2 manifest with 8 MiB appended, at its URL", {
  [`v1/games/manifests/${demoV1V2.descriptor.manifestBlake3}`]: Buffer.concat([demoV1V2.manifest, Buffer.alloc(8 << 20)]),
});

// rolled-back: the channel's sequence-1 document (build v1), re-signed fresh by the real key.
variant("rolled-back", "demo's stable channel replaced by its older sequence-1 document (build v1), validly signed", {
  "v1/games/demo/channels/stable": json({ ...stableDocs[0] }),
});
// same-sequence: sequence 2 again, but naming v1 (a sequence is never reused for another build).
variant("same-sequence", "demo's stable channel at the same sequence 2 but naming build v1, validly signed", {
  "v1/games/demo/channels/stable": json(channelDocOf("demo", "stable", "v1", 2, now + 7 * DAY)),
});
// expired: the current document (v2, sequence 2) signed with an expiry a day ago.
variant("expired", "demo's stable channel (v2, sequence 2) signed with an expiry a day in the past", {
  "v1/games/demo/channels/stable": json(channelDocOf("demo", "stable", "v2", 2, now - DAY)),
});
writeFileSync(join(hostileOut, "hostile.json"), json(hostile));

rmSync(tmp, { recursive: true, force: true });
writeFileSync(join(out, "site.json"), json({ publicKey, keyId: kid, games: index }));
console.error(`site: ${out}; hostile variants: ${hostileOut}`);
