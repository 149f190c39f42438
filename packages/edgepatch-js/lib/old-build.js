// The old build on disk as the applier reads it (an OldBuildSource): a single file (the
// build path "") or a directory tree, listed the way the native CLI lists it. Old files
// are read only where the listing found a regular file, opened without following a link.

import fs from 'node:fs';
import path from 'node:path';
import { isExecutable, readExactly } from './files.js';

/** Old files kept open at once; a tree's segments read from many files in turn. */
const MAX_OPEN = 256;

export class OldBuildFiles {
  /** `root`: the old file or directory (itself may be a symlink; nothing inside is followed). */
  constructor(root) {
    const stats = fs.statSync(root);
    if (!stats.isFile() && !stats.isDirectory()) throw new Error(`${root}: not a file or directory`);
    this.root = fs.realpathSync(root);
    this.isDirectory = stats.isDirectory();
    /** Every regular file's size by build path: from the listing, or the one file. */
    this.sizes = this.isDirectory ? null : new Map([['', stats.size]]);
    /** path -> fd, least recently used first. */
    this.open = new Map();
  }

  /** Every entry of the tree (files with size and executable bit, symlinks with their target, directories). */
  listing() {
    if (!this.isDirectory) throw new Error('the old build is a single file; this is a patch of a directory build');
    const entries = [];
    const walk = (dir, prefix) => {
      for (const name of fs.readdirSync(dir)) {
        const buildPath = prefix === '' ? name : `${prefix}/${name}`;
        const full = path.join(dir, name);
        const stats = fs.lstatSync(full);
        if (stats.isSymbolicLink()) entries.push({ path: buildPath, kind: 'symlink', symlinkTarget: fs.readlinkSync(full) });
        else if (stats.isDirectory()) {
          entries.push({ path: buildPath, kind: 'directory' });
          walk(full, buildPath);
        } else if (stats.isFile()) entries.push({ path: buildPath, kind: 'file', executable: isExecutable(stats), size: stats.size });
        else throw new Error(`${full}: not a regular file, directory or symlink`);
      }
    };
    walk(this.root, '');
    this.sizes = new Map(entries.filter((e) => e.kind === 'file').map((e) => [e.path, e.size]));
    return entries;
  }

  fileSize(buildPath) {
    if (this.sizes === null) throw new Error('the old build is a directory; this is a patch of a single file');
    const size = this.sizes.get(buildPath);
    if (size === undefined) throw new Error(`${JSON.stringify(buildPath)} is not a regular file in the old build`);
    return size;
  }

  /** Straight into the module's memory: no allocation, no second copy. */
  readInto(buildPath, offset, target) {
    readExactly(this.fd(buildPath), offset, target, `old file ${JSON.stringify(buildPath)}`);
  }

  readAt(buildPath, offset, length) {
    const buf = new Uint8Array(length);
    this.readInto(buildPath, offset, buf);
    return buf;
  }

  fd(buildPath) {
    let fd = this.open.get(buildPath);
    if (fd !== undefined) {
      this.open.delete(buildPath);
    } else {
      this.fileSize(buildPath); // listed as a regular file, or throws
      if (this.open.size >= MAX_OPEN) {
        const [oldest, oldestFd] = this.open.entries().next().value;
        this.open.delete(oldest);
        fs.closeSync(oldestFd);
      }
      const full = buildPath === '' ? this.root : path.join(this.root, ...buildPath.split('/'));
      fd = fs.openSync(full, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK);
    }
    this.open.set(buildPath, fd);
    return fd;
  }

  close() {
    for (const fd of this.open.values()) fs.closeSync(fd);
    this.open.clear();
  }
}
