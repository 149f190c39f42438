// Updates in workerd: descriptors generated on demand and once, signed update statements,
// patches that the core's applier turns into the new build, single ranges, ETags and cache
// hits. These requests carry the owner's token (any pair); access.test.ts covers anonymous ones.
import { env, SELF } from "cloudflare:test";
import { beforeAll, describe, expect, it } from "vitest";
import { blake3Hex, initWasm, ManifestReader, PatchApplier, PatchGenerator, Signer } from "../src/wasm";
import { bytes, gameBuild, makeTar, type TarEntry } from "./tar";
import { planBuildReads } from "../src/read-plan";
import { readBuildRanges, type StoredBuild } from "../src/reads";
import type { UpdateDescriptor } from "../src/descriptors";
import { R2RangeReader, type BuildRecord } from "../src/store";
import { keyId, updateStatement } from "../src/statements";

const BASE = "https://edgepatch.test";
const auth = { Authorization: "Bearer test-token" };
const PUBLIC_KEY = "A7uEkRVTltb5Gdqhsb0Piu0KMJI4LOoKdIdcjruHpUs=";

/** A request with the owner's token. */
function get(url: string | URL, init: RequestInit = {}): Promise<Response> {
  return SELF.fetch(url, { ...init, headers: { ...auth, ...(init.headers as Record<string, string> | undefined) } });
}

/** This server has a signing key: every descriptor carries a signature. */
type Descriptor = Required<UpdateDescriptor>;

async function publish(game: string, build: string, entries: TarEntry[]): Promise<void> {
  const res = await SELF.fetch(`${BASE}/v1/games/${game}/builds/${build}`, { method: "PUT", headers: auth, body: makeTar(entries) });
  expect(res.status, await res.clone().text()).toBe(201);
}

async function descriptor(game: string, from: string, to: string): Promise<{ res: Response; d: Descriptor; url: string }> {
  const url = `${BASE}/v1/games/${game}/updates/${from}/${to}`;
  const res = await get(url);
  expect(res.status, await res.clone().text()).toBe(200);
  return { res, d: (await res.json()) as Descriptor, url };
}

async function generations(game: string, from: string, to: string): Promise<number> {
  const res = await get(`${BASE}/v1/games/${game}/updates/${from}/${to}/generations`);
  return ((await res.json()) as { count: number }).count;
}

async function untilCached(url: string, init: RequestInit = {}): Promise<Response> {
  for (let i = 0; i < 100; i++) {
    const res = await get(url, init);
    if (res.headers.get("X-Edgepatch-Cache") === "hit") return res;
    await res.arrayBuffer();
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`${url} never became a cache hit`);
}

function content(e: TarEntry & { type: "file" }): Uint8Array {
  return typeof e.data === "string" ? new TextEncoder().encode(e.data) : e.data;
}

/** Applies `patch` to in-memory `old` with the core's applier; returns path -> description. */
function apply(old: TarEntry[], patch: Uint8Array): Map<string, string> {
  const files = new Map(old.filter((e) => e.type === "file").map((e) => [e.path, content(e as TarEntry & { type: "file" })]));
  const out = new Map<string, string>();
  let cur: { path: string; exec: boolean; parts: Uint8Array[] } | null = null;
  const applier = new PatchApplier(
    {
      fileSize(p: string) {
        const f = files.get(p);
        if (!f) throw new Error(`no old file ${p}`);
        return f.length;
      },
      readAt: (p: string, o: number, n: number) => files.get(p)!.slice(o, o + n),
      // The old build's entries: a tree patch keeps unchanged ones by their place here.
      listing: () =>
        old.map((e) =>
          e.type === "dir"
            ? { path: e.path, kind: "directory" as const }
            : e.type === "symlink"
              ? { path: e.path, kind: "symlink" as const, symlinkTarget: e.target }
              : { path: e.path, kind: "file" as const, executable: (((e as TarEntry & { type: "file" }).mode ?? 0o644) & 0o111) !== 0, size: content(e as TarEntry & { type: "file" }).length },
        ),
    },
    {
      createDirectory: (p: string) => void out.set(p, "dir"),
      createSymlink: (p: string, t: string) => void out.set(p, `link:${t}`),
      beginFile: (path: string, exec: boolean) => void (cur = { path, exec, parts: [] }),
      writeFile: (b: Uint8Array) => void cur!.parts.push(b.slice()),
      finishFile() {
        const all = new Uint8Array(cur!.parts.reduce((n, p) => n + p.length, 0));
        let o = 0;
        for (const p of cur!.parts) all.set(p, (o += p.length) - p.length);
        out.set(cur!.path, `file:${cur!.exec ? "x" : "-"}:${blake3Hex(all)}`);
      },
    },
  );
  applier.push(patch);
  applier.finish();
  applier.free();
  return out;
}

