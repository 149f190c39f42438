// The transform phase (transform.ts, docs/FORMAT.md §2.8) in workerd with the real R2, queues
// and Durable Objects: a changed wasm module is stored normalized in the Worker's patches, in
// one invocation and fanned out, the patch applies byte-exact with the core's applier and is
// smaller than the patch of the same pair without the transform; re-emitted code is stored in
// the field-split layout, its old module (at its path, or the one a renamed module replaced)
// read split from a run object; modules up to the 20 MiB cap are transformed, a larger one
// diffed as it is; a module, a normalized
// or a split run object tampered with in R2 is refused and nothing is served.
import { env, SELF } from "cloudflare:test";
import { beforeAll, describe, expect, it } from "vitest";
import { initWasm, PatchGenerator } from "../src/wasm";
import { loadBuild } from "../src/reads";
import { settings } from "../src/settings";
import { runPrefix, runStep, runWriter, type StepJob } from "../src/fanout";
import { loadTransforms, prepareTransforms, storeTransforms } from "../src/transform";
import { bytes } from "./tar";
import { moduleVersions } from "./wasm_modules";
import { apply, auth, BASE, corrupt, expectSameFiles, generations, publishInParts, servedPatch, stored, until, type Files } from "./generation";

/** The arcade's engine module (fixtures/arcade), whose v2 re-emits its code. */
function reEmitted(): [Uint8Array, Uint8Array] {
  const [a, b] = (JSON.parse(env.ARCADE_LOGIC) as string[]).map((b64) => Uint8Array.from(atob(b64), (c) => c.charCodeAt(0)));
  return [a, b];
}

/**
 * A game whose engine (game.wasm) gains functions near its start: every later call index
 * shifts; or, `reEmit`, whose engine's code a toolchain re-emitted.
 */
function builds(filler = 0, reEmit = false): { v1: Files; v2: Files } {
  const [m1, m2] = reEmit ? reEmitted() : moduleVersions(3000, 20);
  const big = bytes(filler, 71);
  const changed = big.slice();
  for (let i = 5000; i < changed.length; i += 250_000) changed.set(bytes(300, i), i);
  const readme = new TextEncoder().encode("read me\n");
  const v1: Files = new Map([
    ["game.wasm", m1],
    ["readme.txt", readme],
  ]);
  const v2: Files = new Map([
    ["game.wasm", m2],
    ["readme.txt", readme],
  ]);
  if (filler > 0) {
    v1.set("big.bin", big);
    v2.set("big.bin", changed);
  }
  return { v1, v2 };
}

/** `module` grown to exactly `size` bytes by a custom section (named "pad") of `seed`'s bytes at its end. */
function padded(module: Uint8Array, size: number, seed: number): Uint8Array {
  const leb = (n: number) => {
    const out: number[] = [];
    do {
      out.push((n & 0x7f) | (n >= 0x80 ? 0x80 : 0));
      n = Math.floor(n / 128);
    } while (n > 0);
    return out;
  };
  const name = [3, 0x70, 0x61, 0x64];
  // The section's size field is 4 bytes long for every size this is used at (2 MiB to 256 MiB).
  const payload = size - module.length - 1 - 4 - name.length;
  const header = [0, ...leb(name.length + payload), ...name];
  if (payload < 0 || module.length + header.length + payload !== size) throw new Error(`cannot pad a ${module.length}-byte module to ${size}`);
  const out = new Uint8Array(size);
  out.set(module);
  out.set(header, module.length);
  out.set(bytes(payload, seed), module.length + header.length);
  return out;
}

/** `files` with game.wasm under another name (a content-hashed one). */
function renamed(files: Files, name: string): Files {
  return new Map([...files].map(([p, d]) => [p === "game.wasm" ? name : p, d]));
}

/** Bytes of the patch the core's generator makes of the stored pair without any transform. */
async function plainPatchBytes(game: string, v1: Files, v2: Files): Promise<number> {
  const [oldBuild, newBuild] = await Promise.all([loadBuild(env.BUCKET, game, "v1"), loadBuild(env.BUCKET, game, "v2")]);
  const gen = new PatchGenerator(oldBuild.signature, newBuild.signature, 3);
  const gather = (files: Files, ranges: { path: string; offset: number; length: number; normalized: boolean }[]) => {
    const out = new Uint8Array(ranges.reduce((n, r) => n + r.length, 0));
    let at = 0;
    for (const r of ranges) {
      expect(r.normalized).toBe(false);
      out.set(files.get(r.path)!.subarray(r.offset, r.offset + r.length), at);
      at += r.length;
    }
    return out;
  };
  let total = gen.header().length;
  for (let i = 0; i < gen.segmentCount; i++) {
    const fresh = gather(v2, gen.newRanges(i));
    total += gen.encodeSegment(i, fresh, gather(v1, gen.planSegment(i, fresh))).length;
  }
  total += gen.finish().length;
  gen.free();
  return total;
}

