// Where builds live in the origin private file system (OPFS):
//
//   edgepatch/<game>/current                 {"build", "manifestBlake3", "dir", "previous"}: the current build
//                                            and the one it replaced (kept for rollback and for a game still
//                                            running it), each with the directory that holds it; replaced
//                                            last, atomically. Only the directories it names are ever served.
//   edgepatch/<game>/update.json             resume record of the update in progress, naming its staging
//                                            directory (absent when none)
//   edgepatch/<game>/staging/<build>-<id>/   what one update attempt writes (manifest, files/, scratch),
//                                            never served; a fresh <id> per attempt, kept for resume
//   edgepatch/<game>/builds/<build>/manifest the patch manifest that produced the build: every entry's
//                                            kind, size, BLAKE3, executable bit and symlink target
//   edgepatch/<game>/builds/<build>/files/   the build's regular files and directories
//
// A build gets its name only once every byte is verified: its staging directory is renamed to
// builds/<build> while no pointer names that (one directory move in Firefox and WebKit, file by
// file in Chromium), or, where the engine cannot move or the name is still the previous build's,
// `current` names the staging directory itself ("dir"). A "dir" absent from an older pointer is
// builds/<build>.
// Directories `current` does not name (and not the resume record's) are leftovers, pruned.
//
// OPFS has no symlinks and no permission bits: both live only in the manifest.

import { StorageError, messageOf } from "./errors.js";

export const ROOT_DIR = "edgepatch";

export const BUILDS_DIR = "builds";
export const STAGING_DIR = "staging";

/** A stored, verified build and the directory (below the game's) that holds it. */
export interface BuildRef {
  build: string;
  manifestBlake3: string;
  /** "builds/<build>" or "staging/<name>"; absent: builds/<build>. */
  dir?: string;
}

export interface CurrentPointer extends BuildRef {
  /** The build this one replaced (still stored), or null. */
  previous?: BuildRef | null;
}

/** A name for one directory entry: no separators, not "." or "..". */
function plainName(s: string): boolean {
  return s.length > 0 && s.length <= 255 && s !== "." && s !== ".." && !/[\/\\\0]/.test(s);
}

/** The directory holding `ref`, as a path below the game's directory. */
export function buildPath(ref: BuildRef): string {
  const dir = ref.dir ?? `${BUILDS_DIR}/${ref.build}`;
  const i = dir.indexOf("/");
  if (i < 0 || ![BUILDS_DIR, STAGING_DIR].includes(dir.slice(0, i)) || !plainName(dir.slice(i + 1))) {
    throw new StorageError(`the pointer names ${JSON.stringify(dir)} as the directory of build ${ref.build}, which is not a build directory`);
  }
  return dir;
}

/** A fresh staging directory name for one update attempt towards `to`. */
export function newStagingName(to: string): string {
  const id = Array.from(crypto.getRandomValues(new Uint8Array(8)), (b) => b.toString(16).padStart(2, "0")).join("");
  return `${to}-${id}`;
}

export function isStagingName(s: unknown): s is string {
  return typeof s === "string" && plainName(s);
}

/** The directory of a stored build (the one `ref` names). NotFoundError when it is gone. */
export async function buildDir(game: FileSystemDirectoryHandle, ref: BuildRef): Promise<FileSystemDirectoryHandle> {
  return dirAt(game, buildPath(ref), false);
}

export async function opfsRoot(): Promise<FileSystemDirectoryHandle> {
  if (!navigator.storage?.getDirectory) throw new StorageError("this browser has no origin private file system (navigator.storage.getDirectory)");
  try {
    return await navigator.storage.getDirectory();
  } catch (e) {
    throw new StorageError(`opening the origin private file system failed: ${messageOf(e)}`);
  }
}

export async function gameDir(game: string, create: boolean): Promise<FileSystemDirectoryHandle | null> {
  const root = await opfsRoot();
  try {
    const top = await root.getDirectoryHandle(ROOT_DIR, { create });
    return await top.getDirectoryHandle(game, { create });
  } catch (e) {
    if (!create && (e as DOMException).name === "NotFoundError") return null;
    throw new StorageError(`opening ${ROOT_DIR}/${game} failed: ${messageOf(e)}`);
  }
}

/** The directory at a `/`-separated path below `dir` (created when asked). */
export async function dirAt(dir: FileSystemDirectoryHandle, path: string, create: boolean): Promise<FileSystemDirectoryHandle> {
  let d = dir;
  for (const part of path.split("/")) if (part) d = await d.getDirectoryHandle(part, { create });
  return d;
}

/** The file at a `/`-separated path below `dir`; with `create`, its parents are created too. */
export async function fileAt(dir: FileSystemDirectoryHandle, path: string, create: boolean): Promise<FileSystemFileHandle> {
  const i = path.lastIndexOf("/");
  const parent = i < 0 ? dir : await dirAt(dir, path.slice(0, i), create);
  return parent.getFileHandle(path.slice(i + 1), { create });
}

/**
 * Directory handles below one root, each looked up (or created) once: opening every file of a
 * build walks the same few directories thousands of times otherwise, one OPFS round trip per
 * level and file.
 */
export class DirTree {
  private readonly dirs = new Map<string, Promise<FileSystemDirectoryHandle>>();
  constructor(private readonly root: FileSystemDirectoryHandle, private readonly create: boolean) {}

