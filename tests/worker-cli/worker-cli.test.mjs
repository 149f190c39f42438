// Cross-component: the native CLI against the Worker under `wrangler dev`. Publishes the
// fixture builds (and a multi-segment single-file build) onto a channel, updates with
// `edgepatch update` (anonymous: the pairs the channel releases; also --channel) and compares
// the result with the real new build byte for byte; checks that the owner's 100 concurrent
// requests for a new pair cause one generation and that repeats are cache hits; that the
// Worker's patches of moved game-data records (LZMA ops streams) and of a re-emitted wasm
// module (LZMA window segments) are the CLI's `--worker-text-windows` patches.
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { devVars, REPO, startWrangler } from "../../worker/scripts/wrangler-dev.mjs";

const BIN = process.env.EDGEPATCH_BIN ?? join(REPO, "target/release/edgepatch");
const { token, publicKey } = devVars();
const work = mkdtempSync(join(tmpdir(), "edgepatch-worker-cli-"));
// The CLI pins a server's key (--trust-on-first-use) in its config directory: a fresh one per run.
const configDir = join(work, "config");
let server;

function edgepatch(args, { ok = true } = {}) {
  const r = spawnSync(BIN, args, { env: { ...process.env, EDGEPATCH_TOKEN: token, EDGEPATCH_CONFIG_DIR: configDir, EDGEPATCH_PUBLIC_KEY: "" }, encoding: "utf8" });
  if (ok) assert.equal(r.status, 0, `edgepatch ${args.join(" ")}\n${r.stdout}${r.stderr}`);
  return r;
}

function extract(tar, name) {
  const dir = join(work, name);
  mkdirSync(dir, { recursive: true });
  execFileSync("tar", ["-xf", tar, "-C", dir]);
  return dir;
}

/** Every entry of a tree: kind, executable bit, symlink target, content. */
function snapshot(root) {
  const out = {};
  const walk = (rel) => {
    for (const name of readdirSync(join(root, rel)).sort()) {
      const path = rel ? `${rel}/${name}` : name;
      const st = lstatSync(join(root, path));
      if (st.isSymbolicLink()) out[path] = `link:${readlinkSync(join(root, path))}`;
      else if (st.isDirectory()) {
        out[path] = "dir";
        walk(path);
      } else out[path] = `file:${(st.mode & 0o111) !== 0 ? "x" : "-"}:${readFileSync(join(root, path)).toString("base64")}`;
    }
  };
  walk("");
  return out;
}

function assertSameTree(actual, expected) {
  const a = snapshot(actual);
  const e = snapshot(expected);
  assert.deepEqual(Object.keys(a), Object.keys(e));
  for (const k of Object.keys(e)) assert.ok(a[k] === e[k], `${k} differs`);
}

before(async () => {
  assert.ok(existsSync(BIN), `${BIN} missing: cargo build --release --bin edgepatch`);
  server = await startWrangler({ port: Number(process.env.EDGEPATCH_TEST_PORT ?? 8791) });
});

after(() => {
  server?.stop();
  rmSync(work, { recursive: true, force: true });
});

test("publish two fixture builds; edgepatch update reproduces v2 byte-exact (tree)", () => {
  const v1 = extract(join(REPO, "fixtures/game-v1.tar"), "v1");
  const v2 = extract(join(REPO, "fixtures/game-v2.tar"), "v2");
  // Both onto the channel: anonymous callers may then update v1 -> v2 and install v2.
  edgepatch(["publish", "--server", server.url, "--game", "demo", "--build", "v1", "--channel", "main", v1]);
  edgepatch(["publish", "--server", server.url, "--game", "demo", "--build", "v2", "--channel", "main", v2]);
  const out = join(work, "out-v2");
  const r = edgepatch(["update", "--json", "--server", server.url, "--game", "demo", "--from", "v1", "--to", "v2", "--public-key", publicKey, v1, out]);
  const summary = JSON.parse(r.stdout);
  assert.equal(summary.signature_verified, true);
  assert.equal(summary.key_source, "--public-key");
  assertSameTree(out, v2);
  // v1 untouched.
  assertSameTree(v1, extract(join(REPO, "fixtures/game-v1.tar"), "v1-again"));
});

