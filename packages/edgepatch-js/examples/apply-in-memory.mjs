// The core API with the module loaded by hand (@edgepatch/js/core): a single-file patch
// applied to bytes in memory. Runs in Deno (deno run --allow-read) and Node alike.
import { readFileSync } from 'node:fs';
import { PatchApplier, applyStream, initSync } from '@edgepatch/js/core';

const wasmUrl = new URL(import.meta.resolve('@edgepatch/js/wasm'));
initSync({ module: globalThis.Deno ? await Deno.readFile(wasmUrl) : readFileSync(wasmUrl) });

/** The new file's bytes, from the old file's bytes and the patch (any chunks or a stream). */
export async function applyInMemory(oldBytes, patch) {
  const chunks = [];
  const old = {
    fileSize: () => oldBytes.length,
    readAt: (path, offset, length) => oldBytes.subarray(offset, offset + length),
  };
  const sink = {
    createDirectory() { throw new Error('a tree patch; this applies single files'); },
    createSymlink() { throw new Error('a tree patch; this applies single files'); },
    beginFile() {},
    writeFile: (bytes) => chunks.push(bytes), // a copy: the sink may keep it
    finishFile() {},
  };
  const applier = new PatchApplier(old, sink);
  try {
    await applyStream(applier, patch); // resolves once every byte verified
  } finally {
    applier.free();
  }
  return new Uint8Array(await new Blob(chunks).arrayBuffer());
}
