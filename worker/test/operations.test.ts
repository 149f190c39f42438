// Operations in workerd over the real (local) R2, Durable Object and Cache bindings: publishing
// the same content twice, deleting builds, retention, and aborting uploads in parts that were
// never completed (the cron trigger).
import { createExecutionContext, createScheduledController, env, SELF, waitOnExecutionContext } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import worker from "../src/index";
import { applyRetention } from "../src/operations";
import { bytes, gameBuild, makeTar } from "./tar";

const BASE = "https://edgepatch.test";
const auth = { Authorization: "Bearer test-token" };

const publish = (game: string, build: string, tar: Uint8Array, query = "") =>
  SELF.fetch(`${BASE}/v1/games/${game}/builds/${build}${query}`, { method: "PUT", headers: auth, body: tar });
const del = (game: string, build: string, headers: Record<string, string> = auth) => SELF.fetch(`${BASE}/v1/games/${game}/builds/${build}`, { method: "DELETE", headers });
const stored = async (prefix: string) => (await env.BUCKET.list({ prefix })).objects.map((o) => o.key).sort();
const variant = (n: number) => makeTar([...gameBuild(1), { type: "file", path: `build-${n}.txt`, data: `build ${n}` }]);

describe("publishing the same content again", () => {
  it("succeeds with the stored record (unchanged), stores nothing new, and still moves a channel", async () => {
    const first = await publish("same", "v1", makeTar(gameBuild(1)));
    expect(first.status).toBe(201);
    const record = (await first.json()) as { upload: string; signatureBlake3: string };
    const before = await stored("games/same/");
    const again = await publish("same", "v1", makeTar(gameBuild(1)), "?channel=beta");
    expect(again.status, await again.clone().text()).toBe(200);
    const body = (await again.json()) as { upload: string; unchanged: boolean };
    expect(body).toMatchObject({ unchanged: true, upload: record.upload, signatureBlake3: record.signatureBlake3 });
    expect(await stored("games/same/")).toEqual(before);
    expect(await (await SELF.fetch(`${BASE}/v1/games/same/channels/beta`)).json()).toMatchObject({ build: "v1", sequence: 1 });
    // Other content under the name is still refused, and leaves nothing.
    const other = await publish("same", "v1", makeTar(gameBuild(2)));
    expect(other.status).toBe(409);
    expect(((await other.json()) as { error: string }).error).toMatch(/exists with other content/);
    expect(await stored("games/same/")).toEqual(before);
  });
});

describe("deleting a build", () => {
  it("refuses the owner-less and a channel's head, then removes the build and every pair made from it", async () => {
    expect((await publish("del", "v1", makeTar(gameBuild(1)), "?channel=stable")).status).toBe(201);
    expect((await publish("del", "v2", makeTar(gameBuild(2)), "?channel=stable")).status).toBe(201);
    // The channel moves queued _ -> v1, _ -> v2 and v1 -> v2 for pre-generation: wait for them
    // (a generation still running while its build is deleted could store its pair afterwards).
    const pairs = ["games/del/updates/_/v1.json", "games/del/updates/_/v2.json", "games/del/updates/v1/v2.json"];
    for (let i = 0; i < 200 && (await stored("games/del/updates/")).length < 3; i++) await new Promise((r) => setTimeout(r, 50));
    expect(await stored("games/del/updates/")).toEqual(pairs);

    expect((await del("del", "v1", {})).status).toBe(401);
    const head = await del("del", "v2");
    expect(head.status).toBe(409);
    expect(((await head.json()) as { error: string }).error).toMatch(/channel del\/stable points at v2/);
    expect((await del("del", "v9")).status).toBe(404);

    const res = await del("del", "v1");
    expect(res.status, await res.clone().text()).toBe(200);
    const deleted = (await res.json()) as { pairs: { from: string; to: string }[]; objectsDeleted: number };
    expect(deleted.pairs).toEqual([{ from: "_", to: "v1" }, { from: "v1", to: "v2" }]);
    const left = await stored("games/del/");
    expect(left.filter((k) => k.includes("/v1/") || k.endsWith("/v1.json"))).toEqual([]);
    expect(left).toContain("games/del/updates/_/v2.json");
    expect((await SELF.fetch(`${BASE}/v1/games/del/builds/v1`, { headers: auth })).status).toBe(404);
    // The pair cannot come back from a cache or the pair's generation state.
    expect((await SELF.fetch(`${BASE}/v1/games/del/updates/v1/v2`, { headers: auth })).status).toBe(404);
    // Anonymous callers lose the pair (the channel's history forgot v1); _ -> v2 stays.
    expect((await SELF.fetch(`${BASE}/v1/games/del/updates/v1/v2`)).status).toBe(401);
    expect((await SELF.fetch(`${BASE}/v1/games/del/updates/_/v2`)).status).toBe(200);
    // A deleted name is never published again, with any content.
    const republish = await publish("del", "v1", makeTar(gameBuild(1)));
    expect(republish.status).toBe(409);
    expect(((await republish.json()) as { error: string }).error).toMatch(/was deleted/);
  });
});