test("install from the empty build (_) reproduces v2", () => {
  const empty = join(work, "empty");
  mkdirSync(empty, { recursive: true });
  const out = join(work, "out-install");
  edgepatch(["update", "--server", server.url, "--game", "demo", "--from", "_", "--to", "v2", "--public-key", publicKey, empty, out]);
  assertSameTree(out, join(work, "v2"));
});

test("a single large file over several segments, uploaded in parts, updates byte-exact", () => {
  // 13 MiB of incompressible data, then the same with edits, an insertion and an appended tail.
  const a = Buffer.alloc(13 << 20);
  let x = 12345;
  for (let i = 0; i < a.length; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    a[i] = x >>> 24;
  }
  const b = Buffer.concat([a.subarray(0, 3 << 20), Buffer.from("inserted bytes ".repeat(1000)), a.subarray(3 << 20), Buffer.from("tail")]);
  for (let i = 5 << 20; i < b.length; i += 1 << 20) b[i] ^= 0xff;
  const d1 = join(work, "file-v1");
  const d2 = join(work, "file-v2");
  mkdirSync(d1);
  mkdirSync(d2);
  writeFileSync(join(d1, "game.pak"), a);
  writeFileSync(join(d2, "game.pak"), b);
  edgepatch(["publish", "--server", server.url, "--game", "pak", "--build", "v1", "--channel", "main", "--part-size", String(5 << 20), d1]);
  edgepatch(["publish", "--server", server.url, "--game", "pak", "--build", "v2", "--channel", "main", "--part-size", String(5 << 20), d2]);
  const out = join(work, "out-pak");
  const r = edgepatch(["update", "--json", "--server", server.url, "--game", "pak", "--from", "v1", "--to", "v2", "--trust-on-first-use", d1, out]);
  // No key given, --trust-on-first-use: the server's key is pinned, and it is the documented one.
  assert.match(JSON.parse(r.stdout).key_source, /pinned on first use/);
  assert.match(readFileSync(join(configDir, "known_keys"), "utf8"), new RegExp(publicKey.replace(/[+/=]/g, "\\$&")));
  assert.ok(JSON.parse(r.stdout).patch_bytes < b.length / 4, `patch ${JSON.parse(r.stdout).patch_bytes} bytes for ${b.length}`);
  assertSameTree(out, d2);
});

/**
 * Publishes builds d1 and d2 as v1 and v2 of `game`, fetches the Worker's patch as the owner,
 * and checks: its `inspect --json` segments pass `wanted` (`what` names it in the failure), it
 * is byte for byte the CLI's `diff --bounded --level 17 --worker-text-windows` patch, and it
 * applies to d1 giving d2.
 */
async function workerPatchIsTheClis(game, d1, d2, what, wanted) {
  edgepatch(["publish", "--server", server.url, "--game", game, "--build", "v1", d1]);
  edgepatch(["publish", "--server", server.url, "--game", game, "--build", "v2", d2]);
  const owner = { headers: { Authorization: `Bearer ${token}` } };
  const url = `${server.url}/v1/games/${game}/updates/v1/v2`;
  const res = await fetch(url, owner);
  assert.equal(res.status, 200, await res.clone().text());
  const d = await res.json();
  const patch = join(work, `${game}.patch`);
  writeFileSync(patch, Buffer.from(await (await fetch(new URL(d.patchUrl, url), owner)).arrayBuffer()));
  const info = JSON.parse(edgepatch(["--json", "inspect", patch]).stdout);
  assert.ok(info.segments.filter(wanted).length > 0, `no ${what}: ${JSON.stringify(info.segments)}`);
  // The CLI's form of the Worker's generator makes the same patch, byte for byte.
  const cli = join(work, `${game}-cli.patch`);
  edgepatch(["diff", "--quiet", "--bounded", "--level", "17", "--worker-text-windows", d1, d2, cli]);
  assert.ok(readFileSync(cli).equals(readFileSync(patch)), `the Worker's patch (${d.patchSize} bytes) is not the CLI's (${readFileSync(cli).length})`);
  const out = join(work, `out-${game}`);
  edgepatch(["apply", "--quiet", d1, patch, out]);
  assertSameTree(out, d2);
}

