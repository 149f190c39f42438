#!/usr/bin/env node
// Builds web/dist: the package layout that `npm pack` ships (web/package.json "files",
// "exports") and the demo page.
//
//   dist/lib/edgepatch-web.js      the library (ESM; creates the worker beside itself)
//   dist/lib/edgepatch-worker.js   the dedicated worker (ESM, self-contained)
//   dist/lib/edgepatch-sw.js       the Service Worker (classic script), once its source exists
//   dist/lib/edgepatch_wasm_bg.wasm  the apply-only wasm module, beside both workers
//   dist/types/*.d.ts              declarations of the public API (tsc, tsconfig.types.json)
//   dist/demo/                     the demo portal (not packed)
//
// The apply-only wasm package must have been built first (scripts/build-wasm.sh web-apply;
// web/scripts/build-all.sh does it). `npm pack` runs this script (package.json "prepack").
import { build } from "esbuild";
import { execFileSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const web = join(dirname(fileURLToPath(import.meta.url)), "..");
const pkg = join(web, "../crates/edgepatch-wasm/pkg/web-apply");
const dist = join(web, "dist");

if (!existsSync(join(pkg, "edgepatch_wasm_bg.wasm"))) {
  console.error(`build: ${pkg} is missing; run from the repository root: scripts/build-wasm.sh web-apply`);
  process.exit(1);
}
const common = { outdir: dist, bundle: true, target: "es2022", sourcemap: true, logLevel: "warning" };
await build({
  ...common,
  entryPoints: {
    "lib/edgepatch-web": join(web, "src/index.ts"),
    "lib/edgepatch-worker": join(web, "src/worker.ts"),
    "demo/demo": join(web, "demo/demo.ts"),
  },
  format: "esm",
});
// A Service Worker registered as a classic script works in every engine (module Service
// Workers are not assumed in Firefox and WebKit): one self-contained IIFE. A classic script
// has no import.meta; its own URL is self.location, so wasm-bindgen's default (the wasm
// beside the script) still holds.
const serviceWorker = join(web, "src/service-worker.ts");
if (existsSync(serviceWorker)) {
  await build({ ...common, entryPoints: { "lib/edgepatch-sw": serviceWorker }, format: "iife", define: { "import.meta.url": "self.location.href" } });
}
mkdirSync(join(dist, "lib"), { recursive: true });
copyFileSync(join(pkg, "edgepatch_wasm_bg.wasm"), join(dist, "lib/edgepatch_wasm_bg.wasm"));
copyFileSync(join(web, "demo/index.html"), join(dist, "demo/index.html"));

// Declarations: only index.ts and what it imports (the public API), never stale files.
rmSync(join(dist, "types"), { recursive: true, force: true });
const tsc = [join(web, "node_modules/.bin/tsc"), join(web, "../node_modules/.bin/tsc")].find((p) => existsSync(p));
if (!tsc) {
  console.error("build: tsc not found in web/node_modules or the workspace root; run npm install at the repository root");
  process.exit(1);
}
execFileSync(tsc, ["-p", join(web, "tsconfig.types.json")], { stdio: "inherit" });
console.error(`build: ${dist}/lib (library, worker${existsSync(serviceWorker) ? ", service worker" : ""}, wasm), ${dist}/types and ${dist}/demo`);
