// A game portal on @edgepatch/web, built with Vite: installs the game the first time, updates
// it to what the channel names with a progress bar, and plays it from the installed build
// through the library's Service Worker (the game loads every file by URL under /play/<game>/).
//
// Configuration comes from the build's environment (a real portal would write it here):
//   VITE_EDGEPATCH_BASE_URL    update server, e.g. https://cdn.example/updates/ (default /updates/)
//   VITE_EDGEPATCH_GAME        game name (default arcade)
//   VITE_EDGEPATCH_CHANNEL     channel followed (default stable)
//   VITE_EDGEPATCH_PUBLIC_KEY  base64 ed25519 key the updates are signed with (required)
import { EdgepatchError, GameUpdater, type UpdateProgress } from "@edgepatch/web";
import "./style.css";

const env = import.meta.env;
const game = env.VITE_EDGEPATCH_GAME ?? "arcade";
const channel = env.VITE_EDGEPATCH_CHANNEL ?? "stable";
const base = env.BASE_URL;
/** Where the Service Worker serves installed builds: <scope><game>/<path>. */
const playScope = `${base}play/`;

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;
const updateBtn = $<HTMLButtonElement>("update");
const playBtn = $<HTMLButtonElement>("play");
const bar = $<HTMLProgressElement>("bar");
const status = $("status");
$("game").textContent = game;
$("channel").textContent = channel;

type State = "loading" | "idle" | "updating" | "error";
function setState(s: State, text = ""): void {
  document.body.dataset.state = s;
  status.textContent = text;
  if (s === "error") status.dataset.error = "";
  else delete status.dataset.error;
  updateBtn.disabled = s === "updating" || s === "loading";
}
const fail = (e: unknown) => setState("error", e instanceof EdgepatchError ? `${e.name}: ${e.message}` : String(e));

const mib = (n: number) => `${(n / 1048576).toFixed(2)} MiB`;
function showProgress(p: UpdateProgress): void {
  bar.max = Math.max(1, p.bytesTotal);
  bar.value = p.bytesWritten;
  status.textContent = `${p.phase}: ${mib(p.bytesWritten)} of ${mib(p.bytesTotal)} written, patch ${mib(p.patchBytesApplied)} of ${mib(p.patchSize)} (files ${p.filesDone}/${p.filesTotal})`;
  // What the example's e2e test reads: how many progress events arrived, their phases, and the
  // bytes written each reported.
  const seen = document.body.dataset.progressPhases?.split(" ") ?? [];
  if (seen.at(-1) !== p.phase) document.body.dataset.progressPhases = [...seen, p.phase].join(" ").trim();
  document.body.dataset.progressEvents = String(Number(document.body.dataset.progressEvents ?? 0) + 1);
  document.body.dataset.progressWritten = `${document.body.dataset.progressWritten ?? ""} ${p.bytesWritten}/${p.bytesTotal}`.trim();
}

let updater: GameUpdater;
try {
  // The worker and its wasm come from this bundle (Vite finds them through the library's
  // `new Worker(new URL(...), ...)`); a portal serving them elsewhere passes workerUrl/wasmUrl.
  updater = new GameUpdater({
    baseUrl: new URL(env.VITE_EDGEPATCH_BASE_URL ?? `${base}updates/`, location.href),
    game,
    publicKeys: env.VITE_EDGEPATCH_PUBLIC_KEY ? [env.VITE_EDGEPATCH_PUBLIC_KEY] : [],
  });
  updater.addEventListener("progress", (e) => showProgress((e as CustomEvent<UpdateProgress>).detail));
} catch (e) {
  fail(e);
  throw e;
}

async function refresh(): Promise<void> {
  const [installed, latest] = await Promise.all([updater.current(), updater.latest(channel)]);
  $("installed").textContent = installed ?? "nothing";
  $("latest").textContent = latest;
  document.body.dataset.installed = installed ?? "";
  updateBtn.textContent = installed === null ? `Install ${latest}` : installed === latest ? "Up to date" : `Update to ${latest}`;
  playBtn.disabled = installed === null || !serviceWorkerShipped;
}

updateBtn.addEventListener("click", async () => {
  setState("updating", "checking…");
  try {
    const r = await updater.updateToLatest(channel);
    await refresh();
    setState("idle", r.alreadyCurrent ? `${r.to} is current` : `${r.from === "_" ? "installed" : "updated to"} ${r.to}: ${mib(r.downloadedBytes)} downloaded for a ${mib(r.newBytesTotal)} build`);
  } catch (e) {
    fail(e);
  }
});

/** `@edgepatch/web/vite` (vite.config.js) writes the Service Worker at the site's root. */
const serviceWorkerShipped = "serviceWorker" in navigator;

playBtn.addEventListener("click", async () => {
  try {
    const reg = await navigator.serviceWorker.register(`${base}edgepatch-sw.js`, { scope: playScope });
    const sw = reg.installing ?? reg.waiting ?? reg.active;
    if (sw && sw.state !== "activated") await new Promise<void>((ok) => sw.addEventListener("statechange", () => sw.state === "activated" && ok()));
    // A running game keeps its build: an update switches it in on the game's next load.
    const screen = $<HTMLIFrameElement>("screen");
    screen.hidden = false;
    screen.src = `${playScope}${game}/index.html`;
    document.body.dataset.playing = game;
  } catch (e) {
    fail(e);
  }
});

setState("loading");
refresh().then(() => setState("idle"), fail);
