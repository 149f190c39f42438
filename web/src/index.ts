// @edgepatch/web: keep a game build in the origin private file system and
// update it with edgepatch patches, in a dedicated worker.
//
//   const game = new GameUpdater({ baseUrl: "https://cdn.example/updates/", game: "demo", publicKeys: ["<base64 ed25519 key>"] });
//   game.addEventListener("progress", (e) => bar.value = e.detail.bytesWritten / e.detail.bytesTotal);
//   await game.updateToLatest("stable");
//   const png = await game.readFile("assets/img/title.png");

import { AbortedError, EdgepatchError, deserializeError } from "./errors.js";
import { UNSIGNED_WARNING, acceptedKeys } from "./keys.js";
import type { BuildEntry, ChannelHead, PendingUpdate, UpdateOptions, UpdatePlan, UpdateProgress, UpdateRequest, UpdateResult, WorkerInit, WorkerReply, WorkerRequest } from "./messages.js";
import { EMPTY_BUILD } from "./messages.js";

export * from "./errors.js";
export * from "./serve.js";
export type { BuildEntry, ChannelHead, OpfsAccess, PendingUpdate, UpdateOptions, UpdatePhase, UpdatePlan, UpdateProgress, UpdateResult, UpdateTimings } from "./messages.js";
export { EMPTY_BUILD } from "./messages.js";

export interface GameUpdaterOptions extends UpdateOptions {
  /** Base URL of an update server (docs/UPDATE_PROTOCOL.md), e.g. "https://cdn.example/updates/". */
  baseUrl: string | URL;
  game: string;
  /**
   * URL of the dedicated worker script, `@edgepatch/web/worker` (default: edgepatch-worker.js
   * beside this module, in the form bundlers detect and bundle). Same origin as the page.
   */
  workerUrl?: string | URL;
  /**
   * URL of the apply-only wasm module, `@edgepatch/web/wasm` (default: edgepatch_wasm_bg.wasm
   * beside the worker script). Resolved against the page's address.
   */
  wasmUrl?: string | URL;
  /**
   * Ask the browser to keep this origin's storage (`navigator.storage.persist()`) before the
   * first update (default true): without it Safari and Firefox may evict the game under
   * storage pressure. Firefox asks the user; the update never waits for the answer.
   */
  persistentStorage?: boolean;
}

/** Where this origin's storage stands (`GameUpdater.storage()`). */
export interface StorageStatus {
  /** The browser promised not to evict this origin's storage (null: it cannot say). */
  persisted: boolean | null;
  /** Bytes used and the quota, as `navigator.storage.estimate()` reports them (null: unknown). */
  usage: number | null;
  quota: number | null;
}

type Distribute<T> = T extends unknown ? Omit<T, "id"> : never;

/** The `progress` event: `detail` is an UpdateProgress. */
export type ProgressEvent = CustomEvent<UpdateProgress>;

/** The events a GameUpdater dispatches, by type: what `addEventListener` types `e` as. */
export interface GameUpdaterEventMap {
  progress: CustomEvent<UpdateProgress>;
}

/** Options of `update`, `updateToLatest` and `install`. */
export interface UpdateCallOptions {
  /**
   * Aborting rejects with AbortedError (code "aborted"): at once when already aborted (nothing
   * is fetched or written), else at the update's next step (resumable once a resume point is
   * persisted).
   */
  signal?: AbortSignal;
  /** Called with each progress event of this call (as the `progress` event is dispatched). */
  onProgress?: (p: UpdateProgress) => void;
}

/** A listener for one of the updater's events: a function (`this` is the updater) or an object with `handleEvent`. */
export type Listener<E extends Event> = ((this: GameUpdater, ev: E) => unknown) | { handleEvent(ev: E): unknown };

