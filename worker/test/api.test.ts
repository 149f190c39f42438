// The Worker's HTTP API in workerd, over the real (local) R2, Durable Object and Cache
// bindings: publish, list, channels, manifests, patches, ranges, the edge cache,
// signatures, every refused upload, and a race of concurrent requests for one pair.
import { env, SELF } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { blake3Hex, initWasm } from "../src/wasm";
import { bytes, gameBuild, makeTar, type TarEntry } from "./tar";
import { RETIRED_PUBLIC_KEY } from "./keys";

const TOKEN = "test-token";
const BASE = "https://edgepatch.test";
const auth = { Authorization: `Bearer ${TOKEN}` };

function publish(game: string, build: string, tar: Uint8Array | ReadableStream, headers: Record<string, string> = auth, query = ""): Promise<Response> {
  return SELF.fetch(`${BASE}/v1/games/${game}/builds/${build}${query}`, { method: "PUT", headers, body: tar });
}

async function stored(game: string): Promise<string[]> {
  const listed = await env.BUCKET.list({ prefix: `games/${game}/` });
  return listed.objects.map((o) => o.key);
}

async function errorOf(res: Response): Promise<{ error: string; status: number }> {
  expect(res.headers.get("Content-Type")).toBe("application/json");
  const body = (await res.json()) as { error: string; status: number };
  expect(body.status).toBe(res.status);
  expect(typeof body.error).toBe("string");
  return body;
}

describe("service", () => {
  it("answers health, the public key and JSON errors", async () => {
    const health = await SELF.fetch(`${BASE}/v1/health`);
    expect(health.status).toBe(200);
    expect(await health.json()).toMatchObject({ status: "ok" });
    initWasm();
    const publicKey = "A7uEkRVTltb5Gdqhsb0Piu0KMJI4LOoKdIdcjruHpUs=";
    const id = blake3Hex(Uint8Array.from(atob(publicKey), (c) => c.charCodeAt(0))).slice(0, 16);
    const key = await (await SELF.fetch(`${BASE}/v1/public-key`)).json();
    // The current key, and the retired one of vitest.config.ts (PREVIOUS_PUBLIC_KEYS) for rotation.
    expect(key).toEqual({
      algorithm: "ed25519",
      publicKey,
      keyId: id,
      keys: [
        { keyId: id, publicKey },
        { keyId: blake3Hex(Uint8Array.from(atob(RETIRED_PUBLIC_KEY), (c) => c.charCodeAt(0))).slice(0, 16), publicKey: RETIRED_PUBLIC_KEY },
      ],
    });
    expect((await errorOf(await SELF.fetch(`${BASE}/v2/nothing`))).status).toBe(404);
    expect((await errorOf(await SELF.fetch(`${BASE}/v1/health`, { method: "POST" }))).status).toBe(405);
    expect((await errorOf(await SELF.fetch(`${BASE}/v1/games/.hidden/channels/stable`))).status).toBe(400);
  });
});

