// The demo portal: installs build v1 of the fixture game into OPFS, shows its
// assets, updates it to the channel's latest build with a progress bar, and
// continues an interrupted update when the page is opened again.
//
// Query parameters: game (demo), base (../updates/), install (v1), channel (stable),
// publicKey (base64 ed25519 key the updates must be signed with; repeat it to accept
// several), unsigned=1 (dangerouslyAllowUnsignedUpdates, local development only).
// Without a key and without unsigned=1 the library refuses to start: the page says so.

import { EdgepatchError, GameUpdater, registerGameServiceWorker, type OpfsAccess, type UpdateProgress } from "../src/index.js";

const params = new URLSearchParams(location.search);
const game = params.get("game") ?? "demo";
const installBuild = params.get("install") ?? "v1";
const channel = params.get("channel") ?? "stable";
let updater!: GameUpdater;
let configError: unknown = null;
try {
  updater = new GameUpdater({
    baseUrl: new URL(params.get("base") ?? "../updates/", location.href),
    game,
    workerUrl: new URL("../lib/edgepatch-worker.js", import.meta.url),
    publicKeys: params.getAll("publicKey"),
    dangerouslyAllowUnsignedUpdates: params.get("unsigned") === "1",
    // How builds are written (tests force each way the library has: README "Browser support").
    opfsAccess: (params.get("opfsAccess") ?? "auto") as OpfsAccess,
  });
} catch (e) {
  configError = e;
}

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;
const installBtn = $<HTMLButtonElement>("install");
const updateBtn = $<HTMLButtonElement>("update");
const removeBtn = $<HTMLButtonElement>("remove");
const playBtn = $<HTMLButtonElement>("play");
/** The build the game frame was started with (null: not playing). */
let playing: string | null = null;
const bar = $<HTMLProgressElement>("bar");
installBtn.textContent = `Install ${installBuild}`;

type State = "loading" | "idle" | "updating" | "done" | "error";
function setState(s: State): void {
  document.body.dataset.state = s;
  if (s === "updating") document.body.dataset.segmentsPersisted = "0";
  const busy = s === "updating" || s === "loading";
  installBtn.disabled = updateBtn.disabled = removeBtn.disabled = playBtn.disabled = busy || configError !== null;
}

const fmtBytes = (n: number) => (n >= 1 << 20 ? `${(n / (1 << 20)).toFixed(2)} MiB` : n >= 1024 ? `${(n / 1024).toFixed(1)} KiB` : `${n} B`);

function showProgress(p: UpdateProgress): void {
  document.body.dataset.segmentsPersisted = String(p.segmentsDone);
  // The bar follows the bytes written: the patch is small, the writing is the work.
  bar.max = Math.max(1, p.bytesTotal);
  bar.value = p.bytesWritten;
  const eta = p.etaSeconds === null ? "" : `, ${p.etaSeconds.toFixed(1)} s left`;
  const rate = p.bytesPerSecond > 0 ? `, ${fmtBytes(p.bytesPerSecond)}/s` : "";
  $("progress-text").textContent =
    `downloaded ${fmtBytes(p.patchBytesApplied)} of ${fmtBytes(p.patchSize)}, saved ${p.savedPercent.toFixed(1)}% ` +
    `(written ${fmtBytes(p.bytesWritten)} of ${fmtBytes(p.bytesTotal)}; files ${p.filesDone}/${p.filesTotal}${rate}${eta})` +
    (p.resumedFrom > 0 ? ` — resumed at ${fmtBytes(p.resumedFrom)}` : "");
  $("phase").textContent = `${p.phase} ${p.from === "_" ? "install of" : p.from + " →"} ${p.to}`;
}

function showError(e: unknown): void {
  const el = $("error");
  el.hidden = false;
  if (e instanceof EdgepatchError) {
    el.dataset.code = e.code;
    el.textContent = `Update failed (${e.code}): ${e.message}` + (e.resumable ? " — it will continue from where it stopped when you try again." : "");
  } else {
    el.dataset.code = "unknown";
    el.textContent = `Update failed: ${String(e)}`;
  }
}