function describeBuild(entries: TarEntry[]): Map<string, string> {
  const out = new Map<string, string>();
  for (const e of entries) {
    if (e.type === "dir") out.set(e.path, "dir");
    else if (e.type === "symlink") out.set(e.path, `link:${e.target}`);
    else if (e.type === "file") out.set(e.path, `file:${((e.mode ?? 0o644) & 0o111) !== 0 ? "x" : "-"}:${blake3Hex(content(e))}`);
  }
  return out;
}

function sorted(m: Map<string, string>): [string, string][] {
  return [...m.entries()].sort(([a], [b]) => (a < b ? -1 : 1));
}

export async function verifySignature(statement: Uint8Array, signatureB64: string): Promise<boolean> {
  const raw = Uint8Array.from(atob(PUBLIC_KEY), (c) => c.charCodeAt(0));
  const key = await crypto.subtle.importKey("raw", raw, { name: "Ed25519" }, false, ["verify"]);
  return crypto.subtle.verify({ name: "Ed25519" }, key, Uint8Array.from(atob(signatureB64), (c) => c.charCodeAt(0)), statement);
}

const PUBLIC_KEY_ID = () => keyId(Uint8Array.from(atob(PUBLIC_KEY), (c) => c.charCodeAt(0)));

describe("updates", () => {
  const v1 = gameBuild(1);
  const v2 = gameBuild(2);
  beforeAll(async () => {
    initWasm();
    await publish("upd", "v1", v1);
    await publish("upd", "v2", v2);
  });

  it("generates a manifest under a signed update statement and a patch that turns v1 into v2", async () => {
    const { res, d, url } = await descriptor("upd", "v1", "v2");
    expect(res.headers.get("X-Edgepatch-Source")).toBe("generated");
    expect(d).toMatchObject({ game: "upd", from: "v1", to: "v2" });
    const manifestRes = await get(new URL(d.manifestUrl, url));
    expect(manifestRes.status).toBe(200);
    expect(manifestRes.headers.get("Cache-Control")).toBe("public, max-age=31536000, immutable");
    expect(manifestRes.headers.get("ETag")).toBe(`"${d.manifestBlake3}"`);
    const manifest = new Uint8Array(await manifestRes.arrayBuffer());
    expect(manifest.length).toBe(d.manifestSize);
    expect(blake3Hex(manifest)).toBe(d.manifestBlake3);
    expect(d.keyId).toBe(PUBLIC_KEY_ID());
    expect(d).not.toHaveProperty("manifestSignature");
    const statement = updateStatement(d.keyId, "upd", "v1", "v2", manifest.length, blake3Hex(manifest));
    expect(await verifySignature(statement, d.signature)).toBe(true);
    // The statement binds the game, the pair and the manifest: any other one fails.
    for (const other of [
      updateStatement(d.keyId, "other", "v1", "v2", manifest.length, blake3Hex(manifest)),
      updateStatement(d.keyId, "upd", "_", "v2", manifest.length, blake3Hex(manifest)),
      updateStatement(d.keyId, "upd", "v1", "v2", manifest.length + 1, blake3Hex(manifest)),
      updateStatement(d.keyId, "upd", "v1", "v2", manifest.length, "0".repeat(64)),
    ]) {
      expect(await verifySignature(other, d.signature)).toBe(false);
    }
    const reader = new ManifestReader(manifest);
    expect([reader.kind, reader.fromBuild, reader.toBuild, reader.patchSize, reader.patchBlake3]).toEqual(["patch", "v1", "v2", d.patchSize, d.patchBlake3]);
    expect(reader.lookup("data/new.json")).toMatchObject({ kind: "file", size: 14 });
    reader.free();

    const patchRes = await get(new URL(d.patchUrl, url));
    expect(patchRes.status).toBe(200);
    expect(patchRes.headers.get("ETag")).toBe(`"${d.patchBlake3}"`);
    const patch = new Uint8Array(await patchRes.arrayBuffer());
    expect(patch.length).toBe(d.patchSize);
    expect(blake3Hex(patch)).toBe(d.patchBlake3);
    expect(sorted(apply(v1, patch))).toEqual(sorted(describeBuild(v2)));
    // Smaller than the new build: the unchanged/renamed files are copies, the rest deltas.
    const newBytes = v2.reduce((n, e) => n + (e.type === "file" ? content(e).length : 0), 0);
    expect(patch.length).toBeLessThan(newBytes / 5);
  });

  it("installs from the empty build _", async () => {
    const { d, url } = await descriptor("upd", "_", "v2");
    const patch = new Uint8Array(await (await get(new URL(d.patchUrl, url))).arrayBuffer());
    expect(sorted(apply([], patch))).toEqual(sorted(describeBuild(v2)));
  });

  it("generates across several segments with bounded reads", async () => {
    const a = bytes(10 << 20, 21);
    const b = new Uint8Array(a.length + 5000);
    b.set(a.subarray(0, 4 << 20));
    b.set(bytes(5000, 22), 4 << 20);
    b.set(a.subarray(4 << 20), (4 << 20) + 5000);
    for (let i = 6 << 20; i < b.length; i += 100_000) b[i] ^= 1;
    const old: TarEntry[] = [{ type: "file", path: "big.pak", data: a }];
    const neu: TarEntry[] = [{ type: "file", path: "big.pak", data: b }];
    await publish("seg", "v1", old);
    await publish("seg", "v2", neu);
    const { d, url } = await descriptor("seg", "v1", "v2");
    const patch = new Uint8Array(await (await get(new URL(d.patchUrl, url))).arrayBuffer());
    expect(patch.length).toBeLessThan(b.length / 10);
    expect(sorted(apply(old, patch))).toEqual(sorted(describeBuild(neu)));
    const runs = (await (await get(`${BASE}/v1/games/seg/updates/v1/v2/generations`)).json()) as {
      runs: { segments: number; peakWasmMemoryBytes: number }[];
    };
    expect(runs.runs[0].segments).toBeGreaterThanOrEqual(3);
    expect(runs.runs[0].peakWasmMemoryBytes).toBeLessThan(128 << 20);
  });

  it("serves single ranges (206, 416) and ignores multi-range requests", async () => {
    const { d, url } = await descriptor("upd", "v1", "v2");
    const patchUrl = new URL(d.patchUrl, url).toString();
    const whole = new Uint8Array(await (await get(patchUrl)).arrayBuffer());
    const check = async (range: string, start: number, end: number) => {
      const res = await get(patchUrl, { headers: { Range: range } });
      expect(res.status, range).toBe(206);
      expect(res.headers.get("Content-Range")).toBe(`bytes ${start}-${end}/${whole.length}`);
      expect(new Uint8Array(await res.arrayBuffer())).toEqual(whole.slice(start, end + 1));
    };
    await check("bytes=0-7", 0, 7);
    await check("bytes=10-", 10, whole.length - 1);
    await check("bytes=-32", whole.length - 32, whole.length - 1);
    await check(`bytes=5-${whole.length + 100}`, 5, whole.length - 1);
    const bad = await get(patchUrl, { headers: { Range: `bytes=${whole.length}-` } });
    expect(bad.status).toBe(416);
    expect(bad.headers.get("Content-Range")).toBe(`bytes */${whole.length}`);
    await bad.arrayBuffer();
    const multi = await get(patchUrl, { headers: { Range: "bytes=0-1,5-6" } });
    expect(multi.status).toBe(200);
    expect((await multi.arrayBuffer()).byteLength).toBe(whole.length);
  });

  it("fills the cache once on a ranged miss and answers the next range from it", async () => {
    await publish("rng", "v1", v1);
    await publish("rng", "v2", v2);
    const { d, url } = await descriptor("rng", "v1", "v2");
    const patchUrl = new URL(d.patchUrl, url).toString();
    const first = await get(patchUrl, { headers: { Range: "bytes=0-7" } });
    expect(first.status).toBe(206);
    expect(first.headers.get("X-Edgepatch-Cache")).toBe("miss");
    expect(first.headers.get("Content-Range")).toBe(`bytes 0-7/${d.patchSize}`);
    expect(new TextDecoder().decode(await first.arrayBuffer())).toBe("EDGEPTCH");
    // The miss put the whole patch into the cache before answering: no waiting for a hit.
    const second = await get(`${patchUrl}?any=query`, { headers: { Range: "bytes=8-15" } });
    expect(second.headers.get("X-Edgepatch-Cache")).toBe("hit");
    expect(second.status).toBe(206);
    const whole = new Uint8Array(await (await get(patchUrl)).arrayBuffer());
    expect(new Uint8Array(await second.arrayBuffer())).toEqual(whole.slice(8, 16));
  });

  it("answers concurrent ranged misses of one object, all from one cache fill", async () => {
    await publish("rng2", "v1", v1);
    await publish("rng2", "v2", v2);
    const { d, url } = await descriptor("rng2", "_", "v2");
    const patchUrl = new URL(d.patchUrl, url).toString();
    const ranges = Array.from({ length: 8 }, (_, i) => [i * 1000, i * 1000 + 999]);
    const responses = await Promise.all(ranges.map(([a, b]) => get(`${patchUrl}?r=${a}`, { headers: { Range: `bytes=${a}-${b}` } })));
    const bodies = await Promise.all(responses.map((r) => r.arrayBuffer().then((x) => new Uint8Array(x))));
    const whole = new Uint8Array(await (await get(patchUrl)).arrayBuffer());
    expect(blake3Hex(whole)).toBe(d.patchBlake3);
    responses.forEach((r, i) => {
      expect(r.status).toBe(206);
      expect(bodies[i]).toEqual(whole.slice(ranges[i][0], ranges[i][1] + 1));
    });
  });

  it("answers repeats from the edge cache, ranges and ETags included", async () => {
    const { d, url } = await descriptor("upd", "v1", "v2");
    const patchUrl = new URL(d.patchUrl, url).toString();
    const manifestUrl = new URL(d.manifestUrl, url).toString();
    const hit = await untilCached(patchUrl);
    expect(hit.status).toBe(200);
    expect(blake3Hex(new Uint8Array(await hit.arrayBuffer()))).toBe(d.patchBlake3);
    const rangeHit = await get(patchUrl, { headers: { Range: "bytes=0-7" } });
    expect(rangeHit.headers.get("X-Edgepatch-Cache")).toBe("hit");
    expect(rangeHit.status).toBe(206);
    expect(new TextDecoder().decode(await rangeHit.arrayBuffer())).toBe("EDGEPTCH");
    await (await untilCached(manifestUrl)).arrayBuffer();
    await (await untilCached(url)).arrayBuffer();
    const notModified = await get(manifestUrl, { headers: { "If-None-Match": `"${d.manifestBlake3}"` } });
    expect(notModified.status).toBe(304);
    // A URL whose hash is not the pair's is not found, cached or not.
    expect((await get(patchUrl.replace(/[0-9a-f]{64}$/, "0".repeat(64)))).status).toBe(404);
    expect((await get(`${BASE}/v1/games/upd/updates/v1/v9`)).status).toBe(404);
    // The cache key ignores the query string: a random query is still a hit, not an R2 read.
    const queried = await get(`${patchUrl}?nocache=${Math.random()}`, { headers: { Range: "bytes=0-7" } });
    expect(queried.headers.get("X-Edgepatch-Cache")).toBe("hit");
    expect(queried.status).toBe(206);
    await queried.arrayBuffer();
  });

  it("50 concurrent identical requests cause exactly one generation", async () => {
    await publish("race", "v1", v1);
    await publish("race", "v2", v2);
    expect(await generations("race", "v1", "v2")).toBe(0);
    const responses = await Promise.all(Array.from({ length: 50 }, () => get(`${BASE}/v1/games/race/updates/v1/v2`)));
    const bodies = await Promise.all(responses.map((r) => r.text()));
    expect(responses.map((r) => r.status)).toEqual(Array(50).fill(200));
    expect(new Set(bodies).size).toBe(1);
    const sources = responses.map((r) => r.headers.get("X-Edgepatch-Source"));
    expect(sources.filter((s) => s === "generated")).toHaveLength(1);
    expect(await generations("race", "v1", "v2")).toBe(1);
    // And later requests never generate again.
    await Promise.all(Array.from({ length: 10 }, () => get(`${BASE}/v1/games/race/updates/v1/v2`).then((r) => r.text())));
    expect(await generations("race", "v1", "v2")).toBe(1);
    expect((await env.BUCKET.list({ prefix: "games/race/patches/" })).objects).toHaveLength(1);
  });
});

