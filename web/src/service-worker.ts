// The Service Worker that runs a game from its installed build: a request for
// `<scope><game>/<path>` is answered from `<dir>/files/<path>` below `edgepatch/<game>/`
// in OPFS, where <dir> is the directory the `current` pointer names for the build
// (layout.ts), looked up in that build's stored manifest, so games load their
// files by URL as they would from a web server. Built as a classic script
// (dist/lib/edgepatch-sw.js, with the apply-only wasm beside it); a portal registers it
// with `registerGameServiceWorker` (serve.ts) under a scope it chooses.
//
// A running game keeps its build until it reloads: the build is chosen when a page or frame
// navigates (the current build then) and pinned to that client; its other requests are
// answered from the pinned build. Pins are kept in Cache Storage, so a stopped and restarted
// Service Worker keeps them, and dropped when their client is gone. An update keeps the
// previous build (builds.ts), so a game started before an update keeps working; a game
// still running a build two updates old gets 410 Gone for what it had not loaded yet.
//
// Only the two builds the pointer names (current and previous), from the directories it
// names, are ever served, and only with a stored manifest whose BLAKE3 is the pointer's: an
// update writes a staging directory of its own that no pointer names until every byte of it
// is verified, so a pinned build's name never reaches bytes an update is writing or left.

import init, { ManifestReader, blake3Hex, checkName } from "../../crates/edgepatch-wasm/pkg/web-apply/edgepatch_wasm.js";
import type { ManifestEntry } from "../../crates/edgepatch-wasm/pkg/web-apply/edgepatch_wasm.js";
import { type BuildRef, ROOT_DIR, buildDir, dirAt, fileAt, readCurrent } from "./layout.js";
import { parseRange } from "./http-range.js";

// The Service Worker types this file uses (TypeScript's "webworker" lib cannot share a
// program with the "dom" lib the rest of web/src needs).
interface FetchEvent extends Event {
  readonly request: Request;
  readonly clientId: string;
  readonly resultingClientId: string;
  respondWith(r: Promise<Response> | Response): void;
  waitUntil(p: Promise<unknown>): void;
}
interface ExtendableEvent extends Event {
  waitUntil(p: Promise<unknown>): void;
}
declare const self: {
  registration: { scope: string };
  clients: { claim(): Promise<void>; matchAll(o?: { includeUncontrolled?: boolean; type?: string }): Promise<{ id: string }[]> };
  skipWaiting(): Promise<void>;
  addEventListener(type: "install", f: (e: ExtendableEvent) => void): void;
  addEventListener(type: "activate", f: (e: ExtendableEvent) => void): void;
  addEventListener(type: "fetch", f: (e: FetchEvent) => void): void;
};

const ready = init();

/** Content types by extension; what games load by URL. */
const TYPES: Record<string, string> = {
  html: "text/html; charset=utf-8",
  htm: "text/html; charset=utf-8",
  js: "text/javascript; charset=utf-8",
  mjs: "text/javascript; charset=utf-8",
  css: "text/css; charset=utf-8",
  json: "application/json",
  wasm: "application/wasm",
  png: "image/png",
  jpg: "image/jpeg",
  jpeg: "image/jpeg",
  gif: "image/gif",
  webp: "image/webp",
  avif: "image/avif",
  svg: "image/svg+xml",
  ico: "image/x-icon",
  ogg: "audio/ogg",
  mp3: "audio/mpeg",
  wav: "audio/wav",
  m4a: "audio/mp4",
  mp4: "video/mp4",
  webm: "video/webm",
  txt: "text/plain; charset=utf-8",
  xml: "application/xml",
  ttf: "font/ttf",
  otf: "font/otf",
  woff: "font/woff",
  woff2: "font/woff2",
  pck: "application/octet-stream",
  data: "application/octet-stream",
  bin: "application/octet-stream",
};

function typeOf(path: string): string {
  const dot = path.lastIndexOf(".");
  return (dot > path.lastIndexOf("/") && TYPES[path.slice(dot + 1).toLowerCase()]) || "application/octet-stream";
}

/** Precompressed files as Unity emits them (`Build/x.data.br`, `x.js.gz`): their coding. */
function codingOf(path: string): { coding: "br" | "gzip"; inner: string } | null {
  if (path.endsWith(".br")) return { coding: "br", inner: path.slice(0, -3) };
  if (path.endsWith(".gz")) return { coding: "gzip", inner: path.slice(0, -3) };
  return null;
}

function text(status: number, body: string, extra: Record<string, string> = {}): Response {
  return new Response(body + "\n", { status, headers: { "Content-Type": "text/plain; charset=utf-8", "Cache-Control": "no-store", ...extra } });
}

