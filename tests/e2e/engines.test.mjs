// Smoke test of the browser launcher (tests/e2e/engines.mjs) in every engine EDGEPATCH_BROWSERS
// names: the page interface the suites use, and the platform features the library needs
// (OPFS through createWritable, kept across a reload; a module worker; wasm; a Service Worker
// that controls its scope after a reload and answers its fetches), and that console errors
// and uncaught exceptions reach `errors`. A tiny site of its own over node:http on 127.0.0.1,
// so it needs no build. `EDGEPATCH_BROWSERS=webkit node --test tests/e2e/engines.test.mjs`.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createServer } from "node:http";
import { ENGINES, launch, runRetryingWebKitCrash } from "./engines.mjs";

// (module (func (export "add") (param i32 i32) (result i32) local.get 0 local.get 1 i32.add))
const ADD_WASM = Buffer.from("0061736d0100000001070160027f7f017f030201000707010361646400000a09010700200020016a0b", "hex");

const FILES = {
  "/page.html": ["text/html", `<!doctype html><title>smoke</title>
<p id="text" data-x="attr value">hello <b>there</b></p>
<button id="go" disabled>go</button><p id="hidden" hidden>not shown</p><p id="clicks">0</p>
<script>
  document.getElementById("go").onclick = () => (document.getElementById("clicks").textContent = String(Number(document.getElementById("clicks").textContent) + 1));
</script>`],
  // Chromium asks for it; its 404 would be a console error.
  "/favicon.ico": ["image/x-icon", ""],
  "/add.wasm": ["application/wasm", ADD_WASM],
  "/worker.mjs": ["text/javascript", `import { twice } from "./lib.mjs"; self.onmessage = (e) => self.postMessage(twice(e.data));`],
  "/lib.mjs": ["text/javascript", `export const twice = (x) => x * 2;`],
  "/scope/index.html": ["text/html", `<!doctype html><title>in scope</title>`],
  "/scope/sw.js": ["text/javascript", `
    self.addEventListener("install", () => self.skipWaiting());
    self.addEventListener("activate", (e) => e.waitUntil(self.clients.claim()));
    self.addEventListener("fetch", (e) => {
      if (new URL(e.request.url).pathname === "/scope/answer") e.respondWith(new Response("from the service worker", { headers: { "content-type": "text/plain" } }));
    });`],
  "/scope/answer": ["text/plain", "from the network"],
  "/csp.html": ["text/html", `<!doctype html><title>csp</title><img src="/add.wasm">`, { "content-security-policy": "img-src 'none'" }],
};

