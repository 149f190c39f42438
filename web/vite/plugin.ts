// `@edgepatch/web/vite`: what a Vite site needs for the package, in one plugin.
//
//   import edgepatch from "@edgepatch/web/vite";
//   export default defineConfig({ plugins: [edgepatch()] });
//
// - The page's dedicated worker is bundled by Vite (the library starts it as
//   `new Worker(new URL("./edgepatch-worker.js", import.meta.url), { type: "module" })`): the
//   plugin keeps it a module worker (`worker.format: "es"`) and keeps `vite` (dev) from
//   pre-bundling the library away from its worker (`optimizeDeps.exclude`).
// - The Service Worker is written at the site's root (a script under /assets/ could not
//   control a game's scope such as /play/), pointing at the wasm module the dedicated worker
//   loads: ONE content-hashed file, so the browser downloads it once, whichever worker asks
//   first. In `vite build` that is the hashed asset Vite emitted for the dedicated worker
//   (or, when no page bundles the worker, one the plugin emits); in `vite` (dev), the module
//   where the dev server serves it to the worker.
import { readFileSync, realpathSync } from "node:fs";
import { posix, relative, sep } from "node:path";
import type { Plugin, ResolvedConfig } from "vite";
import { SERVICE_WORKER_FILE, hashedWasmName, packageFiles, serviceWorkerSource } from "./service-worker-files.js";

export interface EdgepatchPluginOptions {
  /** The Service Worker's path from the site's root (default `edgepatch-sw.js`); register it with that URL. */
  serviceWorkerFileName?: string;
}

export default function edgepatch(options: EdgepatchPluginOptions = {}): Plugin {
  const files = packageFiles();
  const swName = options.serviceWorkerFileName ?? SERVICE_WORKER_FILE;
  let config: ResolvedConfig;
  return {
    name: "edgepatch",
    config: () => ({ worker: { format: "es" }, optimizeDeps: { exclude: ["@edgepatch/web"] } }),
    configResolved(c) {
      config = c;
    },
    configureServer(server) {
      // Where the dev server serves the wasm module to the dedicated worker (Vite's own rule
      // for a file: below the root by its path, elsewhere under /@fs/).
      const wasm = realpathSync(files.wasm);
      const rel = relative(config.root, wasm);
      const wasmPath = rel.startsWith("..") || rel.startsWith(sep) || /^[a-zA-Z]:/.test(rel) ? `/@fs/${wasm.split(sep).join("/").replace(/^\//, "")}` : `/${rel.split(sep).join("/")}`;
      const swUrl = `${config.base.replace(/\/?$/, "/")}${swName}`;
      server.middlewares.use((req, res, next) => {
        if (req.url?.split("?")[0] !== swUrl) return next();
        res.setHeader("Content-Type", "text/javascript");
        res.setHeader("Cache-Control", "no-cache");
        res.end(serviceWorkerSource(readFileSync(files.serviceWorker, "utf8"), posix.join(config.base, wasmPath)));
      });
    },
    generateBundle: {
      order: "post",
      handler(_outputOptions, bundle) {
        // A server-side (SSR) build has no page to serve the Service Worker to.
        if (this.environment?.config.consumer === "server") return;
        const wasm = readFileSync(files.wasm);
        // The asset Vite emitted for the dedicated worker, found by its bytes.
        let fileName = Object.values(bundle).find((f) => f.type === "asset" && f.fileName.endsWith(".wasm") && Buffer.from(f.source).equals(wasm))?.fileName;
        if (fileName === undefined) {
          fileName = posix.join(config.build.assetsDir, hashedWasmName(wasm));
          this.emitFile({ type: "asset", fileName, source: wasm });
        }
        const fromSw = posix.relative(posix.dirname(posix.join("/", swName)), posix.join("/", fileName));
        this.emitFile({ type: "asset", fileName: swName, source: serviceWorkerSource(readFileSync(files.serviceWorker, "utf8"), fromSw) });
      },
    },
  };
}
