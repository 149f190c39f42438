#!/usr/bin/env node
// Makes the demo's and the browser tests' static update site with the CLI, exactly as a
// studio would (docs/STATIC_SITE.md): `edgepatch keygen`, then `edgepatch site add` per
// build; plus hostile variants of the site for the tests:
//
//   node web/scripts/make-static-site.mjs [--out web/dist/updates] [--trees web/dist/trees]
//        [--hostile web/dist/hostile] [--big] [--edgepatch target/release/edgepatch]
//
// Games (each build published with `site add --channel stable`, so the channel moves
// through the builds in order):
//   demo    fixtures/game-v1.tar, game-v2.tar (zstd level 19)
//   arcade  fixtures/arcade/v1, v2 (the playable game), when those directories exist
//   arcade-decoded  the same game shipped as Unity ships builds (its Build/data.json.gz, plus
//           Build/logic.wasm.br, Brotli 11 of logic.wasm), published with --store-decoded
//   big     with --big: a ~16 MiB file of deterministic pseudo-random bytes with scattered
//           changes, so the v1 -> v2 patch has several 4 MiB segments (resume tests);
//           level 3; only v2 is on the channel
// A fresh key is made on every run, in a temporary directory with the site's private
// state (never under --out, which is served); the public key is in v1/public-key and in
// site.json. --out gets the site's public/ directory as it would be uploaded, plus
// site.json: { publicKey, keyId, games: { G: { updates: [descriptor + segments, newBytes,
// patchBlake3], channels: { C: { build, sequence } } } } }, the listing the tests read.
// Extracted builds land in --trees/<game>/<build>/ for byte comparisons.
//
// --hostile gets what an attacker who controls the host, a CDN or the network would
// serve instead of some of the site's files, and hostile.json says which (per variant,
// site-relative URL path -> file below --hostile); the tests swap them in with
// serve.mjs's `faults.replace`. Variants that must carry a valid signature are signed
// with the site's real key: the key file `edgepatch keygen` wrote is the base64 of the
// 32-byte ed25519 seed, the statements are the core's (wasm `channelStatement`).
//   forged-patch   a self-consistent patch v1 -> a v2 with another index.html title
//                  (every file the same size), made with `edgepatch diff` and re-tried
//                  with variations until it is exactly the real patch's size, at the real
//                  patch's URL
//   wrong-game     demo's v1 -> v2 descriptor replaced by one `site add` signed (real key)
//                  for game "other" (relabelled "demo"), with that game's manifest and patch
//   unsigned       demo's v1 -> v2 descriptor without keyId and signature
//   oversized-manifest  demo's v1 -> v2 manifest with 8 MiB appended
//   rolled-back    demo's channel document replaced by the sequence-1 document `site add v1`
//                  wrote (build v1), signed by the real key and not expired: a replay
//   same-sequence  demo's channel document at sequence 2 (the real one's) naming build v1
//   expired        demo's channel document (build v2, sequence 2) signed with an expiry
//                  a day in the past: a freeze
import { execFileSync } from "node:child_process";
import { createHash, createPrivateKey, sign as ed25519Sign } from "node:crypto";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { brotliCompressSync, constants as zlibConstants } from "node:zlib";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { channelStatement, initSync } from "../../crates/edgepatch-wasm/pkg/web-apply/edgepatch_wasm.js";

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
const now = Math.floor(Date.now() / 1000);
const DAY = 86400;
const json = (v) => JSON.stringify(v, null, 2) + "\n";
const cli = (cmdArgs) => JSON.parse(execFileSync(edgepatch, ["--json", "--quiet", ...cmdArgs], { encoding: "utf8" }));

for (const d of [out, trees, hostileOut]) rmSync(d, { recursive: true, force: true });
// The key and the site's private state: outside anything served, gone when done.
const work = mkdtempSync(join(tmpdir(), "edgepatch-site-"));
process.on("exit", () => rmSync(work, { recursive: true, force: true }));
const tmp = join(work, "tmp");
mkdirSync(join(tmp, "empty"), { recursive: true });

const keyFile = join(work, "site.key");
const { public_key: publicKey, key_id: keyId } = cli(["keygen", keyFile]);
// The key file's format (`edgepatch keygen`): base64 of the 32-byte seed. PKCS#8 wraps it for node.
const seed = Buffer.from(readFileSync(keyFile, "utf8").trim(), "base64");
const signingKey = createPrivateKey({ key: Buffer.concat([Buffer.from("302e020100300506032b657004220420", "hex"), seed]), format: "der", type: "pkcs8" });
const sign = (statement) => ed25519Sign(null, statement, signingKey).toString("base64");