/** The normalized forms of the stored pair's modules, made as the pair's object makes them, under a run's prefix. */
async function transformRun(game: string, run: string) {
  const bucket = env.BUCKET;
  const [oldBuild, newBuild] = await Promise.all([loadBuild(bucket, game, "v1"), loadBuild(bucket, game, "v2")]);
  const prefix = runPrefix(game, "v1", "v2", run);
  const { transforms, stats } = await prepareTransforms(bucket, oldBuild, newBuild, prefix, (name, key) => runWriter(bucket, prefix, name, key));
  const gen = new PatchGenerator(oldBuild.signature, newBuild.signature, 3);
  for (const t of transforms) gen.addWasmTransform(t.record);
  const segments = gen.segmentCount;
  gen.free();
  const job: StepJob = { kind: "step", game, from: "v1", to: "v2", run, step: 0, first: 0, end: segments, level: 3, reader: settings(env).readerFloor, transforms: await storeTransforms(bucket, transforms) };
  return { transforms, job, stats };
}

/**
 * `v1` and `v2` published as builds of `game` and the update asked for: made in one
 * invocation (200), checked byte-exact; returns the served patch and the run's log.
 */
async function generatedInOne(game: string, v1: Files, v2: Files) {
  await publishInParts(game, "v1", v1);
  await publishInParts(game, "v2", v2);
  const res = await SELF.fetch(`${BASE}/v1/games/${game}/updates/v1/v2`, { headers: auth });
  expect(res.status, await res.clone().text()).toBe(200);
  await res.arrayBuffer();
  const patch = await servedPatch(game, "v1", "v2");
  expectSameFiles(apply(v1, patch), v2);
  return { patch, run: (await generations(game, "v1", "v2")).runs[0] };
}

/** As `generatedInOne`, for a pair fanned out (503 first, then assembled); returns the run's log. */
async function generatedFannedOut(game: string, v1: Files, v2: Files) {
  await publishInParts(game, "v1", v1);
  await publishInParts(game, "v2", v2);
  const first = await SELF.fetch(`${BASE}/v1/games/${game}/updates/v1/v2`, { headers: auth });
  expect(first.status).toBe(503);
  await first.arrayBuffer();
  const log = await until("v1 -> v2 assembled", async () => (await generations(game, "v1", "v2")).runs[0]);
  expectSameFiles(apply(v1, await servedPatch(game, "v1", "v2")), v2);
  return log;
}