  /** The directory at a `/`-separated path below the root. */
  dir(path: string): Promise<FileSystemDirectoryHandle> {
    if (path === "") return Promise.resolve(this.root);
    let d = this.dirs.get(path);
    if (!d) {
      const i = path.lastIndexOf("/");
      const parent = i < 0 ? Promise.resolve(this.root) : this.dir(path.slice(0, i));
      d = parent.then((p) => p.getDirectoryHandle(path.slice(i + 1), { create: this.create }));
      // A failed lookup is not remembered: a later call tries again and sees its own error.
      d.catch(() => this.dirs.delete(path));
      this.dirs.set(path, d);
    }
    return d;
  }

  /** The file at a `/`-separated path below the root (created, with its parents, when the tree creates). */
  async file(path: string): Promise<FileSystemFileHandle> {
    const i = path.lastIndexOf("/");
    return (await this.dir(i < 0 ? "" : path.slice(0, i))).getFileHandle(path.slice(i + 1), { create: this.create });
  }
}

/**
 * OPFS operations in flight at once when a build's files are opened, moved or checked: each is
 * a round trip to the browser's storage process, so a build of thousands of small files costs
 * their latency one after another unless several are in flight.
 */
export const OPFS_PARALLELISM = 16;

/** `f` over every item, at most `limit` at once; rejects with the first failure once all have settled or stopped. */
export async function forEachLimited<T>(items: readonly T[], limit: number, f: (item: T, index: number) => Promise<void>): Promise<void> {
  let next = 0;
  let failure: { e: unknown } | null = null;
  const run = async () => {
    while (failure === null && next < items.length) {
      const i = next++;
      try {
        await f(items[i]!, i);
      } catch (e) {
        failure ??= { e };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, run));
  if (failure) throw (failure as { e: unknown }).e;
}

export async function readBytes(dir: FileSystemDirectoryHandle, name: string): Promise<Uint8Array | null> {
  try {
    const f = await (await dir.getFileHandle(name)).getFile();
    return new Uint8Array(await f.arrayBuffer());
  } catch (e) {
    if ((e as DOMException).name === "NotFoundError") return null;
    throw new StorageError(`reading ${name} failed: ${messageOf(e)}`);
  }
}

function parseJson<T>(bytes: Uint8Array | null): T | null {
  if (!bytes) return null;
  try {
    return JSON.parse(new TextDecoder().decode(bytes)) as T;
  } catch {
    return null;
  }
}

/**
 * A JSON file written by `writeAtomic`. A torn or foreign file counts as absent, unless
 * its journal copy is whole: a journaled write that was cut short while rewriting the file
 * (the journal is always complete before the file is touched).
 */
export async function readJson<T>(dir: FileSystemDirectoryHandle, name: string): Promise<T | null> {
  const bytes = await readBytes(dir, name);
  if (!bytes) return null;
  return parseJson<T>(bytes) ?? parseJson<T>(await readBytes(dir, name + JOURNAL));
}

/** Suffix of the journal copy a journaled write makes first. */
export const JOURNAL = ".journal";

/** How `writeAtomic` writes: "auto" follows the engine (writable streams where it has them). */
let smallFileWrites: "auto" | "writable" | "journal" = "auto";
export function setSmallFileWrites(how: "auto" | "writable" | "journal"): void {
  smallFileWrites = how;
}

/**
 * Replaces the file `name` in `dir` with `data`, all or nothing. A writable stream writes a
 * swap file that replaces the original only on close(). Without writable streams (Safari
 * before 26) the file is written in place through a synchronous access handle (dedicated
 * workers only), after a whole journal copy that `readJson` falls back to if the write is
 * cut short, so a reader sees the old content or the new, never a torn one.
 */
export async function writeAtomic(dir: FileSystemDirectoryHandle, name: string, data: Uint8Array | string): Promise<void> {
  const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
  const journaled = smallFileWrites === "journal" || (smallFileWrites === "auto" && typeof (FileSystemFileHandle.prototype as { createWritable?: unknown }).createWritable !== "function");
  try {
    if (journaled) {
      await writeInPlace(dir, name + JOURNAL, bytes);
      await writeInPlace(dir, name, bytes);
      await dir.removeEntry(name + JOURNAL);
      return;
    }
    const h = await dir.getFileHandle(name, { create: true });
    const w = await h.createWritable({ keepExistingData: false });
    await w.write(new Blob([bytes as BlobPart]));
    await w.close();
  } catch (e) {
    throw new StorageError(`writing ${name} failed: ${messageOf(e)}`, { resumable: true });
  }
}

/** Writes and flushes `bytes` as the whole of `name` through a synchronous access handle. */
async function writeInPlace(dir: FileSystemDirectoryHandle, name: string, bytes: Uint8Array): Promise<void> {
  const fh = await dir.getFileHandle(name, { create: true });
  const open = (fh as unknown as { createSyncAccessHandle?: () => Promise<{ truncate(n: number): void; write(b: Uint8Array, o: { at: number }): number; flush(): void; close(): void }> }).createSyncAccessHandle;
  if (typeof open !== "function") throw new Error("this browser has neither writable streams nor synchronous access handles here");
  const h = await open.call(fh);
  try {
    h.truncate(0);
    if (h.write(bytes, { at: 0 }) !== bytes.length) throw new Error("short write (storage full?)");
    h.flush();
  } finally {
    h.close();
  }
}

export async function removeIfPresent(dir: FileSystemDirectoryHandle, name: string): Promise<void> {
  try {
    await dir.removeEntry(name, { recursive: true });
  } catch (e) {
    if ((e as DOMException).name !== "NotFoundError") throw new StorageError(`removing ${name} failed: ${messageOf(e)}`);
  }
}

export async function readCurrent(game: FileSystemDirectoryHandle): Promise<CurrentPointer | null> {
  const c = await readJson<CurrentPointer>(game, "current");
  return c && typeof c.build === "string" ? c : null;
}
