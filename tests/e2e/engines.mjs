// Browser engines for the end-to-end tests, behind one small page interface (the subset of
// Playwright's Page the tests use), each with a fresh persistent profile (so an empty OPFS):
//
//   chromium  Debian's chromium through playwright-core (CDP)
//   firefox   Debian's firefox-esr through puppeteer-core (WebDriver BiDi; no geckodriver)
//   webkit    Debian's WebKitGTK (gir1.2-webkit2-4.1) in tests/e2e/webkitgtk_browser.py, a small
//             browser of our own driven over JSON lines on its stdin/stdout, on an Xvfb display
//             this module starts once per process. (MiniBrowser under WebKitWebDriver only has an
//             ephemeral profile, which has no OPFS; no package drives WebKitGTK with a profile.)
//
// EDGEPATCH_BROWSERS (comma-separated, default "chromium,firefox,webkit") picks the engines the
// suites run in. EDGEPATCH_WEBKIT_DEBUG=1 passes WebKit's own output
// (console messages of pages and workers included) and the driver's trace to stderr.
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";
import puppeteer from "puppeteer-core";

export const ENGINES = (process.env.EDGEPATCH_BROWSERS ?? "chromium,firefox,webkit")
  .split(",")
  .map((s) => s.trim())
  .filter(Boolean);

const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
const FIREFOX = process.env.FIREFOX ?? "/usr/bin/firefox-esr";
// Debian's python3: the GObject bindings (python3-gi) are not in other Pythons (pyenv's).
const WEBKIT_PYTHON = process.env.WEBKIT_PYTHON ?? "/usr/bin/python3";
const WEBKIT_BROWSER = join(dirname(fileURLToPath(import.meta.url)), "webkitgtk_browser.py");

/**
 * Wraps a puppeteer Page so it answers the Playwright calls the tests make: textContent,
 * getAttribute, isVisible, isDisabled, waitForFunction(fn, arg, { timeout }), and console
 * messages typed "warning" (puppeteer says "warn").
 */
function playwrightLike(page) {
  return {
    goto: (url) => page.goto(url),
    reload: () => page.reload(),
    // Playwright waits until the element is visible and enabled before it clicks; puppeteer
    // clicks at once (and a click on a disabled button is lost).
    click: async (sel) => {
      await page.waitForFunction((s) => { const e = document.querySelector(s); return !!e && e.getClientRects().length > 0 && e.disabled !== true; }, { timeout: 30_000, polling: 100 }, sel);
      await page.click(sel);
    },
    evaluate: (fn, arg) => page.evaluate(fn, arg),
    textContent: (sel) => page.$eval(sel, (e) => e.textContent),
    getAttribute: (sel, name) => page.$eval(sel, (e, n) => e.getAttribute(n), name),
    // As Playwright's: false (not an error) when nothing matches.
    isVisible: (sel) => page.evaluate((s) => { const e = document.querySelector(s); return !!e && e.getClientRects().length > 0 && getComputedStyle(e).visibility !== "hidden"; }, sel),
    isDisabled: (sel) => page.$eval(sel, (e) => e.disabled === true),
    waitForFunction: (fn, arg, { timeout = 30_000 } = {}) => page.waitForFunction(fn, { timeout, polling: 100 }, arg),
    on(event, handler) {
      if (event === "console") page.on("console", (m) => handler({ type: () => (m.type() === "warn" ? "warning" : m.type()), text: () => m.text() }));
      else page.on(event, handler);
    },
  };
}

/** The message a request fails with when WebKitGTK's web process dies (see on_terminated in webkitgtk_browser.py). */
const WEBKIT_CRASH = /^WebKit web process terminated \(crashed\)$/;

/**
 * Runs `body()` for a test in `engine`; in WebKit, once more when its first run fails because
 * WebKitGTK's web process crashed, saying so (`note`, e.g. t.diagnostic). A crash of the web
 * process is WebKit's own fault (a page cannot crash it; WebKit ends a page that takes too
 * much memory with another reason, "exceeded-memory-limit", which is not run again). CI saw
 * one in the reload-mid-update test (stop 34), in none of 55 runs of it here. Any other
 * failure, or a second crash, fails the test.
 */