export class GameUpdater extends EventTarget {
  readonly game: string;
  readonly baseUrl: string;
  private worker: Worker;
  private nextId = 1;
  private calls = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void; onProgress?: (p: UpdateProgress) => void }>();

  /** Unsigned updates allowed (`dangerouslyAllowUnsignedUpdates` and no key): every update logs a warning. */
  readonly unsigned: boolean;

  /**
   * Throws SignatureError when no public key is configured (and the local-development
   * opt-out is not set) or a key is malformed. A bad game name is a ProtocolError from
   * the first call (the worker checks names by the core's rule).
   */
  constructor(private opts: GameUpdaterOptions) {
    super();
    this.unsigned = acceptedKeys(opts) === null;
    this.game = opts.game;
    this.baseUrl = new URL(String(opts.baseUrl), location.href).href;
    // Bundlers (Vite, webpack, esbuild) find the worker only in this literal form: keep it so.
    const name = `edgepatch ${opts.game}`;
    if (opts.workerUrl === undefined) this.worker = new Worker(new URL("./edgepatch-worker.js", import.meta.url), { type: "module", name });
    else this.worker = new Worker(opts.workerUrl, { type: "module", name });
    this.worker.postMessage({ op: "init", wasmUrl: opts.wasmUrl === undefined ? null : new URL(String(opts.wasmUrl), location.href).href } satisfies WorkerInit);
    this.worker.addEventListener("message", (ev: MessageEvent<WorkerReply>) => this.onReply(ev.data));
    this.worker.addEventListener("error", (ev) => {
      const err = new EdgepatchError("storage", `the edgepatch worker failed: ${ev.message || "could not load " + String(opts.workerUrl ?? "edgepatch-worker.js")}`);
      for (const c of this.calls.values()) c.reject(err);
      this.calls.clear();
    });
  }

  /** Listens to a GameUpdater event, `e` typed by GameUpdaterEventMap ("progress": `e.detail` is an UpdateProgress). */
  override addEventListener<K extends keyof GameUpdaterEventMap>(type: K, listener: Listener<GameUpdaterEventMap[K]> | null, options?: boolean | AddEventListenerOptions): void;
  override addEventListener(type: string, listener: EventListenerOrEventListenerObject | null, options?: boolean | AddEventListenerOptions): void;
  override addEventListener(type: string, listener: EventListenerOrEventListenerObject | null, options?: boolean | AddEventListenerOptions): void {
    super.addEventListener(type, listener, options);
  }

  override removeEventListener<K extends keyof GameUpdaterEventMap>(type: K, listener: Listener<GameUpdaterEventMap[K]> | null, options?: boolean | EventListenerOptions): void;
  override removeEventListener(type: string, listener: EventListenerOrEventListenerObject | null, options?: boolean | EventListenerOptions): void;
  override removeEventListener(type: string, listener: EventListenerOrEventListenerObject | null, options?: boolean | EventListenerOptions): void {
    super.removeEventListener(type, listener, options);
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

  private request(): Omit<UpdateRequest, "from" | "to" | "channel"> {
    const { workerUrl: _w, wasmUrl: _m, baseUrl: _b, game: _g, persistentStorage: _p, ...options } = this.opts;
    return { ...options, baseUrl: this.baseUrl, game: this.game };
  }

  /**
   * The build a channel points at (default "stable"), from a channel document checked
   * like `updateToLatest` checks it (signature, expiry, sequence); records nothing.
   */
  async latest(channel = "stable"): Promise<string> {
    return (await this.call<ChannelHead>({ op: "latest", request: { ...this.request(), channel } }).promise).build;
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
  update(from: string, to: string, opts: UpdateCallOptions = {}): Promise<UpdateResult> {
    return this.start({ from, to }, opts);
  }

  /**
   * Updates (or installs) to the build `channel` points at. The channel document must be
   * signed by an accepted key, not expired (SignatureError, FrozenError) and not older
   * than the newest one this browser followed from this server (RollbackError); once the
   * update is switched in (or the build was already current), it becomes the newest.
   */
  updateToLatest(channel = "stable", opts: UpdateCallOptions = {}): Promise<UpdateResult> {
    return this.start({ channel }, opts);
  }

  private persistAsked = false;

  /**
   * Asks for persistent storage once per updater (see `persistentStorage`), without waiting
   * for a user's answer: the result is what `storage()` reports later.
   */
  private askPersistence(): void {
    if (this.persistAsked || this.opts.persistentStorage === false) return;
    this.persistAsked = true;
    const s = navigator.storage;
    if (!s?.persist || !s.persisted) return;
    void s.persisted().then((yes) => (yes ? true : s.persist())).catch(() => false);
  }

  /** Whether storage is persistent, and the usage and quota the browser reports. */
  async storage(): Promise<StorageStatus> {
    const s = navigator.storage;
    const persisted = s?.persisted ? await s.persisted().catch(() => null) : null;
    const est = s?.estimate ? await s.estimate().catch(() => null) : null;
    return { persisted, usage: est?.usage ?? null, quota: est?.quota ?? null };
  }

  /**
   * What `update(from, to)` would download and write and whether it fits, from the signed
   * documents (checked as an update checks them); nothing is written. `fullInstall` says the
   * server has no patch for the pair and the build would be installed whole.
   */
  plan(from: string, to: string): Promise<UpdatePlan> {
    return this.call<UpdatePlan>({ op: "plan", request: { ...this.request(), from, to } }).promise;
  }

  /** The build the current one replaced (kept for `rollback()`), or null. */
  previous(): Promise<string | null> {
    return this.call<string | null>({ op: "previous", game: this.game }).promise;
  }

  /**
   * Makes the previous build current again (its manifest and file sizes are checked first);
   * the build rolled back from becomes previous. Discards an interrupted update. A game
   * running now keeps its build until it reloads.
   */
  rollback(): Promise<{ from: string; to: string }> {
    return this.call<{ from: string; to: string }>({ op: "rollback", game: this.game }).promise;
  }

  private start(what: Pick<UpdateRequest, "from" | "to" | "channel">, opts: UpdateCallOptions): Promise<UpdateResult> {
    const signal = opts.signal;
    // Already aborted: nothing reaches the worker, so nothing is fetched or written.
    if (signal?.aborted) return Promise.reject(new AbortedError("update aborted before it started"));
    if (this.unsigned) console.warn(UNSIGNED_WARNING);
    this.askPersistence();
    const { id, promise } = this.call<UpdateResult>({ op: "update", request: { ...this.request(), ...what } }, opts.onProgress);
    if (!signal) return promise;
    // The worker stops at its next step and rejects (after closing its files and keeping
    // what can be resumed), so a next call finds the game free.
    const onAbort = () => this.worker.postMessage({ id: this.nextId++, op: "abort", target: id } satisfies WorkerRequest);
    signal.addEventListener("abort", onAbort, { once: true });
    const done = () => signal.removeEventListener("abort", onAbort);
    promise.then(done, done);
    return promise;
  }

  /** Installs `to` from nothing (an update from the empty build "_"). */
  install(to: string, opts: UpdateCallOptions = {}): Promise<UpdateResult> {
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
