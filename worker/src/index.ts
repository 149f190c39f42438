// edgepatch generator: the HTTP API (worker/README.md) over R2, the Cache API, two Durable
// Objects and a Queue. A thin layer: formats, diffing and statements live in the wasm core.
//
// Who may call what is declared once per route: "anyone" (health, public key, channels),
// "released" (an update pair some channel currently releases: anyone; any other pair: the
// owner) and "owner" (everything else: the bearer token). Anonymous requests are rate limited
// per client address before they reach a route.
import { carriesToken, tokenRequired } from "./auth";
import { checkName, errorResponse, HEX64, HttpError, InternalError, json } from "./http";
import { deleteUpload, ingestBody, signTarStream, storeSigned, type Limits } from "./ingest";
import { cacheKey, cacheLookup, CORS, serveImmutable } from "./serve";
import { base64, statementSigner } from "./signing";
import { channelStatement, keyId } from "./statements";
import { getJson, keys, PART_BYTES, type BuildRecord } from "./store";
import { ConfigError, settings } from "./settings";
import { rotations } from "./rotations";
import { consumePairs, enqueueMove } from "./pregenerate";
import { consumeSteps } from "./fanout";
import { abortStaleUploads, applyRetention, deleteBuild, forgetPendingUpload, recordPendingUpload, sweepGenerationRuns } from "./operations";
import { signDescriptor, storedMismatch, type UpdateDescriptor } from "./descriptors";
import type { Env } from "./env";
import type { ChannelDocument } from "../../crates/edgepatch-format/typescript/update_protocol.js";
import { capabilityNames, initWasm, readerCovers, readerFor } from "./wasm";

export { PatchGeneration } from "./generate";
export { GameRegistry } from "./registry";

const VERSION = "1";

/** Who may call a route (see the header). */
type Access = "anyone" | "released" | "owner";

interface Call {
  req: Request;
  env: Env;
  ctx: ExecutionContext;
  url: URL;
  /** The request carries the owner's token. */
  owner: boolean;
}
type Handler = (call: Call, p: string[]) => Promise<Response>;
interface Route {
  method: string;
  pattern: RegExp;
  access: Access;
  handler: Handler;
}

const SEG = "([^/]+)";
const routes: Route[] = [];
function route(method: string, path: string, access: Access, handler: Handler): void {
  routes.push({ method, pattern: new RegExp(`^${path.replace(/:\w+/g, SEG)}$`), access, handler });
}

function limits(env: Env): Limits {
  const s = settings(env);
  return { maxBuildBytes: s.maxBuildBytes, maxRequestBytes: s.maxRequestBytes };
}

function withCors(res: Response): Response {
  // Set in place where the headers are mutable: re-wrapping would turn a body of known
  // length into a stream (chunked), which some clients then wait on.
  try {
    for (const [k, v] of Object.entries(CORS)) res.headers.set(k, v);
    return res;
  } catch {
    const out = new Response(res.body, res);
    for (const [k, v] of Object.entries(CORS)) out.headers.set(k, v);
    return out;
  }
}

function registry(env: Env, game: string) {
  return env.REGISTRY.get(env.REGISTRY.idFromName(game));
}

route("GET", "/v1/health", "anyone", async () => json({ status: "ok", version: VERSION }, 200, { "Cache-Control": "no-store" }));

route("GET", "/v1/public-key", "anyone", async ({ env }) => {
  const signer = statementSigner(env.MANIFEST_SIGNING_KEY);
  if (!signer) throw new HttpError(404, "this server does not sign");
  const current = await signer;
  // The current key first, then retired keys that clients may still hold statements of.
  const retired = settings(env)
    .previousPublicKeys.map((pk) => ({ keyId: keyId(pk), publicKey: base64(pk) }))
    .filter((k) => k.keyId !== current.keyId);
  // The rotations (checked before the first request), oldest first: how a client that trusts an
  // old key comes to trust the current one.
  const rotated = await rotations(env);
  return json(
    {
      algorithm: "ed25519",
      publicKey: current.publicKey,
      keyId: current.keyId,
      keys: [{ keyId: current.keyId, publicKey: current.publicKey }, ...retired],
      ...(rotated.length ? { rotations: rotated } : {}),
    },
    200,
    { "Cache-Control": "public, max-age=300" },
  );
});

