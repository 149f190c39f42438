// The dedicated worker: owns the wasm module and every OPFS access handle, so
// patching never blocks the page. Requests and replies: messages.ts.

import init from "../../crates/edgepatch-wasm/pkg/web-apply/edgepatch_wasm.js";
import { AbortedError, EdgepatchError, StorageError, messageOf } from "./errors.js";
import type { WorkerInit, WorkerReply, WorkerRequest } from "./messages.js";
import { checkName } from "./protocol.js";
import { Verifier, fetchVerifiedChannel } from "./trust.js";
import { planUpdate, rollbackGame } from "./builds.js";
import { gameDir, readCurrent } from "./layout.js";
import { RECORD, currentEntries, pendingUpdate, readCurrentFile, removeGame, runUpdate, withGameLock } from "./update.js";

// The wasm module loads once, from the URL the page's first message names (`wasmUrl`),
// else from beside this script (wasm-bindgen's default, which bundlers rewrite).
let ready: Promise<unknown> | null = null;
function loadWasm(wasmUrl: string | null): Promise<unknown> {
  return init(wasmUrl === null ? undefined : { module_or_path: wasmUrl }).catch((e: unknown) => {
    throw new StorageError(`could not load the edgepatch wasm module ${wasmUrl ?? "edgepatch_wasm_bg.wasm beside the worker"}: ${messageOf(e)}`);
  });
}
/** Each update's controller, set as its request arrives: an abort that follows it always finds it. */
const running = new Map<number, AbortController>();

function reply(m: WorkerReply, transfer: Transferable[] = []): void {
  (self as unknown as Worker).postMessage(m, transfer);
}

async function handle(m: WorkerRequest): Promise<void> {
  try {
    await (ready ??= loadWasm(null));
    // Every game name reaches OPFS paths: the core's name rule first (never ".", "..", ".channels").
    if ("game" in m) checkName("game", m.game);
    else if (m.op !== "abort") checkName("game", m.request.game);
    switch (m.op) {
      case "update": {
        const ac = running.get(m.id) ?? new AbortController();
        running.set(m.id, ac);
        try {
          if (ac.signal.aborted) throw new AbortedError();
          const value = await runUpdate(m.request, (progress) => reply({ id: m.id, type: "progress", progress }), ac.signal);
          reply({ id: m.id, type: "result", value });
        } finally {
          running.delete(m.id);
        }
        return;
      }
      case "abort":
        running.get(m.target)?.abort();
        reply({ id: m.id, type: "result", value: null });
        return;
      case "current": {
        const c = await currentEntries(m.game);
        reply({ id: m.id, type: "result", value: c ? c.build : null });
        return;
      }
      case "entries": {
        const c = await currentEntries(m.game);
        reply({ id: m.id, type: "result", value: c ? c.entries.map(({ source: _s, ...e }) => e) : [] });
        return;
      }
      case "latest": {
        const r = m.request;
        reply({ id: m.id, type: "result", value: await fetchVerifiedChannel(Verifier.fromOptions(r), r.baseUrl, r.game, r.channel) });
        return;
      }
      case "pending":
        reply({ id: m.id, type: "result", value: await pendingUpdate(m.game) });
        return;
      case "readFile": {
        const bytes = await readCurrentFile(m.game, m.path);
        reply({ id: m.id, type: "result", value: bytes }, [bytes.buffer]);
        return;
      }
      case "previous": {
        const g = await gameDir(m.game, false);
        const c = g && (await readCurrent(g));
        reply({ id: m.id, type: "result", value: c?.previous?.build ?? null });
        return;
      }
      case "rollback":
        reply({ id: m.id, type: "result", value: await withGameLock(m.game, () => rollbackGame(m.game, RECORD)) });
        return;
      case "plan": {
        const r = m.request;
        checkName("from", r.from, true);
        checkName("to", r.to);
        const ac = new AbortController();
        reply({ id: m.id, type: "result", value: await planUpdate(Verifier.fromOptions(r), r.baseUrl, r.game, r.from, r.to, ac.signal) });
        return;
      }
      case "remove":
        await removeGame(m.game);
        reply({ id: m.id, type: "result", value: null });
        return;
    }
  } catch (e) {
    // A fetch or body read cut by the update's signal is the abort, not a storage failure.
    const err = e instanceof EdgepatchError ? e : (e as { name?: string } | null)?.name === "AbortError" ? new AbortedError() : new StorageError(messageOf(e));
    reply({ id: m.id, type: "error", error: err.toJSON() });
  }
}

self.addEventListener("message", (ev: MessageEvent<WorkerRequest | WorkerInit>) => {
  if (ev.data.op === "init") ready ??= loadWasm(ev.data.wasmUrl);
  else {
    const m = ev.data;
    // An abort takes effect as it arrives, not after the worker's next await.
    if (m.op === "abort") running.get(m.target)?.abort();
    if (m.op !== "update") void handle(m);
    else {
      running.set(m.id, new AbortController());
      void handle(m).finally(() => running.delete(m.id));
    }
  }
});