describe("range reads", () => {
  it("scatter R2 bodies, read through small reused buffers, into the concatenation of the ranges", async () => {
    const tar = bytes(700_000, 31);
    const tarKey = "test/ranges/build.tar";
    await env.BUCKET.put(tarKey, tar);
    // Three files; gaps of 500 and 448,500 bytes between them (one merged read, one not).
    const index = new Map([
      ["a", { offset: 1000, size: 100_000, blake3: "" }],
      ["b", { offset: 101_500, size: 50_000, blake3: "" }],
      ["c", { offset: 600_000, size: 40_000, blake3: "" }],
    ]);
    const build: StoredBuild = { record: { build: "t" } as BuildRecord, tarKey, index, signature: new Uint8Array(0) };
    const ranges = [
      { path: "b", offset: 10, length: 30_000, normalized: false, oldSplit: false },
      { path: "a", offset: 0, length: 5000, normalized: false, oldSplit: false },
      { path: "a", offset: 4000, length: 20_000, normalized: false, oldSplit: false }, // overlaps the one before
      { path: "c", offset: 0, length: 0, normalized: false, oldSplit: false },
      { path: "c", offset: 39_990, length: 10, normalized: false, oldSplit: false },
      { path: "a", offset: 99_000, length: 1000, normalized: false, oldSplit: false },
      { path: "b", offset: 0, length: 50_000, normalized: false, oldSplit: false },
    ];
    const expected = new Uint8Array(ranges.reduce((n, r) => n + r.length, 0));
    let at = 0;
    for (const r of ranges) {
      const start = index.get(r.path)!.offset + r.offset;
      expected.set(tar.subarray(start, start + r.length), at);
      at += r.length;
    }
    const plan = planBuildReads(build, ranges);
    expect(plan.total).toBe(expected.length);
    expect(plan.groups).toHaveLength(2);
    // 777-byte buffers: every read arrives in many chunks, most of them across span bounds.
    const reader = new R2RangeReader(env.BUCKET, 2, 777);
    const out = new Uint8Array(plan.total);
    await readBuildRanges(reader, plan, () => out);
    expect(reader.reads).toBe(2);
    expect(out).toEqual(expected);
    // Reused: reading again through the same reader gives the same bytes.
    const again = new Uint8Array(plan.total);
    await readBuildRanges(reader, plan, () => again);
    expect(again).toEqual(expected);
    // A range the object does not have is an error, not a short buffer.
    await expect(reader.read(tarKey, 699_000, 2000, () => {})).rejects.toThrow();
    expect(() => planBuildReads(build, [{ path: "a", offset: 99_999, length: 2, normalized: false, oldSplit: false }])).toThrow(/bytes 99999\+2 of a/);
    // A range of a wasm transform's form that the generation did not make is refused, not read from the tar.
    expect(() => planBuildReads(build, [{ path: "a", offset: 0, length: 2, normalized: true, oldSplit: false }])).toThrow(/normalized/);
    expect(() => planBuildReads(build, [{ path: "a", offset: 0, length: 2, normalized: false, oldSplit: true }])).toThrow(/split old module/);
  });
});

