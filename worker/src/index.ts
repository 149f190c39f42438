// edgepatch generator: the HTTP API (worker/README.md) over R2, the Cache API and two
// Durable Objects. A thin layer: formats, diffing and signing live in the wasm core.
import { requireToken } from "./auth";
import { checkName, errorResponse, HEX64, HttpError, json } from "./http";
import { deleteUpload, ingestBody, signTarStream, storeSigned, type Limits } from "./ingest";
import { cacheKey, cacheLookup, CORS, serveImmutable } from "./serve";
import { manifestSigner } from "./signing";
import { getJson, keys, PART_BYTES, type BuildRecord } from "./store";
import type { UpdateDescriptor } from "./generate";
import type { Env } from "./env";

export { PatchGeneration } from "./generate";
export { GameRegistry } from "./registry";

const VERSION = "1";

type Handler = (req: Request, env: Env, ctx: ExecutionContext, url: URL, p: string[]) => Promise<Response>;
interface Route {
  method: string;
  pattern: RegExp;
  handler: Handler;
}

const SEG = "([^/]+)";
const routes: Route[] = [];
function route(method: string, path: string, handler: Handler): void {
  routes.push({ method, pattern: new RegExp(`^${path.replace(/:\w+/g, SEG)}$`), handler });
}

function limits(env: Env): Limits {
  return { maxBuildBytes: Number(env.MAX_BUILD_BYTES ?? 2 ** 31), maxRequestBytes: Number(env.MAX_REQUEST_BYTES ?? 100 * 2 ** 20) };
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

route("GET", "/v1/health", async () => json({ status: "ok", version: VERSION }, 200, { "Cache-Control": "no-store" }));

route("GET", "/v1/public-key", async (_req, env) => {
  const signer = manifestSigner(env.MANIFEST_SIGNING_KEY);
  if (!signer) throw new HttpError(404, "this server does not sign manifests");
  return json({ algorithm: "ed25519", publicKey: (await signer).publicKey }, 200, { "Cache-Control": "public, max-age=300" });
});

// --- publishing ---------------------------------------------------------------------

async function commit(env: Env, record: BuildRecord, channel: string | null): Promise<Response> {
  const registry = env.REGISTRY.get(env.REGISTRY.idFromName(record.game));
  const result = await registry.commitBuild(record, channel);
  if (!result.ok) {
    await deleteUpload(env.BUCKET, record.game, record.build, record.upload);
    throw new HttpError(result.status, result.error);
  }
  return json(record, 201, { Location: `/v1/games/${record.game}/builds/${record.build}` });
}

async function refuseExisting(env: Env, game: string, build: string): Promise<void> {
  if ((await env.BUCKET.head(keys.build(game, build))) !== null) {
    throw new HttpError(409, `build ${game}/${build} exists; builds are immutable (publish under a new name)`);
  }
}

function channelParam(url: URL): string | null {
  const c = url.searchParams.get("channel");
  return c === null ? null : checkName("channel", c);
}

// Single request: PUT the whole tar (up to MAX_REQUEST_BYTES).
route("PUT", "/v1/games/:game/builds/:build", async (req, env, _ctx, url, [game, build]) => {
  await requireToken(req, env.EDGEPATCH_TOKEN);
  checkName("game", game);
  checkName("build", build);
  const channel = channelParam(url);
  await refuseExisting(env, game, build);
  const upload = crypto.randomUUID();
  const signed = await ingestBody(env.BUCKET, game, build, upload, req, limits(env));
  let record: BuildRecord;
  try {
    record = await storeSigned(env.BUCKET, game, build, upload, signed);
  } catch (e) {
    await deleteUpload(env.BUCKET, game, build, upload);
    throw e;
  }
  return commit(env, record, channel);
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

route("POST", "/v1/games/:game/builds/:build/uploads", async (req, env, _ctx, _url, [game, build]) => {
  await requireToken(req, env.EDGEPATCH_TOKEN);
  checkName("game", game);
  checkName("build", build);
  await refuseExisting(env, game, build);
  const upload = crypto.randomUUID();
  const mpu = await env.BUCKET.createMultipartUpload(keys.buildData(game, build, upload), { httpMetadata: { contentType: "application/x-tar" } });
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

route("PUT", "/v1/games/:game/builds/:build/uploads/:upload/parts/:part", async (req, env, _ctx, _url, [game, build, token, partText]) => {
  await requireToken(req, env.EDGEPATCH_TOKEN);
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
    throw new HttpError(400, `part ${part} refused: ${e instanceof Error ? e.message : String(e)}`);
  }
});

route("DELETE", "/v1/games/:game/builds/:build/uploads/:upload", async (req, env, _ctx, _url, [game, build, token]) => {
  await requireToken(req, env.EDGEPATCH_TOKEN);
  const { upload, r2UploadId } = parseUploadToken(token);
  await env.BUCKET.resumeMultipartUpload(keys.buildData(checkName("game", game), checkName("build", build), upload), r2UploadId)
    .abort()
    .catch(() => {});
  return new Response(null, { status: 204 });
});

route("POST", "/v1/games/:game/builds/:build/uploads/:upload/complete", async (req, env, _ctx, url, [game, build, token]) => {
  await requireToken(req, env.EDGEPATCH_TOKEN);
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
  await refuseExisting(env, game, build);
  const dataKey = keys.buildData(game, build, upload);
  const mpu = env.BUCKET.resumeMultipartUpload(dataKey, r2UploadId);
  try {
    await mpu.complete(parts);
  } catch (e) {
    await mpu.abort().catch(() => {});
    throw new HttpError(400, `upload could not be completed: ${e instanceof Error ? e.message : String(e)}`);
  }
  // The parts are one object now: read it back through the parser and signer. A refused
  // build is deleted before the answer, so nothing stays stored.
  let record: BuildRecord;
  try {
    const l = limits(env);
    const head = await env.BUCKET.head(dataKey);
    if (head === null) throw new HttpError(500, "completed upload is missing");
    if (head.size > l.maxBuildBytes) throw new HttpError(413, `build upload of ${head.size} bytes is larger than the limit of ${l.maxBuildBytes} bytes`);
    const obj = await env.BUCKET.get(dataKey);
    if (obj === null) throw new HttpError(500, "completed upload is missing");
    const signed = await signTarStream(obj.body, l.maxBuildBytes);
    record = await storeSigned(env.BUCKET, game, build, upload, signed);
  } catch (e) {
    await deleteUpload(env.BUCKET, game, build, upload);
    throw e;
  }
  return commit(env, record, channel);
});

// --- builds and channels --------------------------------------------------------------

route("GET", "/v1/games/:game/builds", async (_req, env, _ctx, url, [game]) => {
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

route("GET", "/v1/games/:game/builds/:build", async (_req, env, _ctx, _url, [game, build]) => {
  const record = await getJson<BuildRecord>(env.BUCKET, keys.build(checkName("game", game), checkName("build", build)));
  if (record === null) throw new HttpError(404, `no build ${game}/${build}`);
  return json(record, 200, { "Cache-Control": "no-store" });
});

route("GET", "/v1/games/:game/builds/:build/signature", async (req, env, ctx, url, [game, build]) => {
  const record = await getJson<BuildRecord>(env.BUCKET, keys.build(checkName("game", game), checkName("build", build)));
  if (record === null) throw new HttpError(404, `no build ${game}/${build}`);
  return serveImmutable(req, url, ctx, env.BUCKET, keys.buildSignature(game, build, record.upload), record.signatureBlake3);
});

route("GET", "/v1/games/:game/channels/:channel", async (_req, env, _ctx, _url, [game, channel]) => {
  const c = await getJson<{ build: string }>(env.BUCKET, keys.channel(checkName("game", game), checkName("channel", channel)));
  if (c === null) throw new HttpError(404, `no channel ${game}/${channel}`);
  return json({ game, channel, build: c.build }, 200, { "Cache-Control": "no-store" });
});

route("PUT", "/v1/games/:game/channels/:channel", async (req, env, _ctx, _url, [game, channel]) => {
  await requireToken(req, env.EDGEPATCH_TOKEN);
  checkName("game", game);
  checkName("channel", channel);
  let build: string;
  try {
    build = String(((await req.json()) as { build?: unknown }).build);
  } catch {
    throw new HttpError(400, 'channel update needs a JSON body {"build": "<name>"}');
  }
  checkName("build", build);
  const result = await env.REGISTRY.get(env.REGISTRY.idFromName(game)).setChannel(game, channel, build);
  if (!result.ok) throw new HttpError(result.status, result.error);
  return json({ game, channel, build });
});

// --- updates: descriptor (generated on demand, once), manifest, patch -------------------

const DESCRIPTOR_CACHE = "public, max-age=3600";

route("GET", "/v1/games/:game/updates/:from/:to", async (req, env, ctx, url, [game, from, to]) => {
  checkName("game", game);
  checkName("build", from, true);
  checkName("build", to);
  const cached = await cacheLookup(req, url);
  if (cached) return cached;
  let descriptor = await getJson<UpdateDescriptor>(env.BUCKET, keys.descriptor(game, from, to));
  let source = "r2";
  if (descriptor === null) {
    const stub = env.GENERATIONS.get(env.GENERATIONS.idFromName(`${game}/${from}/${to}`));
    const result = await stub.generate(game, from, to);
    if (!result.ok) throw new HttpError(result.status, result.error);
    descriptor = result.descriptor;
    source = result.generated ? "generated" : "joined";
  }
  const headers = { "Cache-Control": DESCRIPTOR_CACHE, ETag: `"u-${descriptor.manifestBlake3}"` };
  ctx.waitUntil(caches.default.put(cacheKey(url), json(descriptor, 200, headers)).catch(() => {}));
  return json(descriptor, 200, { ...headers, "X-Edgepatch-Cache": "miss", "X-Edgepatch-Source": source });
});

route("GET", "/v1/games/:game/updates/:from/:to/generations", async (req, env, _ctx, _url, [game, from, to]) => {
  await requireToken(req, env.EDGEPATCH_TOKEN);
  checkName("game", game);
  checkName("build", from, true);
  checkName("build", to);
  const listed = await env.BUCKET.list({ prefix: keys.generationLog(game, from, to) });
  const runs = await Promise.all(listed.objects.map((o) => getJson<unknown>(env.BUCKET, o.key)));
  return json({ game, from, to, count: listed.objects.length, runs }, 200, { "Cache-Control": "no-store" });
});

async function servePairObject(kind: "manifest" | "patch", req: Request, env: Env, ctx: ExecutionContext, url: URL, [game, from, to, hex]: string[]): Promise<Response> {
  checkName("game", game);
  checkName("build", from, true);
  checkName("build", to);
  if (!HEX64.test(hex)) throw new HttpError(404, `not found: ${url.pathname}`);
  const cached = await cacheLookup(req, url);
  if (cached) return cached.status === 200 && req.headers.get("If-None-Match") === `"${hex}"` ? new Response(null, { status: 304, headers: { ETag: `"${hex}"` } }) : cached;
  const d = await getJson<UpdateDescriptor>(env.BUCKET, keys.descriptor(game, from, to));
  const expected = kind === "manifest" ? d?.manifestBlake3 : d?.patchBlake3;
  if (!d || expected !== hex) throw new HttpError(404, `not found: ${url.pathname} (fetch the update descriptor first)`);
  return serveImmutable(req, url, ctx, env.BUCKET, kind === "manifest" ? keys.manifest(game, from, to) : keys.patch(game, from, to), hex, true);
}

route("GET", "/v1/games/:game/manifests/:from/:to/:hex", (req, env, ctx, url, p) => servePairObject("manifest", req, env, ctx, url, p));
route("GET", "/v1/games/:game/patches/:from/:to/:hex", (req, env, ctx, url, p) => servePairObject("patch", req, env, ctx, url, p));

export default {
  async fetch(req: Request, env: Env, ctx: ExecutionContext): Promise<Response> {
    const url = new URL(req.url);
    if (req.method === "OPTIONS") {
      return new Response(null, {
        status: 204,
        headers: { ...CORS, "Access-Control-Allow-Methods": "GET, HEAD, PUT, POST, DELETE", "Access-Control-Allow-Headers": "Range, Authorization, Content-Type, If-None-Match", "Access-Control-Max-Age": "86400" },
      });
    }
    const method = req.method === "HEAD" ? "GET" : req.method;
    let pathMatched = false;
    try {
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
        return withCors(await r.handler(req, env, ctx, url, params));
      }
      if (pathMatched) return errorResponse(405, `${req.method} is not allowed on ${url.pathname}`, CORS);
      return errorResponse(404, `no such endpoint: ${req.method} ${url.pathname}`, CORS);
    } catch (e) {
      if (e instanceof HttpError) return errorResponse(e.status, e.message, { ...CORS, ...e.headers });
      console.error(e);
      return errorResponse(500, `internal error: ${e instanceof Error ? e.message : String(e)}`, CORS);
    }
  },
} satisfies ExportedHandler<Env>;