// --- publishing ---------------------------------------------------------------------

/**
 * Commits a signed upload. The same content published again under the same name answers 200
 * with the stored record and `"unchanged": true` (and still moves the channel), so a retried
 * CI step succeeds; other content under a published or deleted name is refused (409).
 */
async function commit(env: Env, url: URL, record: BuildRecord, channel: string | null): Promise<Response> {
  const result = await registry(env, record.game).commitBuild(record, channel);
  if (!result.ok || result.existing) await deleteUpload(env.BUCKET, record.game, record.build, record.upload);
  if (!result.ok) throw new HttpError(result.status, result.error);
  await enqueueMove(env, record.game, result.moved);
  const location = { Location: `/v1/games/${record.game}/builds/${record.build}` };
  if (result.existing) return json({ ...result.existing, unchanged: true }, 200, location);
  const retired = await applyRetention(env, url.origin, record.game);
  return json({ ...record, ...(retired.length ? { retired } : {}) }, 201, location);
}

/** Refuses early what can be refused before the upload: a deleted name. A published name is decided at commit (same content: 200). */
async function refuseDeleted(env: Env, game: string, build: string): Promise<void> {
  if (await registry(env, game).wasDeleted(build)) {
    throw new HttpError(409, `build ${game}/${build} was deleted; a name always means one content (publish under a new name)`);
  }
}

function channelParam(url: URL): string | null {
  const c = url.searchParams.get("channel");
  return c === null ? null : checkName("channel", c);
}

// Single request: PUT the whole tar (up to MAX_REQUEST_BYTES).
route("PUT", "/v1/games/:game/builds/:build", "owner", async ({ req, env, url }, [game, build]) => {
  checkName("game", game);
  checkName("build", build);
  const channel = channelParam(url);
  await refuseDeleted(env, game, build);
  const upload = crypto.randomUUID();
  const signed = await ingestBody(env.BUCKET, game, build, upload, req, limits(env));
  let record: BuildRecord;
  try {
    record = await storeSigned(env.BUCKET, game, build, upload, signed);
  } catch (e) {
    await deleteUpload(env.BUCKET, game, build, upload);
    throw e;
  }
  return commit(env, url, record, channel);
});

// In parts: start, PUT parts (all but the last of one size, >= 5 MiB), complete.
function uploadToken(upload: string, r2UploadId: string): string {
  return `${upload}.${btoa(r2UploadId).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "")}`;
}
function parseUploadToken(token: string): { upload: string; r2UploadId: string } {
  const m = /^([0-9a-f-]{36})\.([A-Za-z0-9_-]+)$/.exec(token);
  if (!m) throw new HttpError(404, "no such upload");
  try {
    const b64 = m[2].replace(/-/g, "+").replace(/_/g, "/");
    return { upload: m[1], r2UploadId: atob(b64 + "=".repeat((4 - (b64.length % 4)) % 4)) };
  } catch {
    throw new HttpError(404, "no such upload");
  }
}

route("POST", "/v1/games/:game/builds/:build/uploads", "owner", async ({ env }, [game, build]) => {
  checkName("game", game);
  checkName("build", build);
  await refuseDeleted(env, game, build);
  const upload = crypto.randomUUID();
  const mpu = await env.BUCKET.createMultipartUpload(keys.buildData(game, build, upload), { httpMetadata: { contentType: "application/x-tar" } });
  // Until it completes or is aborted; the cron trigger aborts it after UPLOAD_TTL_SECONDS.
  await recordPendingUpload(env.BUCKET, { game, build, upload, r2UploadId: mpu.uploadId, startedAt: Date.now() });
  const l = limits(env);
  return json(
    {
      uploadId: uploadToken(upload, mpu.uploadId),
      minPartBytes: 5 << 20,
      maxPartBytes: l.maxRequestBytes,
      maxBuildBytes: l.maxBuildBytes,
      suggestedPartBytes: Math.min(Math.max(PART_BYTES, 16 << 20), l.maxRequestBytes),
      rule: "every part but the last has the same size, at least minPartBytes",
    },
    201,
  );
});

