// How the worker reads the old build and writes the new one in OPFS. Two ways, one interface:
//
//   access-handles        synchronous access handles (Chromium, Firefox, Safari): the applier's
//                         callbacks read and write files directly (build-files-sync.ts)
//   writable-streams      no synchronous access handles (WebKitGTK has no backend for them):
//                         old files are read from File snapshots with FileReaderSync, writes are
//                         queued during a push and written through writable streams after it,
//                         unchanged files are copied by the sink itself (build-files-async.ts)
//
// `opfsAccess: "auto"` (the default) probes once per worker which one the engine offers.
// Small files (pointers, resume records) are written with createWritable where the engine
// has it, else through a synchronous access handle with a journal (layout.ts, writeAtomic).

import type { BuildSink, ListedEntry, ManifestEntry, OldBuildSource } from "../../crates/edgepatch-wasm/pkg/web-apply/edgepatch_wasm.js";
import { StorageError } from "./errors.js";
import { DirTree, OPFS_PARALLELISM, ROOT_DIR, forEachLimited, opfsRoot, removeIfPresent, setSmallFileWrites } from "./layout.js";
import type { OpfsAccess } from "./messages.js";

/** The old build, opened before the first push (OPFS opens are async, the applier's callbacks are not). */
export interface OldBuildFiles extends OldBuildSource {
  entries: ListedEntry[];
  /** Opens every regular file of `entries` below `dir`. */
  open(dir: FileSystemDirectoryHandle, entries: ManifestEntry[]): Promise<void>;
  close(): void;
}

/** The new build: a BuildSink for the applier, plus what the update loop does between pushes. */
export interface NewBuildFiles extends BuildSink {
  /** The first error a callback or a queued write hit (storage, not the patch). */
  failure: unknown;
  /** Files finished (content checked by the applier) in this session. */
  readonly finishedNow: Set<string>;
  filesDone: number;
  /** Bytes of files written to storage in this session (copies included), as they are written. */
  readonly bytesWritten: number;
  /** Called as bytes are written, with `bytesWritten` (inside the applier's callbacks where writes are synchronous). */
  onWrite: ((bytesWritten: number) => void) | null;
  /** The file the applier is writing, or null between files: what an error while writing is about. */
  readonly currentPath: string | null;
  /** Largest piece of patch to push at once: bounds what a push can queue (async writes). */
  readonly pushBytes: number;
  /**
   * Creates the build's directories and opens its files, before the first push. `resuming`:
   * an interrupted apply continues, so the files written before it are read back.
   */
  open(filesDir: FileSystemDirectoryHandle, entries: ManifestEntry[], resuming: boolean): Promise<void>;
  /**
   * Where writes are synchronous: opens the applier's scratch space (`BuildSink.writeScratch`)
   * as a file in `buildDir`, beside the build's files, before the first push; `close` removes it.
   * Without it the applier holds the split old modules in its memory.
   */
  openScratch?(buildDir: FileSystemDirectoryHandle): Promise<void>;
  /** Whether `openScratch` opened a scratch space (the applier then writes there). */
  readonly hasScratch?: boolean;
  /**
   * After every push: writes what the push queued (a no-op where writes are synchronous).
   * `behind`: resolves once what earlier pushes queued is written, while this push's writes
   * go on as the applier decodes the next piece (one push of writes in flight at most).
   */
  settle(behind?: boolean): Promise<void>;
  /**
   * Whether making everything durable now is worth a resume point (after `settle`): always
   * with access handles; with writable streams not when it would reopen a large file whose
   * stream was reopened recently (each reopen may copy the file: see build-files-async.ts).
   */
  worthDurable(): boolean;
  /** Everything written so far durable: before a resume point that relies on it is persisted. */
  durable(): Promise<void>;
  /** A file's size as stored (after `durable`). */
  size(path: string): Promise<number>;
  /** A file's BLAKE3 (hex) as stored, read back (after `durable`). */
  blake3(path: string, size: number): Promise<string>;
  /** Releases every handle; anything not made durable is dropped. */
  close(): Promise<void>;
}

/**
 * What both ways of writing share: the build's directories are created and its files opened
 * (`openFile`, the way's own) before the first push, and the sink names anything the manifest
 * does not list (the bound applier refuses it too) and remembers the first error a callback hit.
 */
export abstract class NewBuildEntries<Handle> {
  readonly handles = new Map<string, Handle>();
  readonly dirs = new Set<string>();
  readonly symlinks = new Map<string, string>();
  readonly finishedNow = new Set<string>();
  failure: unknown = null;
  filesDone = 0;
  bytesWritten = 0;
  onWrite: ((bytesWritten: number) => void) | null = null;

  /** Counts `n` bytes written to storage and tells `onWrite`. */
  protected wrote(n: number): void {
    this.bytesWritten += n;
    this.onWrite?.(this.bytesWritten);
  }

