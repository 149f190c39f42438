#!/usr/bin/env node
// Makes a static update site (docs/UPDATE_PROTOCOL.md) with the native CLI:
//
//   node web/scripts/make-static-site.mjs [--out web/dist/updates] [--trees web/dist/trees] [--big]
//
// Game "demo": fixture builds v1 and v2 (fixtures/game-v*.tar); updates _ -> v1,
// v1 -> v2, _ -> v2; channel "stable" -> v2. With --big, game "big" too: a ~16 MiB
// file of deterministic pseudo-random bytes with scattered changes, so the v1 -> v2
// patch has several 4 MiB segments (the resume tests need that).
// Manifests are signed (ed25519, a fixed test key; v1/public-key). The extracted
// builds land in --trees/<game>/<build>/ for byte comparisons.
import { execFileSync } from "node:child_process";
import { createHash, createPrivateKey, sign as ed25519Sign } from "node:crypto";
import { copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { blake3Hex, initSync } from "../../crates/edgepatch-wasm/pkg/web-apply/edgepatch_wasm.js";

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
const edgepatch = resolve(opt("--edgepatch", join(repo, "target/release/edgepatch")));
const big = args.includes("--big");
// A fixed ed25519 key (32-byte seed; a test key, not a secret): the site signs every
// manifest and publishes v1/public-key, as a signing server does.
const SEED = Buffer.alloc(32, 7);
const signingKey = createPrivateKey({ key: Buffer.concat([Buffer.from("302e020100300506032b657004220420", "hex"), SEED]), format: "der", type: "pkcs8" });
const publicKey = Buffer.from(signingKey.export({ format: "jwk" }).x, "base64url").toString("base64");

rmSync(out, { recursive: true, force: true });
rmSync(trees, { recursive: true, force: true });
const games = join(out, "v1/games");
mkdirSync(join(games, "manifests"), { recursive: true });
mkdirSync(join(games, "patches"), { recursive: true });
const tmp = join(trees, ".work");
mkdirSync(join(tmp, "empty"), { recursive: true });

const index = {};
writeFileSync(join(out, "v1/public-key"), JSON.stringify({ algorithm: "ed25519", publicKey }) + "\n");

function publish(game, from, to, oldDir, newDir, level) {
  const patch = join(tmp, `${game}-${from}-${to}.patch`);
  const manifest = join(tmp, `${game}-${from}-${to}.manifest`);
  const diff = JSON.parse(execFileSync(edgepatch, ["--json", "--quiet", "diff", "--level", String(level), oldDir, newDir, patch], { encoding: "utf8" }));
  execFileSync(edgepatch, ["--json", "--quiet", "manifest", "--old", oldDir, "--new", newDir, "--from", from, "--to", to, patch, manifest]);
  const pBytes = readFileSync(patch);
  const mBytes = readFileSync(manifest);
  const pHash = blake3Hex(pBytes);
  const mHash = blake3Hex(mBytes);
  copyFileSync(patch, join(games, "patches", pHash));
  copyFileSync(manifest, join(games, "manifests", mHash));
  const dir = join(games, game, "updates", from);
  mkdirSync(dir, { recursive: true });
  const descriptor = {
    game, from, to,
    manifestUrl: `../../../manifests/${mHash}`,
    manifestSize: mBytes.length,
    manifestBlake3: mHash,
    patchUrl: `../../../patches/${pHash}`,
    patchSize: pBytes.length,
    manifestSignature: ed25519Sign(null, mBytes, signingKey).toString("base64"),
  };
  writeFileSync(join(dir, to), JSON.stringify(descriptor, null, 2) + "\n");
  (index[game] ??= { updates: [] }).updates.push({ ...descriptor, segments: diff.segments, newBytes: diff.new_bytes });
  console.error(`site: ${game} ${from} -> ${to}: patch ${pBytes.length} bytes (${diff.segments} segments), ${diff.new_bytes} bytes of build`);
}

function channel(game, name, build) {
  const dir = join(games, game, "channels");
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, name), JSON.stringify({ game, channel: name, build }) + "\n");
  index[game].channels = { ...(index[game].channels ?? {}), [name]: build };
}

// demo: the fixture game.
for (const v of ["v1", "v2"]) {
  const d = join(trees, "demo", v);
  mkdirSync(d, { recursive: true });
  execFileSync("tar", ["-xf", join(repo, `fixtures/game-${v}.tar`), "-C", d]);
}
publish("demo", "_", "v1", join(tmp, "empty"), join(trees, "demo/v1"), 19);
publish("demo", "v1", "v2", join(trees, "demo/v1"), join(trees, "demo/v2"), 19);
publish("demo", "_", "v2", join(tmp, "empty"), join(trees, "demo/v2"), 19);
channel("demo", "stable", "v2");

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
  channel("big", "stable", "v2");
}

rmSync(tmp, { recursive: true, force: true });
writeFileSync(join(out, "site.json"), JSON.stringify({ publicKey, games: index }, null, 2) + "\n");
console.error(`site: ${out}`);
