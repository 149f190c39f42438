// Browser engines for the end-to-end tests, behind one small page interface (the subset of
// Playwright's Page the tests use), each with a fresh persistent profile (so an empty OPFS):
//
//   chromium  Debian's chromium through playwright-core (CDP)
//   firefox   Debian's firefox-esr through puppeteer-core (WebDriver BiDi; no geckodriver)
//
// EDGEPATCH_BROWSERS (comma-separated, default "chromium,firefox") picks the engines the
// suites run in. WebKit (WebKitGTK) is driven by tests/e2e/webkit.mjs where it exists.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";
import puppeteer from "puppeteer-core";

export const ENGINES = (process.env.EDGEPATCH_BROWSERS ?? "chromium,firefox")
  .split(",")
  .map((s) => s.trim())
  .filter(Boolean);

const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
const FIREFOX = process.env.FIREFOX ?? "/usr/bin/firefox-esr";

/**
 * Wraps a puppeteer Page so it answers the Playwright calls the tests make: textContent,
 * getAttribute, isVisible, isDisabled, waitForFunction(fn, arg, { timeout }), and console
 * messages typed "warning" (puppeteer says "warn").
 */
function playwrightLike(page) {
  return {
    goto: (url) => page.goto(url),
    reload: () => page.reload(),
    click: (sel) => page.click(sel),
    evaluate: (fn, arg) => page.evaluate(fn, arg),
    textContent: (sel) => page.$eval(sel, (e) => e.textContent),
    getAttribute: (sel, name) => page.$eval(sel, (e, n) => e.getAttribute(n), name),
    isVisible: (sel) => page.$eval(sel, (e) => !e.hidden && e.getClientRects().length > 0),
    isDisabled: (sel) => page.$eval(sel, (e) => e.disabled === true),
    waitForFunction: (fn, arg, { timeout = 30_000 } = {}) => page.waitForFunction(fn, { timeout, polling: 100 }, arg),
    on(event, handler) {
      if (event === "console") page.on("console", (m) => handler({ type: () => (m.type() === "warn" ? "warning" : m.type()), text: () => m.text() }));
      else page.on(event, handler);
    },
  };
}

/**
 * Launches `engine` with a fresh profile and returns the browser: `page` (Playwright-like),
 * the shorthands goto(url), reload(), evaluate(fn, arg), waitFor(fn, arg, timeoutMs),
 * `errors` and `warnings` (console errors and uncaught exceptions; console warnings), and
 * close() (which also removes the profile). `firefoxPrefs`: extra preferences (Firefox).
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

async function launchPage(engine, { firefoxPrefs = {} } = {}) {
  const profile = mkdtempSync(join(tmpdir(), `edgepatch-${engine}-`));
  if (engine === "chromium") {
    const context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    });
    const page = context.pages()[0] ?? (await context.newPage());
    return {
      page,
      close: async () => {
        await context.close();
        rmSync(profile, { recursive: true, force: true });
      },
    };
  }
  if (engine === "firefox") {
    const browser = await puppeteer.launch({ browser: "firefox", executablePath: FIREFOX, headless: true, userDataDir: profile, extraPrefsFirefox: firefoxPrefs });
    const page = (await browser.pages())[0] ?? (await browser.newPage());
    return {
      page: playwrightLike(page),
      close: async () => {
        await browser.close();
        rmSync(profile, { recursive: true, force: true });
      },
    };
  }
  throw new Error(`unknown browser engine ${engine} (chromium, firefox)`);
}
