// The static update site (made by `edgepatch site`, web/scripts/make-static-site.mjs) served
// with the headers docs/STATIC_SITE.md prescribes (web/scripts/serve.mjs), read from a page
// on another origin, as a portal reads a CDN or bucket: the page is served from
// http://127.0.0.1:A, the site from http://localhost:B (two origins: other host, other port).
// Real Chromium (playwright-core), real OPFS, real HTTP.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { lstatSync, mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";
import { startServer } from "../../web/scripts/serve.mjs";

const repo = join(dirname(fileURLToPath(import.meta.url)), "../..");
const dist = join(repo, "web/dist");
const { publicKey, games: site } = JSON.parse(readFileSync(join(dist, "updates/site.json"), "utf8"));
const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";

let portal;
let cdn;
let cdnBase;
before(async () => {
  portal = await startServer({ root: dist });
  cdn = await startServer({ root: dist });
  cdnBase = `http://localhost:${new URL(cdn.url).port}/updates/`;
});
after(async () => {
  await portal?.close();
  await cdn?.close();
});

/** Regular files of a tree on disk, path -> sha256. */
function diskFiles(dir, rel = "", out = {}) {
  for (const name of readdirSync(join(dir, rel)).sort()) {
    const p = rel ? `${rel}/${name}` : name;
    const st = lstatSync(join(dir, p));
    if (st.isDirectory()) diskFiles(dir, p, out);
    else if (st.isFile()) out[p] = createHash("sha256").update(readFileSync(join(dir, p))).digest("hex");
  }
  return out;
}

/** The current build of `game` in OPFS and its regular files (path -> sha256), read straight from OPFS. */
async function opfsCurrent(page, game) {
  return page.evaluate(async (game) => {
    const g = await (await (await navigator.storage.getDirectory()).getDirectoryHandle("edgepatch")).getDirectoryHandle(game);
    const current = JSON.parse(await (await (await g.getFileHandle("current")).getFile()).text());
    const files = {};
    const walk = async (d, rel) => {
      for await (const [name, h] of d.entries()) {
        const p = rel ? `${rel}/${name}` : name;
        if (h.kind === "directory") await walk(h, p);
        else {
          const digest = await crypto.subtle.digest("SHA-256", await (await h.getFile()).arrayBuffer());
          files[p] = [...new Uint8Array(digest)].map((x) => x.toString(16).padStart(2, "0")).join("");
        }
      }
    };
    await walk(await (await (await g.getDirectoryHandle("builds")).getDirectoryHandle(current.build)).getDirectoryHandle("files"), "");
    return { build: current.build, files };
  }, game);
}

async function waitState(page, states, timeout = 60_000) {
  await page.waitForFunction((s) => s.includes(document.body.dataset.state), states, { timeout });
  return page.evaluate(() => document.body.dataset.state);
}