describe("generator fed in place", () => {
  it("gives the same patch as the copying API, segment by segment", () => {
    initWasm();
    const sign = (data: Uint8Array) => {
      const s = new Signer();
      s.beginFile("big.pak", false, data.length);
      s.update(data);
      s.finishFile();
      return s.finish();
    };
    const a = bytes(9 << 20, 41);
    const b = a.slice();
    for (let i = 1000; i < b.length; i += 300_000) b.set(bytes(700, i), i);
    const cat = (f: Uint8Array, ranges: { offset: number; length: number }[]) => {
      const out = new Uint8Array(ranges.reduce((n, r) => n + r.length, 0));
      let at = 0;
      for (const r of ranges) {
        out.set(f.subarray(r.offset, r.offset + r.length), at);
        at += r.length;
      }
      return out;
    };
    const [sa, sb] = [sign(a), sign(b)];
    const copying = new PatchGenerator(sa, sb, 3);
    const inPlace = new PatchGenerator(sa, sb, 3);
    try {
      expect(inPlace.header()).toEqual(copying.header());
      expect(copying.segmentCount).toBeGreaterThanOrEqual(3);
      for (let i = 0; i < copying.segmentCount; i++) {
        const fresh = cat(b, copying.newRanges(i));
        const wanted = copying.planSegment(i, fresh);
        const expected = copying.encodeSegment(i, fresh, cat(a, wanted));
        inPlace.newBytesTarget(fresh.length).set(fresh);
        const wantedInPlace = inPlace.planFilledSegment(i);
        expect(wantedInPlace).toEqual(wanted);
        const old = cat(a, wantedInPlace);
        inPlace.oldBytesTarget(old.length).set(old);
        expect(inPlace.encodeFilledSegment(i)).toBe(expected.length);
        expect(inPlace.segmentOutput()).toEqual(expected);
      }
      expect(inPlace.finish()).toEqual(copying.finish());
      expect(inPlace.manifest("v1", "v2")).toEqual(copying.manifest("v1", "v2"));
    } finally {
      copying.free();
      inPlace.free();
    }
  });
});