route("PUT", "/v1/games/:game/builds/:build/uploads/:upload/parts/:part", "owner", async ({ req, env }, [game, build, token, partText]) => {
  checkName("game", game);
  checkName("build", build);
  const { upload, r2UploadId } = parseUploadToken(token);
  const part = Number(partText);
  if (!Number.isInteger(part) || part < 1 || part > 10000) throw new HttpError(400, `part number ${partText} is not 1..10000`);
  const length = Number(req.headers.get("Content-Length") ?? NaN);
  if (!Number.isFinite(length)) throw new HttpError(411, "a part needs a Content-Length");
  if (length > limits(env).maxRequestBytes) throw new HttpError(413, `part of ${length} bytes is larger than the limit of ${limits(env).maxRequestBytes}`);
  if (req.body === null || length === 0) throw new HttpError(400, "empty part");
  const mpu = env.BUCKET.resumeMultipartUpload(keys.buildData(game, build, upload), r2UploadId);
  try {
    const uploaded = await mpu.uploadPart(part, req.body);
    return json({ partNumber: uploaded.partNumber, etag: uploaded.etag });
  } catch (e) {
    console.error(`part ${part} of ${game}/${build}:`, e);
    throw new HttpError(400, `part ${part} refused (is the upload id current and the part the agreed size?)`);
  }
});

route("DELETE", "/v1/games/:game/builds/:build/uploads/:upload", "owner", async ({ env }, [game, build, token]) => {
  const { upload, r2UploadId } = parseUploadToken(token);
  await env.BUCKET.resumeMultipartUpload(keys.buildData(checkName("game", game), checkName("build", build), upload), r2UploadId)
    .abort()
    .catch(() => {});
  await forgetPendingUpload(env.BUCKET, game, build, upload);
  return new Response(null, { status: 204 });
});

route("POST", "/v1/games/:game/builds/:build/uploads/:upload/complete", "owner", async ({ req, env, url }, [game, build, token]) => {
  checkName("game", game);
  checkName("build", build);
  const channel = channelParam(url);
  const { upload, r2UploadId } = parseUploadToken(token);
  let parts: R2UploadedPart[];
  try {
    const body = (await req.json()) as { parts?: { partNumber: number; etag: string }[] };
    if (!Array.isArray(body.parts) || body.parts.length === 0) throw new Error("no parts");
    parts = body.parts.map((p) => ({ partNumber: Number(p.partNumber), etag: String(p.etag) }));
  } catch {
    throw new HttpError(400, 'complete needs a JSON body {"parts": [{"partNumber": 1, "etag": "..."}, ...]}');
  }
  await refuseDeleted(env, game, build);
  const dataKey = keys.buildData(game, build, upload);
  const mpu = env.BUCKET.resumeMultipartUpload(dataKey, r2UploadId);
  try {
    await mpu.complete(parts);
    await forgetPendingUpload(env.BUCKET, game, build, upload);
  } catch (e) {
    await mpu.abort().catch(() => {});
    await forgetPendingUpload(env.BUCKET, game, build, upload);
    console.error(`completing the upload of ${game}/${build}:`, e);
    throw new HttpError(400, "upload could not be completed (are the parts and their etags those the part uploads answered?)");
  }
  // The parts are one object now: read it back through the parser and signer. A refused
  // build is deleted before the answer, so nothing stays stored.
  let record: BuildRecord;
  try {
    const l = limits(env);
    const head = await env.BUCKET.head(dataKey);
    if (head === null) throw new InternalError("completed upload is missing");
    if (head.size > l.maxBuildBytes) throw new HttpError(413, `build upload of ${head.size} bytes is larger than the limit of ${l.maxBuildBytes} bytes`);
    const obj = await env.BUCKET.get(dataKey);
    if (obj === null) throw new InternalError("completed upload is missing");
    const signed = await signTarStream(obj.body, l.maxBuildBytes, undefined, "storage");
    record = await storeSigned(env.BUCKET, game, build, upload, signed);
  } catch (e) {
    await deleteUpload(env.BUCKET, game, build, upload);
    throw e;
  }
  return commit(env, url, record, channel);
});

