// Synchronous file I/O the applier's callbacks share (they run inside `PatchApplier.push`,
// so they cannot wait on promises).

import fs from 'node:fs';
import path from 'node:path';

/** Fills all of `target` from byte `offset` of `fd`, or throws naming `what`. */
export function readExactly(fd, offset, target, what) {
  let filled = 0;
  while (filled < target.length) {
    const n = fs.readSync(fd, target, filled, target.length - filled, offset + filled);
    if (n === 0) throw new Error(`${what} ends before byte ${offset + target.length}`);
    filled += n;
  }
}

/** Writes all of `bytes` at `position` (null: the file's current position). */
export function writeAll(fd, bytes, position = null) {
  let done = 0;
  while (done < bytes.length) done += fs.writeSync(fd, bytes, done, bytes.length - done, position === null ? null : position + done);
}

/** A fresh name beside `target` (same directory, so a rename into place stays on one file system). */
export function nameBeside(target, kind) {
  const rand = Math.random().toString(36).slice(2, 10);
  return path.join(path.dirname(target), `.${path.basename(target)}.edgepatch-${kind}-${process.pid}-${rand}`);
}

export function pathExists(p) {
  try {
    fs.lstatSync(p);
    return true;
  } catch {
    return false;
  }
}

export function isExecutable(stats) {
  return (stats.mode & 0o111) !== 0;
}
