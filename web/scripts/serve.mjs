#!/usr/bin/env node
// A static HTTP server for the demo and the browser tests: serves web/dist
// (library, demo page, the update site made by make-static-site.mjs) with the
// headers docs/STATIC_SITE.md asks of any host of an update site: single-range
// requests (206 + Content-Range, 416 when unsatisfiable, multi-range refused),
// Cache-Control by object kind (content-addressed manifests and patches, and a bundler's
// content-hashed assets, immutable; descriptors and the public key max-age=300; channel
// documents and everything else no-cache), and CORS on every answer (any origin; the Range
// header allowed; the Content-Range, Content-Length and ETag headers exposed; OPTIONS
// preflights answered).
//
//   node web/scripts/serve.mjs [--host 127.0.0.1] [--port 8080] [--root web/dist] [--check]
//
// Tests import startServer() and use its in-process fault injection (never
// reachable over HTTP): cut patch responses at a patch offset, corrupt a patch
// byte, stall patch responses at a patch offset (the connection stays open, no
// more bytes), serve other files at given URL paths (what a hostile host, CDN or
// network would answer: `faults.replace`, URL path -> file), leave out response
// headers (`faults.omitHeaders`, a misconfigured CDN), send every answer's body
// through one slow link (`faults.bytesPerSecond`, for benchmarks), and count the
// patch bytes served (`stats`; preflights apart in `stats.preflights`).
import { createReadStream, existsSync, readFileSync, statSync } from "node:fs";
import { createServer } from "node:http";
import { dirname, extname, join, normalize, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";

const TYPES = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".map": "application/json",
  ".wasm": "application/wasm",
  ".json": "application/json",
  ".css": "text/css",
  ".png": "image/png",
  ".txt": "text/plain; charset=utf-8",
};