// --- builds and channels --------------------------------------------------------------

route("GET", "/v1/games/:game/builds", "owner", async ({ env, url }, [game]) => {
  checkName("game", game);
  const prefix = keys.buildsPrefix(game);
  const listed = await env.BUCKET.list({ prefix, cursor: url.searchParams.get("cursor") ?? undefined, limit: 1000, include: ["customMetadata"] } as R2ListOptions);
  const builds = listed.objects.map((o) => ({
    build: o.key.slice(prefix.length, -".json".length),
    publishedAt: o.customMetadata?.publishedAt,
    tarBytes: Number(o.customMetadata?.tarBytes),
    files: Number(o.customMetadata?.files),
  }));
  return json({ game, builds, ...(listed.truncated ? { cursor: listed.cursor } : {}) }, 200, { "Cache-Control": "no-store" });
});

route("GET", "/v1/games/:game/builds/:build", "owner", async ({ env }, [game, build]) => {
  const record = await getJson<BuildRecord>(env.BUCKET, keys.build(checkName("game", game), checkName("build", build)));
  if (record === null) throw new HttpError(404, `no build ${game}/${build}`);
  return json(record, 200, { "Cache-Control": "no-store" });
});

route("DELETE", "/v1/games/:game/builds/:build", "owner", async ({ env, url }, [game, build]) => {
  const result = await deleteBuild(env, url.origin, checkName("game", game), checkName("build", build));
  if (!result.ok) throw new HttpError(result.status, result.error);
  return json(result.deleted, 200, { "Cache-Control": "no-store" });
});

// Maintenance on demand (the cron trigger runs the same): abort stale uploads in parts.
route("POST", "/v1/maintenance/uploads", "owner", async ({ env }) => json(await abortStaleUploads(env, Date.now()), 200, { "Cache-Control": "no-store" }));

route("GET", "/v1/games/:game/builds/:build/signature", "owner", async ({ req, env, ctx, url }, [game, build]) => {
  const record = await getJson<BuildRecord>(env.BUCKET, keys.build(checkName("game", game), checkName("build", build)));
  if (record === null) throw new HttpError(404, `no build ${game}/${build}`);
  // Not shared through the edge cache: anonymous callers must not get it from there.
  return serveImmutable(req, url, ctx, env.BUCKET, keys.buildSignature(game, build, record.upload), record.signatureBlake3, { cache: false });
});

/** Channel documents are re-signed on each request with a fresh `expires`: only a short cache. */
const CHANNEL_CACHE = "public, max-age=60";

route("GET", "/v1/games/:game/channels/:channel", "anyone", async ({ env }, [game, channel]) => {
  checkName("game", game);
  checkName("channel", channel);
  const state = await registry(env, game).channel(channel);
  if (state === null) throw new HttpError(404, `no channel ${game}/${channel}`);
  const expires = Math.floor(Date.now() / 1000) + settings(env).channelTtlSeconds;
  const doc: ChannelDocument = { game, channel, build: state.build, sequence: state.sequence, expires };
  const signer = statementSigner(env.MANIFEST_SIGNING_KEY);
  if (!signer) return json(doc, 200, { "Cache-Control": CHANNEL_CACHE });
  const s = await signer;
  const signature = await s.sign(channelStatement(s.keyId, game, channel, state.build, state.sequence, expires));
  const signed: ChannelDocument = { ...doc, keyId: s.keyId, signature };
  return json(signed, 200, { "Cache-Control": CHANNEL_CACHE });
});