test("the server sends each kind of site object with the Cache-Control, CORS and range headers docs/STATIC_SITE.md prescribes", async () => {
  const d = site.demo.updates.find((u) => u.from === "v1" && u.to === "v2");
  const objects = {
    patch: [`v1/games/demo/patches/${d.patchBlake3}`, "public, max-age=31536000, immutable", "application/octet-stream"],
    manifest: [`v1/games/demo/manifests/${d.manifestBlake3}`, "public, max-age=31536000, immutable", "application/octet-stream"],
    channel: ["v1/games/demo/channels/stable", "no-cache", "application/json"],
    descriptor: ["v1/games/demo/updates/v1/v2", "max-age=300", "application/json"],
    "public key": ["v1/public-key", "max-age=300", "application/json"],
  };
  for (const [kind, [path, cache, type]] of Object.entries(objects)) {
    const res = await fetch(cdnBase + path, { headers: { Origin: portal.url.slice(0, -1) } });
    await res.arrayBuffer();
    assert.equal(res.status, 200, `${kind} ${path}`);
    assert.equal(res.headers.get("cache-control"), cache, `${kind}: Cache-Control`);
    assert.equal(res.headers.get("content-type"), type, `${kind}: Content-Type`);
    assert.equal(res.headers.get("access-control-allow-origin"), "*", `${kind}: CORS`);
    assert.match(res.headers.get("access-control-expose-headers") ?? "", /(^|, )Content-Range(,|$)/, `${kind}: Content-Range exposed`);
    assert.equal(res.headers.get("accept-ranges"), "bytes", `${kind}: Accept-Ranges`);
  }
  // Ranges: one range is 206 with Content-Range; past the end is 416 with the size; several are refused.
  const patchUrl = cdnBase + objects.patch[0];
  let res = await fetch(patchUrl, { headers: { Range: "bytes=10-19" } });
  assert.equal(res.status, 206);
  assert.equal(res.headers.get("content-range"), `bytes 10-19/${d.patchSize}`);
  assert.equal((await res.arrayBuffer()).byteLength, 10);
  res = await fetch(patchUrl, { headers: { Range: `bytes=${d.patchSize}-` } });
  await res.arrayBuffer();
  assert.equal(res.status, 416);
  assert.equal(res.headers.get("content-range"), `bytes */${d.patchSize}`);
  res = await fetch(patchUrl, { headers: { Range: "bytes=0-1,5-9" } });
  await res.arrayBuffer();
  assert.equal(res.status, 416, "multi-range is not served");
  // A preflight (what a browser sends before a ranged read where Range is not safelisted).
  res = await fetch(patchUrl, { method: "OPTIONS", headers: { Origin: "http://127.0.0.1:1", "Access-Control-Request-Method": "GET", "Access-Control-Request-Headers": "range" } });
  assert.equal(res.status, 204);
  assert.match(res.headers.get("access-control-allow-headers") ?? "", /\bRange\b/i);
  assert.match(res.headers.get("access-control-allow-methods") ?? "", /\bGET\b/);
});

test("a page on another origin installs and updates from the site through its CORS headers; without Content-Range exposed the update fails and v1 stays", async (t) => {
  const profile = mkdtempSync(join(tmpdir(), "edgepatch-e2e-site-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  t.after(async () => {
    await context.close();
    rmSync(profile, { recursive: true, force: true });
    cdn.faults.omitHeaders.clear();
  });
  const page = context.pages()[0] ?? (await context.newPage());
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  const pageOrigin = portal.url.slice(0, -1);
  assert.notEqual(new URL(cdnBase).origin, pageOrigin, "two origins");
  cdn.resetStats();
  portal.resetStats();
  await page.goto(`${portal.url}demo/?game=demo&install=v1&base=${encodeURIComponent(cdnBase)}&publicKey=${encodeURIComponent(publicKey)}`);
  assert.equal(await waitState(page, ["idle", "error"]), "idle");

  await page.click("#install");
  assert.equal(await waitState(page, ["done", "error"]), "done", await page.textContent("#error"));
  assert.equal((await opfsCurrent(page, "demo")).build, "v1");
  // Everything of the update came from the other origin, as cross-origin requests.
  assert.equal(portal.stats.requests.filter((r) => r.path.startsWith("/updates/")).length, 0, "nothing read from the page's own origin");
  const siteRequests = cdn.stats.requests;
  assert.ok(siteRequests.some((r) => r.path.includes("/patches/") && r.status === 206), "ranged patch reads (206)");
  assert.deepEqual([...new Set(siteRequests.map((r) => r.origin))], [pageOrigin], "every request carried the page's Origin");
  t.diagnostic(`install: ${siteRequests.length} requests to ${new URL(cdnBase).origin}, ${cdn.stats.preflights.length} preflights`);

  // A CDN that does not expose Content-Range: the page cannot check a ranged answer's length.
  cdn.faults.omitHeaders.add("access-control-expose-headers");
  await page.click("#update");
  assert.equal(await waitState(page, ["done", "error"]), "error", "refused without Access-Control-Expose-Headers");
  assert.match(await page.textContent("#error"), /Content-Range/);
  assert.equal((await opfsCurrent(page, "demo")).build, "v1", "v1 stays current");

  // With the headers back, the same page updates to v2, byte-exact.
  cdn.faults.omitHeaders.clear();
  await page.click("#update");
  assert.equal(await waitState(page, ["done", "error"]), "done", await page.textContent("#error"));
  const got = await opfsCurrent(page, "demo");
  assert.equal(got.build, "v2");
  assert.deepEqual(got.files, diskFiles(join(dist, "trees/demo/v2")), "v2 byte-exact");
  assert.equal(site.demo.channels.stable.build, "v2");
  assert.deepEqual(errors, []);
});
