#!/usr/bin/env node
// Builds web/dist: the package layout that `npm pack` ships (web/package.json "files",
// "exports") and the demo page.
//
//   dist/lib/edgepatch-web.js      the library (ESM; creates the worker beside itself)
//   dist/lib/edgepatch-worker.js   the dedicated worker (ESM, self-contained)
//   dist/lib/edgepatch-sw.js       the Service Worker (classic script), once its source exists
//   dist/lib/edgepatch_wasm_bg.wasm  the apply-only wasm module, beside both workers
//   dist/types/*.d.ts              declarations of the public API (tsc, tsconfig.types.json)
//   dist/vite/edgepatch-vite.js    `@edgepatch/web/vite`, the Vite plugin (Node, ESM; vite/plugin.ts)
//   dist/vite/edgepatch-web-copy.js  the `edgepatch-web-copy` command for other bundlers
//   dist/types/vite/*.d.ts         the plugin's declarations (tsconfig.vite.json)
//   dist/demo/                     the demo portal (not packed)
//
// The apply-only wasm package must have been built first (scripts/build-wasm.sh web-apply;
// web/scripts/build-all.sh does it). `npm pack` runs this script (package.json "prepack").
import { build } from "esbuild";
import { execFileSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
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
// The Vite plugin and the copy command run in Node at a site's build time, never in a browser.
const node = { ...common, platform: "node", format: "esm", packages: "external" };
await build({ ...node, entryPoints: { "vite/edgepatch-vite": join(web, "vite/plugin.ts") } });
await build({ ...node, entryPoints: { "vite/edgepatch-web-copy": join(web, "vite/copy-cli.ts") }, banner: { js: "#!/usr/bin/env node" } });
mkdirSync(join(dist, "lib"), { recursive: true });
copyFileSync(join(pkg, "edgepatch_wasm_bg.wasm"), join(dist, "lib/edgepatch_wasm_bg.wasm"));
copyFileSync(join(web, "demo/index.html"), join(dist, "demo/index.html"));
if (existsSync(serviceWorker)) {
  // The plugin and the command rewrite the one place the Service Worker names its wasm
  // (vite/service-worker-files.ts): the command, run once, refuses a build without it.
  const out = mkdtempSync(join(tmpdir(), "edgepatch-web-copy-"));
  try {
    execFileSync(process.execPath, [join(dist, "vite/edgepatch-web-copy.js"), out], { stdio: "pipe" });
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}

// Declarations: only index.ts and what it imports (the public API), never stale files.
rmSync(join(dist, "types"), { recursive: true, force: true });
const tsc = [join(web, "node_modules/.bin/tsc"), join(web, "../node_modules/.bin/tsc")].find((p) => existsSync(p));
if (!tsc) {
  console.error("build: tsc not found in web/node_modules or the workspace root; run npm install at the repository root");
  process.exit(1);
}
execFileSync(tsc, ["-p", join(web, "tsconfig.types.json")], { stdio: "inherit" });
execFileSync(tsc, ["-p", join(web, "tsconfig.vite.json")], { stdio: "inherit" });
console.error(`build: ${dist}/lib (library, worker${existsSync(serviceWorker) ? ", service worker" : ""}, wasm), ${dist}/vite (Vite plugin, copy command), ${dist}/types and ${dist}/demo`);
