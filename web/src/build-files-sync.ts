// Builds read and written through synchronous OPFS access handles (dedicated workers in
// Chromium, Firefox and Safari): the applier's callbacks read old files and write new ones
// directly, zero-copy where the binding allows. See build-files.ts for the other way.

import { Signer } from "../../crates/edgepatch-wasm/pkg/web-apply/edgepatch_wasm.js";
import type { ListedEntry, ManifestEntry } from "../../crates/edgepatch-wasm/pkg/web-apply/edgepatch_wasm.js";
import { DirTree, OPFS_PARALLELISM, forEachLimited, removeIfPresent } from "./layout.js";
import { type NewBuildFiles, NewBuildEntries, type OldBuildFiles } from "./build-files.js";

/** The scratch space's file in a build's directory (beside `manifest` and `files/`). */
export const SCRATCH_FILE = "scratch";

/** FileSystemSyncAccessHandle (not in TypeScript's DOM lib). */
interface SyncHandle {
  read(buffer: Uint8Array, options?: { at?: number }): number;
  write(buffer: Uint8Array, options?: { at?: number }): number;
  truncate(size: number): void;
  getSize(): number;
  flush(): void;
  close(): void;
}

async function openSync(fh: FileSystemFileHandle, readOnly: boolean): Promise<SyncHandle> {
  // "read-only" lets other readers in (Chromium 121+); Firefox ignores it and opens an
  // exclusive handle, which is why each file is opened once.
  const create = (fh as unknown as { createSyncAccessHandle(o?: { mode: string }): Promise<SyncHandle> }).createSyncAccessHandle;
  return create.call(fh, readOnly ? { mode: "read-only" } : undefined);
}

/** The old build, read with synchronous access handles (zero-copy `readInto`). */
export class SyncOldBuild implements OldBuildFiles {
  readonly handles = new Map<string, SyncHandle>();
  /** The old build's entries, from its stored manifest: what a tree patch keeps unnamed. */
  entries: ListedEntry[] = [];
  async open(dir: FileSystemDirectoryHandle, entries: ManifestEntry[]): Promise<void> {
    this.entries = entries;
    const tree = new DirTree(dir, false);
    const files = entries.filter((e) => e.kind === "file");
    const opened: SyncHandle[] = new Array(files.length);
    try {
      await forEachLimited(files, OPFS_PARALLELISM, async (e, i) => {
        opened[i] = await openSync(await tree.file(e.path), true);
      });
    } catch (e) {
      for (const h of opened) h?.close();
      throw e;
    }
    files.forEach((e, i) => this.handles.set(e.path, opened[i]!));
  }
  listing(): ListedEntry[] {
    return this.entries;
  }
  private handle(path: string): SyncHandle {
    const h = this.handles.get(path);
    if (!h) throw new Error(`the old build has no file ${path}`);
    return h;
  }
  fileSize(path: string): number {
    return this.handle(path).getSize();
  }
  readInto(path: string, offset: number, target: Uint8Array): number {
    const n = this.handle(path).read(target, { at: offset });
    if (n !== target.length) throw new Error(`old file ${path}: read ${n} of ${target.length} bytes at ${offset}`);
    return n;
  }
  readAt(path: string, offset: number, length: number): Uint8Array {
    const buf = new Uint8Array(length);
    this.readInto(path, offset, buf);
    return buf;
  }
  close(): void {
    for (const h of this.handles.values()) h.close();
    this.handles.clear();
  }
}

/**
 * The new build: every file's access handle is opened before the first push. The bound
 * applier accepts only what the manifest lists; these checks name what it does not.
 */
export class SyncNewBuild extends NewBuildEntries<SyncHandle> implements NewBuildFiles {
  readonly pushBytes = Infinity;
  private dirty = new Set<SyncHandle>();
  private cur: { path: string; h: SyncHandle; pos: number } | null = null;
  /** The applier's scratch space: a file of its own beside the build's files, removed at close. */
  private scratch: { dir: FileSystemDirectoryHandle; h: SyncHandle } | null = null;

  get currentPath(): string | null {
    return this.cur?.path ?? null;
  }

  get hasScratch(): boolean {
    return this.scratch !== null;
  }