route("PUT", "/v1/games/:game/channels/:channel", "owner", async ({ req, env }, [game, channel]) => {
  checkName("game", game);
  checkName("channel", channel);
  let build: string;
  try {
    build = String(((await req.json()) as { build?: unknown }).build);
  } catch {
    throw new HttpError(400, 'channel update needs a JSON body {"build": "<name>"}');
  }
  checkName("build", build);
  const result = await registry(env, game).setChannel(game, channel, build);
  if (!result.ok) throw new HttpError(result.status, result.error);
  await enqueueMove(env, game, result.moved);
  return json({ game, channel, build });
});

// --- updates: descriptor (generated ahead or on demand, once), manifest, patch ---------

const DESCRIPTOR_CACHE = "public, max-age=3600";

/** The pair's descriptor as its PatchGeneration object holds it, generating it first if no one has. */
async function generatedDescriptor(env: Env, game: string, from: string, to: string): Promise<{ descriptor: UpdateDescriptor; generated: boolean }> {
  const stub = env.GENERATIONS.get(env.GENERATIONS.idFromName(`${game}/${from}/${to}`));
  const result = await stub.generate(game, from, to);
  if (!result.ok) throw new HttpError(result.status, result.error, result.retryAfter ? { "Retry-After": String(result.retryAfter) } : {});
  return result;
}

/**
 * The reader a request names (`?reader=`, docs/FORMAT.md §5), as hex without the capabilities
 * this Worker does not know; a request that names none is taken for READER_FLOOR's reader.
 */
function requestReader(url: URL, env: Env): string {
  const raw = url.searchParams.get("reader");
  if (raw === null) return settings(env).readerFloor;
  initWasm();
  try {
    return readerFor(raw);
  } catch (e) {
    throw new HttpError(400, `reader=${JSON.stringify(raw.slice(0, 40))}: ${e instanceof Error ? e.message : String(e)}`);
  }
}

/** Refuses a descriptor whose patch needs more than `reader` understands, naming both. */
function checkReader(descriptor: UpdateDescriptor, reader: string): void {
  // A descriptor stored before readers were recorded says nothing: it is served as it is.
  if (descriptor.readerNeeds === undefined || readerCovers(reader, descriptor.readerNeeds)) return;
  throw new HttpError(
    406,
    `this update's patch needs reader capabilities ${capabilityNames(descriptor.readerNeeds)}; the client reads ${capabilityNames(reader)}: update the client, or set the server's READER_FLOOR to what the client reads`,
  );
}

route("GET", "/v1/games/:game/updates/:from/:to", "released", async ({ req, env, ctx, url }, [game, from, to]) => {
  // The reader is part of the cache key: a cached answer was checked for that reader.
  const reader = requestReader(url, env);
  const keyed = new URL(url.pathname, url.origin);
  keyed.searchParams.set("reader", reader);
  const cached = await cacheLookup(req, keyed);
  if (cached) return cached;
  let descriptor = await getJson<UpdateDescriptor>(env.BUCKET, keys.descriptor(game, from, to));
  let source = "r2";
  if (descriptor === null) {
    const result = await generatedDescriptor(env, game, from, to);
    descriptor = result.descriptor;
    source = result.generated ? "generated" : "joined";
  }
  const signer = statementSigner(env.MANIFEST_SIGNING_KEY);
  if ((signer ? (await signer).keyId : undefined) !== descriptor.keyId) {
    // Signed by a key since rotated out (or the server stopped signing): signed again, but only
    // what this Worker generated. The bucket's copy is not trusted: the descriptor signed is the
    // pair's own record, and a stored descriptor, manifest or patch that differs from it is
    // refused (the log says how), never signed.
    const generated = (await generatedDescriptor(env, game, from, to)).descriptor;
    const mismatch = await storedMismatch(env, game, from, to, descriptor, generated);
    if (mismatch !== null) {
      console.error(`refusing to sign the update ${game} ${from} -> ${to} again: ${mismatch}`);
      throw new HttpError(500, "internal error: the stored update is not the one this server generated, so it is not signed");
    }
    descriptor = await signDescriptor(env, generated);
    await env.BUCKET.put(keys.descriptor(game, from, to), JSON.stringify(descriptor), { httpMetadata: { contentType: "application/json" } });
  }
  checkReader(descriptor, reader);
  const headers = { "Cache-Control": DESCRIPTOR_CACHE, ETag: `"u-${descriptor.manifestBlake3}"` };
  ctx.waitUntil(caches.default.put(cacheKey(keyed), json(descriptor, 200, headers)).catch(() => {}));
  return json(descriptor, 200, { ...headers, "X-Edgepatch-Cache": "miss", "X-Edgepatch-Source": source });
});

