// The two files a site serves for the package's Service Worker, shared by the Vite plugin
// (plugin.ts) and the copy command for other bundlers (copy-cli.ts): the Service Worker
// script, written to point at ONE content-hashed wasm module, the same URL the page's
// dedicated worker loads, so a browser downloads the module once and caches it for good.
//
// The built Service Worker (dist/lib/edgepatch-sw.js) loads its wasm the way wasm-bindgen
// does by default: `new URL("edgepatch_wasm_bg.wasm", self.location.href)`, beside the
// script. Writing a site's copy replaces that one expression with the hashed URL;
// web/scripts/build.mjs refuses a build whose Service Worker does not hold it exactly once.
import { createHash } from "node:crypto";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** The Service Worker's file name at the site's root (its directory must cover the game's scope). */
export const SERVICE_WORKER_FILE = "edgepatch-sw.js";
const WASM_FILE = "edgepatch_wasm_bg.wasm";
const SW_WASM_REFERENCE = `new URL("${WASM_FILE}", self.location.href)`;

/** The package's Service Worker and wasm module (dist/lib/), from this module's place in dist/vite/. */
export function packageFiles(): { serviceWorker: string; wasm: string } {
  const lib = join(dirname(fileURLToPath(import.meta.url)), "../lib");
  return { serviceWorker: join(lib, SERVICE_WORKER_FILE), wasm: join(lib, WASM_FILE) };
}

/** `edgepatch_wasm_bg-<first 16 hex of its SHA-256>.wasm`: a name that changes with the bytes. */
export function hashedWasmName(wasm: Uint8Array): string {
  return `edgepatch_wasm_bg-${createHash("sha256").update(wasm).digest("hex").slice(0, 16)}.wasm`;
}

/**
 * The Service Worker's source with its wasm at `wasmUrl` (resolved against the script's own
 * URL: a path relative to the script, or absolute). Throws when `source` is not a
 * Service Worker of this package (the reference it rewrites is not there exactly once).
 */
export function serviceWorkerSource(source: string, wasmUrl: string): string {
  const parts = source.split(SW_WASM_REFERENCE);
  if (parts.length !== 2) throw new Error(`@edgepatch/web: the Service Worker script holds ${SW_WASM_REFERENCE} ${parts.length - 1} times, not once; is the package's dist/lib/${SERVICE_WORKER_FILE} from the same build?`);
  return parts.join(`new URL(${JSON.stringify(wasmUrl)}, self.location.href)`);
}