describe("publish", () => {
  it("stores a build with its signature, lists it and moves the channel", async () => {
    const res = await publish("pub", "v1", makeTar(gameBuild(1)), auth, "?channel=stable");
    expect(res.status, await res.clone().text()).toBe(201);
    const record = (await res.json()) as Record<string, unknown>;
    expect(record).toMatchObject({ game: "pub", build: "v1", files: 5, directories: 2, symlinks: 1 });
    const list = (await (await SELF.fetch(`${BASE}/v1/games/pub/builds`, { headers: auth })).json()) as { builds: { build: string }[] };
    expect(list.builds.map((b) => b.build)).toEqual(["v1"]);
    expect(await (await SELF.fetch(`${BASE}/v1/games/pub/channels/stable`)).json()).toMatchObject({ game: "pub", channel: "stable", build: "v1", sequence: 1 });
    expect((await publish("pub", "v2", makeTar(gameBuild(2)), auth, "?channel=stable")).status).toBe(201);
    expect(await (await SELF.fetch(`${BASE}/v1/games/pub/channels/stable`)).json()).toMatchObject({ build: "v2", sequence: 2 });
    // The signature is served as stored and is what the record names.
    const sig = await SELF.fetch(`${BASE}/v1/games/pub/builds/v1/signature`, { headers: auth });
    expect(sig.status).toBe(200);
    initWasm();
    expect(blake3Hex(new Uint8Array(await sig.arrayBuffer()))).toBe(record.signatureBlake3);
    // Builds are immutable.
    const again = await publish("pub", "v1", makeTar(gameBuild(2)));
    expect((await errorOf(again)).status).toBe(409);
    // Channels move by token only, to existing builds only.
    const move = (build: string, headers = auth) =>
      SELF.fetch(`${BASE}/v1/games/pub/channels/stable`, { method: "PUT", headers, body: JSON.stringify({ build }) });
    expect((await move("v1")).status).toBe(200);
    expect((await move("v9")).status).toBe(404);
    expect((await move("v2", { Authorization: "Bearer nope" })).status).toBe(401);
    expect((await errorOf(await SELF.fetch(`${BASE}/v1/games/pub/channels/none`))).status).toBe(404);
  });

  it("uploads a large build in parts", async () => {
    const big = makeTar([{ type: "file", path: "big.bin", data: bytes(11 << 20, 11) }, ...gameBuild(1)]);
    const start = await SELF.fetch(`${BASE}/v1/games/parts/builds/v1/uploads`, { method: "POST", headers: auth });
    expect(start.status).toBe(201);
    const { uploadId } = (await start.json()) as { uploadId: string };
    const part = 5 << 20;
    const parts = [];
    for (let i = 0, n = 1; i < big.length; i += part, n++) {
      const res = await SELF.fetch(`${BASE}/v1/games/parts/builds/v1/uploads/${uploadId}/parts/${n}`, {
        method: "PUT",
        headers: { ...auth, "Content-Length": String(Math.min(part, big.length - i)) },
        body: big.slice(i, i + part),
      });
      expect(res.status, await res.clone().text()).toBe(200);
      parts.push(await res.json());
    }
    const done = await SELF.fetch(`${BASE}/v1/games/parts/builds/v1/uploads/${uploadId}/complete`, { method: "POST", headers: auth, body: JSON.stringify({ parts }) });
    expect(done.status, await done.clone().text()).toBe(201);
    expect(await done.json()).toMatchObject({ files: 6, tarBytes: big.length });
  });

  it("refuses a malformed build uploaded in parts and keeps nothing", async () => {
    const bad = makeTar([{ type: "file", path: "big.bin", data: bytes(6 << 20, 5) }, { type: "file", path: "../escape", data: "x" }]);
    const { uploadId } = (await (await SELF.fetch(`${BASE}/v1/games/badparts/builds/v1/uploads`, { method: "POST", headers: auth })).json()) as { uploadId: string };
    const parts = [];
    for (let i = 0, n = 1; i < bad.length; i += 5 << 20, n++) {
      const body = bad.slice(i, i + (5 << 20));
      const res = await SELF.fetch(`${BASE}/v1/games/badparts/builds/v1/uploads/${uploadId}/parts/${n}`, { method: "PUT", headers: { ...auth, "Content-Length": String(body.length) }, body });
      parts.push(await res.json());
    }
    const done = await SELF.fetch(`${BASE}/v1/games/badparts/builds/v1/uploads/${uploadId}/complete`, { method: "POST", headers: auth, body: JSON.stringify({ parts }) });
    expect((await errorOf(done)).error).toMatch(/\.\./);
    expect(done.status).toBe(400);
    expect(await stored("badparts")).toEqual([]);
  });
});

describe("refused uploads store nothing", () => {
  const good = gameBuild(1);
  const cases: [string, () => Uint8Array | ReadableStream, number, RegExp, Record<string, string>?][] = [
    ["wrong token", () => makeTar(good), 401, /wrong token/, { Authorization: "Bearer wrong" }],
    ["missing token", () => makeTar(good), 401, /missing bearer token/, {}],
    ["a path with ..", () => makeTar([...good, { type: "file", path: "data/../../etc/passwd", data: "x" }]), 400, /\.\./],
    ["an absolute path", () => makeTar([{ type: "file", path: "/etc/passwd", data: "x" }]), 400, /absolute|\//],
    ["a link whose own path climbs out", () => makeTar([{ type: "symlink", path: "../link", target: "a" }]), 400, /\.\./],
    ["a hard link", () => makeTar([{ type: "file", path: "a", data: "x" }, { type: "hardlink", path: "b", target: "a" }]), 400, /hard link/],
    ["a FIFO", () => makeTar([{ type: "fifo", path: "pipe" }]), 400, /not allowed/],
    ["a duplicate path", () => makeTar([{ type: "file", path: "a", data: "x" }, { type: "file", path: "a", data: "y" }]), 400, /twice|duplicate/i],
    ["a truncated tar", () => makeTar(good).slice(0, 3000), 400, /truncated/],
    ["bytes that are not a tar", () => bytes(4096, 9), 400, /checksum|not a tar/],
    ["an empty body", () => new Uint8Array(0), 400, /empty|not a tar/],
    ["a declared size over the limit", () => makeTar([{ type: "file", path: "big", data: bytes(13 << 20, 1) }]), 413, /larger than the limit/],
    [
      "a streamed body over the limit",
      () =>
        new ReadableStream({
          start(c) {
            const tar = makeTar([{ type: "file", path: "big", data: bytes(13 << 20, 2) }]);
            for (let i = 0; i < tar.length; i += 1 << 20) c.enqueue(tar.slice(i, i + (1 << 20)));
            c.close();
          },
        }),
      413,
      /larger than the limit/,
    ],
  ];
  for (const [name, body, status, message, headers] of cases) {
    it(`refuses ${name} with ${status}`, async () => {
      const game = `bad-${name.replace(/[^a-z]+/g, "-")}`.slice(0, 60);
      const res = await publish(game, "v1", body(), headers ?? auth);
      const err = await errorOf(res);
      expect(res.status, err.error).toBe(status);
      expect(err.error).toMatch(message);
      expect(await stored(game)).toEqual([]);
    });
  }
});