route("GET", "/v1/games/:game/updates/:from/:to/generations", "owner", async ({ env }, [game, from, to]) => {
  checkName("game", game);
  checkName("build", from, true);
  checkName("build", to);
  const listed = await env.BUCKET.list({ prefix: keys.generationLog(game, from, to) });
  const runs = await Promise.all(listed.objects.map((o) => getJson<unknown>(env.BUCKET, o.key)));
  const stub = env.GENERATIONS.get(env.GENERATIONS.idFromName(`${game}/${from}/${to}`));
  const [failure, fanout] = await Promise.all([stub.failure(), stub.fanoutProgress()]);
  return json({ game, from, to, count: listed.objects.length, runs, failure, fanout }, 200, { "Cache-Control": "no-store" });
});

async function servePairObject(kind: "manifest" | "patch", { req, env, ctx, url }: Call, [game, from, to, hex]: string[]): Promise<Response> {
  if (!HEX64.test(hex)) throw new HttpError(404, `not found: ${url.pathname}`);
  const cached = await cacheLookup(req, url);
  if (cached) return cached.status === 200 && req.headers.get("If-None-Match") === `"${hex}"` ? new Response(null, { status: 304, headers: { ETag: `"${hex}"` } }) : cached;
  const d = await getJson<UpdateDescriptor>(env.BUCKET, keys.descriptor(game, from, to));
  const expected = kind === "manifest" ? d?.manifestBlake3 : d?.patchBlake3;
  if (!d || expected !== hex) throw new HttpError(404, `not found: ${url.pathname} (fetch the update descriptor first)`);
  return serveImmutable(req, url, ctx, env.BUCKET, kind === "manifest" ? keys.manifest(game, from, to) : keys.patch(game, from, to), hex, { cacheChecked: true });
}

// Content-addressed under their pair: the same pair check as the descriptor's applies.
route("GET", "/v1/games/:game/manifests/:from/:to/:hex", "released", (call, p) => servePairObject("manifest", call, p));
route("GET", "/v1/games/:game/patches/:from/:to/:hex", "released", (call, p) => servePairObject("patch", call, p));

/**
 * Refuses an anonymous request for a pair no channel releases. The answer is the same whether
 * the builds exist or not, and it comes before any cache lookup or generation.
 */
async function requireReleased(call: Call, [game, from, to]: string[]): Promise<void> {
  checkName("game", game);
  checkName("build", from, true);
  checkName("build", to);
  if (call.owner) return;
  if (!(await registry(call.env, game).allows(from, to))) {
    const refusal = tokenRequired(call.req, call.env.EDGEPATCH_TOKEN, `the update ${from} -> ${to} of ${game}, which no channel releases,`);
    throw new HttpError(refusal.status === 503 ? 401 : refusal.status, refusal.message, refusal.headers);
  }
}

/** The client a rate limit counts against: its address as Cloudflare's edge saw it. */
function clientKey(req: Request): string {
  return req.headers.get("CF-Connecting-IP") ?? "unknown";
}

