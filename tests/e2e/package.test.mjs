// The installable package, as a portal uses it: `npm pack` of web/, the tarball installed
// into a copy of examples/vite-portal (npm's cache; Vite comes from the registry the first
// time), the portal built with Vite, served beside the static update site (web/dist/updates)
// with the Content Security Policy web/README.md documents as an HTTP header on every
// response, and driven in a real browser: install v1, update to v2 with progress events,
// OPFS byte-exact; play through the Service Worker when the package ships one, with the one
// content-hashed wasm module the Vite plugin (`@edgepatch/web/vite`) writes downloaded once
// for both workers. Also: the tarball's file list and exports, the declarations in a
// TypeScript consumer, the plugin in `vite` (dev) and the `edgepatch-web-copy` command.
//
// With EDGEPATCH_RELEASE_DIR (scripts/test.sh sets it), what a user downloads from a release:
// the tarball scripts/release.sh packed, checked against its SHA256SUMS, and an update site
// that release's static CLI made (web/scripts/build-all.sh).
//
// Needs web/dist (web/scripts/build-all.sh) and the apply-only wasm package; run by
// web/scripts/test.sh. EDGEPATCH_PACKAGE_REPORT=1 prints the sizes and times measured.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { cpSync, lstatSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { gzipSync } from "node:zlib";
import { chromium } from "playwright-core";
import { startServer } from "../../web/scripts/serve.mjs";

// Browsers: tests/e2e/engines.mjs (every engine EDGEPATCH_BROWSERS names) once it exists;
// until then Chromium through playwright-core, behind the same small interface. Loaded
// before any test or hook is declared, so the runner sees every test before it starts.
let engines = null;
try {
  engines = await import("./engines.mjs");
} catch (e) {
  if (e.code !== "ERR_MODULE_NOT_FOUND" || !String(e.message).includes("engines.mjs'")) throw e;
}
const ENGINES = engines ? engines.ENGINES : ["chromium"];

const repo = join(dirname(fileURLToPath(import.meta.url)), "../..");
const web = join(repo, "web");
const dist = join(web, "dist");
const { publicKey } = JSON.parse(readFileSync(join(dist, "updates/site.json"), "utf8"));
const hostile = JSON.parse(readFileSync(join(dist, "hostile/hostile.json"), "utf8"));
const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
const TSC = join(repo, "node_modules/.bin/tsc");
const GAME = "demo";
/** scripts/release.sh's output (EDGEPATCH_RELEASE_DIR, as scripts/test.sh sets it): its tarball is installed instead of one packed here. */
const RELEASE_DIR = process.env.EDGEPATCH_RELEASE_DIR || null;

const work = mkdtempSync(join(tmpdir(), "edgepatch-package-"));
const app = join(work, "app");
const measured = {};
let tarball, packed, server, policy;
/** Every request path the server answered, in order (the wasm downloads are counted from it). */
const requested = [];

function timed(name, fn) {
  const t0 = performance.now();
  const r = fn();
  measured[name] = `${((performance.now() - t0) / 1000).toFixed(2)} s`;
  return r;
}
function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { encoding: "utf8", maxBuffer: 64 << 20, ...opts, env: { ...process.env, npm_config_update_notifier: "false", ...opts.env } });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(" ")} failed (${r.status}):\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