function contentType(path) {
  if (/\/v1\/games\/[^/]+\/(channels|updates)\//.test(path) || path.endsWith("/v1/public-key")) return "application/json";
  return TYPES[extname(path)] ?? "application/octet-stream";
}

/** [start, end] inclusive, "unsatisfiable", "multi", or null (no usable Range header). */
function parseRange(header, size) {
  if (!header) return null;
  const m = /^bytes=(.*)$/.exec(header.trim());
  if (!m) return null;
  if (m[1].includes(",")) return "multi";
  const r = /^(\d*)-(\d*)$/.exec(m[1].trim());
  if (!r || (r[1] === "" && r[2] === "")) return null;
  let start, end;
  if (r[1] === "") {
    const n = Number(r[2]);
    if (n === 0) return "unsatisfiable";
    start = Math.max(0, size - n);
    end = size - 1;
  } else {
    start = Number(r[1]);
    end = r[2] === "" ? size - 1 : Math.min(Number(r[2]), size - 1);
    if (start >= size || end < start) return "unsatisfiable";
  }
  return [start, end];
}

/** The demo page's address: with the update site's public key (the library requires one). */
function demoPath(root) {
  try {
    const { publicKey } = JSON.parse(readFileSync(join(root, "updates/site.json"), "utf8"));
    // The playable fixture game when the site has it (Install, Update, Play), else the demo build.
    const game = existsSync(join(root, "updates/v1/games/arcade")) ? "game=arcade&" : "";
    return `/demo/?${game}publicKey=${encodeURIComponent(publicKey)}`;
  } catch {
    return "/demo/";
  }
}

/** Cache-Control per object kind (docs/STATIC_SITE.md, "Headers the host must send"). */
function cacheControl(path) {
  if (/\/v1\/games\/[^/]+\/(patches|manifests)\/[0-9a-f]{64}$/.test(path)) return "public, max-age=31536000, immutable";
  if (/\/v1\/games\/[^/]+\/updates\/[^/]+\/[^/]+$/.test(path) || path.endsWith("/v1/public-key")) return "max-age=300";
  // A bundler's content-hashed output (Vite: assets/<name>-<8 characters>.<ext>; the wasm
  // module @edgepatch/web/vite names): a new build has new names, so cached for good.
  if (/\/assets\/[^/]+-[\w-]{8}\.\w+$/.test(path) || /\/edgepatch_wasm_bg-[0-9a-f]{16}\.wasm$/.test(path)) return "public, max-age=31536000, immutable";
  return "no-cache"; // channel documents (they move), and the demo and library (rebuilt in place)
}

/** CORS for a page on another origin (docs/STATIC_SITE.md): reads, ranges, and the lengths of ranged answers. */
const CORS = {
  "Access-Control-Allow-Origin": "*",
  "Access-Control-Allow-Methods": "GET, HEAD",
  "Access-Control-Allow-Headers": "Range",
  "Access-Control-Expose-Headers": "Content-Range, Content-Length, ETag",
};

export function startServer({ root, host = "127.0.0.1", port = 0, log = false } = {}) {
  root = resolve(root);
  const demo = demoPath(root);
  const faults = { cutPatchAt: null, stallPatchAt: null, corruptPatchAt: null, replace: new Map(), omitHeaders: new Set(), bytesPerSecond: null };
  const stats = { patchBytesServed: 0, requests: [], preflights: [] };
  // A slow link all answers share (faults.bytesPerSecond): when its next byte is free.
  let linkFreeAt = 0;
  const linkDelay = (bytes) => {
    if (!faults.bytesPerSecond) return 0;
    const now = performance.now();
    linkFreeAt = Math.max(linkFreeAt, now) + (bytes / faults.bytesPerSecond) * 1000;
    return Math.max(0, Math.round(linkFreeAt - now - (bytes / faults.bytesPerSecond) * 1000));
  };

  const server = createServer((req, res) => {
    // Every answer carries CORS, less what a test leaves out (header names in lower case).
    const writeHead = res.writeHead.bind(res);
    res.writeHead = (status, headers = {}) =>
      writeHead(status, Object.fromEntries(Object.entries({ ...CORS, ...headers }).filter(([k]) => !faults.omitHeaders.has(k.toLowerCase()))));
    const error = (status, message) => {
      res.writeHead(status, { "Content-Type": "application/json" });
      res.end(JSON.stringify({ error: message, status }) + "\n");
    };
    const url = new URL(req.url, "http://x");
    if (req.method === "OPTIONS") {
      stats.preflights.push({ path: url.pathname, origin: req.headers.origin ?? null, headers: req.headers["access-control-request-headers"] ?? null });
      res.writeHead(204, { "Access-Control-Max-Age": "600" });
      return res.end();
    }
    if (req.method !== "GET" && req.method !== "HEAD") return error(405, `${req.method} not allowed`);
    if (url.pathname === "/") {
      res.writeHead(302, { Location: demo });
      return res.end();
    }
    let rel = decodeURIComponent(url.pathname);
    if (rel.endsWith("/")) rel += "index.html";
    const file = faults.replace.get(url.pathname) ?? normalize(join(root, rel));
    if (!faults.replace.has(url.pathname) && file !== root && !file.startsWith(root + sep)) return error(403, "outside the root");
    let st;
    try {
      st = statSync(file);
    } catch {
      return error(404, `${url.pathname} not found`);
    }
    if (!st.isFile()) return error(404, `${url.pathname} is not a file`);
    const isPatch = /\/patches\/[0-9a-f]{64}$/.test(url.pathname);
    const immutable = /\/(patches|manifests)\/[0-9a-f]{64}$/.test(url.pathname);
    const headers = { "Content-Type": contentType(rel), "Accept-Ranges": "bytes", "Cache-Control": cacheControl(url.pathname) };
    if (immutable) headers.ETag = `"${url.pathname.slice(-64)}"`;
    // The game Service Worker (lib/edgepatch-sw.js) may control a scope outside lib/ (e.g. /play/).
    if (url.pathname.endsWith("/edgepatch-sw.js")) headers["Service-Worker-Allowed"] = "/";
    const range = parseRange(req.headers.range, st.size);
    if (range === "multi") return error(416, "multi-range requests are not served (docs/UPDATE_PROTOCOL.md)");
    if (range === "unsatisfiable") {
      res.writeHead(416, { "Content-Range": `bytes */${st.size}`, "Content-Type": "application/json" });
      return res.end(JSON.stringify({ error: `range ${req.headers.range} is outside ${st.size} bytes`, status: 416 }) + "\n");
    }
    const [start, end] = range ?? [0, st.size - 1];
    const entry = { path: url.pathname, range: req.headers.range ?? null, status: range ? 206 : 200, bytes: 0, origin: req.headers.origin ?? null };
    stats.requests.push(entry);
    if (log) console.error(`${req.method} ${url.pathname} ${req.headers.range ?? ""}`);
    if (range) headers["Content-Range"] = `bytes ${start}-${end}/${st.size}`;
    headers["Content-Length"] = String(st.size === 0 ? 0 : end - start + 1);
    const cut = isPatch && faults.cutPatchAt !== null ? faults.cutPatchAt : null;
    if (cut !== null && start >= cut) {
      // The connection dies before the first byte at or after the cut.
      entry.status = "cut";
      return req.socket.destroy();
    }
    const stall = isPatch && faults.stallPatchAt !== null ? faults.stallPatchAt : null;
    res.writeHead(range ? 206 : 200, headers);
    if (req.method === "HEAD" || st.size === 0) return res.end();
    let pos = start;
    const stream = createReadStream(file, { start, end, highWaterMark: 64 * 1024 });
    stream.on("data", (chunk) => {
      if (isPatch && faults.corruptPatchAt !== null && faults.corruptPatchAt >= pos && faults.corruptPatchAt < pos + chunk.length) {
        chunk = Buffer.from(chunk);
        chunk[faults.corruptPatchAt - pos] ^= 0x5a;
      }
      if (stall !== null && pos + chunk.length > stall) {
        // Send what precedes the stall point, then nothing more: the connection stays open.
        const head = chunk.subarray(0, Math.max(0, stall - pos));
        stream.destroy();
        entry.status = "stalled";
        entry.bytes += head.length;
        stats.patchBytesServed += head.length;
        pos += head.length;
        return res.write(head);
      }
      if (cut !== null && pos + chunk.length > cut) {
        const head = chunk.subarray(0, cut - pos);
        stream.destroy();
        entry.status = "cut";
        entry.bytes += head.length;
        stats.patchBytesServed += head.length;
        // Flush what precedes the cut, then drop the connection mid-body.
        return res.write(head, () => req.socket.destroy());
      }
      pos += chunk.length;
      entry.bytes += chunk.length;
      if (isPatch) stats.patchBytesServed += chunk.length;
      const send = () => {
        if (!res.write(chunk)) {
          stream.pause();
          res.once("drain", () => stream.resume());
        }
      };
      const wait = linkDelay(chunk.length);
      if (wait === 0) return send();
      stream.pause();
      delayed = true;
      setTimeout(() => {
        delayed = false;
        if (res.destroyed) return;
        send();
        if (ended) res.end();
        else if (!res.writableNeedDrain) stream.resume();
      }, wait);
    });
    let delayed = false;
    let ended = false;
    stream.on("end", () => (delayed ? (ended = true) : res.end()));
    if (stall !== null && start >= stall) {
      stream.destroy();
      entry.status = "stalled";
      return;
    }
    stream.on("error", () => req.socket.destroy());
    res.on("close", () => stream.destroy());
  });

  return new Promise((resolveStart, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      const addr = server.address();
      resolveStart({
        url: `http://${host}:${addr.port}/`,
        demoUrl: `http://${host}:${addr.port}${demo}`,
        server,
        faults,
        stats,
        resetStats() {
          stats.patchBytesServed = 0;
          stats.requests = [];
          stats.preflights = [];
        },
        close: () => new Promise((r) => { server.closeAllConnections?.(); server.close(() => r()); }),
      });
    });
  });
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const opt = (name, dflt) => {
    const i = args.indexOf(name);
    return i >= 0 ? args[i + 1] : dflt;
  };
  const root = opt("--root", join(dirname(fileURLToPath(import.meta.url)), "../dist"));
  const s = await startServer({ root, host: opt("--host", "127.0.0.1"), port: Number(opt("--port", "8080")), log: args.includes("--log") });
  console.log(`edgepatch demo: ${s.demoUrl}`);
  if (args.includes("--check")) {
    // Non-interactive: fetch the page, the worker, the wasm and the channel, then stop.
    for (const p of ["demo/", "demo/demo.js", "lib/edgepatch-worker.js", "lib/edgepatch-sw.js", "lib/edgepatch_wasm_bg.wasm", "updates/v1/games/demo/channels/stable", "updates/v1/games/arcade/channels/stable"]) {
      const r = await fetch(s.url + p);
      if (!r.ok) {
        console.error(`check: GET ${p} -> ${r.status}`);
        process.exit(1);
      }
      await r.arrayBuffer();
    }
    console.error("check: demo page, library, Service Worker, wasm and update site (demo, arcade) served");
    await s.close();
  }
}
