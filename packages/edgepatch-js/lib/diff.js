// Making a single-file patch on disk with the core's diff (one thread: wasm has none).

import fs from 'node:fs';
import { diffFiles } from './core.js';
import { nameBeside } from './files.js';

/**
 * Makes a single-file patch from `oldPath` to `newPath` at zstd `level` (1..=22, default
 * 19): the same bytes as `edgepatch diff --level N OLD NEW PATCH`. Both files are held in
 * memory. PATCH is written to a temporary file and renamed (replacing an existing PATCH,
 * as the native CLI does). Returns the patch's size.
 */
export function diffFile(oldPath, newPath, patchPath, { level = 19 } = {}) {
  for (const p of [oldPath, newPath]) {
    if (!fs.statSync(p).isFile()) throw new Error(`${p}: not a file (diffFile makes single-file patches; the native CLI diffs directories)`);
  }
  const patch = diffFiles(fs.readFileSync(oldPath), fs.readFileSync(newPath), level);
  const tmp = nameBeside(patchPath, 'patch');
  try {
    fs.writeFileSync(tmp, patch, { flag: 'wx' });
    fs.renameSync(tmp, patchPath);
  } catch (e) {
    fs.rmSync(tmp, { force: true });
    throw e;
  }
  return patch.length;
}
