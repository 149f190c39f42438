// Helpers of the generation tests in workerd (fanout.test.ts, transform.test.ts): builds
// published in parts, the generation log, patches applied with the core's applier, bytes of a
// stored build tampered with.
import { env, SELF } from "cloudflare:test";
import { expect } from "vitest";
import { blake3Hex, ManifestReader, PatchApplier } from "../src/wasm";
import { decodeIndex, keys, type BuildRecord } from "../src/store";
import { makeTar } from "./tar";
import { TEST_TOKEN } from "./keys";

export const BASE = "https://edgepatch.test";
export const auth = { Authorization: `Bearer ${TEST_TOKEN}` };

/** Build contents: path -> bytes. */
export type Files = Map<string, Uint8Array>;

/** Publishes `files` in 5 MiB parts (the builds are over the tests' 12 MiB request limit). */
export async function publishInParts(game: string, build: string, files: Files, channel?: string): Promise<void> {
  const tar = makeTar([...files].map(([path, data]) => ({ type: "file" as const, path, data })));
  const start = await SELF.fetch(`${BASE}/v1/games/${game}/builds/${build}/uploads`, { method: "POST", headers: auth });
  expect(start.status).toBe(201);
  const { uploadId } = (await start.json()) as { uploadId: string };
  const part = 5 << 20;
  const parts = [];
  for (let i = 0, n = 1; i < tar.length; i += part, n++) {
    const res = await SELF.fetch(`${BASE}/v1/games/${game}/builds/${build}/uploads/${uploadId}/parts/${n}`, {
      method: "PUT",
      headers: { ...auth, "Content-Length": String(Math.min(part, tar.length - i)) },
      body: tar.slice(i, i + part),
    });
    expect(res.status, await res.clone().text()).toBe(200);
    parts.push(await res.json());
  }
  const query = channel ? `?channel=${channel}` : "";
  const done = await SELF.fetch(`${BASE}/v1/games/${game}/builds/${build}/uploads/${uploadId}/complete${query}`, { method: "POST", headers: auth, body: JSON.stringify({ parts }) });
  expect(done.status, await done.clone().text()).toBe(201);
}

export interface Generations {
  count: number;
  runs: { steps?: number; segments: number; stepFailures?: number; patchBytes: number; transform?: { modules: number; untransformed: number; modulesAboveCap: { path: string; bytes: number }[] }; transformedModules?: number; splitModules?: number; modulesAboveCap?: { path: string; bytes: number }[] }[];
  failure: { attempts: number; error: string } | null;
  fanout: { steps: number; stepsDone: number; stepFailures: number } | null;
}

export async function generations(game: string, from: string, to: string): Promise<Generations> {
  return (await (await SELF.fetch(`${BASE}/v1/games/${game}/updates/${from}/${to}/generations`, { headers: auth })).json()) as Generations;
}

export async function stored(prefix: string): Promise<string[]> {
  return (await env.BUCKET.list({ prefix })).objects.map((o) => o.key);
}

export async function until<T>(what: string, f: () => Promise<T | null | undefined | false>, seconds = 90): Promise<T> {
  const end = Date.now() + seconds * 1000;
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Applies `patch` to `old` with the core's applier; returns the new build's files. */
export function apply(old: Files, patch: Uint8Array): Files {
  const out: Files = new Map();
  let cur: { path: string; parts: Uint8Array[] } | null = null;
  const applier = new PatchApplier(
    {
      fileSize: (p: string) => old.get(p)!.length,
      readAt: (p: string, o: number, n: number) => old.get(p)!.slice(o, o + n),
      listing: () => [...old].map(([path, data]) => ({ path, kind: "file" as const, executable: false, size: data.length })),
    },
    {
      createDirectory: () => {},
      createSymlink: () => {},
      beginFile: (path: string) => void (cur = { path, parts: [] }),
      writeFile: (b: Uint8Array) => void cur!.parts.push(b.slice()),
      finishFile() {
        const all = new Uint8Array(cur!.parts.reduce((n, p) => n + p.length, 0));
        let o = 0;
        for (const p of cur!.parts) all.set(p, (o += p.length) - p.length);
        out.set(cur!.path, all);
      },
    },
  );
  for (let i = 0; i < patch.length; i += 1 << 20) applier.push(patch.subarray(i, i + (1 << 20)));
  applier.finish();
  applier.free();
  return out;
}

/** The pair's patch as served, checked against its descriptor and manifest. */
export async function servedPatch(game: string, from: string, to: string, segments?: number): Promise<Uint8Array> {
  const res = await SELF.fetch(`${BASE}/v1/games/${game}/updates/${from}/${to}`, { headers: auth });
  expect(res.status).toBe(200);
  const d = (await res.json()) as { patchUrl: string; manifestUrl: string; patchBlake3: string; patchSize: number };
  const url = `${BASE}/v1/games/${game}/updates/${from}/${to}`;
  const patch = new Uint8Array(await (await SELF.fetch(new URL(d.patchUrl, url), { headers: auth })).arrayBuffer());
  expect(patch.length).toBe(d.patchSize);
  expect(blake3Hex(patch)).toBe(d.patchBlake3);
  const manifest = new ManifestReader(new Uint8Array(await (await SELF.fetch(new URL(d.manifestUrl, url), { headers: auth })).arrayBuffer()));
  expect(manifest.patchBlake3).toBe(d.patchBlake3);
  if (segments !== undefined) expect(manifest.segments().length).toBe(segments);
  manifest.free();
  return patch;
}

export function expectSameFiles(got: Files, want: Files): void {
  expect([...got.keys()].sort()).toEqual([...want.keys()].sort());
  for (const [path, data] of want) expect(blake3Hex(got.get(path)!), path).toBe(blake3Hex(data));
}

/** Flips one byte of a stored build's tar inside the data of `path`; returns the undo. */
export async function corrupt(game: string, build: string, path: string): Promise<() => Promise<void>> {
  const record = (await (await env.BUCKET.get(keys.build(game, build)))!.json()) as BuildRecord;
  const index = decodeIndex(await (await env.BUCKET.get(keys.buildIndex(game, build, record.upload)))!.text());
  const key = keys.buildData(game, build, record.upload);
  const original = new Uint8Array(await (await env.BUCKET.get(key))!.arrayBuffer());
  const bad = original.slice();
  bad[index.get(path)!.offset + 1000] ^= 0x40;
  await env.BUCKET.put(key, bad);
  return async () => void (await env.BUCKET.put(key, original));
}

