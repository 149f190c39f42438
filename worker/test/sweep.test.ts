// Sweeping what fanned-out generation runs leave under tmp/generations/ (fanout.ts): the
// steps' temporary objects and the multipart uploads a step or an assembly left open, when
// the run is over (the cron trigger) or a build of its pair is deleted. In workerd, over the
// real (local) R2 and Durable Object bindings.
import { createScheduledController, env, runInDurableObject, SELF } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import worker from "../src/index";
import { settings } from "../src/settings";
import type { FanoutRun, RunUpload } from "../src/fanout";
import type { PatchGeneration } from "../src/generate";
import { gameBuild, makeTar } from "./tar";

const BASE = "https://edgepatch.test";
const auth = { Authorization: "Bearer test-token" };
const stored = async (prefix: string) => (await env.BUCKET.list({ prefix })).objects.map((o) => o.key).sort();
const pair = (game: string, from: string, to: string) => env.GENERATIONS.get(env.GENERATIONS.idFromName(`${game}/${from}/${to}`)) as DurableObjectStub<PatchGeneration>;

/** What a run's dead step leaves: one finished step object, one open multipart upload (a part in) and its record. */
async function leftovers(game: string, from: string, to: string, run: string): Promise<RunUpload> {
  const prefix = `tmp/generations/${game}/${from}/${to}/${run}/`;
  await env.BUCKET.put(`${prefix}0`, new Uint8Array(1000).fill(7));
  const upload = await env.BUCKET.createMultipartUpload(`${prefix}1`);
  await upload.uploadPart(1, new Uint8Array(5 << 20).fill(9));
  const record: RunUpload = { key: `${prefix}1`, uploadId: upload.uploadId };
  await env.BUCKET.put(`${prefix}uploads/step-1`, JSON.stringify(record));
  return record;
}

/** Whether the multipart upload is still open: a part of an aborted one is refused. */
async function stillOpen(u: RunUpload): Promise<boolean> {
  const upload = env.BUCKET.resumeMultipartUpload(u.key, u.uploadId);
  try {
    return (await upload.uploadPart(2, new Uint8Array(10))).etag.length > 0;
  } catch {
    return false;
  }
}

/** Makes `run` the pair's run in progress, as its object stores it when it plans one. */
async function inProgress(game: string, from: string, to: string, run: string): Promise<void> {
  const r: FanoutRun = { run, game, from, to, level: 3, reader: settings(env).readerFloor, segments: 4, steps: 2, stepSegments: 2, done: {}, stepFailures: 0, startedAt: Date.now(), progressAt: Date.now() };
  await runInDurableObject(pair(game, from, to), async (_instance, state) => {
    await state.storage.put("fanout", r);
  });
}

const cron = () => worker.scheduled(createScheduledController({ scheduledTime: Date.now(), cron: "23 4 * * *" }), env);

describe("sweeping fanned-out runs", () => {
  it("the cron trigger deletes an abandoned run's objects and aborts its open uploads, and keeps the run in progress", async () => {
    const dead = await leftovers("sweep", "v1", "v2", "dead-run");
    const live = await leftovers("sweep", "v1", "v2", "live-run");
    await inProgress("sweep", "v1", "v2", "live-run");
    expect(await stillOpen(dead)).toBe(true);
    await cron();
    expect(await stored("tmp/generations/sweep/v1/v2/dead-run/")).toEqual([]);
    expect(await stillOpen(dead)).toBe(false);
    expect(await stored("tmp/generations/sweep/v1/v2/live-run/")).toEqual(["tmp/generations/sweep/v1/v2/live-run/0", "tmp/generations/sweep/v1/v2/live-run/uploads/step-1"]);
    expect(await stillOpen(live)).toBe(true);
    // Once the run is over (here: the pair forgotten), the next sweep takes it too.
    await pair("sweep", "v1", "v2").forget();
    await cron();
    expect(await stored("tmp/generations/sweep/")).toEqual([]);
    expect(await stillOpen(live)).toBe(false);
  });

  it("deleting a build sweeps the runs of its pairs, in progress or not, and stops them", async () => {
    for (const [b, v] of [["v1", 1], ["v2", 2]] as const) {
      const res = await SELF.fetch(`${BASE}/v1/games/sweepdel/builds/${b}`, { method: "PUT", headers: auth, body: makeTar(gameBuild(v)) });
      expect(res.status, await res.clone().text()).toBe(201);
    }
    const running = await leftovers("sweepdel", "v1", "v2", "running");
    await inProgress("sweepdel", "v1", "v2", "running");
    // A run of another pair of the game (not naming v2) stays.
    await leftovers("sweepdel", "v1", "v3", "other");
    await inProgress("sweepdel", "v1", "v3", "other");
    const res = await SELF.fetch(`${BASE}/v1/games/sweepdel/builds/v2`, { method: "DELETE", headers: auth });
    expect(res.status, await res.clone().text()).toBe(200);
    const deleted = (await res.json()) as { pairs: { from: string; to: string }[] };
    expect(deleted.pairs).toContainEqual({ from: "v1", to: "v2" });
    expect(await stored("tmp/generations/sweepdel/v1/v2/")).toEqual([]);
    expect(await stillOpen(running)).toBe(false);
    // The pair's object forgot the run: a step still queued for it is dropped.
    expect(await pair("sweepdel", "v1", "v2").runWanted("running")).toBe(false);
    expect((await stored("tmp/generations/sweepdel/v1/v3/")).length).toBe(2);
    expect(await pair("sweepdel", "v1", "v3").runWanted("other")).toBe(true);
  });
});
