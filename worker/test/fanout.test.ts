// Generation fanned out (worker/README.md, "Generation fanned out"), in workerd with the real
// queues, R2 and Durable Objects: a pair of more than GENERATION_STEP_SEGMENTS (3 here, in
// vitest.config.ts) segments is made in steps on the GENERATION_STEPS queue and assembled into
// one patch that the core's applier turns into the new build; a failing step is retried by the
// queue and the pair still completes; a channel move pre-generates fanned-out pairs.
import { env, SELF } from "cloudflare:test";
import { beforeAll, describe, expect, it } from "vitest";
import { initWasm } from "../src/wasm";
import { settings } from "../src/settings";
import { assembleRun, runStep, stepJobs, type FanoutRun } from "../src/fanout";
import { bytes } from "./tar";
import { apply, auth, BASE, corrupt, expectSameFiles, generations, publishInParts, servedPatch, stored, until, type Files } from "./generation";

/** v1: a 13 MiB file and a small one. v2: the big one changed here and there, a 1 MiB file
 * after it. The new stream (delta files in tree order) is big.bin [0, 13 MiB), tail.bin
 * [13, 14 MiB): 4 segments, so 2 steps of at most 3: big.bin crosses from step 0 into step 1
 * (checked by step 0 with a full read), tail.bin lies in step 1. */
function builds(): { v1: Files; v2: Files } {
  const big = bytes(13 << 20, 61);
  const changed = big.slice();
  for (let i = 5000; i < changed.length; i += 250_000) changed.set(bytes(300, i), i);
  return {
    v1: new Map([
      ["big.bin", big],
      ["readme.txt", new TextEncoder().encode("version 1\n")],
    ]),
    v2: new Map([
      ["big.bin", changed],
      ["readme.txt", new TextEncoder().encode("version 1\n")],
      ["tail.bin", bytes(1 << 20, 62)],
    ]),
  };
}

