#!/usr/bin/env node
// Bundles the library, its worker and the demo page into web/dist/ (esbuild) and
// copies the apply-only wasm module beside the worker. The wasm package must have
// been built first (web/scripts/test.sh and demo.sh do: see wasmPackCommand).
import { build } from "esbuild";
import { copyFileSync, existsSync, mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const web = join(dirname(fileURLToPath(import.meta.url)), "..");
const pkg = join(web, "../crates/edgepatch-wasm/pkg/web-apply");
const dist = join(web, "dist");

if (!existsSync(join(pkg, "edgepatch_wasm_bg.wasm"))) {
  console.error(`build: ${pkg} is missing; run from the repository root:\n  wasm-pack build --mode no-install --release --target web --out-dir pkg/web-apply crates/edgepatch-wasm --no-default-features`);
  process.exit(1);
}
await build({
  entryPoints: {
    "lib/edgepatch-web": join(web, "src/index.ts"),
    "lib/edgepatch-worker": join(web, "src/worker.ts"),
    "demo/demo": join(web, "demo/demo.ts"),
  },
  outdir: dist,
  bundle: true,
  format: "esm",
  target: "es2022",
  sourcemap: true,
  logLevel: "warning",
});
mkdirSync(join(dist, "lib"), { recursive: true });
copyFileSync(join(pkg, "edgepatch_wasm_bg.wasm"), join(dist, "lib/edgepatch_wasm_bg.wasm"));
copyFileSync(join(web, "demo/index.html"), join(dist, "demo/index.html"));
console.error(`build: ${dist}/lib (library, worker, wasm) and ${dist}/demo`);