test("game data whose records move: the Worker's patch has LZMA ops streams, and is the CLI's --worker-text-windows patch", async () => {
  // 16-byte records whose 32-bit field at offset 4 moves by a small skewed amount (as
  // offsets in a game's data files move between builds): an ops segment whose diff stream
  // LZMA codes 6% smaller than zstd at the Worker's level (docs/FORMAT.md §2.3 `M`).
  let x = 777;
  const next = () => {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    return x >>> 24;
  };
  const a = Buffer.alloc(2 << 20);
  for (let i = 0; i < a.length; i++) a[i] = next();
  const b = Buffer.from(a);
  for (let r = 0; r < b.length; r += 16) {
    const moved = 4 * [1, 1, 1, 2, 2, 3, 4, 8][next() & 7];
    b.writeUInt32LE((b.readUInt32LE(r + 4) + moved) >>> 0, r + 4);
  }
  const [d1, d2] = [join(work, "records-v1"), join(work, "records-v2")];
  mkdirSync(d1);
  mkdirSync(d2);
  writeFileSync(join(d1, "levels.dat"), a);
  writeFileSync(join(d2, "levels.dat"), b);
  await workerPatchIsTheClis("records", d1, d2, "ops segment with LZMA streams", (s) => s.kind === "ops" && s.lzma?.length > 0);
});

test("a re-emitted wasm module: the Worker's patch has LZMA window segments, and is the CLI's --worker-text-windows patch", async () => {
  // fixtures/arcade's logic.wasm, stored in the field-split layout (docs/FORMAT.md §2.8.7):
  // its parts, with their windows far under the Worker's 4 MiB, are tried as LZMA (§2.6 `L`).
  const [d1, d2] = [join(REPO, "fixtures/arcade/v1"), join(REPO, "fixtures/arcade/v2")];
  await workerPatchIsTheClis("arcade-lzma", d1, d2, "LZMA window segment", (s) => s.codec === "lzma");
});

test("a wrong public key is refused and nothing is written", () => {
  const out = join(work, "out-wrongkey");
  const r = edgepatch(["update", "--server", server.url, "--game", "demo", "--from", "v1", "--to", "v2", "--public-key", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", join(work, "v1"), out], { ok: false });
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /signed by key [0-9a-f]{16}, which is not one of the accepted keys/);
  assert.equal(existsSync(out), false);
});

test("wrong token: 401, nothing published", () => {
  const r = spawnSync(BIN, ["publish", "--server", server.url, "--game", "demo", "--build", "v3", join(work, "v2")], { env: { ...process.env, EDGEPATCH_TOKEN: "wrong" }, encoding: "utf8" });
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /401/);
  return fetch(`${server.url}/v1/games/demo/builds/v3`, { headers: { Authorization: `Bearer ${token}` } }).then((res) => assert.equal(res.status, 404));
});

