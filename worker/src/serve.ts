// Serving stored bytes: immutable, content-addressed objects with strong ETags, single
// ranges (206/416), from the edge cache (caches.default) when it has them.
import { errorResponse, HttpError, parseRange } from "./http";

export const IMMUTABLE = "public, max-age=31536000, immutable";

export const CORS: Record<string, string> = {
  "Access-Control-Allow-Origin": "*",
  "Access-Control-Expose-Headers": "Content-Range, Content-Length, Accept-Ranges, ETag, X-Edgepatch-Cache, X-Edgepatch-Source",
};

/** The response a cache lookup found, marked as a hit (cached responses are immutable: copy). */
function fromCache(res: Response): Response {
  if (res.status === 416) return errorResponse(416, "range not satisfiable", { "Content-Range": res.headers.get("Content-Range") ?? "", ...CORS });
  const out = new Response(res.body, res);
  out.headers.set("X-Edgepatch-Cache", "hit");
  out.headers.delete("CF-Cache-Status");
  for (const [k, v] of Object.entries(CORS)) out.headers.set(k, v);
  return out;
}

function etagMatches(request: Request, etag: string): boolean {
  const inm = request.headers.get("If-None-Match");
  return inm !== null && inm.split(",").some((t) => t.trim() === etag || t.trim() === `W/${etag}` || t.trim() === "*");
}

/**
 * The URL without its query string but its `reader` (an update descriptor is checked for the
 * reader a request names, docs/FORMAT.md §5): every other query of one object shares one entry.
 */
function keyUrl(url: URL): string {
  const reader = url.searchParams.get("reader");
  return `${url.origin}${url.pathname}${reader === null ? "" : `?reader=${encodeURIComponent(reader)}`}`;
}

/** The URL as a cache key: a plain GET of it (no query, no Range, no credentials). */
export function cacheKey(url: URL): Request {
  return new Request(keyUrl(url), { method: "GET" });
}

export async function cacheLookup(request: Request, url: URL): Promise<Response | null> {
  if (request.method !== "GET") return null;
  const headers: Record<string, string> = {};
  // Only a single range is passed on (the cache would answer several with multipart/byteranges,
  // which the protocol never uses): anything else gets the whole object.
  const range = request.headers.get("Range");
  if (range !== null && /^\s*bytes\s*=\s*\d*\s*-\s*\d*\s*$/.test(range)) headers.Range = range;
  const hit = await caches.default.match(new Request(keyUrl(url), { headers }));
  return hit ? fromCache(hit) : null;
}

/**
 * The fills of the edge cache running in this isolate, by cache key: concurrent misses of one
 * object wait for one fill instead of each reading the whole object from R2.
 */
const filling = new Map<string, Promise<boolean>>();

/** Puts the whole object into the edge cache once; true when the cache holds it afterwards. */
function fillOnce(url: URL, bucket: R2Bucket, key: string, headers: Record<string, string>, size: number): Promise<boolean> {
  const k = keyUrl(url);
  let fill = filling.get(k);
  if (fill === undefined) {
    fill = (async () => {
      const whole = await bucket.get(key);
      if (whole === null) return false;
      await caches.default.put(cacheKey(url), new Response(whole.body, { headers: { ...headers, "X-Edgepatch-Cache": "hit", "Content-Length": String(size) } }));
      return true;
    })()
      .catch((e) => {
        console.error(`filling the cache with ${key}:`, e);
        return false;
      })
      .finally(() => filling.delete(k));
    filling.set(k, fill);
  }
  return fill;
}

export interface ServeOptions {
  /** The caller has looked the URL up in the cache already. */
  cacheChecked?: boolean;
  /** Whether the edge cache may hold this object (false: only owners may read it). */
  cache?: boolean;
}

/**
 * Serves the immutable R2 object `key` whose BLAKE3 is `blake3` (checked by the caller),
 * honouring If-None-Match and a single Range, and fills the edge cache on a miss.
 */
export async function serveImmutable(request: Request, url: URL, ctx: ExecutionContext, bucket: R2Bucket, key: string, blake3: string, options: ServeOptions = {}): Promise<Response> {
  const useCache = options.cache ?? true;
  const cached = options.cacheChecked || !useCache ? null : await cacheLookup(request, url);
  if (cached) return etagMatches(request, `"${blake3}"`) ? notModified(blake3) : cached;
  const head = await bucket.head(key);
  if (head === null) throw new HttpError(404, `not found: ${url.pathname}`);
  const etag = `"${blake3}"`;
  if (etagMatches(request, etag)) return notModified(blake3);
  const headers: Record<string, string> = {
    "Content-Type": "application/octet-stream",
    "Cache-Control": useCache ? IMMUTABLE : "private, no-store",
    ETag: etag,
    "Accept-Ranges": "bytes",
    "X-Edgepatch-Cache": "miss",
    ...CORS,
  };
  const range = parseRange(request.headers.get("Range"), head.size);
  if (request.method === "HEAD") {
    return new Response(null, { status: 200, headers: { ...headers, "Content-Length": String(head.size) } });
  }
  if (range === null) {
    const obj = await bucket.get(key);
    if (obj === null) throw new HttpError(404, `not found: ${url.pathname}`);
    if (!useCache) return new Response(obj.body, { status: 200, headers: { ...headers, "Content-Length": String(head.size) } });
    // The same R2 read feeds the client and the cache.
    const [forClient, forCache] = obj.body.tee();
    ctx.waitUntil(
      caches.default.put(cacheKey(url), new Response(forCache, { headers: { ...headers, "X-Edgepatch-Cache": "hit", "Content-Length": String(head.size) } })).catch(() => {}),
    );
    return new Response(forClient, { status: 200, headers: { ...headers, "Content-Length": String(head.size) } });
  }
  // A ranged miss fills the cache with the whole object once, then answers from the cache;
  // only when the cache cannot hold it (too large, unavailable) is the range read from R2.
  if (useCache && (await fillOnce(url, bucket, key, headers, head.size))) {
    const hit = await caches.default.match(new Request(keyUrl(url), { headers: { Range: `bytes=${range.offset}-${range.offset + range.length - 1}` } }));
    if (hit && hit.status === 206) {
      const out = new Response(hit.body, hit);
      out.headers.set("X-Edgepatch-Cache", "miss");
      out.headers.delete("CF-Cache-Status");
      return out;
    }
    await hit?.body?.cancel();
  }
  const obj = await bucket.get(key, { range });
  if (obj === null) throw new HttpError(404, `not found: ${url.pathname}`);
  return new Response(obj.body, {
    status: 206,
    headers: {
      ...headers,
      "Content-Length": String(range.length),
      "Content-Range": `bytes ${range.offset}-${range.offset + range.length - 1}/${head.size}`,
    },
  });
}

function notModified(blake3: string): Response {
  return new Response(null, { status: 304, headers: { ETag: `"${blake3}"`, "Cache-Control": IMMUTABLE, ...CORS } });
}
