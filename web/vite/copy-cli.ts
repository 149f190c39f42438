// `npx edgepatch-web-copy OUTDIR [--base URL]`: for a site built without the Vite plugin,
// writes the package's Service Worker (OUTDIR/edgepatch-sw.js) and its wasm module under a
// content-hashed name beside it, the Service Worker pointing at that wasm, and prints the
// wasm's URL: pass it as `wasmUrl` to `GameUpdater` so the page's dedicated worker loads the
// same file (one download). OUTDIR is served at --base (default `/`), the directory that
// must cover the game's scope.
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { SERVICE_WORKER_FILE, hashedWasmName, packageFiles, serviceWorkerSource } from "./service-worker-files.js";

const USAGE = "usage: edgepatch-web-copy OUTDIR [--base URL]   (OUTDIR is served at URL, default /)";
const args = process.argv.slice(2);
let outDir: string | undefined;
let base = "/";
for (let i = 0; i < args.length; i++) {
  const a = args[i]!;
  if (a === "--base" && i + 1 < args.length) base = args[++i]!;
  else if (a === "-h" || a === "--help") {
    console.log(USAGE);
    process.exit(0);
  } else if (!a.startsWith("-") && outDir === undefined) outDir = a;
  else {
    console.error(`edgepatch-web-copy: unexpected argument ${a}\n${USAGE}`);
    process.exit(2);
  }
}
if (outDir === undefined) {
  console.error(USAGE);
  process.exit(2);
}

const files = packageFiles();
const wasm = readFileSync(files.wasm);
const wasmName = hashedWasmName(wasm);
mkdirSync(outDir, { recursive: true });
writeFileSync(join(outDir, wasmName), wasm);
writeFileSync(join(outDir, SERVICE_WORKER_FILE), serviceWorkerSource(readFileSync(files.serviceWorker, "utf8"), wasmName));
console.error(`edgepatch-web-copy: wrote ${join(outDir, SERVICE_WORKER_FILE)} and ${join(outDir, wasmName)}; pass the URL below as GameUpdater's wasmUrl, serve ${wasmName} with a long max-age`);
console.log(`${base.replace(/\/?$/, "/")}${wasmName}`);