  async openScratch(buildDir: FileSystemDirectoryHandle): Promise<void> {
    try {
      // A crashed session's scratch is stale: never read, replaced.
      await removeIfPresent(buildDir, SCRATCH_FILE);
      this.scratch = { dir: buildDir, h: await openSync(await buildDir.getFileHandle(SCRATCH_FILE, { create: true }), false) };
    } catch {
      // Best effort: without it the applier holds those bytes in memory, as it did before.
      this.scratch = null;
    }
  }
  writeScratch(offset: number, bytes: Uint8Array): boolean {
    return this.guard(() => {
      const s = this.scratch;
      if (!s) return false;
      const n = s.h.write(bytes, { at: offset });
      if (n !== bytes.length) throw new Error(`scratch space: wrote ${n} of ${bytes.length} bytes (storage full?)`);
      return true;
    });
  }
  readScratch(offset: number, target: Uint8Array): void {
    this.guard(() => {
      const s = this.scratch;
      if (!s) throw new Error("no scratch space was opened");
      const n = s.h.read(target, { at: offset });
      if (n !== target.length) throw new Error(`scratch space: read ${n} of ${target.length} bytes at ${offset}`);
    });
  }

  protected openFile(fh: FileSystemFileHandle): Promise<SyncHandle> {
    return openSync(fh, false);
  }
  protected override async release(handles: SyncHandle[]): Promise<void> {
    for (const h of handles) h.close();
  }
  beginFile(path: string, _executable: boolean, _size: number): void {
    this.guard(() => {
      const h = this.handle(path);
      h.truncate(0);
      this.cur = { path, h, pos: 0 };
    });
  }
  resumeFile(path: string, _executable: boolean, _size: number, written: number): void {
    this.guard(() => {
      const h = this.handle(path);
      if (h.getSize() < written) throw new Error(`${path} has ${h.getSize()} bytes, the resume point needs ${written}`);
      h.truncate(written);
      this.cur = { path, h, pos: written };
    });
  }
  writeFile(bytes: Uint8Array): void {
    this.guard(() => {
      const c = this.cur;
      if (!c) throw new Error("writeFile outside a file");
      const n = c.h.write(bytes, { at: c.pos });
      if (n !== bytes.length) throw new Error(`${c.path}: wrote ${n} of ${bytes.length} bytes (storage full?)`);
      c.pos += n;
      this.dirty.add(c.h);
      this.wrote(n);
    });
  }
  finishFile(): void {
    const c = this.cur;
    if (!c) throw new Error("finishFile outside a file");
    this.finishedNow.add(c.path);
    this.filesDone++;
    this.cur = null;
  }
  readWritten(path: string, offset: number, target: Uint8Array): number {
    return this.guard(() => {
      const n = this.handle(path).read(target, { at: offset });
      if (n !== target.length) throw new Error(`${path}: read back ${n} of ${target.length} bytes at ${offset}`);
      return n;
    });
  }
  async settle(_behind?: boolean): Promise<void> {}
  worthDurable(): boolean {
    return true;
  }
  async durable(): Promise<void> {
    for (const h of this.dirty) h.flush();
    this.dirty.clear();
  }
  async size(path: string): Promise<number> {
    return this.handle(path).getSize();
  }
  async blake3(path: string, size: number): Promise<string> {
    const h = this.handle(path);
    return blake3Of(size, (buf, at) => h.read(buf, { at }));
  }
  async close(): Promise<void> {
    for (const h of this.handles.values()) {
      try {
        h.close();
      } catch {
        /* already closed */
      }
    }
    this.handles.clear();
    const s = this.scratch;
    this.scratch = null;
    if (s) {
      try {
        s.h.close();
      } catch {
        /* already closed */
      }
      // Best effort: a leftover is replaced by the next update's `openScratch`.
      await removeIfPresent(s.dir, SCRATCH_FILE).catch(() => undefined);
    }
  }
}

/** Streams `size` bytes through the core's BLAKE3 (the Signer), 4 MiB at a time; `read` fills `buf` from `at`. */
export async function blake3Of(size: number, read: (buf: Uint8Array, at: number) => number | Promise<number>): Promise<string> {
  const signer = new Signer();
  try {
    signer.beginFile("f", false, size);
    const buf = new Uint8Array(Math.min(size, 4 << 20) || 1);
    for (let at = 0; at < size; ) {
      const n = await read(buf.subarray(0, Math.min(buf.length, size - at)), at);
      if (n <= 0) throw new Error(`short read at ${at}`);
      signer.update(buf.subarray(0, n));
      at += n;
    }
    return signer.finishFile();
  } finally {
    signer.free();
  }
}