  protected abstract openFile(fh: FileSystemFileHandle, path: string, resuming: boolean): Promise<Handle>;

  async open(filesDir: FileSystemDirectoryHandle, entries: ManifestEntry[], resuming: boolean): Promise<void> {
    const tree = new DirTree(filesDir, true);
    const files: ManifestEntry[] = [];
    for (const e of entries) {
      if (e.kind === "directory") {
        await tree.dir(e.path);
        this.dirs.add(e.path);
      } else if (e.kind === "symlink") {
        this.symlinks.set(e.path, e.symlinkTarget ?? "");
      } else {
        files.push(e);
      }
    }
    const opened: Handle[] = new Array(files.length);
    await forEachLimited(files, OPFS_PARALLELISM, async (e, i) => {
      opened[i] = await this.openFile(await tree.file(e.path), e.path, resuming);
    }).catch(async (e) => {
      // Handles that did open are released before the failure is reported.
      await this.release(opened.filter((h) => h !== undefined));
      throw e;
    });
    // In the manifest's order, as the applier meets them.
    files.forEach((e, i) => this.handles.set(e.path, opened[i]!));
  }
  /** Releases handles `open` opened before one of its opens failed. */
  protected async release(_handles: Handle[]): Promise<void> {}
  protected guard<T>(f: () => T): T {
    try {
      return f();
    } catch (e) {
      this.failure ??= e;
      throw e;
    }
  }
  protected handle(path: string): Handle {
    const h = this.handles.get(path);
    if (h === undefined) throw new Error(`the patch writes ${path}, which the manifest does not list as a file`);
    return h;
  }
  createDirectory(path: string): void {
    if (!this.dirs.has(path)) throw new Error(`the patch creates directory ${path}, which the manifest does not list`);
  }
  createSymlink(path: string, target: string): void {
    if (this.symlinks.get(path) !== target) throw new Error(`the patch makes symlink ${path} -> ${target}, which the manifest does not list`);
  }
}

export type AccessMode = Exclude<OpfsAccess, "auto">;

/** FileSystemFileHandle.createSyncAccessHandle (dedicated workers; not in TypeScript's DOM lib). */
function syncHandleMethod(): ((this: FileSystemFileHandle, o?: { mode: string }) => Promise<{ close(): void }>) | undefined {
  const proto = (globalThis as { FileSystemFileHandle?: { prototype: object } }).FileSystemFileHandle?.prototype as Record<string, unknown> | undefined;
  const f = proto?.["createSyncAccessHandle"];
  return typeof f === "function" ? (f as ReturnType<typeof syncHandleMethod>) : undefined;
}

export function hasWritableStreams(): boolean {
  const proto = (globalThis as { FileSystemFileHandle?: { prototype: object } }).FileSystemFileHandle?.prototype as Record<string, unknown> | undefined;
  return typeof proto?.["createWritable"] === "function";
}

/**
 * Whether synchronous access handles work here. The method's presence is not enough:
 * WebKitGTK has it and throws NotSupportedError (and then keeps the file locked), so the
 * probe opens one on a scratch file of its own, never on a build's file.
 */
async function syncHandlesWork(): Promise<boolean> {
  const create = syncHandleMethod();
  if (!create) return false;
  const top = await (await opfsRoot()).getDirectoryHandle(ROOT_DIR, { create: true });
  await removeIfPresent(top, ".probe").catch(() => undefined); // a locked leftover of an earlier probe
  let dir: FileSystemDirectoryHandle;
  try {
    dir = await top.getDirectoryHandle(".probe", { create: true });
  } catch {
    return false;
  }
  const name = `probe-${Date.now()}-${Math.floor(Math.random() * 1e9)}`;
  try {
    const h = await create.call(await dir.getFileHandle(name, { create: true }));
    h.close();
    return true;
  } catch {
    return false;
  } finally {
    await removeIfPresent(top, ".probe").catch(() => undefined);
  }
}

let probed: Promise<AccessMode> | null = null;

/**
 * The way this worker writes builds: `wanted` unless "auto", else what the engine offers
 * (probed once). Also sets how small files are written (journaled where there are no
 * writable streams).
 */
export async function accessMode(wanted: OpfsAccess = "auto"): Promise<AccessMode> {
  const mode = wanted === "auto" ? await (probed ??= probeMode()) : wanted;
  setSmallFileWrites(mode === "access-handles-only" ? "journal" : "writable");
  return mode;
}

async function probeMode(): Promise<AccessMode> {
  const sync = await syncHandlesWork();
  const writable = hasWritableStreams();
  if (sync) return writable ? "access-handles" : "access-handles-only";
  if (writable) return "writable-streams";
  throw new StorageError("this browser can write origin private files neither through synchronous access handles (createSyncAccessHandle) nor through writable streams (createWritable)");
}