// --- pins: which build each client runs ---------------------------------------------

const PIN_CACHE = "edgepatch-sw-pins";
const pins = new Map<string, string>();
const pinKey = (clientId: string) => `/__edgepatch_pin/${encodeURIComponent(clientId)}`;

async function pin(clientId: string, key: string): Promise<void> {
  pins.set(clientId, key);
  const cache = await caches.open(PIN_CACHE);
  await cache.put(pinKey(clientId), new Response(key));
}

async function pinned(clientId: string): Promise<string | null> {
  const known = pins.get(clientId);
  if (known) return known;
  const res = await (await caches.open(PIN_CACHE)).match(pinKey(clientId));
  if (!res) return null;
  const key = await res.text();
  pins.set(clientId, key);
  return key;
}

/** Drops the pins of clients that are gone (but `keep`'s: a navigation's client does not exist yet). */
async function prunePins(keep: string): Promise<void> {
  const cache = await caches.open(PIN_CACHE);
  const live = new Set((await self.clients.matchAll({ includeUncontrolled: true, type: "all" })).map((c) => c.id));
  for (const req of await cache.keys()) {
    const id = decodeURIComponent(new URL(req.url).pathname.slice("/__edgepatch_pin/".length));
    if (id !== keep && !live.has(id)) {
      pins.delete(id);
      await cache.delete(req);
    }
  }
}

// --- builds and manifests --------------------------------------------------------------

/** Stored manifests of builds being served, by `game/build/manifestBlake3` (a few; they are small). */
const manifests = new Map<string, ManifestReader>();

async function gameDirectory(game: string): Promise<FileSystemDirectoryHandle | null> {
  try {
    const root = await navigator.storage.getDirectory();
    return await (await root.getDirectoryHandle(ROOT_DIR)).getDirectoryHandle(game);
  } catch {
    return null;
  }
}

/** The stored manifest of `ref`, if it is the one the pointer records (else null). */
async function manifestOf(g: FileSystemDirectoryHandle, game: string, ref: BuildRef): Promise<ManifestReader | null> {
  const key = `${game}/${ref.build}/${ref.manifestBlake3}`;
  const known = manifests.get(key);
  if (known) return known;
  let bytes: Uint8Array;
  try {
    const d = await buildDir(g, ref);
    bytes = new Uint8Array(await (await (await d.getFileHandle("manifest")).getFile()).arrayBuffer());
  } catch {
    return null;
  }
  if (blake3Hex(bytes) !== ref.manifestBlake3) return null;
  const m = new ManifestReader(bytes);
  if (manifests.size >= 8) {
    const [oldest, reader] = manifests.entries().next().value as [string, ManifestReader];
    manifests.delete(oldest);
    reader.free();
  }
  manifests.set(key, m);
  return m;
}

/**
 * The entry `path` names in the build, symlinks resolved through the manifest (targets are
 * relative to the link's directory; one leaving the build, or 40 hops, resolves to nothing).
 */
function resolve(m: ManifestReader, path: string): { path: string; entry: ManifestEntry } | null {
  let p = path;
  for (let hops = 0; hops <= 40; hops++) {
    const e = m.lookup(p);
    if (!e) return null;
    if (e.kind !== "symlink") return { path: p, entry: e };
    const parts = p.split("/").slice(0, -1);
    for (const c of (e.symlinkTarget ?? "").split("/")) {
      if (c === "..") {
        if (parts.length === 0) return null;
        parts.pop();
      } else if (c !== "." && c !== "") parts.push(c);
    }
    p = parts.join("/");
  }
  return null;
}

// --- answering -------------------------------------------------------------------------