describe("generation fanned out", () => {
  const { v1, v2 } = builds();
  beforeAll(() => initWasm());

  it("generates a pair of more segments than a step holds in steps, assembled into one patch that applies byte-exact", async () => {
    await publishInParts("fan", "v1", v1);
    await publishInParts("fan", "v2", v2);
    // The first request starts the run and is told to come back.
    const first = await SELF.fetch(`${BASE}/v1/games/fan/updates/v1/v2`, { headers: auth });
    expect(first.status).toBe(503);
    expect(Number(first.headers.get("Retry-After"))).toBeGreaterThanOrEqual(1);
    await first.arrayBuffer();
    const log = await until("v1 -> v2 assembled", async () => (await generations("fan", "v1", "v2")).runs[0]);
    expect(log).toMatchObject({ steps: 2, segments: 4, stepFailures: 0 });
    expectSameFiles(apply(v1, await servedPatch("fan", "v1", "v2", 4)), v2);
    // One run, no failure, the run's temporary objects gone.
    const g = await generations("fan", "v1", "v2");
    expect(g).toMatchObject({ count: 1, failure: null, fanout: null });
    expect(await stored("tmp/generations/fan/")).toEqual([]);
  });

  it("retries a failing step and still completes the pair", async () => {
    await publishInParts("fanflaky", "v1", v1);
    await publishInParts("fanflaky", "v2", v2);
    // tail.bin lies in the second step: it fails its integrity check until the bytes are repaired.
    const undo = await corrupt("fanflaky", "v2", "tail.bin");
    await (await SELF.fetch(`${BASE}/v1/games/fanflaky/updates/v1/v2`, { headers: auth })).arrayBuffer();
    const failing = await until("a step to fail", async () => {
      const f = (await generations("fanflaky", "v1", "v2")).fanout;
      return f && f.stepFailures > 0 ? f : null;
    });
    expect(failing.steps).toBe(2);
    expect((await generations("fanflaky", "v1", "v2")).count).toBe(0);
    await undo();
    const log = await until("v1 -> v2 assembled after the retry", async () => (await generations("fanflaky", "v1", "v2")).runs[0]);
    expect(log.stepFailures).toBeGreaterThanOrEqual(1);
    expectSameFiles(apply(v1, await servedPatch("fanflaky", "v1", "v2", 4)), v2);
    expect(await generations("fanflaky", "v1", "v2")).toMatchObject({ count: 1, failure: null, fanout: null });
  });

  it("pre-generates fanned-out pairs when a channel moves, without a request", async () => {
    await publishInParts("fanpre", "v1", v1, "live");
    await publishInParts("fanpre", "v2", v2);
    await until("_ -> v1 pre-generated", async () => (await stored("games/fanpre/updates/_/v1.json")).length > 0);
    const move = await SELF.fetch(`${BASE}/v1/games/fanpre/channels/live`, { method: "PUT", headers: auth, body: JSON.stringify({ build: "v2" }) });
    expect(move.status).toBe(200);
    await until("_ -> v2 and v1 -> v2 pre-generated", async () => (await stored("games/fanpre/updates/")).length === 3);
    for (const from of ["_", "v1"]) {
      const g = await generations("fanpre", from, "v2");
      expect(g.count, from).toBe(1);
      expect(g.runs[0].steps, from).toBe(2);
    }
    // The player's request finds it ready.
    const res = await SELF.fetch(`${BASE}/v1/games/fanpre/updates/v1/v2`, { headers: { "CF-Connecting-IP": "198.51.100.7" } });
    expect(res.status).toBe(200);
    expect(res.headers.get("X-Edgepatch-Source")).toBe("r2");
    await res.arrayBuffer();
    expectSameFiles(apply(v1, await servedPatch("fanpre", "v1", "v2", 4)), v2);
  });

  // The threat model (worker/README.md): the bucket may hold any bytes; a wrong patch must never
  // be served as good. Steps read old bytes unchecked and report which old files they read; the
  // assembly checks each of those once, in full, before it stores anything.
  describe("old bytes tampered with in R2", () => {
    /** A run of the pair as its object plans it (GENERATION_STEP_SEGMENTS 3: steps [0, 3) and [3, 4)). */
    const plannedRun = (game: string, run: string): FanoutRun => ({ run, game, from: "v1", to: "v2", level: 3, reader: settings(env).readerFloor, segments: 4, steps: 2, stepSegments: 3, done: {}, stepFailures: 0, startedAt: Date.now(), progressAt: Date.now() });

    it("a step's output made from tampered old bytes is refused by the assembly: no patch stored", async () => {
      await publishInParts("fantamper", "v1", v1);
      await publishInParts("fantamper", "v2", v2);
      // The test vector: one byte of the old big.bin flipped in the stored tar (fanout.test.ts `corrupt`).
      const undo = await corrupt("fantamper", "v1", "big.bin");
      const run = plannedRun("fantamper", "tampered");
      for (const job of stepJobs(run)) run.done[job.step] = await runStep(env, job);
      // The steps read old big.bin (its spans are what the new one is compressed against).
      expect(run.done[0].oldFiles).not.toBeNull();
      await expect(assembleRun(env, run)).rejects.toThrow(/integrity: stored bytes of v1\/big\.bin do not match the BLAKE3 recorded at upload/);
      expect(await stored("games/fantamper/patches/")).toEqual([]);
      expect(await stored("games/fantamper/updates/")).toEqual([]);
      await undo();
    });

    it("the assembly refuses old bytes replaced after the steps read them (ETag pinned)", async () => {
      await publishInParts("fanswap", "v1", v1);
      await publishInParts("fanswap", "v2", v2);
      const run = plannedRun("fanswap", "swapped");
      for (const job of stepJobs(run)) run.done[job.step] = await runStep(env, job);
      const undo = await corrupt("fanswap", "v1", "big.bin");
      await expect(assembleRun(env, run)).rejects.toThrow(/integrity: .*changed during the generation/);
      expect(await stored("games/fanswap/patches/")).toEqual([]);
      await undo();
    });

    it("served: the pair fails while the old build is tampered with, and is generated once repaired", async () => {
      await publishInParts("fanserve", "v1", v1);
      await publishInParts("fanserve", "v2", v2);
      const undo = await corrupt("fanserve", "v1", "big.bin");
      await (await SELF.fetch(`${BASE}/v1/games/fanserve/updates/v1/v2`, { headers: auth })).arrayBuffer();
      const failure = await until("the run to fail", async () => (await generations("fanserve", "v1", "v2")).failure);
      expect(failure.error).toMatch(/integrity: stored bytes of v1\/big\.bin/);
      expect((await generations("fanserve", "v1", "v2")).count).toBe(0);
      const res = await SELF.fetch(`${BASE}/v1/games/fanserve/updates/v1/v2`, { headers: auth });
      expect(res.status).not.toBe(200);
      await res.arrayBuffer();
      expect(await stored("games/fanserve/patches/")).toEqual([]);
      await undo();
      // The pair is queued again after its backoff: with the bytes intact it is generated.
      const log = await until("v1 -> v2 assembled after the repair", async () => (await generations("fanserve", "v1", "v2")).runs[0]);
      expect(log.steps).toBe(2);
      expectSameFiles(apply(v1, await servedPatch("fanserve", "v1", "v2", 4)), v2);
    });
  });
});
