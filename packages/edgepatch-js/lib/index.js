'use strict';
// Single-file diff and apply in Node over the WebAssembly build of edgepatch-core
// (crates/edgepatch-wasm, built by `npm run build -w edgepatch-js` / scripts/setup.sh
// into ../wasm). The patch logic is all in the core; this is file I/O only.

const fs = require('node:fs');
const path = require('node:path');

let wasm;
try {
  wasm = require('../wasm/edgepatch_wasm.js');
} catch (e) {
  if (e.code !== 'MODULE_NOT_FOUND') throw e;
  throw new Error('the WebAssembly build is missing (packages/edgepatch-js/wasm); run scripts/setup.sh');
}

const CHUNK = 1 << 20;

function singleFileOnly(what) {
  return new Error(`${what}: edgepatch-js handles single-file patches; use the native edgepatch CLI for directory builds`);
}

/** A temporary path beside `target`, so the final rename stays on one file system. */
function tempBeside(target) {
  const rand = Math.random().toString(36).slice(2, 10);
  return path.join(path.dirname(target), `.${path.basename(target)}.edgepatch-${process.pid}-${rand}.tmp`);
}

/** Reads exactly `length` bytes at `offset` (into `buf` if given), or throws. */
function readExactly(fd, offset, length, buf = Buffer.allocUnsafe(length)) {
  let filled = 0;
  while (filled < length) {
    const n = fs.readSync(fd, buf, filled, length - filled, offset + filled);
    if (n === 0) throw new Error(`old file ends before byte ${offset + length}`);
    filled += n;
  }
  return buf;
}

function writeAll(fd, bytes, position = null) {
  let done = 0;
  while (done < bytes.length) done += fs.writeSync(fd, bytes, done, bytes.length - done, position === null ? null : position + done);
}

/**
 * Applies the single-file patch at `patchPath` to `oldPath`, creating `outPath`.
 * The patch is streamed in chunks into the applier, the old file read at offsets;
 * the output is written to a temporary file beside OUT and moved into place only
 * after the whole patch verified, so OUT is never half-written. OUT must not exist.
 * `onProgress(progress)` is called after each chunk.
 */
function applyFile(oldPath, patchPath, outPath, { chunkSize = CHUNK, onProgress } = {}) {
  if (pathExists(outPath)) throw new Error(`${outPath} already exists`);
  const oldFd = fs.openSync(oldPath, 'r');
  let patchFd;
  let tmp = null;
  let outFd = null;
  let executable = false;
  // The applier's scratch space (the old module of a wasm file in the field-split layout,
  // split): a file beside OUT, made at the first write, removed however the apply ends.
  let scratch = null;
  try {
    patchFd = fs.openSync(patchPath, 'r');
    const old = {
      fileSize(p) {
        if (p !== '') throw singleFileOnly(`old file ${JSON.stringify(p)}`);
        return fs.fstatSync(oldFd).size;
      },
      readAt(p, offset, length) {
        if (p !== '') throw singleFileOnly(`old file ${JSON.stringify(p)}`);
        return readExactly(oldFd, offset, length);
      },
      // Straight into wasm memory: no allocation, no second copy.
      readInto(p, offset, target) {
        if (p !== '') throw singleFileOnly(`old file ${JSON.stringify(p)}`);
        readExactly(oldFd, offset, target.length, target);
      },
      // Asked only by tree patches.
      listing() { throw singleFileOnly('the old build'); },
    };
    const sink = {
      createDirectory(p) { throw singleFileOnly(`directory ${JSON.stringify(p)}`); },
      createSymlink(p) { throw singleFileOnly(`symlink ${JSON.stringify(p)}`); },
      beginFile(p, exec) {
        if (p !== '') throw singleFileOnly(`file ${JSON.stringify(p)}`);
        if (outFd !== null) throw new Error('a second file in a single-file patch');
        tmp = tempBeside(outPath);
        outFd = fs.openSync(tmp, 'wx', 0o644);
        executable = exec;
      },
      writeFile(bytes) { writeAll(outFd, bytes); },
      finishFile() {},
      writeScratch(offset, bytes) {
        if (scratch === null) {
          const p = tempBeside(outPath);
          scratch = { path: p, fd: fs.openSync(p, 'wx+', 0o600) };
        }
        writeAll(scratch.fd, bytes, offset);
        return true;
      },
      readScratch(offset, target) {
        if (scratch === null) throw new Error('nothing was written to the scratch space');
        readExactly(scratch.fd, offset, target.length, target);
      },
    };
    const applier = new wasm.PatchApplier(old, sink);
    const buf = Buffer.allocUnsafe(chunkSize);
    for (;;) {
      const n = fs.readSync(patchFd, buf, 0, chunkSize, null);
      if (n === 0) break;
      applier.push(buf.subarray(0, n));
      if (onProgress) onProgress(applier.progress());
    }
    const summary = applier.finish();
    if (outFd === null) throw new Error('the patch produced no file');
    if (executable) fs.fchmodSync(outFd, 0o755);
    fs.fsyncSync(outFd);
    fs.closeSync(outFd);
    outFd = null;
    commit(tmp, outPath);
    tmp = null;
    return summary;
  } finally {
    fs.closeSync(oldFd);
    if (patchFd !== undefined) fs.closeSync(patchFd);
    if (outFd !== null) fs.closeSync(outFd);
    if (tmp !== null) fs.rmSync(tmp, { force: true });
    if (scratch !== null) {
      fs.closeSync(scratch.fd);
      fs.rmSync(scratch.path, { force: true });
    }
  }
}

function pathExists(p) {
  try {
    fs.lstatSync(p);
    return true;
  } catch {
    return false;
  }
}

/** Moves `tmp` to `outPath` without replacing anything there (a hard link fails if it exists). */
function commit(tmp, outPath) {
  try {
    fs.linkSync(tmp, outPath);
    fs.unlinkSync(tmp);
  } catch (e) {
    if (e.code === 'EEXIST') throw new Error(`${outPath} already exists`);
    if (!['EPERM', 'ENOTSUP', 'EOPNOTSUPP', 'EXDEV', 'EMLINK'].includes(e.code)) throw e;
    if (pathExists(outPath)) throw new Error(`${outPath} already exists`);
    fs.renameSync(tmp, outPath);
  }
}

/**
 * Makes a single-file patch from `oldPath` to `newPath` at zstd `level` (1..=22,
 * default 19): the same bytes as `edgepatch diff --level N OLD NEW PATCH`.
 * Both files are held in memory. PATCH is written via a temporary file and a
 * rename (replacing an existing PATCH, as the native CLI does).
 */
function diffFile(oldPath, newPath, patchPath, { level = 19 } = {}) {
  for (const p of [oldPath, newPath]) {
    if (!fs.statSync(p).isFile()) throw singleFileOnly(p);
  }
  const patch = wasm.diffFiles(fs.readFileSync(oldPath), fs.readFileSync(newPath), level);
  const tmp = tempBeside(patchPath);
  try {
    fs.writeFileSync(tmp, patch, { flag: 'wx' });
    fs.renameSync(tmp, patchPath);
  } catch (e) {
    fs.rmSync(tmp, { force: true });
    throw e;
  }
  return patch.length;
}

module.exports = {
  applyFile,
  diffFile,
  PatchApplier: wasm.PatchApplier,
  diffFiles: wasm.diffFiles,
  wasmMemoryBytes: wasm.wasmMemoryBytes,
};