async function handle(req: Request, env: Env, ctx: ExecutionContext): Promise<Response> {
  const url = new URL(req.url);
  const method = req.method === "HEAD" ? "GET" : req.method;
  settings(env);
  const owner = await carriesToken(req, env.EDGEPATCH_TOKEN);
  if (!owner) {
    const { success } = await env.ANONYMOUS_RATE_LIMITER.limit({ key: clientKey(req) });
    if (!success) throw new HttpError(429, "too many requests from this address; try again in a minute", { "Retry-After": "60" });
  }
  let pathMatched = false;
  for (const r of routes) {
    const m = r.pattern.exec(url.pathname);
    if (!m) continue;
    pathMatched = true;
    if (r.method !== method) continue;
    const params = m.slice(1).map((s) => {
      try {
        return decodeURIComponent(s);
      } catch {
        throw new HttpError(400, `bad URL encoding in ${url.pathname}`);
      }
    });
    const call: Call = { req, env, ctx, url, owner };
    if (r.access === "owner" && !owner) throw tokenRequired(req, env.EDGEPATCH_TOKEN, `${method} ${url.pathname}`);
    if (r.access === "released") await requireReleased(call, params);
    return withCors(await r.handler(call, params));
  }
  if (pathMatched) throw new HttpError(405, `${req.method} is not allowed on ${url.pathname}`);
  throw new HttpError(404, `no such endpoint: ${req.method} ${url.pathname}`);
}

/** The settings and key rotations of `env`; a misconfiguration is logged, then thrown (queue and cron work is refused too). */
async function checkSettings(env: Env): Promise<void> {
  try {
    settings(env);
    await rotations(env);
  } catch (e) {
    if (e instanceof ConfigError) console.error(`server misconfigured: ${e.message}`);
    throw e;
  }
}

export default {
  async fetch(req: Request, env: Env, ctx: ExecutionContext): Promise<Response> {
    try {
      // Before any answer, preflights included: a misconfigured Worker serves nothing.
      settings(env);
      await rotations(env);
      if (req.method === "OPTIONS") {
        return new Response(null, {
          status: 204,
          headers: { ...CORS, "Access-Control-Allow-Methods": "GET, HEAD, PUT, POST, DELETE", "Access-Control-Allow-Headers": "Range, Authorization, Content-Type, If-None-Match", "Access-Control-Max-Age": "86400" },
        });
      }
      return await handle(req, env, ctx);
    } catch (e) {
      if (e instanceof HttpError) return errorResponse(e.status, e.message, { ...CORS, ...e.headers });
      // Internals (R2, runtime, configuration) go to the log, never to the client.
      if (e instanceof ConfigError) {
        console.error(`server misconfigured: ${e.message}`);
        return errorResponse(500, e.publicReason ? `server misconfigured: ${e.publicReason}` : "server misconfigured", CORS);
      }
      console.error(e instanceof InternalError ? `${e.message}:` : "internal error:", e instanceof InternalError ? e.cause ?? "" : e);
      return errorResponse(500, "internal error", CORS);
    }
  },

  async queue(batch: MessageBatch<unknown>, env: Env): Promise<void> {
    await checkSettings(env);
    // Two queues (wrangler.toml): pairs to pre-generate, and the steps of fanned-out generations.
    if (batch.queue.startsWith("edgepatch-generation-steps")) await consumeSteps(batch, env);
    else await consumePairs(batch, env);
  },

  /** The cron trigger (wrangler.toml [triggers]): aborts uploads in parts left incomplete. */
  async scheduled(controller: ScheduledController, env: Env, _ctx?: ExecutionContext): Promise<void> {
    await checkSettings(env);
    const r = await abortStaleUploads(env, controller.scheduledTime);
    console.log(`maintenance: ${r.aborted} stale uploads aborted, ${r.kept} in progress`);
    const g = await sweepGenerationRuns(env);
    console.log(`maintenance: ${g.runs} finished or abandoned generation runs swept (${g.objects} objects, ${g.uploads} uploads aborted)`);
  },
} satisfies ExportedHandler<Env>;
