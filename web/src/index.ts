// @edgepatch/web: keep a game build in the origin private file system and
// update it with edgepatch patches, in a dedicated worker.
//
//   const game = new GameUpdater({ baseUrl: "https://cdn.example/updates/", game: "demo" });
//   game.addEventListener("progress", (e) => bar.value = e.detail.patchBytesApplied / e.detail.patchSize);
//   await game.update(await game.current() ?? "_", await game.latest());
//   const png = await game.readFile("assets/img/title.png");

import { EdgepatchError, deserializeError } from "./errors.js";
import type { BuildEntry, PendingUpdate, UpdateOptions, UpdateProgress, UpdateResult, WorkerReply, WorkerRequest } from "./messages.js";
import { EMPTY_BUILD, checkName, fetchChannel } from "./protocol.js";

export * from "./errors.js";
export type { BuildEntry, PendingUpdate, UpdateOptions, UpdatePhase, UpdateProgress, UpdateResult } from "./messages.js";
export { EMPTY_BUILD } from "./protocol.js";

export interface GameUpdaterOptions extends UpdateOptions {
  /** Base URL of an update server (docs/UPDATE_PROTOCOL.md), e.g. "https://cdn.example/updates/". */
  baseUrl: string | URL;
  game: string;
  /** URL of edgepatch-worker.js (default: beside this module). */
  workerUrl?: string | URL;
}

type Distribute<T> = T extends unknown ? Omit<T, "id"> : never;

/** The `progress` event: `detail` is an UpdateProgress. */
export type ProgressEvent = CustomEvent<UpdateProgress>;

export class GameUpdater extends EventTarget {
  readonly game: string;
  readonly baseUrl: string;
  private worker: Worker;
  private nextId = 1;
  private calls = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void; onProgress?: (p: UpdateProgress) => void }>();

  constructor(private opts: GameUpdaterOptions) {
    super();
    checkName("game", opts.game);
    this.game = opts.game;
    this.baseUrl = new URL(String(opts.baseUrl), location.href).href;
    this.worker = new Worker(opts.workerUrl ?? new URL("./edgepatch-worker.js", import.meta.url), { type: "module", name: `edgepatch ${opts.game}` });
    this.worker.addEventListener("message", (ev: MessageEvent<WorkerReply>) => this.onReply(ev.data));
    this.worker.addEventListener("error", (ev) => {
      const err = new EdgepatchError("storage", `the edgepatch worker failed: ${ev.message || "could not load " + String(opts.workerUrl ?? "edgepatch-worker.js")}`);
      for (const c of this.calls.values()) c.reject(err);
      this.calls.clear();
    });
  }

  private onReply(m: WorkerReply): void {
    const c = this.calls.get(m.id);
    if (!c) return;
    if (m.type === "progress") {
      c.onProgress?.(m.progress);
      this.dispatchEvent(new CustomEvent("progress", { detail: m.progress }));
      return;
    }
    this.calls.delete(m.id);
    if (m.type === "result") c.resolve(m.value);
    else c.reject(deserializeError(m.error));
  }

  private call<T>(req: Distribute<WorkerRequest>, onProgress?: (p: UpdateProgress) => void): { id: number; promise: Promise<T> } {
    const id = this.nextId++;
    const promise = new Promise<T>((resolve, reject) => {
      this.calls.set(id, { resolve: resolve as (v: unknown) => void, reject, ...(onProgress ? { onProgress } : {}) });
    });
    this.worker.postMessage({ ...req, id } as WorkerRequest);
    return { id, promise };
  }

  /** The current build's name, or null when nothing is installed. */
  current(): Promise<string | null> {
    return this.call<string | null>({ op: "current", game: this.game }).promise;
  }

  /** The build a channel points at (default "stable"). */
  async latest(channel = "stable"): Promise<string> {
    return (await fetchChannel(this.baseUrl, this.game, channel)).build;
  }

  /** An interrupted update that `update(from, to)` would continue, or null. */
  pending(): Promise<PendingUpdate | null> {
    return this.call<PendingUpdate | null>({ op: "pending", game: this.game }).promise;
  }

  /**
   * Turns build `from` (the current one, or "_" to install) into `to`. Resolves
   * once `to` is verified and current; rejects with an EdgepatchError, leaving
   * `from` current and intact. After an error with `resumable`, calling again
   * continues where it stopped.
   */
  update(from: string, to: string, opts: { signal?: AbortSignal; onProgress?: (p: UpdateProgress) => void } = {}): Promise<UpdateResult> {
    const { workerUrl: _w, baseUrl: _b, game: _g, ...options } = this.opts;
    const { id, promise } = this.call<UpdateResult>({ op: "update", request: { ...options, baseUrl: this.baseUrl, game: this.game, from, to } }, opts.onProgress);
    opts.signal?.addEventListener("abort", () => this.worker.postMessage({ id: this.nextId++, op: "abort", target: id } satisfies WorkerRequest), { once: true });
    return promise;
  }

  /** Installs `to` from nothing (an update from the empty build "_"). */
  install(to: string, opts: { signal?: AbortSignal; onProgress?: (p: UpdateProgress) => void } = {}): Promise<UpdateResult> {
    return this.update(EMPTY_BUILD, to, opts);
  }

  /** Every entry of the current build (symlinks and executable bits come from its manifest). */
  entries(): Promise<BuildEntry[]> {
    return this.call<BuildEntry[]>({ op: "entries", game: this.game }).promise;
  }

  /** A file of the current build, following symlinks. */
  readFile(path: string): Promise<Uint8Array> {
    return this.call<Uint8Array>({ op: "readFile", game: this.game, path }).promise;
  }

  /** Deletes every build and update state of this game. */
  remove(): Promise<void> {
    return this.call<void>({ op: "remove", game: this.game }).promise;
  }

  /** Stops the worker (an update in flight stops where it is and can be resumed later). */
  close(): void {
    this.worker.terminate();
  }
}
