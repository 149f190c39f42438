// The new build as the applier writes it (a BuildSink): staged beside OUT, a file or a
// directory tree decided by the patch's first entry, and renamed to OUT only by `commit`,
// once the applier verified everything. Every path is checked to stay beneath the staging
// directory (the core refuses such patches first), and the build's links are created at
// commit, after every file: no link exists while anything is written, so none can
// redirect a write.

import fs from 'node:fs';
import path from 'node:path';
import { nameBeside, pathExists, readExactly, writeAll } from './files.js';

export class StagedOutput {
  /**
   * `out`: the new build's path, which must not exist. `trustPatch`: the patch is the
   * caller's own, so its gzip/zlib files may be rebuilt from its side infos (`trustsSideInfos`).
   */
  constructor(out, { trustPatch = false } = {}) {
    if (pathExists(out)) throw new Error(`${out} already exists`);
    this.out = path.resolve(out);
    this.trustPatch = trustPatch;
    this.staging = nameBeside(this.out, 'staging');
    /** 'file' or 'tree' once the first entry arrived. */
    this.shape = null;
    this.current = null;
    this.links = [];
    this.scratch = null;
  }

  /** Where the new entry `buildPath` goes ("": the single file itself). */
  target(buildPath) {
    if (buildPath === '') {
      if (this.shape !== null) throw new Error('a single-file build has exactly one entry');
      this.shape = 'file';
      return this.staging;
    }
    if (this.shape === 'file') throw new Error('a single-file build has exactly one entry');
    const parts = buildPath.split('/');
    if (parts.some((p) => p === '' || p === '.' || p === '..' || p.includes('\0') || p.includes('\\'))) {
      throw new Error(`${JSON.stringify(buildPath)} is not a relative build path`);
    }
    this.tree();
    return path.join(this.staging, ...parts);
  }

  tree() {
    if (this.shape === null) {
      fs.mkdirSync(this.staging, { mode: 0o755 });
      this.shape = 'tree';
    }
  }

  createDirectory(buildPath) {
    const at = this.target(buildPath);
    fs.mkdirSync(at, { mode: 0o755 });
    fs.chmodSync(at, 0o755);
  }

  createSymlink(buildPath, target) {
    this.links.push([this.target(buildPath), target]);
  }

  beginFile(buildPath, executable) {
    const at = this.target(buildPath);
    const mode = executable ? 0o755 : 0o644;
    // O_EXCL: never through an existing name (and so never through a link).
    const fd = fs.openSync(at, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_NOFOLLOW, mode);
    this.current = { fd, buildPath };
    // The umask must not change what the patch says.
    fs.fchmodSync(fd, mode);
  }

  writeFile(bytes) {
    if (this.current === null) throw new Error('writeFile outside a file');
    writeAll(this.current.fd, bytes);
  }

  /** Called once the file's content matched its BLAKE3. */
  finishFile() {
    if (this.current === null) throw new Error('finishFile outside a file');
    const { fd } = this.current;
    this.current = null;
    fs.fsyncSync(fd);
    fs.closeSync(fd);
  }

  /** The applier's scratch space: a file beside the staging area, removed however the apply ends. */
  trustsSideInfos() {
    return this.trustPatch;
  }

  writeScratch(offset, bytes) {
    if (this.scratch === null) {
      const p = `${this.staging}.scratch`;
      this.scratch = { path: p, fd: fs.openSync(p, 'wx+', 0o600) };
    }
    writeAll(this.scratch.fd, bytes, offset);
    return true;
  }

  readScratch(offset, target) {
    if (this.scratch === null) throw new Error('nothing was written to the scratch space');
    readExactly(this.scratch.fd, offset, target, 'the scratch space');
  }

  /** After `PatchApplier.finish()` returned: creates the links, syncs, renames the staging area to OUT. */
  commit() {
    if (this.shape === null) this.tree(); // a build with no entries is an empty directory
    for (const [at, target] of this.links) fs.symlinkSync(target, at);
    if (this.shape === 'tree') syncDirectories(this.staging);
    // rename() would replace an empty directory or a file at OUT: refuse anything there.
    if (pathExists(this.out)) throw new Error(`${this.out} already exists`);
    fs.renameSync(this.staging, this.out);
    this.shape = 'committed';
    syncDirectory(path.dirname(this.out));
  }

  /** Removes whatever was staged (nothing once committed) and the scratch space. */
  close() {
    if (this.current !== null) fs.closeSync(this.current.fd);
    this.current = null;
    if (this.scratch !== null) {
      fs.closeSync(this.scratch.fd);
      fs.rmSync(this.scratch.path, { force: true });
      this.scratch = null;
    }
    if (this.shape !== null && this.shape !== 'committed') fs.rmSync(this.staging, { recursive: true, force: true });
  }
}

/** fsync of every directory beneath `dir` (and itself): the entries made are durable. */
function syncDirectories(dir) {
  for (const d of fs.readdirSync(dir, { withFileTypes: true })) if (d.isDirectory()) syncDirectories(path.join(dir, d.name));
  syncDirectory(dir);
}

function syncDirectory(dir) {
  const fd = fs.openSync(dir, 'r');
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}