export async function runRetryingWebKitCrash(engine, body, note) {
  try {
    return await body();
  } catch (e) {
    if (engine !== "webkit" || !WEBKIT_CRASH.test(e?.message ?? "")) throw e;
    note(`WebKit's web process crashed (${e.message}): running the test once more in a fresh browser`);
    return await body();
  }
}

/**
 * Registers `body` as one node:test test per engine of ENGINES (`engines`: only these), and
 * per variant of `variants(engine)` (default: one, null; any other is named in the test's name
 * by `label(variant)`), run as body(t, engine, variant) through runRetryingWebKitCrash.
 */
export function engineTests(name, body, { engines = null, variants = () => [null], label = String } = {}) {
  for (const e of ENGINES) {
    if (engines && !engines.includes(e)) continue;
    for (const v of variants(e)) {
      test(`${name} [${e}${v === null ? "" : `, ${label(v)}`}]`, (t) => runRetryingWebKitCrash(e, () => body(t, e, v), (m) => t.diagnostic(m)));
    }
  }
}

/**
 * Launches `engine` with a fresh profile and returns the browser: `page` (Playwright-like),
 * the shorthands goto(url), reload(), evaluate(fn, arg), waitFor(fn, arg, timeoutMs),
 * `errors` and `warnings` (console errors and uncaught exceptions; console warnings), and
 * close() (which also removes the profile), and `version` (the browser's). Options:
 * `profileDir` (use this directory as the profile and leave it in place on close),
 * `firefoxPrefs` (extra Firefox preferences), `webkitQuotaBytes` (WebKit: the most an origin
 * may store, enforced on OPFS writes; WebKit's estimate() reports a lower quota that grows with
 * usage, not this number), `webkitEvaluateTimeoutMs` (WebKit: how long an evaluate() may take,
 * default 180 s; 0: no limit, as in Playwright).
 */
export async function launch(engine, options = {}) {
  const b = await launchPage(engine, options);
  const errors = [];
  const warnings = [];
  b.page.on("pageerror", (e) => errors.push(e.message));
  b.page.on("console", (m) => {
    if (m.type() === "error") errors.push(m.text());
    if (m.type() === "warning") warnings.push(m.text());
  });
  return {
    engine,
    version: b.version,
    page: b.page,
    errors,
    warnings,
    goto: (url) => b.page.goto(url),
    reload: () => b.page.reload(),
    evaluate: (fn, arg) => b.page.evaluate(fn, arg),
    waitFor: (fn, arg, timeoutMs = 30_000) => b.page.waitForFunction(fn, arg, { timeout: timeoutMs }),
    close: b.close,
  };
}

async function launchPage(engine, { profileDir = null, firefoxPrefs = {}, webkitQuotaBytes = 0, webkitEvaluateTimeoutMs = WEBKIT_EVALUATE_MS } = {}) {
  const profile = profileDir ?? mkdtempSync(join(tmpdir(), `edgepatch-${engine}-`));
  const removeProfile = () => profileDir || rmSync(profile, { recursive: true, force: true });
  if (engine === "chromium") {
    // Chromium leaves scoped_dir temporary directories (~30 MB each) in TMPDIR after a run:
    // inside the profile they go when the profile goes, as WebKit's do.
    const chromiumTmp = join(profile, "tmp");
    mkdirSync(chromiumTmp, { recursive: true });
    const context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      env: { ...process.env, TMPDIR: chromiumTmp },
      args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    });
    const page = context.pages()[0] ?? (await context.newPage());
    return {
      page,
      version: context.browser()?.version() ?? "",
      close: async () => {
        await context.close();
        removeProfile();
      },
    };
  }
  if (engine === "firefox") {
    const browser = await puppeteer.launch({ browser: "firefox", executablePath: FIREFOX, headless: true, userDataDir: profile, extraPrefsFirefox: firefoxPrefs });
    const page = (await browser.pages())[0] ?? (await browser.newPage());
    return {
      page: playwrightLike(page),
      version: await browser.version(),
      close: async () => {
        await browser.close();
        removeProfile();
      },
    };
  }
  if (engine === "webkit") {
    try {
      return await launchWebKit(profile, { webkitQuotaBytes, webkitEvaluateTimeoutMs, removeProfile });
    } catch (e) {
      removeProfile();
      throw e;
    }
  }
  throw new Error(`unknown browser engine ${engine} (chromium, firefox, webkit)`);
}