const objectUrls: string[] = [];
async function showBuild(): Promise<void> {
  const current = await updater.current();
  $("current").textContent = current ?? "none";
  document.body.dataset.current = current ?? "";
  for (const u of objectUrls.splice(0)) URL.revokeObjectURL(u);
  const img = $<HTMLImageElement>("title-img");
  const table = $<HTMLTableElement>("files");
  table.textContent = "";
  if (!current) {
    img.hidden = true;
    $("game-title").textContent = "No build installed.";
    $("game-text").textContent = "";
    return;
  }
  const entries = await updater.entries();
  const has = (p: string) => entries.some((e) => e.path === p);
  const text = async (p: string) => new TextDecoder().decode(await updater.readFile(p));
  if (has("assets/img/title.png")) {
    const url = URL.createObjectURL(new Blob([(await updater.readFile("assets/img/title.png")) as BlobPart], { type: "image/png" }));
    objectUrls.push(url);
    img.src = url;
    img.hidden = false;
  } else img.hidden = true;
  if (has("index.html")) {
    const title = /<title>([^<]*)<\/title>/i.exec(await text("index.html"));
    $("game-title").textContent = title ? title[1]! : "(no title)";
  } else $("game-title").textContent = `${game} ${current}`;
  if (has("data/levels.json")) {
    const levels = JSON.parse(await text("data/levels.json")) as unknown;
    const n = Array.isArray(levels) ? levels.length : Array.isArray((levels as { levels?: unknown[] }).levels) ? (levels as { levels: unknown[] }).levels.length : 0;
    $("game-text").textContent = `${n} levels` + (has("assets/img/boss.png") ? ", now with a boss" : "");
  } else if (has("version.txt")) {
    $("game-text").textContent = (await text("version.txt")).trim();
  }
  for (const e of entries) {
    const tr = table.insertRow();
    tr.insertCell().textContent = e.path + (e.kind === "directory" ? "/" : e.kind === "symlink" ? ` → ${e.symlinkTarget}` : "");
    const size = tr.insertCell();
    size.className = "n";
    size.textContent = e.kind === "file" ? fmtBytes(e.size) + (e.executable ? " (x)" : "") : "";
  }
}

/** `to` null: the channel's build (signed, not expired, not rolled back). */
async function run(from: string, to: string | null): Promise<void> {
  setState("updating");
  $("error").hidden = true;
  try {
    const r = to === null ? await updater.updateToLatest(channel, { onProgress: showProgress }) : await updater.update(from, to, { onProgress: showProgress });
    if (r.channel) $("latest").textContent = `(latest on ${channel}: ${r.channel.build}${r.channel.sequence !== undefined ? `, sequence ${r.channel.sequence}` : ""})`;
    $("phase").textContent = r.alreadyCurrent ? `${r.to} is already installed` :
      `${r.from === "_" ? "installed" : "updated to"} ${r.to}: downloaded ${fmtBytes(r.downloadedBytes)} of a ${fmtBytes(r.patchSize)} patch` +
      `${r.resumed ? ` (resumed at ${fmtBytes(r.resumedFrom)})` : ""} in ${r.seconds.toFixed(2)} s, saved ${r.savedPercent.toFixed(1)}%` +
      (r.keyId ? `; signed by key ${r.keyId}` : "; NOT signature-checked (unsigned updates allowed)");
    await showBuild();
    if (playing !== null && playing !== r.to) $("play-note").textContent = `Update ready: ${r.to} is installed and takes effect on the next launch (the running game keeps ${playing}).`;
    setState("done");
  } catch (e) {
    showError(e);
    await showBuild().catch(() => {});
    setState("error");
  }
}

installBtn.onclick = () => {
  setState("updating");
  void run("_", installBuild);
};
updateBtn.onclick = () => {
  setState("updating");
  void run("", null);
};
// Play: the installed build, served by URL from OPFS by the game Service Worker (scope /play/).
playBtn.onclick = async () => {
  try {
    await registerGameServiceWorker(new URL("../lib/edgepatch-sw.js", import.meta.url), { scope: "/play/" });
    playing = await updater.current();
    $("player").hidden = false;
    $("play-note").textContent = `Playing ${game} ${playing ?? "(nothing installed)"} from this browser's storage.`;
    $<HTMLIFrameElement>("play-frame").src = `/play/${game}/index.html`;
  } catch (e) {
    showError(e);
  }
};
removeBtn.onclick = async () => {
  setState("updating");
  await updater.remove();
  await showBuild();
  setState("idle");
};

// Exposed for the browser tests and the curious.
(globalThis as unknown as { edgepatchDemo: unknown }).edgepatchDemo = { get updater() { return updater; }, run };

void (async () => {
  if (configError) {
    showError(configError);
    setState("error");
    return;
  }
  try {
    await showBuild();
    const pending = await updater.pending();
    if (pending) {
      // An update was interrupted (reload, lost connection): continue it.
      $("phase").textContent = `continuing the interrupted update ${pending.from} → ${pending.to}`;
      await run(pending.from, pending.to);
      return;
    }
    setState("idle");
  } catch (e) {
    showError(e);
    setState("error");
  }
})();