const siteDir = join(work, "site");
const publicDir = join(siteDir, "public");
const index = {};

/** `edgepatch site add`; records the published pairs in the listing; returns them. */
function siteAdd(game, build, dir, { channel = "stable", level = 19, site = siteDir, listed = true, storeDecoded = false } = {}) {
  const addArgs = ["site", "add", "--site", site, "--key", keyFile, "--game", game, "--build", build, "--level", String(level)];
  if (channel) addArgs.push("--channel", channel);
  if (storeDecoded) addArgs.push("--store-decoded");
  const { pairs } = cli([...addArgs, dir]);
  for (const p of pairs) {
    console.error(`site: ${game} ${p.from} -> ${build}: patch ${p.patch_bytes} bytes (${p.segments} segments), ${p.new_bytes} bytes of build`);
    if (!listed) continue;
    const descriptor = JSON.parse(readFileSync(join(site, "public", p.descriptor), "utf8"));
    (index[game] ??= { updates: [], channels: {} }).updates.push({ ...descriptor, segments: p.segments, newBytes: p.new_bytes, patchBlake3: p.patch.split("/").at(-1) });
  }
  if (channel && listed) {
    const doc = JSON.parse(readFileSync(join(site, "public", `v1/games/${game}/channels/${channel}`), "utf8"));
    index[game].channels[channel] = { build: doc.build, sequence: doc.sequence };
  }
  return Object.fromEntries(pairs.map((p) => [p.from, p]));
}

function channelDocOf(game, channel, build, sequence, expires) {
  return { game, channel, build, sequence, expires, keyId, signature: sign(channelStatement(keyId, game, channel, build, sequence, expires)) };
}

// demo: the fixture game (the tars keep executable bits and links).
for (const v of ["v1", "v2"]) {
  const d = join(trees, "demo", v);
  mkdirSync(d, { recursive: true });
  execFileSync("tar", ["-xf", join(repo, `fixtures/game-${v}.tar`), "-C", d]);
}
siteAdd("demo", "v1", join(trees, "demo/v1"));
// The channel's first document, as clients saw it before v2: the rolled-back variant replays it.
const stableSequence1 = readFileSync(join(publicDir, "v1/games/demo/channels/stable"));
const demoV1V2 = siteAdd("demo", "v2", join(trees, "demo/v2")).v1;

// arcade: the playable game, once its fixture builds exist.
if (existsSync(join(repo, "fixtures/arcade/v1")) && existsSync(join(repo, "fixtures/arcade/v2"))) {
  for (const v of ["v1", "v2"]) {
    cpSync(join(repo, "fixtures/arcade", v), join(trees, "arcade", v), { recursive: true, verbatimSymlinks: true });
    siteAdd("arcade", v, join(trees, "arcade", v));
  }
  for (const v of ["v1", "v2"]) {
    const d = join(trees, "arcade-decoded", v);
    cpSync(join(repo, "fixtures/arcade", v), d, { recursive: true, verbatimSymlinks: true });
    const wasm = readFileSync(join(d, "logic.wasm"));
    writeFileSync(join(d, "Build/logic.wasm.br"), brotliCompressSync(wasm, { params: { [zlibConstants.BROTLI_PARAM_QUALITY]: 11, [zlibConstants.BROTLI_PARAM_SIZE_HINT]: wasm.length } }));
    siteAdd("arcade-decoded", v, d, { storeDecoded: true });
  }
}

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
  siteAdd("big", "v1", join(trees, "big/v1"), { channel: null, level: 3 });
  siteAdd("big", "v2", join(trees, "big/v2"), { level: 3 });
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