test("anonymous callers get only released pairs; the owner's 100 concurrent requests for a new pair: one generation; repeats are cache hits", async () => {
  const url = `${server.url}/v1/games/demo/updates/v2/v1`;
  // No channel releases v1 from v2: anonymous callers are refused, and nothing is generated.
  const refused = await fetch(url);
  assert.equal(refused.status, 401, await refused.text());
  assert.equal((await fetch(`${server.url}/v1/games/demo/builds`)).status, 401);
  const owner = { headers: { Authorization: `Bearer ${token}` } };
  const before = await (await fetch(`${url}/generations`, owner)).json();
  assert.equal(before.count, 0);
  const responses = await Promise.all(Array.from({ length: 100 }, () => fetch(url, owner).then(async (r) => ({ status: r.status, body: await r.text() }))));
  assert.ok(responses.every((r) => r.status === 200), responses.find((r) => r.status !== 200)?.body);
  assert.equal(new Set(responses.map((r) => r.body)).size, 1);
  const gens = await (await fetch(`${url}/generations`, owner)).json();
  assert.equal(gens.count, 1);
  const d = JSON.parse(responses[0].body);
  const patchUrl = new URL(d.patchUrl, url);
  await (await fetch(patchUrl, owner)).arrayBuffer();
  let hits = 0;
  for (let i = 0; i < 40; i++) {
    const r = await fetch(patchUrl, owner);
    await r.arrayBuffer();
    if (r.headers.get("x-edgepatch-cache") === "hit") hits++;
    else await new Promise((res) => setTimeout(res, 50));
  }
  assert.ok(hits >= 30, `${hits} of 40 repeated patch requests were cache hits`);
  const range = await fetch(patchUrl, { headers: { ...owner.headers, Range: "bytes=0-7" } });
  assert.equal(range.status, 206);
  assert.equal(Buffer.from(await range.arrayBuffer()).toString(), "EDGEPTCH");
  assert.equal((await fetch(patchUrl, { headers: { ...owner.headers, Range: `bytes=${d.patchSize}-` } })).status, 416);
  // The cached patch of an unreleased pair is still refused to anonymous callers.
  assert.equal((await fetch(patchUrl)).status, 401);
});

test("update --channel: to the build the channel points at now, and after it moves", async () => {
  // The first test published demo v2 with --channel main.
  const out = join(work, "out-channel");
  const r = edgepatch(["update", "--json", "--server", server.url, "--game", "demo", "--from", "v1", "--channel", "main", "--public-key", publicKey, join(work, "v1"), out]);
  const summary = JSON.parse(r.stdout);
  assert.equal(summary.to, "v2");
  assert.equal(summary.channel, "main");
  assertSameTree(out, join(work, "v2"));

  // Move main back to v1: an install from nothing now gives v1.
  const moved = await fetch(`${server.url}/v1/games/demo/channels/main`, { method: "PUT", headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" }, body: JSON.stringify({ build: "v1" }) });
  assert.equal(moved.status, 200, await moved.text());
  const empty = join(work, "empty-channel");
  mkdirSync(empty, { recursive: true });
  const out1 = join(work, "out-channel-v1");
  const r1 = edgepatch(["update", "--json", "--server", server.url, "--game", "demo", "--from", "_", "--channel", "main", "--public-key", publicKey, empty, out1]);
  assert.equal(JSON.parse(r1.stdout).to, "v1");
  assertSameTree(out1, join(work, "v1"));

  // No such channel: a clear error, nothing written; --to and --channel together: refused.
  const missing = join(work, "out-no-channel");
  const bad = edgepatch(["update", "--server", server.url, "--game", "demo", "--from", "v1", "--channel", "nosuch", "--public-key", publicKey, join(work, "v1"), missing], { ok: false });
  assert.notEqual(bad.status, 0);
  assert.match(bad.stderr, /404.*no channel demo\/nosuch/);
  assert.equal(existsSync(missing), false);
  const both = edgepatch(["update", "--server", server.url, "--game", "demo", "--from", "v1", "--to", "v2", "--channel", "main", join(work, "v1"), missing], { ok: false });
  assert.notEqual(both.status, 0);
  assert.match(both.stderr, /cannot be used with/);
  assert.equal(existsSync(missing), false);
});
