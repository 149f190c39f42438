// What an operator does to keep a deployment tidy: delete a build (and everything made from
// it), keep only the newest RETAIN_BUILDS builds of a game, and abort uploads in parts that
// were started and never completed (a cron trigger, wrangler.toml [triggers]). Deletion is
// refused for a build a channel points at; a deleted name is never published again
// (registry.ts), so a cached or stored object can never stand for other content.
import { cacheKey } from "./serve";
import { runPrefix, sweepRunPrefix } from "./fanout";
import { deleteUpload } from "./ingest";
import { getJson, keys, putJson, type BuildRecord } from "./store";
import { settings } from "./settings";
import { readerCapabilities } from "./wasm";
import type { Env } from "./env";

/** One upload in parts that was started: kept until it completes or is aborted. */
export interface PendingUpload {
  game: string;
  build: string;
  upload: string;
  r2UploadId: string;
  /** Unix milliseconds. */
  startedAt: number;
}

const PENDING_PREFIX = "uploads/pending/";
const pendingKey = (game: string, build: string, upload: string) => `${PENDING_PREFIX}${game}/${build}/${upload}.json`;

export function recordPendingUpload(bucket: R2Bucket, p: PendingUpload): Promise<unknown> {
  return putJson(bucket, pendingKey(p.game, p.build, p.upload), p);
}

export function forgetPendingUpload(bucket: R2Bucket, game: string, build: string, upload: string): Promise<void> {
  return bucket.delete(pendingKey(game, build, upload));
}

/** Every key under `prefix` (R2 lists 1000 at a time). */
async function listAll(bucket: R2Bucket, prefix: string): Promise<string[]> {
  const out: string[] = [];
  let cursor: string | undefined;
  do {
    const page = await bucket.list({ prefix, cursor, limit: 1000 });
    for (const o of page.objects) out.push(o.key);
    cursor = page.truncated ? page.cursor : undefined;
  } while (cursor);
  return out;
}

function registry(env: Env, game: string) {
  return env.REGISTRY.get(env.REGISTRY.idFromName(game));
}

export interface DeletedBuild {
  game: string;
  build: string;
  /** Stored objects removed: the build's uploads, and the descriptors, manifests and patches of pairs from or to it. */
  objectsDeleted: number;
  /** Update pairs that named the build. */
  pairs: { from: string; to: string }[];
}

/**
 * Deletes build `build` of `game`: the registry drops it (refusing while a channel points at
 * it), then its stored uploads, and every pair from or to it (descriptor, manifest, patch,
 * the pair's generation state, this location's cached descriptor). Cached manifests and
 * patches at other Cloudflare locations expire on their own: they stay signed and correct.
 */
export async function deleteBuild(env: Env, origin: string, game: string, build: string): Promise<{ ok: true; deleted: DeletedBuild } | { ok: false; status: number; error: string }> {
  const result = await registry(env, game).deleteBuild(game, build);
  if (!result.ok) return result;
  const bucket = env.BUCKET;
  const doomed = await listAll(bucket, `games/${game}/data/${build}/`);
  const pairs: { from: string; to: string }[] = [];
  const descriptorsPrefix = `games/${game}/updates/`;
  for (const key of await listAll(bucket, descriptorsPrefix)) {
    const m = /^([^/]+)\/([^/]+)\.json$/.exec(key.slice(descriptorsPrefix.length));
    if (!m || (m[1] !== build && m[2] !== build)) continue;
    const [from, to] = [m[1], m[2]];
    pairs.push({ from, to });
    doomed.push(keys.descriptor(game, from, to), keys.manifest(game, from, to), keys.patch(game, from, to));
  }
  for (let i = 0; i < doomed.length; i += 1000) await bucket.delete(doomed.slice(i, i + 1000));
  // Fanned-out runs of pairs from or to the build, in progress or abandoned: their temporary
  // objects and open uploads go too, and their pairs' objects forget them (so their steps stop).
  const swept = await sweepGenerationRuns(env, { game, build });
  for (const p of swept.pairs) if (!pairs.some((q) => q.from === p.from && q.to === p.to)) pairs.push(p);
  await Promise.all(
    pairs.map(async ({ from, to }) => {
      await env.GENERATIONS.get(env.GENERATIONS.idFromName(`${game}/${from}/${to}`)).forget();
      // The descriptor's cache entries are per reader: the floor's and this build's own set are
      // dropped here; an entry for another reader expires with its max-age.
      for (const reader of new Set([settings(env).readerFloor, readerCapabilities()])) {
        const url = new URL(`/v1/games/${game}/updates/${from}/${to}`, origin);
        url.searchParams.set("reader", reader);
        await caches.default.delete(cacheKey(url)).catch(() => false);
      }
    }),
  );
  return { ok: true, deleted: { game, build, objectsDeleted: doomed.length + swept.objects, pairs } };
}