// forged-patch: demo v2 with another <title>, the same files and sizes (only contents differ,
// so that only the binding to the signed manifest can tell). Two knobs an attacker turns until
// the patch (`edgepatch diff`) is exactly as long as the real one: the first `m` bytes of
// assets/img/enemy.png put back to v1's (the patch shrinks), and deterministic "random" noise
// in place of the title's other mentions (it grows, a byte or so per character).
{
  const target = demoV1V2.patch_bytes;
  const title = "FORGED Hopper!";
  const patchFile = join(tmp, "demo-forged.patch");
  const rand = (seed) => createHash("sha256").update(seed).digest("base64").replace(/[^A-Za-z0-9]/g, "").slice(0, 28);
  const enemy = "assets/img/enemy.png";
  const [enemyV1, enemyV2] = ["v1", "v2"].map((b) => readFileSync(join(trees, "demo", b, enemy)));
  if (enemyV1.length !== enemyV2.length) throw new Error(`${enemy}: v1 and v2 sizes differ; the forged patch needs a same-size file`);
  const forgedSize = (m, noise) => {
    const dir = retitled("v2", "demo-forged", title, noise);
    writeFileSync(join(dir, enemy), Buffer.concat([enemyV1.subarray(0, m), enemyV2.subarray(m)]));
    return cli(["diff", join(trees, "demo/v1"), dir, patchFile]).patch_bytes;
  };
  let found = null;
  let tries = 0;
  search: for (let m = 0; m <= enemyV1.length; m += 8) {
    for (let k = 0; k <= 28; k++) {
      for (let s = 0; s < (k === 0 ? 1 : 3); s++) {
        tries++;
        const size = forgedSize(m, rand(`forged ${m} ${k} ${s}`).slice(0, k));
        if (size === target) {
          found = readFileSync(patchFile);
          break search;
        }
        if (size > target + 4) continue search; // more noise only grows it: shrink more
      }
    }
  }
  if (!found) throw new Error(`no forged patch of exactly ${target} bytes after ${tries} tries`);
  console.error(`site: hostile forged-patch: ${target} bytes after ${tries} tries`);
  variant("forged-patch", "a self-consistent v1 -> v2 patch with another index.html title, the real patch's size, at its URL",
    { [demoV1V2.patch]: found }, { forgedTitle: title, patchSize: target });
}

// wrong-game: game "other" (v1 = demo's v1, v2 retitled) published on a second site with
// the same key; its v1 -> v2 descriptor, signed for "other", relabelled "demo" and served
// as demo's, its manifest and patch where that descriptor's relative URLs point on demo's.
{
  const otherSite = join(work, "other-site");
  siteAdd("other", "v1", join(trees, "demo/v1"), { channel: null, site: otherSite, listed: false });
  const p = siteAdd("other", "v2", retitled("v2", "other-v2", "Other Game v2!"), { channel: null, site: otherSite, listed: false }).v1;
  const read = (rel) => readFileSync(join(otherSite, "public", rel));
  const d = JSON.parse(read(p.descriptor));
  variant("wrong-game", "demo's v1 -> v2 descriptor replaced by game other's (signed for other), with its manifest and patch", {
    "v1/games/demo/updates/v1/v2": json({ ...d, game: "demo" }),
    [p.manifest.replace("/other/", "/demo/")]: read(p.manifest),
    [p.patch.replace("/other/", "/demo/")]: read(p.patch),
  });
}

// unsigned: demo's real v1 -> v2 descriptor without its keyId and signature.
{
  const { keyId: _k, signature: _s, ...unsigned } = JSON.parse(readFileSync(join(publicDir, demoV1V2.descriptor), "utf8"));
  variant("unsigned", "demo's v1 -> v2 descriptor with its keyId and signature removed", { [demoV1V2.descriptor]: json(unsigned) });
}

// oversized-manifest: the real v1 -> v2 manifest followed by 8 MiB of zeros, at its URL.
variant("oversized-manifest", "demo's v1 -> v2 manifest with 8 MiB appended, at its URL", {
  [demoV1V2.manifest]: Buffer.concat([readFileSync(join(publicDir, demoV1V2.manifest)), Buffer.alloc(8 << 20)]),
});

// rolled-back: the channel's sequence-1 document (build v1), as `site add v1` signed it.
variant("rolled-back", "demo's stable channel replaced by its older sequence-1 document (build v1), validly signed", {
  "v1/games/demo/channels/stable": stableSequence1,
});
// same-sequence: the current sequence (2) again, but naming v1 (a sequence is never reused for another build).
const { sequence } = index.demo.channels.stable;
variant("same-sequence", `demo's stable channel at the same sequence ${sequence} but naming build v1, validly signed`, {
  "v1/games/demo/channels/stable": json(channelDocOf("demo", "stable", "v1", sequence, now + 7 * DAY)),
});
// expired: the current document (v2, sequence 2) signed with an expiry a day ago.
variant("expired", `demo's stable channel (v2, sequence ${sequence}) signed with an expiry a day in the past`, {
  "v1/games/demo/channels/stable": json(channelDocOf("demo", "stable", "v2", sequence, now - DAY)),
});
writeFileSync(join(hostileOut, "hostile.json"), json(hostile));

// The site as it would be uploaded, and the listing the tests read.
cpSync(publicDir, out, { recursive: true });
writeFileSync(join(out, "site.json"), json({ publicKey, keyId, games: index }));
console.error(`site: ${out} (key ${keyId}); hostile variants: ${hostileOut}`);