async function serve(event: FetchEvent, scopePath: string): Promise<Response> {
  await ready;
  const req = event.request;
  const url = new URL(req.url);
  let rest: string;
  try {
    rest = decodeURIComponent(url.pathname.slice(scopePath.length));
  } catch {
    return text(400, "bad URL encoding");
  }
  const slash = rest.indexOf("/");
  const game = slash < 0 ? rest : rest.slice(0, slash);
  let path = slash < 0 ? "" : rest.slice(slash + 1);
  if (path === "" || path.endsWith("/")) path += "index.html";
  try {
    checkName("game", game);
  } catch {
    return text(404, `no game ${game}`);
  }
  // Build paths are relative, `/`-separated, without `.`, `..` or empty components.
  if (path.split("/").some((c) => c === "" || c === "." || c === ".." || c.includes("\\") || c.includes("\0"))) return text(404, `not found: ${path}`);

  const g = await gameDirectory(game);
  const current = g && (await readCurrent(g));
  if (!g || !current) return text(404, `${game} is not installed`);
  // The build this client runs: chosen at navigation, pinned to the client; served only
  // while the pointer names it (current or previous), from the directory it names.
  const navigation = req.mode === "navigate" || req.destination === "document" || req.destination === "iframe";
  let ref: BuildRef | null = current;
  if (navigation) {
    if (event.resultingClientId) await pin(event.resultingClientId, `${game}/${current.build}`);
    event.waitUntil(prunePins(event.resultingClientId));
  } else if (event.clientId) {
    const key = await pinned(event.clientId);
    if (key?.startsWith(`${game}/`)) {
      const build = key.slice(game.length + 1);
      ref = [current, current.previous].find((r) => r?.build === build) ?? null;
      if (!ref) return text(410, `build ${build} of ${game} is not stored any more (two updates happened since this page loaded): reload`);
    }
  }
  const build = ref.build;
  const m = await manifestOf(g, game, ref);
  if (!m) return text(410, `build ${build} of ${game} is not stored any more: reload`);
  const found = resolve(m, path);
  if (!found || found.entry.kind !== "file") return text(404, `${game} ${build} has no file ${path}`);

  let file: File;
  try {
    file = await (await fileAt(await dirAt(await buildDir(g, ref), "files", false), found.path, false)).getFile();
    // A file whose size is not the manifest's is not the verified one.
    if (file.size !== found.entry.size) throw new Error("size");
  } catch {
    return text(410, `build ${build} of ${game} is not stored any more: reload`);
  }
  const etag = `"${found.entry.blake3}"`;
  const coded = codingOf(path);
  // Stored decoded (the site was made with --store-decoded): the bytes are what a web server's
  // Content-Encoding would have delivered already, served as they are, ranges included.
  const decoded = coded !== null && found.entry.decoded === true;
  const headers: Record<string, string> = {
    "Content-Type": typeOf(coded ? coded.inner : path),
    ETag: etag,
    "Cache-Control": "no-cache",
    "X-Edgepatch-Build": build,
  };
  if (req.headers.get("If-None-Match")?.split(",").some((t) => t.trim() === etag)) return new Response(null, { status: 304, headers });
  if (decoded) headers["X-Edgepatch-Content-Encoding"] = coded.coding;
  if (coded && !decoded) {
    // A Response made here is not content-decoded by the browser: decode it here, so the game
    // gets what a web server with Content-Encoding would have delivered (no ranges then).
    headers["X-Edgepatch-Content-Encoding"] = coded.coding;
    const body = coded.coding === "gzip" ? file.stream().pipeThrough(new DecompressionStream("gzip")) : await decodeBrotli(file);
    if (body === null) return text(415, `${path}: this browser cannot decode brotli in a Service Worker; ship ${coded.inner}.gz or ${coded.inner}`);
    return new Response(req.method === "HEAD" ? null : body, { status: 200, headers });
  }
  headers["Accept-Ranges"] = "bytes";
  const range = parseRange(req.headers.get("Range"), file.size);
  if (range === "unsatisfiable") return new Response(null, { status: 416, headers: { ...headers, "Content-Range": `bytes */${file.size}` } });
  if (range) {
    const { offset, length } = range;
    headers["Content-Range"] = `bytes ${offset}-${offset + length - 1}/${file.size}`;
    headers["Content-Length"] = String(length);
    return new Response(req.method === "HEAD" ? null : file.slice(offset, offset + length), { status: 206, headers });
  }
  headers["Content-Length"] = String(file.size);
  return new Response(req.method === "HEAD" ? null : file, { status: 200, headers });
}

/** Brotli through DecompressionStream where the browser has it ("brotli"), else null. */
async function decodeBrotli(file: File): Promise<ReadableStream<Uint8Array> | null> {
  try {
    return file.stream().pipeThrough(new DecompressionStream("brotli" as CompressionFormat));
  } catch {
    return null;
  }
}

self.addEventListener("install", () => void self.skipWaiting());
self.addEventListener("activate", (event) => event.waitUntil(self.clients.claim()));
self.addEventListener("fetch", (event) => {
  const scope = new URL(self.registration.scope);
  const url = new URL(event.request.url);
  if (url.origin !== scope.origin || !url.pathname.startsWith(scope.pathname)) return;
  if (event.request.method !== "GET" && event.request.method !== "HEAD") return;
  event.respondWith(serve(event, scope.pathname).catch((e) => text(500, `edgepatch service worker: ${e instanceof Error ? e.message : String(e)}`)));
});
