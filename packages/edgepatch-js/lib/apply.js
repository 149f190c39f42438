// Applying a patch on disk, as the native `edgepatch apply` does: the patch streamed into
// the core's applier (from a file or any stream), the old build read at offsets, the new
// build staged beside OUT and renamed into place only once every file and the patch
// verified. OUT must not exist; a failed apply leaves nothing behind.

import fs from 'node:fs';
import { PatchApplier, applyStream } from './core.js';
import { OldBuildFiles } from './old-build.js';
import { StagedOutput } from './staged-output.js';

const CHUNK = 1 << 20;

/** Applies a single-file patch to the file `oldPath`, creating the file `outPath`. */
export async function applyFile(oldPath, patch, outPath, options = {}) {
  if (!fs.statSync(oldPath).isFile()) throw new Error(`${oldPath}: not a file (a directory build takes applyTree)`);
  return applyPatch(oldPath, patch, outPath, options);
}

/** Applies a tree patch to the build directory `oldDir`, creating the directory `newDir`. */
export async function applyTree(oldDir, patch, newDir, options = {}) {
  if (!fs.statSync(oldDir).isDirectory()) throw new Error(`${oldDir}: not a directory (a single file takes applyFile)`);
  return applyPatch(oldDir, patch, newDir, options);
}

async function applyPatch(oldPath, patch, outPath, { chunkSize = CHUNK, onProgress, signal, trustPatch = false } = {}) {
  signal?.throwIfAborted();
  const old = new OldBuildFiles(oldPath);
  let output = null;
  let applier = null;
  try {
    output = new StagedOutput(outPath, { trustPatch });
    applier = new PatchApplier(old, output);
    const chunks = typeof patch === 'string' ? fs.createReadStream(patch, { highWaterMark: chunkSize, signal }) : patch;
    const summary = await applyStream(applier, chunks, { onProgress, signal });
    output.commit();
    return summary;
  } finally {
    applier?.free();
    output?.close();
    old.close();
  }
}