describe("retention", () => {
  it("keeps the newest RETAIN_BUILDS builds and every build a channel names", async () => {
    for (let n = 1; n <= 5; n++) {
      expect((await publish("keep", `b${n}`, variant(n), n === 1 ? "?channel=old" : n === 5 ? "?channel=stable" : "")).status).toBe(201);
      await new Promise((r) => setTimeout(r, 5)); // distinct publish times
    }
    // RETAIN_BUILDS is off in the test settings: run the same pass with it set to 2.
    const retired = await applyRetention({ ...env, RETAIN_BUILDS: "2" }, BASE, "keep");
    expect(retired.sort()).toEqual(["b2", "b3"]);
    const list = (await (await SELF.fetch(`${BASE}/v1/games/keep/builds`, { headers: auth })).json()) as { builds: { build: string }[] };
    expect(list.builds.map((b) => b.build).sort()).toEqual(["b1", "b4", "b5"]);
    expect(await applyRetention({ ...env, RETAIN_BUILDS: "0" }, BASE, "keep")).toEqual([]);
  });
});

describe("uploads in parts that are never completed", () => {
  it("are aborted by the cron trigger after UPLOAD_TTL_SECONDS, and a fresh one is left alone", async () => {
    const start = async (build: string) => {
      const { uploadId } = (await (await SELF.fetch(`${BASE}/v1/games/stale/builds/${build}/uploads`, { method: "POST", headers: auth })).json()) as { uploadId: string };
      const body = bytes(5 << 20, 3);
      const part = await SELF.fetch(`${BASE}/v1/games/stale/builds/${build}/uploads/${uploadId}/parts/1`, { method: "PUT", headers: { ...auth, "Content-Length": String(body.length) }, body });
      expect(part.status).toBe(200);
      return { uploadId, part: await part.json() };
    };
    const old = await start("v1");
    expect(await stored("uploads/pending/stale/")).toHaveLength(1);
    const cron = async (scheduledTime: number) => {
      const ctx = createExecutionContext();
      await worker.scheduled(createScheduledController({ scheduledTime, cron: "23 4 * * *" }), env);
      await waitOnExecutionContext(ctx);
    };
    await cron(Date.now()); // younger than the TTL (a day): kept
    expect(await stored("uploads/pending/stale/")).toHaveLength(1);
    await cron(Date.now() + 2 * 86400 * 1000);
    expect(await stored("uploads/pending/stale/")).toEqual([]);
    // The aborted upload cannot be completed any more, and nothing of it is stored.
    const done = await SELF.fetch(`${BASE}/v1/games/stale/builds/v1/uploads/${old.uploadId}/complete`, { method: "POST", headers: auth, body: JSON.stringify({ parts: [old.part] }) });
    expect(done.status).toBe(400);
    expect(await stored("games/stale/")).toEqual([]);
    // The same on demand, by the owner only.
    await start("v2");
    expect((await SELF.fetch(`${BASE}/v1/maintenance/uploads`, { method: "POST" })).status).toBe(401);
    expect(await (await SELF.fetch(`${BASE}/v1/maintenance/uploads`, { method: "POST", headers: auth })).json()).toEqual({ aborted: 0, kept: 1 });
  });
});
