// The portal's build. @edgepatch/web needs two things from it:
//  - its dedicated worker and wasm are found by Vite itself (the library creates the worker as
//    `new Worker(new URL("./edgepatch-worker.js", import.meta.url), { type: "module" })`);
//    `worker.format: "es"` keeps it a module worker, and excluding the package from dependency
//    pre-bundling keeps that URL pointing at the real file in `vite` (dev);
//  - the Service Worker must be served from a path whose directory covers the game's scope, so
//    it is copied to the site's root as /edgepatch-sw.js, with the wasm module beside it.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { defineConfig } from "vite";

const require = createRequire(import.meta.url);

/** Copies `@edgepatch/web/sw` and `@edgepatch/web/wasm` to the root of the built site. */
function edgepatchServiceWorker() {
  let sw = null;
  try {
    sw = require.resolve("@edgepatch/web/sw");
  } catch {
    // A package version without a Service Worker: the portal builds, "Play" says it is missing.
  }
  return {
    name: "edgepatch-service-worker",
    // Tells the page whether "Play" can work (src/main.ts).
    config: () => ({ define: { "import.meta.env.EDGEPATCH_SERVICE_WORKER": JSON.stringify(sw !== null) } }),
    configureServer(server) {
      if (!sw) return;
      const files = { "/edgepatch-sw.js": [sw, "text/javascript"], "/edgepatch_wasm_bg.wasm": [require.resolve("@edgepatch/web/wasm"), "application/wasm"] };
      server.middlewares.use((req, res, next) => {
        const file = files[req.url?.split("?")[0] ?? ""];
        if (!file) return next();
        res.setHeader("Content-Type", file[1]);
        res.end(readFileSync(file[0]));
      });
    },
    generateBundle() {
      if (!sw) return;
      this.emitFile({ type: "asset", fileName: "edgepatch-sw.js", source: readFileSync(sw) });
      this.emitFile({ type: "asset", fileName: "edgepatch_wasm_bg.wasm", source: readFileSync(require.resolve("@edgepatch/web/wasm")) });
    },
  };
}

export default defineConfig({
  worker: { format: "es" },
  optimizeDeps: { exclude: ["@edgepatch/web"] },
  build: { target: "es2022" },
  plugins: [edgepatchServiceWorker()],
});
