#!/usr/bin/env node
// bench/browser/sw-ttfb.mjs — the game Service Worker's time to first byte and full read
// for a 30 MB asset and a small file, per engine (BENCHMARKS.md, "The game Service Worker's first byte").
//
//   node bench/browser/sw-ttfb.mjs [--engines chromium,firefox,webkit] [--runs 5]
//
// A build with one 30 MiB file (incompressible) and a 2 KiB one is made in a temporary
// directory, published on a static site with `edgepatch keygen` + `edgepatch site add`,
// served by web/scripts/serve.mjs with web/dist/lib; in a fresh profile the library
// installs it and registers lib/edgepatch-sw.js for /play/; then, in a page under the
// scope, `fetch` of each file is timed to its first chunk and to its last (median of
// --runs, after one warm-up). The same files fetched from the server directly (loopback)
// are the reference. Needs web/scripts/build-all.sh's output and target/release/edgepatch.
import { execFileSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { randomBytes } from "node:crypto";
import { launch } from "../../tests/e2e/engines.mjs";
import { startServer } from "../../web/scripts/serve.mjs";

const repo = join(dirname(fileURLToPath(import.meta.url)), "../..");
const args = process.argv.slice(2);
const opt = (n, d) => (args.includes(n) ? args[args.indexOf(n) + 1] : d);
const engines = opt("--engines", "chromium,firefox,webkit").split(",");
const runs = Number(opt("--runs", "5"));
const EDGEPATCH = join(repo, "target/release/edgepatch");

const work = mkdtempSync(join(tmpdir(), "edgepatch-sw-ttfb-"));
try {
  const build = join(work, "build");
  mkdirSync(join(build, "Build"), { recursive: true });
  writeFileSync(join(build, "Build/big.data"), randomBytes(30 << 20));
  writeFileSync(join(build, "small.json"), JSON.stringify({ pad: "x".repeat(2000) }));
  writeFileSync(join(build, "index.html"), "<!doctype html><title>ttfb</title>");
  const root = join(work, "root");
  mkdirSync(root);
  cpSync(join(repo, "web/dist/lib"), join(root, "lib"), { recursive: true });
  mkdirSync(join(root, "direct"));
  cpSync(build, join(root, "direct"), { recursive: true });
  const key = join(work, "site.key");
  const keygen = execFileSync(EDGEPATCH, ["keygen", key], { encoding: "utf8" });
  const publicKey = /public key:\s*(\S+)/.exec(keygen)[1];
  const siteDir = join(work, "site");
  execFileSync(EDGEPATCH, ["--quiet", "site", "add", "--site", siteDir, "--key", key, "--game", "ttfb", "--build", "v1", "--channel", "stable", build]);
  cpSync(join(siteDir, "public"), join(root, "updates"), { recursive: true });
  const server = await startServer({ root });
  console.log(`engine | file | via | first byte ms (median of ${runs}) | whole file ms | MB/s`);
  console.log("---|---|---|---:|---:|---:");
  for (const engine of engines) {
    const b = await launch(engine);
    try {
      await b.goto(`${server.url}lib/`);
      await b.evaluate(async (publicKey) => {
        const lib = await import("/lib/edgepatch-web.js");
        const game = new lib.GameUpdater({ baseUrl: "/updates/", game: "ttfb", workerUrl: "/lib/edgepatch-worker.js", publicKeys: [publicKey] });
        await game.install("v1");
        await lib.registerGameServiceWorker("/lib/edgepatch-sw.js", { scope: "/play/" });
      }, publicKey);
      await b.goto(`${server.url}play/ttfb/index.html`);
      for (const [file, size] of [["Build/big.data", 30 << 20], ["small.json", 0]]) {
        for (const [via, url] of [["Service Worker (OPFS)", `/play/ttfb/${file}`], ["server (loopback)", `/direct/${file}`]]) {
          const times = await b.evaluate(
            async ([url, runs]) => {
              const out = [];
              for (let i = 0; i <= runs; i++) {
                const t0 = performance.now();
                const res = await fetch(url, { cache: "no-store" });
                const reader = res.body.getReader();
                let first = null;
                let bytes = 0;
                for (;;) {
                  const { done, value } = await reader.read();
                  if (done) break;
                  first ??= performance.now() - t0;
                  bytes += value.length;
                }
                if (i > 0) out.push([first, performance.now() - t0, bytes]);
              }
              return out;
            },
            [url, runs],
          );
          const median = (k) => times.map((x) => x[k]).sort((a, b) => a - b)[Math.floor(times.length / 2)];
          const bytes = times[0][2];
          const whole = median(1);
          console.log(`${engine} | ${file} (${bytes.toLocaleString("en")} B) | ${via} | ${median(0).toFixed(1)} | ${whole.toFixed(1)} | ${size ? (bytes / 1e6 / (whole / 1000)).toFixed(0) : "-"}`);
        }
      }
    } finally {
      await b.close();
    }
  }
  await server.close();
} finally {
  rmSync(work, { recursive: true, force: true });
}
