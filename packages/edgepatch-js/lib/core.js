// The WebAssembly build of edgepatch-core (crates/edgepatch-wasm) and the loop that feeds
// it a patch stream, the same on every platform. Nothing here loads the module: the entry
// points do (node.js reads the .wasm file, workers.js imports it), or an embedder calls
// `initSync` / `init` with the module itself before anything else.

export * from '../wasm/edgepatch_wasm.js';
export { default as init } from '../wasm/edgepatch_wasm.js';

/**
 * Pushes every chunk of `patch` (a ReadableStream or any (async) iterable of byte
 * chunks, of any sizes) into `applier`, then finishes it: the summary is returned only
 * once all of the patch arrived and every file and the patch checksum verified.
 */
export async function applyStream(applier, patch, { onProgress, signal } = {}) {
  if (typeof patch === 'string') throw new TypeError('applyStream takes the patch\'s bytes (a stream or chunks), not a path: applyFile and applyTree take paths');
  signal?.throwIfAborted();
  for await (const chunk of chunksOf(patch)) {
    signal?.throwIfAborted();
    applier.push(chunk);
    if (onProgress) onProgress(applier.progress());
  }
  signal?.throwIfAborted();
  return applier.finish();
}

/** The chunks of a ReadableStream (read through its reader: not every runtime iterates one) or an iterable. */
async function* chunksOf(patch) {
  if (typeof patch?.getReader !== 'function') {
    yield* patch;
    return;
  }
  const reader = patch.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      yield value;
    }
  } finally {
    reader.releaseLock();
  }
}