before(async () => {
  if (RELEASE_DIR) {
    // The tarball scripts/release.sh packed, checked against its SHA256SUMS, as a user downloads it.
    const name = readdirSync(RELEASE_DIR).find((f) => /^edgepatch-web-.*\.tgz$/.test(f));
    assert.ok(name, `${RELEASE_DIR} holds @edgepatch/web's tarball`);
    tarball = join(RELEASE_DIR, name);
    const sums = readFileSync(join(RELEASE_DIR, "SHA256SUMS"), "utf8");
    assert.ok(sums.includes(`${sha256(readFileSync(tarball))}  ${name}`), `SHA256SUMS lists ${name} with its hash`);
    const files = run("tar", ["tzf", tarball]).split("\n").filter((f) => f && !f.endsWith("/")).map((f) => ({ path: f.replace(/^package\//, "") }));
    packed = { filename: name, files, size: statSync(tarball).size, unpackedSize: null };
  } else {
    // npm pack runs the package's prepack (scripts/build.mjs): the tarball is what a fresh build ships.
    const json = timed("npm pack", () => run("npm", ["pack", "--json", "--pack-destination", work], { cwd: web }));
    [packed] = JSON.parse(json.slice(json.indexOf("[")));
    tarball = join(work, packed.filename);
  }

  cpSync(join(repo, "examples/vite-portal"), app, { recursive: true, filter: (p) => !/\/(node_modules|dist)$/.test(p) });
  const pkgFile = join(app, "package.json");
  const pkg = JSON.parse(readFileSync(pkgFile, "utf8"));
  pkg.dependencies["@edgepatch/web"] = `file:${tarball}`;
  writeFileSync(pkgFile, JSON.stringify(pkg, null, 2));
  timed("npm install (example)", () => run("npm", ["install", "--prefer-offline", "--no-audit", "--no-fund", "--loglevel=error"], { cwd: app }));
  timed("vite build", () =>
    run("npx", ["--no-install", "vite", "build", "--logLevel", "warn"], { cwd: app, env: { VITE_EDGEPATCH_GAME: GAME, VITE_EDGEPATCH_PUBLIC_KEY: publicKey } }),
  );
  // The update site beside the portal: same origin, at the portal's default base URL.
  symlinkSync(join(dist, "updates"), join(app, "dist/updates"));

  // The policy documented in web/README.md is the one in the example's meta tag; send it as a
  // header too, so the worker and Service Worker scripts (which ignore the page's meta tag) get it.
  const html = readFileSync(join(app, "dist/index.html"), "utf8");
  policy = /http-equiv="Content-Security-Policy"\s+content="([^"]+)"/.exec(html)?.[1];
  assert.ok(policy, "the example's index.html has a Content-Security-Policy meta tag");
  server = await startServer({ root: join(app, "dist") });
  server.csp = policy;
  server.server.prependListener("request", (req, res) => {
    requested.push(new URL(req.url, server.url).pathname);
    res.setHeader("Content-Security-Policy", server.csp);
  });
});
after(async () => {
  await server?.close();
  if (process.env.EDGEPATCH_PACKAGE_REPORT) console.error(JSON.stringify(measured, null, 2));
  rmSync(work, { recursive: true, force: true });
});

test("the tarball holds the library, worker, wasm, declarations and nothing else; every export resolves", () => {
  const files = packed.files.map((f) => f.path).sort();
  const hasSw = files.includes("dist/lib/edgepatch-sw.js");
  const want = [
    "README.md",
    "dist/lib/edgepatch-web.js",
    "dist/lib/edgepatch-web.js.map",
    "dist/lib/edgepatch-worker.js",
    "dist/lib/edgepatch-worker.js.map",
    "dist/lib/edgepatch_wasm_bg.wasm",
    ...(hasSw ? ["dist/lib/edgepatch-sw.js", "dist/lib/edgepatch-sw.js.map"] : []),
    "dist/vite/edgepatch-vite.js",
    "dist/vite/edgepatch-vite.js.map",
    "dist/vite/edgepatch-web-copy.js",
    "dist/vite/edgepatch-web-copy.js.map",
    ...readdirSync(join(dist, "types"), { recursive: true }).filter((f) => f.endsWith(".d.ts")).map((f) => `dist/types/${f}`),
    "package.json",
  ].sort();
  assert.deepEqual(files, want);
  assert.ok(files.includes("dist/types/index.d.ts"));
  const installed = join(app, "node_modules/@edgepatch/web");
  const pkg = JSON.parse(readFileSync(join(installed, "package.json"), "utf8"));
  assert.equal(pkg.private, undefined, "not private");
  assert.ok(pkg.version && pkg.license && pkg.sideEffects, "version, license, sideEffects");
  for (const [subpath, target] of Object.entries(pkg.exports)) {
    for (const file of typeof target === "string" ? [target] : Object.values(target)) {
      if (subpath === "./sw" && !hasSw) continue; // reported by the Service Worker test
      assert.ok(statSync(join(installed, file)).isFile(), `export ${subpath} -> ${file} is in the tarball`);
    }
  }
  for (const [name, file] of Object.entries(pkg.bin)) assert.ok(statSync(join(installed, file)).isFile(), `bin ${name} -> ${file} is in the tarball`);
  // The wasm shipped is the apply-only build the worker was bundled against.
  assert.equal(sha256(readFileSync(join(installed, "dist/lib/edgepatch_wasm_bg.wasm"))), sha256(readFileSync(join(repo, "crates/edgepatch-wasm/pkg/web-apply/edgepatch_wasm_bg.wasm"))));
  measured.tarball = `${packed.size} bytes, unpacked ${packed.unpackedSize} bytes, ${files.length} files`;
  const out = join(app, "dist/assets");
  for (const f of readdirSync(out)) {
    const b = readFileSync(join(out, f));
    measured[`bundle ${f.replace(/-[\w-]{8}\./, ".")}`] = `${b.length} bytes, gzip ${gzipSync(b, { level: 9 }).length}`;
  }
});

test("npm publish --dry-run passes for @edgepatch/web", () => {
  // An explicit log level: a silent npm around this test would otherwise hide the summary.
  const r = spawnSync("npm", ["publish", "--dry-run", "--loglevel=notice"], { cwd: web, encoding: "utf8" });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout + r.stderr, /\+ @edgepatch\/web@\d+\.\d+\.\d+/);
  assert.match(r.stdout + r.stderr, /public access/);
});

test("the declarations type-check a consumer, and reject a wrong option", () => {
  // The example itself (src/main.ts, strict) against the installed package's types.
  run(TSC, ["-p", app]);
  const consumer = join(app, "consumer");
  cpSync(join(app, "tsconfig.json"), join(consumer, "tsconfig.json"));
  const good = `import { GameUpdater, QuotaError, EMPTY_BUILD, type GameUpdaterOptions, type UpdateProgress, type UpdateResult } from "@edgepatch/web";
const opts: GameUpdaterOptions = { baseUrl: "https://cdn.example/updates/", game: "g", publicKey: "k", workerUrl: "/w.js", wasmUrl: new URL("/x.wasm", location.href) };
const g = new GameUpdater(opts);
g.addEventListener("progress", (e) => console.log((e as CustomEvent<UpdateProgress>).detail.patchBytesApplied));
const r: Promise<UpdateResult> = g.install("v1");
void r.catch((e) => e instanceof QuotaError && e.needed);
export const empty: string = EMPTY_BUILD;
`;
  writeFileSync(join(consumer, "tsconfig.json"), JSON.stringify({ ...JSON.parse(readFileSync(join(app, "tsconfig.json"), "utf8")), include: ["*.ts"] }));
  writeFileSync(join(consumer, "good.ts"), good);
  run(TSC, ["-p", consumer]);
  // The types are real (not `any`): a wrong option type and an unknown method do not compile.
  writeFileSync(join(consumer, "bad.ts"), `import { GameUpdater } from "@edgepatch/web";\nconst g = new GameUpdater({ baseUrl: 1, game: "g" });\ng.noSuchMethod();\n`);
  const r = spawnSync(TSC, ["-p", consumer], { encoding: "utf8" });
  assert.notEqual(r.status, 0, "tsc refuses bad.ts");
  assert.match(r.stdout, /bad\.ts\(2,\d+\): error TS2322/);
  assert.match(r.stdout, /bad\.ts\(3,\d+\): error TS2339/);
  assert.doesNotMatch(r.stdout, /good\.ts/);
});

/** Regular files below `dir`, relative paths; symlinks (the update site beside the portal) are not followed. */
function siteFiles(dir, rel = "", out = []) {
  for (const name of readdirSync(join(dir, rel))) {
    const p = rel ? `${rel}/${name}` : name;
    const st = lstatSync(join(dir, p));
    if (st.isDirectory()) siteFiles(dir, p, out);
    else if (st.isFile()) out.push(p);
  }
  return out;
}
const packageWasm = () => readFileSync(join(app, "node_modules/@edgepatch/web/dist/lib/edgepatch_wasm_bg.wasm"));
/** The wasm module a Service Worker script loads: the URL in its `new URL("...wasm", self.location.href)`. */
function serviceWorkerWasm(source) {
  const refs = [...source.matchAll(/new URL\(("[^"]*\.wasm"), self\.location\.href\)/g)].map((m) => JSON.parse(m[1]));
  assert.equal(refs.length, 1, `one wasm reference in the Service Worker: ${refs}`);
  return refs[0];
}

test("the built site holds ONE wasm module, content-hashed; the Service Worker at its root and the page's worker load it", () => {
  const site = join(app, "dist");
  const files = siteFiles(site);
  const wasm = files.filter((f) => f.endsWith(".wasm"));
  assert.equal(wasm.length, 1, `one .wasm in the site: ${wasm}`);
  assert.match(wasm[0], /^assets\/edgepatch_wasm_bg-[\w-]{8}\.wasm$/);
  assert.equal(sha256(readFileSync(join(site, wasm[0]))), sha256(packageWasm()));
  assert.ok(files.includes("edgepatch-sw.js"), "the Service Worker at the site's root");
  assert.equal(serviceWorkerWasm(readFileSync(join(site, "edgepatch-sw.js"), "utf8")), wasm[0]);
  const worker = files.filter((f) => /^assets\/edgepatch-worker-[\w-]{8}\.js$/.test(f));
  assert.equal(worker.length, 1, `one dedicated worker bundle: ${worker}`);
  assert.ok(readFileSync(join(site, worker[0]), "utf8").includes(`/${wasm[0]}`), "the dedicated worker loads the same file");
});

test("`vite` (dev) serves the Service Worker at the root, pointing at the wasm module where the dev server serves it to the page's worker", async (t) => {
  const { createServer } = await import(pathToFileURL(join(app, "node_modules/vite/dist/node/index.js")).href);
  const dev = await createServer({ root: app, configFile: join(app, "vite.config.js"), logLevel: "silent", server: { host: "127.0.0.1", port: 0 } });
  await dev.listen();
  t.after(() => dev.close());
  const base = dev.resolvedUrls.local[0];
  const sw = await fetch(new URL("edgepatch-sw.js", base));
  assert.equal(sw.status, 200);
  assert.match(sw.headers.get("content-type"), /javascript/);
  const wasmUrl = new URL(serviceWorkerWasm(await sw.text()), sw.url);
  const wasm = await fetch(wasmUrl);
  assert.equal(wasm.status, 200, `${wasmUrl}`);
  assert.equal(sha256(Buffer.from(await wasm.arrayBuffer())), sha256(packageWasm()));
  // The dedicated worker as the dev server serves it (the library is not pre-bundled): its wasm resolves to the same URL.
  const workerUrl = new URL("node_modules/@edgepatch/web/dist/lib/edgepatch-worker.js?worker_file&type=module", base);
  const worker = await (await fetch(workerUrl)).text();
  const ref = /new URL\(\s*[`"']([^`"']*edgepatch_wasm_bg[^`"']*\.wasm)[`"']\s*,\s*(?:[`"'][`"']\s*\+\s*)?import\.meta\.url\s*\)/.exec(worker);
  assert.ok(ref, "the dev worker names its wasm with new URL(..., import.meta.url)");
  assert.equal(new URL(ref[1], workerUrl).pathname, wasmUrl.pathname);
});

test("`npx edgepatch-web-copy OUTDIR` writes the Service Worker and one content-hashed wasm beside it, and prints the wasm's URL", () => {
  const out = join(work, "copied");
  const url = run("npx", ["--no-install", "edgepatch-web-copy", out, "--base", "/static/"], { cwd: app }).trim();
  const files = readdirSync(out).sort();
  assert.equal(files.length, 2, `${files}`);
  assert.equal(files[0], "edgepatch-sw.js");
  assert.match(files[1], /^edgepatch_wasm_bg-[0-9a-f]{16}\.wasm$/);
  assert.equal(url, `/static/${files[1]}`);
  assert.equal(serviceWorkerWasm(readFileSync(join(out, files[0]), "utf8")), files[1]);
  assert.equal(sha256(readFileSync(join(out, files[1]))), sha256(packageWasm()));
});

async function launchChromium({ profileDir }) {
  const context = await chromium.launchPersistentContext(profileDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  const page = context.pages()[0] ?? (await context.newPage());
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  page.on("console", (m) => m.type() === "error" && errors.push(m.text()));
  context.on("weberror", (e) => errors.push(String(e.error())));
  return {
    errors,
    goto: (url) => page.goto(url),
    evaluate: (fn, arg) => page.evaluate(fn, arg),
    waitFor: (fn, arg, timeout) => page.waitForFunction(fn, arg, { timeout }),
    close: () => context.close(),
  };
}

/** A fresh profile (empty OPFS) in `engine` on the built portal. */
async function openPortal(t, engine) {
  const profileDir = mkdtempSync(join(tmpdir(), "edgepatch-portal-"));
  const b = engines ? await engines.launch(engine, { profileDir }) : await launchChromium({ profileDir });
  t.after(async () => {
    await b.close();
    rmSync(profileDir, { recursive: true, force: true });
  });
  await b.goto(`${server.url}index.html`);
  return b;
}

async function waitIdle(b, timeout = 60_000) {
  await b.waitFor(() => ["idle", "error"].includes(document.body.dataset.state), null, timeout);
  const st = await b.evaluate(() => ({ state: document.body.dataset.state, status: document.getElementById("status").textContent }));
  assert.equal(st.state, "idle", `portal: ${st.status}`);
}
const text = (b, id) => b.evaluate((id) => document.getElementById(id).textContent, id);
const click = (b, id) => b.evaluate((id) => document.getElementById(id).click(), id);

/** The channel document at sequence 1 (build v1), validly signed: the channel before v2 was published. */
function channelAtV1(t) {
  for (const [sitePath, file] of Object.entries(hostile["rolled-back"].replace)) server.faults.replace.set(`/updates/${sitePath}`, join(dist, "hostile", file));
  t.after(() => server.faults.replace.clear());
}

if (!engines) {
  test("Firefox and WebKit run of the portal", (t) => t.skip("MISSING: tests/e2e/engines.mjs is not in this checkout; the portal runs in Chromium only"));
}

for (const engine of ENGINES) {
  test(`[${engine}] the built portal installs v1, then updates to v2 with progress, under its CSP; OPFS byte-exact`, async (t) => {
    channelAtV1(t);
    const b = await openPortal(t, engine);
    await waitIdle(b);
    assert.equal(await text(b, "installed"), "nothing");
    assert.equal(await text(b, "latest"), "v1");
    await click(b, "update");
    await waitIdle(b);
    assert.equal(await text(b, "installed"), "v1");
    await assertBuild(b, "v1");

    server.faults.replace.clear(); // v2 is published: the channel moves
    await b.goto(`${server.url}index.html`);
    await waitIdle(b);
    assert.equal(await text(b, "latest"), "v2");
    assert.equal(await text(b, "update"), "Update to v2");
    assert.equal(await b.evaluate(() => document.body.dataset.progressEvents ?? "none"), "none");
    await click(b, "update");
    await waitIdle(b);
    assert.equal(await text(b, "installed"), "v2");
    const progress = await b.evaluate(() => ({
      events: Number(document.body.dataset.progressEvents),
      phases: document.body.dataset.progressPhases,
      written: document.body.dataset.progressWritten.split(" ").map((w) => w.split("/").map(Number)),
      bar: [document.getElementById("bar").value, document.getElementById("bar").max],
    }));
    assert.ok(progress.events > 1, `progress events during the update: ${progress.events}`);
    // Bytes written never fall, are counted against one total, and end at it.
    const total = progress.written[0][1];
    assert.ok(total > 0 && progress.written.every(([, t]) => t === total), JSON.stringify(progress.written));
    assert.ok(progress.written.every(([w], i) => w >= (progress.written[i - 1]?.[0] ?? 0)), `bytes written rise: ${JSON.stringify(progress.written)}`);
    assert.equal(progress.written.at(-1)[0], total, "the last event counts every byte");
    assert.match(progress.phases, /downloading.*done$/, "phases ran to done");
    assert.equal(progress.bar[0], progress.bar[1], "the progress bar is full");
    await assertBuild(b, "v2");
    assert.deepEqual(b.errors, [], "no page, worker or CSP errors");
  });

  test(`[${engine}] the documented CSP is needed: without 'wasm-unsafe-eval' the worker cannot load its wasm, and says so`, async (t) => {
    server.csp = policy.replace(" 'wasm-unsafe-eval'", "");
    t.after(() => (server.csp = policy));
    const b = await openPortal(t, engine);
    await b.waitFor(() => document.body.dataset.state === "error", null, 30_000);
    const status = await text(b, "status");
    if (process.env.EDGEPATCH_PACKAGE_REPORT) console.error(`[${engine}] without 'wasm-unsafe-eval': ${status}`);
    assert.match(status, /^StorageError: could not load the edgepatch wasm module edgepatch_wasm_bg.wasm beside the worker: /);
  });

  test(`[${engine}] without a bundler: the package's files served as they are, workerUrl and wasmUrl elsewhere`, async (t) => {
    // A portal that copies dist/lib somewhere and the wasm somewhere else: the default place
    // beside the worker has no wasm, so only the wasmUrl the page passed can work.
    const lib = join(app, "node_modules/@edgepatch/web/dist/lib");
    cpSync(lib, join(app, "dist/vendor"), { recursive: true, filter: (p) => !p.endsWith(".wasm") });
    cpSync(join(lib, "edgepatch_wasm_bg.wasm"), join(app, "dist/wasm-elsewhere/apply.wasm"));
    t.after(() => rmSync(join(app, "dist/vendor"), { recursive: true, force: true }));
    const b = await openPortal(t, engine);
    await waitIdle(b);
    const call = (wasmUrl) =>
      b.evaluate(
        async ({ publicKey, game, wasmUrl }) => {
          const { GameUpdater } = await import("/vendor/edgepatch-web.js");
          const g = new GameUpdater({ baseUrl: "/updates/", game, publicKey, workerUrl: "/vendor/edgepatch-worker.js", wasmUrl });
          try {
            return await g.latest("stable");
          } catch (e) {
            return `${e.name}: ${e.message}`;
          } finally {
            g.close();
          }
        },
        { publicKey, game: GAME, wasmUrl },
      );
    assert.equal(await call("/wasm-elsewhere/apply.wasm"), "v2", "the channel checked with the wasm from wasmUrl");
    assert.match(await call("/wasm-elsewhere/missing.wasm"), /^StorageError: could not load the edgepatch wasm module http:\/\/[^ ]+\/wasm-elsewhere\/missing\.wasm: /);
    assert.ok(b.errors.every((e) => /404|not found/i.test(e)), `only the missing wasm's 404: ${b.errors}`);
  });

  test(`[${engine}] the portal plays the installed build through the package's Service Worker`, async (t) => {
    if (!packed.files.some((f) => f.path === "dist/lib/edgepatch-sw.js")) {
      t.skip("MISSING: the package ships no Service Worker yet (web/src/service-worker.ts not built into dist/lib/edgepatch-sw.js)");
      return;
    }
    const from = requested.length;
    const b = await openPortal(t, engine);
    await waitIdle(b);
    await click(b, "update");
    await waitIdle(b);
    const installed = await text(b, "installed");
    await b.waitFor(() => !document.getElementById("play").disabled, null, 10_000);
    await click(b, "play");
    // The frame starts as about:blank (already "complete"): wait for the game's own document.
    await b.waitFor(() => {
      const d = document.getElementById("screen").contentDocument;
      return document.body.dataset.playing && d?.location.pathname.includes("/play/") && d.readyState === "complete";
    }, null, 30_000);
    // The game's entry page, fetched by the game's frame (a client the Service Worker controls): the installed build's bytes.
    const served = await b.evaluate(async () => {
      const w = document.getElementById("screen").contentWindow;
      const r = await w.fetch(w.location.href);
      return { status: r.status, text: await r.text(), controlled: !!w.navigator.serviceWorker.controller };
    });
    assert.deepEqual(served, { status: 200, text: readFileSync(join(dist, "trees", GAME, installed, "index.html"), "utf8"), controlled: true });
    // Both workers loaded the wasm module (the page's to update, the Service Worker to serve),
    // one URL, from the network once: the second came from the HTTP cache.
    const site = siteFiles(join(app, "dist")).find((f) => f.endsWith(".wasm"));
    const wasmFetches = requested.slice(from).filter((p) => p.endsWith(".wasm") && !p.startsWith("/updates/"));
    assert.deepEqual(wasmFetches, [`/${site}`], "the wasm module fetched once from the server");
    assert.deepEqual(b.errors, [], "no page, worker or CSP errors");
  });
}

function sha256(b) {
  return createHash("sha256").update(b).digest("hex");
}

/** Regular files (path -> sha256) of a build on disk: symlinks are manifest entries, not OPFS files. */
function diskFiles(dir, rel = "", out = {}) {
  for (const name of readdirSync(join(dir, rel))) {
    const p = rel ? `${rel}/${name}` : name;
    const st = lstatSync(join(dir, p));
    if (st.isDirectory()) diskFiles(dir, p, out);
    else if (st.isFile()) out[p] = sha256(readFileSync(join(dir, p)));
  }
  return out;
}

/** `build` is current in OPFS (read straight from the file system, not through the library) and byte-exact. */
async function assertBuild(b, build) {
  const got = await b.evaluate(async ({ game, build }) => {
    const g = await (await (await navigator.storage.getDirectory()).getDirectoryHandle("edgepatch")).getDirectoryHandle(game);
    const current = JSON.parse(await (await (await g.getFileHandle("current")).getFile()).text());
    const files = {};
    const walk = async (d, rel) => {
      for await (const [name, h] of d.entries()) {
        const p = rel ? `${rel}/${name}` : name;
        if (h.kind === "directory") await walk(h, p);
        else files[p] = [...new Uint8Array(await crypto.subtle.digest("SHA-256", await (await h.getFile()).arrayBuffer()))].map((x) => x.toString(16).padStart(2, "0")).join("");
      }
    };
    await walk(await (await (await g.getDirectoryHandle("builds")).getDirectoryHandle(build)).getDirectoryHandle("files"), "");
    return { current: current.build, files };
  }, { game: GAME, build });
  assert.equal(got.current, build, "current build");
  const want = diskFiles(join(dist, "trees", GAME, build));
  assert.deepEqual(Object.keys(got.files).sort(), Object.keys(want).sort(), "same regular files");
  for (const [p, h] of Object.entries(want)) assert.equal(got.files[p], h, `${p} byte-exact`);
}