// ---------------------------------------------------------------------------------------
// WebKit (WebKitGTK) through tests/e2e/webkitgtk_browser.py

const WEBKIT_DEBUG = Boolean(process.env.EDGEPATCH_WEBKIT_DEBUG);
const WEBKIT_READY_MS = 30_000;
// Playwright's evaluate has no time limit; this one has a generous one so that a page that
// never settles (or a stuck web process) fails its test instead of holding the run.
const WEBKIT_EVALUATE_MS = 180_000;
const WEBKIT_CLOSE_MS = 5_000;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** One Xvfb per Node process, started at the first WebKit launch; resolves to ":N". */
let xvfb = null;
function xvfbDisplay() {
  xvfb ??= new Promise((resolve, reject) => {
    // -displayfd: Xvfb picks a free display itself and writes its number to fd 3 when ready.
    // setpriv (util-linux, Essential in Debian) --pdeathsig: Xvfb is killed with this process
    // even when it dies of a signal (a test runner's timeout), where no "exit" handler runs.
    const p = spawn("setpriv", ["--pdeathsig", "KILL", "--", "Xvfb", "-displayfd", "3", "-screen", "0", "1280x800x24", "-nolisten", "tcp"], { stdio: ["ignore", "ignore", "pipe", "pipe"] });
    let number = "";
    let stderr = "";
    p.stderr.on("data", (d) => (stderr = (stderr + d).slice(-2000)));
    p.stdio[3].on("data", (d) => {
      number += d;
      if (!number.includes("\n")) return;
      // From here on the display lives as long as this process, and does not keep it alive.
      for (const s of [p, p.stderr, p.stdio[3]]) s.unref();
      resolve(`:${number.trim()}`);
    });
    p.on("error", (e) => {
      xvfb = null;
      reject(new Error(`cannot start Xvfb (apt-get install xvfb): ${e.message}`));
    });
    p.on("exit", (code, signal) => {
      xvfb = null; // the next launch starts another
      reject(new Error(`Xvfb exited (${signal ?? code}) before it was ready: ${stderr}`));
    });
    process.once("exit", () => p.kill());
  });
  return xvfb;
}

/** Page-side helpers are composed as source text: they must run under a page's CSP (no eval). */
const jsArg = (arg) => (arg === undefined ? "undefined" : JSON.stringify(arg));
const fnSource = (fn) => (typeof fn === "function" ? fn.toString() : `() => (${fn})`);

