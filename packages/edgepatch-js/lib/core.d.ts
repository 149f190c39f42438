/**
 * The WebAssembly build of edgepatch-core, for embedders that load the module themselves
 * (`@edgepatch/js/core`): call {@link initSync} (or the async {@link init}) with the module
 * (`@edgepatch/js/wasm`) before anything else. The package's main entry point does that
 * for you in Node, Deno and Cloudflare Workers.
 *
 * @module
 */
export * from '../wasm/edgepatch_wasm.js';
export { default as init } from '../wasm/edgepatch_wasm.js';
import type { ApplyProgress, ApplySummary, PatchApplier } from '../wasm/edgepatch_wasm.js';

/** The bytes of a patch as they arrive: a `ReadableStream` (a `fetch` body, an R2 object's body) or any iterable of chunks. */
export type PatchChunks = ReadableStream<Uint8Array> | AsyncIterable<Uint8Array> | Iterable<Uint8Array>;

export interface StreamOptions {
  /** Called after each chunk was applied. */
  onProgress?: (progress: ApplyProgress) => void;
  /** Stops the apply between chunks (it then rejects with the signal's reason). */
  signal?: AbortSignal;
}

/**
 * Pushes every chunk of `patch` into `applier`, then finishes it. Resolves only once
 * all of the patch arrived and every file and the patch's checksum verified; until then
 * nothing the sink was given is final. Rejects with the core's `Error` (its `kind` names
 * what was wrong: `"truncated"`, `"corrupt"`, `"old_build"`, `"path"`, ...).
 */
export function applyStream(applier: PatchApplier, patch: PatchChunks, options?: StreamOptions): Promise<ApplySummary>;