/**
 * With RETAIN_BUILDS = N > 0: deletes the game's builds beyond the newest N (by publish time),
 * except those a channel names (its head and its history, so released pairs stay available).
 */
export async function applyRetention(env: Env, origin: string, game: string): Promise<string[]> {
  const keep = settings(env).retainBuilds;
  if (keep === 0) return [];
  const prefix = keys.buildsPrefix(game);
  const builds: { build: string; publishedAt: string }[] = [];
  let cursor: string | undefined;
  do {
    const page = await env.BUCKET.list({ prefix, cursor, limit: 1000, include: ["customMetadata"] } as R2ListOptions);
    for (const o of page.objects) builds.push({ build: o.key.slice(prefix.length, -".json".length), publishedAt: o.customMetadata?.publishedAt ?? "" });
    cursor = page.truncated ? page.cursor : undefined;
  } while (cursor);
  if (builds.length <= keep) return [];
  builds.sort((a, b) => (a.publishedAt < b.publishedAt ? 1 : a.publishedAt > b.publishedAt ? -1 : 0));
  const named = await registry(env, game).channelBuilds();
  const retired: string[] = [];
  for (const { build } of builds.slice(keep)) {
    if (named.has(build)) continue;
    const r = await deleteBuild(env, origin, game, build);
    if (r.ok) retired.push(build);
  }
  return retired;
}

/**
 * Aborts every upload in parts started more than UPLOAD_TTL_SECONDS before `now` and never
 * completed, and deletes what it stored. R2 keeps the parts of an abandoned multipart upload
 * (billed) until it is aborted; a bucket lifecycle rule does the same (worker/README.md).
 */
export async function abortStaleUploads(env: Env, now: number): Promise<{ aborted: number; kept: number }> {
  const ttlMs = settings(env).uploadTtlSeconds * 1000;
  let aborted = 0;
  let kept = 0;
  for (const key of await listAll(env.BUCKET, PENDING_PREFIX)) {
    const p = await getJson<PendingUpload>(env.BUCKET, key);
    if (p === null) continue;
    if (now - p.startedAt < ttlMs) {
      kept++;
      continue;
    }
    await env.BUCKET.resumeMultipartUpload(keys.buildData(p.game, p.build, p.upload), p.r2UploadId)
      .abort()
      .catch(() => {});
    // A completed upload's record names its upload: never delete the data a build stands on.
    const record = await getJson<BuildRecord>(env.BUCKET, keys.build(p.game, p.build));
    if (record?.upload !== p.upload) await deleteUpload(env.BUCKET, p.game, p.build, p.upload);
    await env.BUCKET.delete(key);
    aborted++;
  }
  return { aborted, kept };
}

const TMP_GENERATIONS = "tmp/generations/";

/**
 * Sweeps the temporary objects of fanned-out generation runs (fanout.ts: the steps' segments
 * and the records of their open multipart uploads, under tmp/generations/{game}/{from}/{to}/{run}/):
 * with `build`, every run of a pair from or to that build of that game (the build is being
 * deleted); without, every run its pair's object no longer wants (finished, abandoned, or
 * forgotten), from the cron trigger. The multipart uploads a dead step or assembly left open
 * are aborted. A run in progress is kept: its pair's object stores it before any step is queued.
 */
export async function sweepGenerationRuns(env: Env, only?: { game: string; build: string }): Promise<{ runs: number; objects: number; uploads: number; pairs: { from: string; to: string }[] }> {
  const prefix = only ? `${TMP_GENERATIONS}${only.game}/` : TMP_GENERATIONS;
  const runs = new Map<string, { game: string; from: string; to: string; run: string }>();
  for (const key of await listAll(env.BUCKET, prefix)) {
    const m = /^([^/]+)\/([^/]+)\/([^/]+)\/([^/]+)\//.exec(key.slice(TMP_GENERATIONS.length));
    if (!m) continue;
    const [, game, from, to, run] = m;
    if (only && from !== only.build && to !== only.build) continue;
    runs.set(runPrefix(game, from, to, run), { game, from, to, run });
  }
  let swept = 0;
  let objects = 0;
  let uploads = 0;
  const pairs: { from: string; to: string }[] = [];
  for (const [runKeys, r] of runs) {
    if (!only) {
      const stub = env.GENERATIONS.get(env.GENERATIONS.idFromName(`${r.game}/${r.from}/${r.to}`));
      if (await stub.runWanted(r.run)) continue;
    }
    const n = await sweepRunPrefix(env.BUCKET, runKeys);
    objects += n.objects;
    uploads += n.uploads;
    swept++;
    if (!pairs.some((p) => p.from === r.from && p.to === r.to)) pairs.push({ from: r.from, to: r.to });
  }
  return { runs: swept, objects, uploads, pairs };
}
