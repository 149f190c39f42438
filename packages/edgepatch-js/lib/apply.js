// Applying a patch on disk, as the native `edgepatch apply` does: the patch streamed into
// the core's applier (from a file or any stream), the old build read at offsets, the new
// build staged beside OUT and renamed into place only once every file and the patch
// verified. OUT must not exist; a failed apply leaves nothing behind.

import fs from 'node:fs';
import { FileHasher, PatchApplier, applyStream } from './core.js';
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
    if (trustPatch && typeof patch === 'string') await checkPatchChecksum(patch, chunkSize, signal);
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

/**
 * A trusted patch on disk is checked whole before any of it is applied: its trailer checksum
 * (the BLAKE3 of every byte before its last 32, docs/FORMAT.md), so a copy damaged since it
 * was made never reaches preflate, which trusts its side infos. The applier checks the same
 * checksum only at the end. (A trusted patch given as a stream cannot be read twice: its
 * side infos are used as they arrive.)
 */
async function checkPatchChecksum(patchPath, chunkSize, signal) {
  const size = fs.statSync(patchPath).size;
  const corrupt = (why) => Object.assign(new Error(`${patchPath}: ${why}`), { kind: 'corrupt' });
  if (size < 32) throw corrupt(`truncated: ${size} bytes, shorter than the patch checksum`);
  const hasher = new FileHasher();
  try {
    if (size > 32) {
      for await (const chunk of fs.createReadStream(patchPath, { start: 0, end: size - 33, highWaterMark: chunkSize, signal })) hasher.update(chunk);
    }
    const stored = Buffer.alloc(32);
    const fd = fs.openSync(patchPath, 'r');
    try {
      fs.readSync(fd, stored, 0, 32, size - 32);
    } finally {
      fs.closeSync(fd);
    }
    if (hasher.finish() !== stored.toString('hex')) {
      throw corrupt('corrupt: the patch checksum (BLAKE3) does not match its content, checked before applying: the patch was damaged after it was made');
    }
  } finally {
    hasher.free();
  }
}