describe("the wasm transform phase", () => {
  beforeAll(() => initWasm());

  it("stores a changed module normalized in a pair made in one invocation: applies byte-exact, smaller than without", async () => {
    const { v1, v2 } = builds();
    const { patch, run } = await generatedInOne("wt", v1, v2);
    expect(run.transform).toMatchObject({ modules: 1, split: 0, untransformed: 0 });
    const plain = await plainPatchBytes("wt", v1, v2);
    expect(patch.length).toBeLessThan(plain);
    // The run's normalized module is gone with it.
    expect(await stored("tmp/generations/wt/")).toEqual([]);
  });

  it("transforms modules up to MAX_TRANSFORM_MODULE_BYTES (20 MiB) and diffs a larger one as it is, listed in the run's log", async () => {
    // Both sides padded (the same padding) to the cap, then to a byte over it.
    const [m1, m2] = moduleVersions(3000, 20);
    for (const [game, size, modules] of [
      ["wtcap", 20 << 20, 1],
      ["wtover", (20 << 20) + 1, 0],
    ] as const) {
      const v1: Files = new Map([["game.wasm", padded(m1, size, 5)]]);
      const v2: Files = new Map([["game.wasm", padded(m2, size, 5)]]);
      // 5 segments: fanned out (GENERATION_STEP_SEGMENTS is 3 in the tests).
      const log = await generatedFannedOut(game, v1, v2);
      expect(log.transformedModules ?? 0, game).toBe(modules);
      expect(log.modulesAboveCap, game).toEqual(modules ? undefined : [{ path: "game.wasm", bytes: size }]);
    }
    // In one invocation too (the old version above the cap, the new one small): the phase's
    // statistics list it, with its new size.
    const { run } = await generatedInOne("wtoverone", new Map([["engine.wasm", padded(m1, (20 << 20) + 1, 5)]]), new Map([["engine.wasm", m2]]));
    expect(run.transform).toMatchObject({ modules: 0, modulesAboveCap: [{ path: "engine.wasm", bytes: m2.length }] });
  });

  it("stores it normalized in a fanned-out pair too: every step and the assembly get the transform", async () => {
    // 13 MiB beside the module: 4 segments, 2 steps.
    const { v1, v2 } = builds(13 << 20);
    const log = await generatedFannedOut("wtfan", v1, v2);
    expect(log).toMatchObject({ steps: 2, transformedModules: 1 });
    expect(await plainPatchBytes("wtfan", v1, v2)).toBeGreaterThan(log.patchBytes);
    expect(await stored("tmp/generations/wtfan/")).toEqual([]);
  });

  it("normalizes a module renamed between builds (content-hashed names) against the one it replaced", async () => {
    const { v1, v2 } = builds();
    const [r1, r2] = [renamed(v1, "game-1a2b3c4d.wasm"), renamed(v2, "game-9f8e7d6c.wasm")];
    const { patch, run } = await generatedInOne("wtren", r1, r2);
    expect(run.transform).toMatchObject({ modules: 1, untransformed: 0 });
    expect(patch.length).toBeLessThan(await plainPatchBytes("wtren", r1, r2));
  });

  it("stores a renamed module's re-emitted code in the field-split layout, the old module it replaced read split", async () => {
    const { v1, v2 } = builds(0, true);
    const [r1, r2] = [renamed(v1, "game-1a2b3c4d.wasm"), renamed(v2, "game-9f8e7d6c.wasm")];
    const { patch, run } = await generatedInOne("wtrensplit", r1, r2);
    expect(run.transform).toMatchObject({ modules: 1, split: 1, untransformed: 0 });
    // Within a few bytes of the same pair at one path (the patch names the old file it reads split).
    const { patch: samePath } = await generatedInOne("wtrensame", v1, v2);
    expect(Math.abs(patch.length - samePath.length)).toBeLessThan(64);
    expect(await stored("tmp/generations/wtrensplit/")).toEqual([]);
  });

  it("a renamed split module in a fanned-out pair: the steps read the old module it replaced split", async () => {
    const { v1, v2 } = builds(13 << 20, true);
    const log = await generatedFannedOut("wtrenfan", renamed(v1, "game-1a2b3c4d.wasm"), renamed(v2, "game-9f8e7d6c.wasm"));
    // 13 MiB of other files and the module cut at its parts: more than 4 segments, a step
    // boundary among the module's parts.
    expect(log).toMatchObject({ steps: 3, transformedModules: 1, splitModules: 1 });
    expect(await stored("tmp/generations/wtrenfan/")).toEqual([]);
  });

  it("stores re-emitted code in the field-split layout, its old module read split: byte-exact, smaller than without", async () => {
    const { v1, v2 } = builds(0, true);
    const { patch, run } = await generatedInOne("wtsplit", v1, v2);
    expect(run.transform).toMatchObject({ modules: 1, split: 1, untransformed: 0 });
    expect(patch.length).toBeLessThan(await plainPatchBytes("wtsplit", v1, v2));
    expect(await stored("tmp/generations/wtsplit/")).toEqual([]);
  });

  it("in a fanned-out pair too: the steps read the split old module", async () => {
    const { v1, v2 } = builds(13 << 20, true);
    const log = await generatedFannedOut("wtsplitfan", v1, v2);
    // The module cut at its parts: 3 steps of 3 segments, where 4 MiB segments made 2.
    expect(log).toMatchObject({ steps: 3, transformedModules: 1, splitModules: 1 });
    expect(await stored("tmp/generations/wtsplitfan/")).toEqual([]);
  });

  // The threat model (worker/README.md): the bucket may serve any bytes.
  describe("tampered with in R2", () => {
    it("an old module that is not its upload's is refused before it is transformed: nothing served", async () => {
      const { v1, v2 } = builds();
      await publishInParts("wtold", "v1", v1);
      await publishInParts("wtold", "v2", v2);
      const undo = await corrupt("wtold", "v1", "game.wasm");
      const res = await SELF.fetch(`${BASE}/v1/games/wtold/updates/v1/v2`, { headers: auth });
      expect(res.status).toBe(503);
      await res.arrayBuffer();
      expect((await generations("wtold", "v1", "v2")).failure?.error).toMatch(/integrity: stored bytes of v1\/game\.wasm do not match the BLAKE3 recorded at upload/);
      expect(await stored("games/wtold/patches/")).toEqual([]);
      expect(await stored("games/wtold/updates/")).toEqual([]);
      expect(await stored("tmp/generations/wtold/")).toEqual([]);
      await undo();
    });

    it("a new module that is not its upload's is refused too", async () => {
      const { v1, v2 } = builds();
      await publishInParts("wtnew", "v1", v1);
      await publishInParts("wtnew", "v2", v2);
      const undo = await corrupt("wtnew", "v2", "game.wasm");
      const res = await SELF.fetch(`${BASE}/v1/games/wtnew/updates/v1/v2`, { headers: auth });
      expect(res.status).toBe(503);
      await res.arrayBuffer();
      expect((await generations("wtnew", "v1", "v2")).failure?.error).toMatch(/integrity: stored bytes of v2\/game\.wasm do not match the BLAKE3 recorded at upload/);
      expect(await stored("games/wtnew/patches/")).toEqual([]);
      await undo();
    });

    it("a normalized run object changed after the transform phase fails the step that reads it", async () => {
      const { v1, v2 } = builds();
      await publishInParts("wtnorm", "v1", v1);
      await publishInParts("wtnorm", "v2", v2);
      const { transforms, job } = await transformRun("wtnorm", "tampered");
      expect(transforms).toHaveLength(1);
      const key = transforms[0].normalizedKey;
      expect(key.startsWith(runPrefix("wtnorm", "v1", "v2", "tampered"))).toBe(true);
      const good = new Uint8Array(await (await env.BUCKET.get(key))!.arrayBuffer());
      expect(good.length).toBe(transforms[0].normalizedSize);
      // Untouched, the step makes its segments.
      expect((await runStep(env, { ...job, run: "tampered" })).lengths.length).toBe(job.end);
      const bad = good.slice();
      bad[good.length >> 1] ^= 0x01;
      await env.BUCKET.put(key, bad);
      await expect(runStep(env, job)).rejects.toThrow(/"game\.wasm": normalized bytes 0\.\.\d+ are not those its wasm transform was made from/);
      expect(await stored("games/wtnorm/patches/")).toEqual([]);
    });

    it("a split old module changed after the transform phase fails the step that reads it", async () => {
      const { v1, v2 } = builds(0, true);
      await publishInParts("wtsplitbad", "v1", v1);
      await publishInParts("wtsplitbad", "v2", v2);
      const { transforms, job, stats } = await transformRun("wtsplitbad", "tampered");
      expect(stats.split).toBe(1);
      const split = transforms[0].oldSplit!;
      expect(split.key.startsWith(runPrefix("wtsplitbad", "v1", "v2", "tampered"))).toBe(true);
      const good = new Uint8Array(await (await env.BUCKET.get(split.key))!.arrayBuffer());
      expect(good.length).toBe(v1.get("game.wasm")!.length);
      expect(good).not.toEqual(v1.get("game.wasm"));
      expect((await runStep(env, job)).lengths.length).toBe(job.end);
      const bad = good.slice();
      bad[good.length >> 1] ^= 0x01;
      await env.BUCKET.put(split.key, bad);
      await expect(runStep(env, job)).rejects.toThrow(/integrity: the stored split old module of game\.wasm does not match/);
      await env.BUCKET.delete(split.key);
      await expect(runStep(env, job)).rejects.toThrow(/split/);
      expect(await stored("games/wtsplitbad/patches/")).toEqual([]);
    });

    it("a transform record changed in R2 is refused (pinned by its BLAKE3)", async () => {
      const { v1, v2 } = builds();
      await publishInParts("wtrec", "v1", v1);
      await publishInParts("wtrec", "v2", v2);
      const { job } = await transformRun("wtrec", "record");
      const recordKey = job.transforms![0].recordKey;
      const record = new Uint8Array(await (await env.BUCKET.get(recordKey))!.arrayBuffer());
      record[record.length - 1] ^= 0x01;
      await env.BUCKET.put(recordKey, record);
      await expect(loadTransforms(env.BUCKET, job.transforms)).rejects.toThrow(/integrity: the stored wasm transform record of game\.wasm/);
      await expect(runStep(env, job)).rejects.toThrow(/integrity/);
    });
  });
});
