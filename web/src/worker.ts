// The dedicated worker: owns the wasm module and every OPFS access handle, so
// patching never blocks the page. Requests and replies: messages.ts.

import init from "../../crates/edgepatch-wasm/pkg/web-apply/edgepatch_wasm.js";
import { EdgepatchError, StorageError, messageOf } from "./errors.js";
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
        const ac = new AbortController();
        running.set(m.id, ac);
        try {
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
    const err = e instanceof EdgepatchError ? e : new StorageError(messageOf(e));
    reply({ id: m.id, type: "error", error: err.toJSON() });
  }
}

self.addEventListener("message", (ev: MessageEvent<WorkerRequest | WorkerInit>) => {
  if (ev.data.op === "init") ready ??= loadWasm(ev.data.wasmUrl);
  else void handle(ev.data);
});
