// Descriptors signed again after a key rotation, in workerd: the Worker signs a descriptor of an
// older key again only when it, the stored manifest and the stored patch are what the pair's
// PatchGeneration object generated. The bucket is not trusted: a descriptor, manifest or patch
// changed there (even all three, consistently) is refused with a 500 and a log line, never signed.
import { createExecutionContext, env, SELF, waitOnExecutionContext } from "cloudflare:test";
import { afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import worker from "../src/index";
import { initWasm } from "../src/wasm";
import type { UpdateDescriptor } from "../src/descriptors";
import { keyId, updateStatement } from "../src/statements";
import { keys } from "../src/store";
import { settings } from "../src/settings";
import { makeTar, type TarEntry } from "./tar";
import { PUBLIC_KEY, TEST_TOKEN } from "./keys";

const BASE = "https://edgepatch.test";
const auth = { Authorization: `Bearer ${TEST_TOKEN}` };
/** The owner rotated: a new signing key, the old public key retired. */
const ROTATED = { MANIFEST_SIGNING_KEY: "AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA=", PREVIOUS_PUBLIC_KEYS: PUBLIC_KEY };
const b64 = (s: string) => Uint8Array.from(atob(s), (c) => c.charCodeAt(0));

type Descriptor = UpdateDescriptor;

function build(v: number): TarEntry[] {
  return [
    { type: "file", path: "index.html", data: `<!doctype html><title>build ${v}</title>\n` },
    { type: "file", path: "data.bin", data: new Uint8Array(20_000 + v * 1000).fill(v) },
  ];
}

async function publish(game: string, name: string, v: number): Promise<void> {
  const res = await SELF.fetch(`${BASE}/v1/games/${game}/builds/${name}`, { method: "PUT", headers: auth, body: makeTar(build(v)) });
  expect(res.status, await res.clone().text()).toBe(201);
}

/** The pair's descriptor under the test's key (generating it), then out of the edge cache. */
async function generated(game: string, from: string, to: string): Promise<Descriptor> {
  const path = `/v1/games/${game}/updates/${from}/${to}`;
  const res = await SELF.fetch(`${BASE}${path}`, { headers: auth });
  expect(res.status, await res.clone().text()).toBe(200);
  const d = (await res.json()) as Descriptor;
  await dropCached(path);
  return d;
}

/** The edge cache's key of a descriptor asked for without a reader (the floor's; docs/FORMAT.md §5). */
const cachedAt = (path: string) => `${BASE}${path}?reader=${settings(env).readerFloor}`;

async function dropCached(path: string): Promise<void> {
  // The route puts the descriptor into the edge cache after it answers (waitUntil).
  for (let i = 0; i < 100 && !(await caches.default.match(cachedAt(path))); i++) await new Promise((r) => setTimeout(r, 20));
  await caches.default.delete(cachedAt(path));
}

/** The descriptor as the rotated Worker answers it (run in this isolate, so its log is seen). */
async function rotatedCall(path: string): Promise<Response> {
  const ctx = createExecutionContext();
  const res = await worker.fetch(new Request(`${BASE}${path}`, { headers: auth }), { ...env, ...ROTATED }, ctx);
  await waitOnExecutionContext(ctx);
  return res;
}

async function storedDescriptor(game: string, from: string, to: string): Promise<Descriptor> {
  return (await (await env.BUCKET.get(keys.descriptor(game, from, to)))!.json()) as Descriptor;
}

async function putDescriptor(game: string, from: string, to: string, d: Descriptor): Promise<void> {
  await env.BUCKET.put(keys.descriptor(game, from, to), JSON.stringify(d), { httpMetadata: { contentType: "application/json" } });
}

async function object(key: string): Promise<Uint8Array> {
  return new Uint8Array(await (await env.BUCKET.get(key))!.arrayBuffer());
}

async function verifiesUnderRotatedKey(d: Descriptor, manifestSize: number, manifestBlake3: string): Promise<boolean> {
  const keysDoc = (await (await rotatedCall("/v1/public-key")).json()) as { publicKey: string; keyId: string };
  expect(d.keyId).toBe(keysDoc.keyId);
  const key = await crypto.subtle.importKey("raw", b64(keysDoc.publicKey), { name: "Ed25519" }, false, ["verify"]);
  return crypto.subtle.verify({ name: "Ed25519" }, key, b64(d.signature!), updateStatement(keysDoc.keyId, d.game, d.from, d.to, manifestSize, manifestBlake3));
}

/**
 * Asks the rotated Worker for a tampered pair: a 500 that names no detail, a log line naming
 * the pair, and the bucket's descriptor left as it was (not signed by the new key).
 */
async function expectRefused(game: string, from: string, to: string, reason: RegExp): Promise<void> {
  const before = await storedDescriptor(game, from, to);
  const logged = vi.spyOn(console, "error").mockImplementation(() => {});
  const res = await rotatedCall(`/v1/games/${game}/updates/${from}/${to}`);
  expect(res.status).toBe(500);
  const body = (await res.json()) as { error: string; status: number; signature?: string };
  expect(body).toEqual({ error: "internal error: the stored update is not the one this server generated, so it is not signed", status: 500 });
  const lines = logged.mock.calls.map((c) => c.map(String).join(" "));
  expect(lines.some((l) => l.includes(`refusing to sign the update ${game} ${from} -> ${to} again`) && reason.test(l)), lines.join("\n")).toBe(true);
  expect(await storedDescriptor(game, from, to)).toEqual(before);
  expect(await caches.default.match(cachedAt(`/v1/games/${game}/updates/${from}/${to}`))).toBeUndefined();
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe("re-signing after a key rotation", () => {
  beforeAll(() => initWasm());

  it("signs an honest descriptor of the old key again with the new key", async () => {
    await publish("resign", "v1", 1);
    const old = await generated("resign", "_", "v1");
    expect(old.keyId).toBe(keyId(b64(PUBLIC_KEY)));
    const res = await rotatedCall("/v1/games/resign/updates/_/v1");
    expect(res.status, await res.clone().text()).toBe(200);
    const fresh = (await res.json()) as Descriptor;
    expect(fresh.keyId).not.toBe(old.keyId);
    expect(await verifiesUnderRotatedKey(fresh, old.manifestSize, old.manifestBlake3)).toBe(true);
    const { keyId: _k, signature: _s, ...unsigned } = old;
    expect(fresh).toMatchObject(unsigned);
    // Stored for the next request.
    expect(await storedDescriptor("resign", "_", "v1")).toEqual(fresh);
  });

  it("refuses a descriptor whose manifest size or BLAKE3 was changed in the bucket", async () => {
    await publish("tamper1", "v1", 1);
    await publish("tamper1", "v2", 2);
    const honest = await generated("tamper1", "_", "v1");
    const other = await generated("tamper1", "_", "v2");
    // Another manifest the same key signed (v2's install), under v1's install.
    await putDescriptor("tamper1", "_", "v1", { ...honest, manifestSize: other.manifestSize, manifestBlake3: other.manifestBlake3 });
    await expectRefused("tamper1", "_", "v1", /manifest(Size|Blake3)/);
    await putDescriptor("tamper1", "_", "v1", { ...honest, manifestBlake3: other.manifestBlake3 });
    await expectRefused("tamper1", "_", "v1", /manifestBlake3/);
    await putDescriptor("tamper1", "_", "v1", { ...honest, manifestSize: honest.manifestSize + 1 });
    await expectRefused("tamper1", "_", "v1", /manifestSize/);
    // The honest descriptor put back is signed again.
    await putDescriptor("tamper1", "_", "v1", honest);
    const res = await rotatedCall("/v1/games/tamper1/updates/_/v1");
    expect(res.status).toBe(200);
    expect(await verifiesUnderRotatedKey((await res.json()) as Descriptor, honest.manifestSize, honest.manifestBlake3)).toBe(true);
  });

  it("refuses a manifest and patch swapped in the bucket with the descriptor changed to match them", async () => {
    // What a check of the bucket against itself would sign: descriptor, manifest and patch agree.
    await publish("tamper2", "v1", 1);
    await publish("tamper2", "v2", 2);
    const honest = await generated("tamper2", "_", "v1");
    const other = await generated("tamper2", "_", "v2");
    await env.BUCKET.put(keys.manifest("tamper2", "_", "v1"), await object(keys.manifest("tamper2", "_", "v2")));
    await env.BUCKET.put(keys.patch("tamper2", "_", "v1"), await object(keys.patch("tamper2", "_", "v2")));
    await putDescriptor("tamper2", "_", "v1", {
      ...honest,
      manifestUrl: `../../manifests/_/v1/${other.manifestBlake3}`,
      manifestSize: other.manifestSize,
      manifestBlake3: other.manifestBlake3,
      patchUrl: `../../patches/_/v1/${other.patchBlake3}`,
      patchSize: other.patchSize,
      patchBlake3: other.patchBlake3,
    });
    await expectRefused("tamper2", "_", "v1", /manifest/);
  });

  it("refuses an intact descriptor whose manifest or patch object was swapped or cut", async () => {
    await publish("tamper3", "v1", 1);
    await publish("tamper3", "v2", 2);
    await generated("tamper3", "_", "v1");
    await generated("tamper3", "_", "v2");
    const manifest = await object(keys.manifest("tamper3", "_", "v1"));
    const patch = await object(keys.patch("tamper3", "_", "v1"));
    // Same size, other bytes.
    const flipped = manifest.slice();
    flipped[flipped.length - 1] ^= 1;
    await env.BUCKET.put(keys.manifest("tamper3", "_", "v1"), flipped);
    await expectRefused("tamper3", "_", "v1", /stored manifest's BLAKE3/);
    await env.BUCKET.put(keys.manifest("tamper3", "_", "v1"), await object(keys.manifest("tamper3", "_", "v2")));
    await expectRefused("tamper3", "_", "v1", /stored manifest/);
    await env.BUCKET.delete(keys.manifest("tamper3", "_", "v1"));
    await expectRefused("tamper3", "_", "v1", /stored manifest is missing/);
    await env.BUCKET.put(keys.manifest("tamper3", "_", "v1"), manifest);
    await env.BUCKET.put(keys.patch("tamper3", "_", "v1"), patch.subarray(0, patch.length - 1));
    await expectRefused("tamper3", "_", "v1", /stored patch is/);
    await env.BUCKET.put(keys.patch("tamper3", "_", "v1"), patch);
    expect((await rotatedCall("/v1/games/tamper3/updates/_/v1")).status).toBe(200);
  });

  it("refuses a descriptor the bucket holds for a pair this Worker never generated", async () => {
    await publish("tamper4", "v1", 1);
    await publish("tamper4", "v2", 2);
    const other = await generated("tamper4", "_", "v2");
    // A descriptor for _ -> v1 (never generated) naming v2's install manifest, old key id.
    const forged = { ...other, to: "v1", manifestUrl: `../../manifests/_/v1/${other.manifestBlake3}`, patchUrl: `../../patches/_/v1/${other.patchBlake3}` };
    await putDescriptor("tamper4", "_", "v1", forged);
    await env.BUCKET.put(keys.manifest("tamper4", "_", "v1"), await object(keys.manifest("tamper4", "_", "v2")));
    await env.BUCKET.put(keys.patch("tamper4", "_", "v1"), await object(keys.patch("tamper4", "_", "v2")));
    const logged = vi.spyOn(console, "error").mockImplementation(() => {});
    const res = await rotatedCall("/v1/games/tamper4/updates/_/v1");
    expect(res.status).toBe(500);
    expect(logged.mock.calls.some((c) => c.map(String).join(" ").includes("refusing to sign the update tamper4 _ -> v1 again"))).toBe(true);
    vi.restoreAllMocks();
    // The pair was generated for real meanwhile (overwriting the bucket's copies): that one is signed.
    const again = await rotatedCall("/v1/games/tamper4/updates/_/v1");
    expect(again.status, await again.clone().text()).toBe(200);
    const d = (await again.json()) as Descriptor;
    expect(d.manifestBlake3).not.toBe(other.manifestBlake3);
    const manifest = await object(keys.manifest("tamper4", "_", "v1"));
    expect(d.manifestSize).toBe(manifest.length);
    expect(await verifiesUnderRotatedKey(d, d.manifestSize, d.manifestBlake3)).toBe(true);
  });

  it("does not take a bucket's descriptor the current key did not sign as the pair's record", async () => {
    // Pre-generation (the queue) asks the pair's object directly: a forged descriptor waiting in
    // the bucket must not become what later re-signatures are checked against.
    await publish("tamper5", "v1", 1);
    await publish("tamper5", "v2", 2);
    const other = await generated("tamper5", "_", "v2");
    await putDescriptor("tamper5", "_", "v1", { ...other, to: "v1" });
    const stub = env.GENERATIONS.get(env.GENERATIONS.idFromName("tamper5/_/v1"));
    const result = await stub.generate("tamper5", "_", "v1");
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(result.descriptor.manifestBlake3).not.toBe(other.manifestBlake3);
    expect(result.descriptor.keyId).toBe(keyId(b64(PUBLIC_KEY)));
    expect((await storedDescriptor("tamper5", "_", "v1")).manifestBlake3).toBe(result.descriptor.manifestBlake3);
  });
});