let server;
let base;
before(async () => {
  server = createServer((req, res) => {
    const f = FILES[new URL(req.url, "http://x").pathname];
    if (!f) {
      res.writeHead(404).end("not found");
      return;
    }
    res.writeHead(200, { "content-type": f[0], "cache-control": "no-store", ...f[2] }).end(f[1]);
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${server.address().port}`;
});
after(() => new Promise((r) => {
  server.close(r);
  server.closeAllConnections();
}));

/** Kills the one running WebKitGTK web process (a child of a child of this Node process) as a crash would. */
function killWebKitWebProcess() {
  const children = (ppids) => execFileSync("ps", ["-o", "pid=,comm=", "--ppid", ppids.join(",")], { encoding: "utf8" }).trim().split("\n").map((l) => l.trim().split(/\s+/));
  const web = children(children([process.pid]).map(([pid]) => pid)).filter(([, comm]) => comm.startsWith("WebKitWebProc"));
  assert.equal(web.length, 1, JSON.stringify(web));
  process.kill(Number(web[0][0]), "SIGKILL");
}

test("runRetryingWebKitCrash runs a test again only after a WebKit web process crash, and only once", async () => {
  const crash = new Error("WebKit web process terminated (crashed)");
  const attempts = (results) => {
    let n = 0;
    const body = async () => {
      const r = results[n++];
      if (r instanceof Error) throw r;
      return r;
    };
    return { body, runs: () => n };
  };
  const notes = [];
  const note = (m) => notes.push(m);

  let a = attempts([crash, "second"]);
  assert.equal(await runRetryingWebKitCrash("webkit", a.body, note), "second");
  assert.equal(a.runs(), 2);
  assert.equal(notes.length, 1);
  assert.match(notes[0], /crashed.*once more/);

  a = attempts([crash, crash]);
  await assert.rejects(runRetryingWebKitCrash("webkit", a.body, note), /terminated \(crashed\)/);
  assert.equal(a.runs(), 2, "a second crash fails the test");

  for (const [engine, error] of [
    ["chromium", crash],
    ["webkit", new Error("WebKit web process terminated (exceeded-memory-limit)")],
    ["webkit", new assert.AssertionError({ message: "bytes differ" })],
  ]) {
    a = attempts([error, "second"]);
    await assert.rejects(runRetryingWebKitCrash(engine, a.body, note), error);
    assert.equal(a.runs(), 1, `${engine}: ${error.message} is not run again`);
  }
});

async function open(t, engine, path = "/page.html", options = {}) {
  const b = await launch(engine, options);
  t.after(() => b.close());
  await b.goto(base + path);
  return b;
}

for (const engine of ENGINES) {
  test(`[${engine}] page interface: evaluate (async, argument, exception), text, attributes, visibility, click waits until enabled, waitForFunction`, async (t) => {
    const b = await open(t, engine);
    const { page } = b;
    assert.deepEqual(await page.evaluate(async ([a, o]) => (await Promise.resolve(a)) + o.n, [40, { n: 2 }]), 42);
    assert.equal(await page.evaluate(() => undefined), undefined);
    assert.deepEqual(await page.evaluate((s) => [s, s.length], "ü\n\u2028\"'"), ["ü\n\u2028\"'", 5]);
    await assert.rejects(page.evaluate(() => Promise.reject(new RangeError("thrown in the page"))), /thrown in the page/);
    assert.equal(await page.textContent("#text"), "hello there");
    assert.equal(await page.getAttribute("#text", "data-x"), "attr value");
    assert.equal(await page.getAttribute("#text", "data-none"), null);
    assert.equal(await page.isVisible("#text"), true);
    assert.equal(await page.isVisible("#hidden"), false);
    assert.equal(await page.isVisible("#no-such-element"), false);
    assert.equal(await page.isDisabled("#go"), true);
    await page.evaluate(() => setTimeout(() => (document.getElementById("go").disabled = false), 300));
    await page.click("#go");
    assert.equal(await page.isDisabled("#go"), false);
    assert.equal(await page.textContent("#clicks"), "1", "one click, once the button was enabled");
    await page.evaluate(() => setTimeout(() => (window.later = "set"), 200));
    assert.equal(await page.waitForFunction((v) => window.later === v && v, "set", { timeout: 5000 }).then(() => "resolved"), "resolved");
    await assert.rejects(page.waitForFunction(() => false, null, { timeout: 500 }), /timeout|Timeout|Waiting failed/i);
    assert.deepEqual(b.errors, []);
  });

  test(`[${engine}] console.error, an uncaught exception and an unhandled rejection reach errors; console.warn reaches warnings`, async (t) => {
    const b = await open(t, engine);
    await b.evaluate(() => {
      console.error("logged error", 7);
      console.warn("logged warning");
      console.log("not an error");
      setTimeout(() => {
        throw new Error("uncaught in a timer");
      }, 0);
      Promise.reject(new Error("rejected, never handled"));
    });
    const deadline = Date.now() + 5000;
    while (b.errors.length < 3 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    assert.ok(b.errors.some((e) => e.includes("logged error")), JSON.stringify(b.errors));
    assert.ok(b.errors.some((e) => e.includes("uncaught in a timer")), JSON.stringify(b.errors));
    assert.ok(b.errors.some((e) => e.includes("rejected, never handled")), JSON.stringify(b.errors));
    assert.ok(!b.errors.some((e) => e.includes("not an error")));
    assert.ok(b.warnings.some((w) => w.includes("logged warning")), JSON.stringify(b.warnings));
  });

  test(`[${engine}] a load the page's Content Security Policy blocks reaches errors`, async (t) => {
    const b = await open(t, engine, "/csp.html");
    const deadline = Date.now() + 5000;
    while (!b.errors.some((e) => e.includes("add.wasm")) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    // (Firefox also reports its blocked /favicon.ico.)
    assert.ok(b.errors.some((e) => e.includes(`${base}/add.wasm`) && /Content.Security.Policy/i.test(e)), JSON.stringify(b.errors));
  });

  test(`[${engine}] OPFS: a file written with createWritable reads back, and is still there after reload()`, async (t) => {
    const b = await open(t, engine);
    const written = await b.evaluate(async (text) => {
      const dir = await (await navigator.storage.getDirectory()).getDirectoryHandle("smoke", { create: true });
      const w = await (await dir.getFileHandle("a.txt", { create: true })).createWritable();
      await w.write(text);
      await w.close();
      return (await (await dir.getFileHandle("a.txt")).getFile()).text();
    }, "written through createWritable");
    assert.equal(written, "written through createWritable");
    await b.reload();
    const afterReload = await b.evaluate(async () => {
      const dir = await (await navigator.storage.getDirectory()).getDirectoryHandle("smoke");
      return (await (await dir.getFileHandle("a.txt")).getFile()).text();
    });
    assert.equal(afterReload, "written through createWritable");
  });

  test(`[${engine}] a module worker and wasm run in the page`, async (t) => {
    const b = await open(t, engine);
    const r = await b.evaluate(async () => {
      const w = new Worker("/worker.mjs", { type: "module" });
      const fromWorker = await new Promise((resolve, reject) => {
        w.onmessage = (e) => resolve(e.data);
        w.onerror = (e) => reject(new Error(`worker: ${e.message}`));
        w.postMessage(21);
      });
      w.terminate();
      const { instance } = await WebAssembly.instantiateStreaming(fetch("/add.wasm"));
      return { fromWorker, sum: instance.exports.add(40, 2) };
    });
    assert.deepEqual(r, { fromWorker: 42, sum: 42 });
  });

  test(`[${engine}] a Service Worker controls its scope after a reload and answers fetches`, async (t) => {
    const b = await open(t, engine, "/scope/index.html");
    assert.equal(await b.evaluate(() => fetch("/scope/answer").then((r) => r.text())), "from the network");
    await b.evaluate(async () => {
      await navigator.serviceWorker.register("/scope/sw.js", { scope: "/scope/" });
      await navigator.serviceWorker.ready;
    });
    await b.reload();
    assert.equal(await b.evaluate(() => navigator.serviceWorker.controller?.scriptURL ?? null), `${base}/scope/sw.js`);
    assert.equal(await b.evaluate(() => fetch("/scope/answer").then((r) => r.text())), "from the service worker");
    assert.deepEqual(b.errors, []);
  });
}

if (ENGINES.includes("webkit")) {
  test("[webkit] the driver: a load that fails rejects goto; an evaluate cut off by a navigation rejects instead of hanging", async (t) => {
    const b = await open(t, "webkit");
    // A port nobody listens on (the server's, once closed).
    const spare = createServer();
    await new Promise((r) => spare.listen(0, "127.0.0.1", r));
    const port = spare.address().port;
    await new Promise((r) => spare.close(r));
    await assert.rejects(b.goto(`http://127.0.0.1:${port}/`), /failed/);
    await b.goto(`${base}/page.html`);
    const never = assert.rejects(b.evaluate(() => new Promise(() => {})), /navigation/);
    await b.reload();
    await never;
    assert.equal(await b.page.textContent("#text"), "hello there", "usable after both");
  });

  test("[webkit] the driver: a web process that dies fails the pending evaluate and reaches errors; the next goto works", async (t) => {
    const b = await open(t, "webkit");
    const pending = assert.rejects(b.evaluate(() => new Promise(() => {})), /web process terminated \(crashed\)/);
    killWebKitWebProcess();
    await pending;
    const deadline = Date.now() + 5000;
    while (!b.errors.length && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    assert.deepEqual(b.errors, ["WebKit web process terminated (crashed)"]);
    await b.goto(`${base}/page.html`);
    assert.equal(await b.page.textContent("#text"), "hello there");
  });

  test("[webkit] a test whose web process crashes runs again in a fresh browser (engineTests)", async (t) => {
    let runs = 0;
    await runRetryingWebKitCrash(
      "webkit",
      async () => {
        runs++;
        const b = await open(t, "webkit");
        if (runs === 1) {
          const pending = b.evaluate(() => new Promise(() => {}));
          killWebKitWebProcess();
          await pending;
        }
        assert.equal(await b.page.textContent("#text"), "hello there");
      },
      (m) => t.diagnostic(m),
    );
    assert.equal(runs, 2);
  });

  test("[webkit] webkitQuotaBytes limits what an origin may write to OPFS", async (t) => {
    // Writes 2 MiB to OPFS; the error's name, or null when it all went in.
    const write2MiB = (b) =>
      b.evaluate(async () => {
        const root = await navigator.storage.getDirectory();
        const w = await (await root.getFileHandle("big", { create: true })).createWritable();
        try {
          for (let i = 0; i < 8; i++) await w.write(new Uint8Array(256 * 1024));
          await w.close();
          return null;
        } catch (e) {
          return e.name;
        }
      });
    const limited = await open(t, "webkit", "/page.html", { webkitQuotaBytes: 1024 * 1024 });
    assert.equal(await write2MiB(limited), "QuotaExceededError");
    // WebKit's estimate() does not report the limit itself: its quota starts far lower and
    // grows with usage (measured: 66584 bytes reported for a 1 MiB limit, nothing used).
    assert.ok((await limited.evaluate(async () => (await navigator.storage.estimate()).quota)) <= 1024 * 1024);
    const unlimited = await open(t, "webkit");
    assert.equal(await write2MiB(unlimited), null);
  });
}