async function launchWebKit(profile, { webkitQuotaBytes, webkitEvaluateTimeoutMs, removeProfile }) {
  const display = await xvfbDisplay();
  // WebKit keeps a temporary file per createWritable() in TMPDIR and leaves some behind
  // (thousands per test run): inside the profile they go when the profile goes.
  const webkitTmp = join(profile, "tmp");
  mkdirSync(webkitTmp, { recursive: true });
  const args = [WEBKIT_BROWSER, "--profile", profile];
  if (webkitQuotaBytes) args.push("--origin-quota-bytes", String(webkitQuotaBytes));
  const child = spawn(WEBKIT_PYTHON, args, {
    stdio: ["pipe", "pipe", "pipe"],
    // NO_AT_BRIDGE: no accessibility bus on this display (GTK would wait for it and warn).
    env: { ...process.env, TMPDIR: webkitTmp, DISPLAY: display, GDK_BACKEND: "x11", WAYLAND_DISPLAY: "", NO_AT_BRIDGE: "1" },
  });
  let stderrTail = "";
  child.stderr.on("data", (d) => {
    stderrTail = (stderrTail + d).slice(-4000);
    if (WEBKIT_DEBUG) process.stderr.write(d);
  });
  child.stdin.on("error", () => {}); // an exited browser: its pending calls fail on "exit"

  let nextId = 1;
  const pending = new Map(); // id -> { resolve, reject, timer }
  const listeners = { console: [], pageerror: [] };
  let exited = null;
  let ready;
  let version = "";
  const readyPromise = new Promise((resolve, reject) => (ready = { resolve, reject }));

  const failAll = (message) => {
    for (const [, p] of pending) p.reject(new Error(message));
    pending.clear();
  };
  child.on("error", (e) => {
    exited = `cannot run ${WEBKIT_PYTHON}: ${e.message}`;
    ready.reject(new Error(exited));
    failAll(exited);
  });
  child.on("exit", (code, signal) => {
    // Its output pipes may still be held by a WebKit process it left behind (when it was
    // killed); after a moment for its last lines they must not keep this process alive.
    setTimeout(() => {
      child.stdout.destroy();
      child.stderr.destroy();
    }, 1000).unref();
    exited = `the WebKit browser exited (${signal ?? code})${stderrTail ? `; its last output:\n${stderrTail}` : ""}`;
    ready.reject(new Error(exited));
    failAll(exited);
  });
  createInterface({ input: child.stdout }).on("line", (line) => {
    let m;
    try {
      m = JSON.parse(line);
    } catch {
      return;
    }
    if (m.event === "ready") {
      version = `WebKitGTK ${m.webkitgtk}`;
      return ready.resolve(m);
    }
    if (m.event === "console") {
      const msg = { type: () => m.type, text: () => m.text };
      for (const h of listeners.console) h(msg);
      return;
    }
    if (m.event === "pageerror" || m.event === "crashed") {
      const e = new Error(m.event === "crashed" ? `WebKit web process terminated (${m.reason})` : m.message);
      for (const h of listeners.pageerror) h(e);
      return;
    }
    const p = pending.get(m.id);
    if (!p) return; // answered after its caller gave up (timeout)
    pending.delete(m.id);
    clearTimeout(p.timer);
    if (m.error) {
      const e = new Error(m.error.message);
      if (m.error.js) e.name = m.error.name; // the page's own exception
      e.fromPage = Boolean(m.error.js);
      p.reject(e);
    } else p.resolve(m.value);
  });

  function request(message, timeoutMs, what) {
    if (exited) return Promise.reject(new Error(exited));
    const id = nextId++;
    return new Promise((resolve, reject) => {
      const timer = timeoutMs
        ? setTimeout(() => {
            pending.delete(id);
            reject(new Error(`webkit: ${what} got no answer in ${timeoutMs} ms`));
          }, timeoutMs)
        : null;
      pending.set(id, { resolve, reject, timer });
      child.stdin.write(JSON.stringify({ id, ...message }) + "\n");
    });
  }

  async function evaluateSource(source, arg, timeoutMs = webkitEvaluateTimeoutMs) {
    const value = await request({ cmd: "evaluate", fn: source, arg: jsArg(arg) }, timeoutMs, "evaluate");
    return value == null ? undefined : JSON.parse(value);
  }

  /** Calls `poll` (returns undefined to try again) every 100 ms until it answers or `timeout` passes. */
  async function until(poll, timeout, what) {
    const deadline = Date.now() + timeout;
    for (;;) {
      try {
        const r = await poll(Math.max(1000, deadline - Date.now()));
        if (r !== undefined) return r;
      } catch (e) {
        // The page's own exception ends the wait (as in Playwright); a document replaced by a
        // navigation in between does not.
        if (e.fromPage || exited) throw e;
      }
      if (Date.now() > deadline) throw new Error(`webkit: ${what}: timeout ${timeout} ms exceeded`);
      await sleep(100);
    }
  }

  /**
   * Waits (as Playwright's locator calls do) until `selector` matches, then runs `body`
   * (source of `(element, arg) => value`) on the first match and returns its value.
   */
  const onElement = (selector, body, arg, what, timeout = 30_000) =>
    until(
      async (ms) => {
        const r = await evaluateSource(`([selector, arg]) => { const e = document.querySelector(selector); return e ? { value: (${body})(e, arg) } : null; }`, [selector, arg], ms);
        return r ? r.value ?? null : undefined;
      },
      timeout,
      `${what}(${JSON.stringify(selector)})`,
    );

  const page = {
    goto: async (url, { timeout = 30_000 } = {}) => {
      await request({ cmd: "goto", url }, timeout, `goto ${url}`);
      return null;
    },
    reload: async ({ timeout = 30_000 } = {}) => {
      await request({ cmd: "reload" }, timeout, "reload");
      return null;
    },
    evaluate: (fn, arg) => evaluateSource(fnSource(fn), arg),
    // Playwright waits until the element is visible and enabled, then clicks it with the mouse;
    // here the click is the element's click() (a trusted mouse event needs no GTK input).
    click: async (selector, { timeout = 30_000 } = {}) => {
      await until(
        async (ms) => {
          const r = await evaluateSource(
            `(selector) => {
              const e = document.querySelector(selector);
              if (!e) return "missing";
              if (e.getClientRects().length === 0 || getComputedStyle(e).visibility === "hidden") return "hidden";
              if (e.disabled === true) return "disabled";
              e.scrollIntoView({ block: "center", inline: "center" });
              e.click();
              return "clicked";
            }`,
            selector,
            ms,
          );
          return r === "clicked" ? r : undefined;
        },
        timeout,
        `click(${JSON.stringify(selector)})`,
      );
    },
    textContent: (selector) => onElement(selector, "(e) => e.textContent", undefined, "textContent"),
    getAttribute: (selector, name) => onElement(selector, "(e, name) => e.getAttribute(name)", name, "getAttribute"),
    isVisible: (selector) =>
      evaluateSource(`(selector) => { const e = document.querySelector(selector); return !!e && e.getClientRects().length > 0 && getComputedStyle(e).visibility !== "hidden"; }`, selector),
    isDisabled: (selector) => onElement(selector, "(e) => e.disabled === true", undefined, "isDisabled"),
    waitForFunction: (fn, arg, { timeout = 30_000 } = {}) =>
      until(
        async (ms) => {
          const v = await evaluateSource(fnSource(fn), arg, ms);
          return v ? v : undefined;
        },
        timeout,
        "waitForFunction",
      ),
    on(event, handler) {
      if (!listeners[event]) throw new Error(`webkit page: no event ${event} (console, pageerror)`);
      listeners[event].push(handler);
    },
  };

  const readyTimer = setTimeout(() => ready.reject(new Error(`the WebKit browser was not ready in ${WEBKIT_READY_MS} ms; its output:\n${stderrTail}`)), WEBKIT_READY_MS);
  try {
    await readyPromise;
  } catch (e) {
    child.kill("SIGKILL");
    throw e;
  } finally {
    clearTimeout(readyTimer);
  }

  let closing = null;
  const close = () =>
    (closing ??= (async () => {
      if (!exited) {
        const gone = new Promise((r) => child.once("exit", r));
        await request({ cmd: "close" }, WEBKIT_CLOSE_MS, "close").catch(() => {});
        // The driver quits its main loop after answering; it (and with it the web process)
        // is killed if it does not go in time.
        if (!exited) {
          const kill = setTimeout(() => child.kill("SIGKILL"), WEBKIT_CLOSE_MS);
          await gone;
          clearTimeout(kill);
        }
      }
      removeProfile();
    })());
  return { page, version, close };
}
