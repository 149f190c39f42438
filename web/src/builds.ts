// The builds a game keeps, and the decisions around them that are not the patching
// itself: which pair to download (a patch, or a full install when the server has no
// patch for this pair), whether storage has room for it, the switch that keeps the
// replaced build for rollback, the rollback, and the plan of an update before it runs.
//
// Kept builds: the current one, the one it replaced ("previous": for rollback() and
// for a game still running it, see service-worker.ts), and the staging directory of the
// update in progress (layout.ts). A build older than previous is deleted when a newer
// build is verified and switched in. An update never writes a directory the pointer names.

import { ManifestReader, blake3Hex } from "../../crates/edgepatch-wasm/pkg/web-apply/edgepatch_wasm.js";
import type { ManifestEntry } from "../../crates/edgepatch-wasm/pkg/web-apply/edgepatch_wasm.js";
import { HttpError, IntegrityError, QuotaError, StateError, StorageError, messageOf } from "./errors.js";
import { blake3Of } from "./build-files-sync.js";
import { BUILDS_DIR, type BuildRef, CurrentPointer, DirTree, OPFS_PARALLELISM, STAGING_DIR, buildDir, buildPath, dirAt, fileAt, forEachLimited, gameDir, isStagingName, readCurrent, readJson, removeIfPresent, writeAtomic } from "./layout.js";
import type { UpdatePlan } from "./messages.js";
import { EMPTY_BUILD, checkName } from "./protocol.js";
import { Verifier, VerifiedUpdate, fetchVerifiedUpdate } from "./trust.js";

/**
 * Statuses that mean "no patch for this pair here" rather than a failing server: 404/410
 * (a static site keeps patches from its last N builds only), 401/403 (a Worker serves
 * anonymous clients only released pairs: from "_" or a recent channel head).
 */
const NO_PATCH_STATUSES = new Set([401, 403, 404, 410]);

/** The update to download for `from` -> `to`: the patch, or the install patch `_` -> `to` when the server has none for the pair. */
export async function fetchUpdateOrInstall(verifier: Verifier | null, baseUrl: string, game: string, from: string, to: string, signal: AbortSignal): Promise<{ verified: VerifiedUpdate; patchFrom: string }> {
  try {
    return { verified: await fetchVerifiedUpdate(verifier, baseUrl, game, from, to, signal), patchFrom: from };
  } catch (e) {
    if (from === EMPTY_BUILD || !(e instanceof HttpError && e.status !== undefined && NO_PATCH_STATUSES.has(e.status))) throw e;
    // The new build is written from nothing either way (OPFS builds are whole copies), so a
    // full install costs the same writes as a patch and only more download.
    return { verified: await fetchVerifiedUpdate(verifier, baseUrl, game, EMPTY_BUILD, to, signal), patchFrom: EMPTY_BUILD };
  }
}

function fileBytes(entries: ManifestEntry[]): number {
  return entries.reduce((a, e) => a + (e.kind === "file" ? e.size : 0), 0);
}

/** Free bytes as the browser reports them (quota - usage), or null where `estimate()` is missing or fails. */
export async function availableBytes(): Promise<number | null> {
  try {
    const est = await navigator.storage?.estimate?.();
    if (!est || typeof est.quota !== "number" || typeof est.usage !== "number") return null;
    return Math.max(0, est.quota - est.usage);
  } catch {
    return null;
  }
}

/**
 * Refuses (QuotaError) before anything is written when the browser reports less free space
 * than the update needs. Browsers report a quota, not the disk: a write can still fail,
 * which is a resumable StorageError that leaves the current build as it was.
 */
export async function checkSpace(needed: number, what: string): Promise<void> {
  const available = await availableBytes();
  if (available !== null && needed > available) {
    throw new QuotaError(`${what} needs ${needed} bytes of storage, the browser reports ${available} free`, { needed, available });
  }
}

/** Bytes an update writes: every file of the new build, and its manifest. */
export function bytesToWrite(verified: VerifiedUpdate): number {
  return fileBytes(verified.entries) + verified.manifestBytes.length;
}

/** The directories the pointer names (current and previous), as paths below the game's directory. */
export function referencedDirs(pointer: CurrentPointer | null): Set<string> {
  const keep = new Set<string>();
  if (pointer) keep.add(buildPath(pointer));
  if (pointer?.previous) keep.add(buildPath(pointer.previous));
  return keep;
}

async function names(dir: FileSystemDirectoryHandle): Promise<string[]> {
  const out: string[] = [];
  for await (const name of dir.keys()) out.push(name);
  return out;
}

/**
 * Deletes every build and staging directory the pointer does not name, but the staging
 * directory `keepStaging` (the update being resumed).
 */
export async function pruneBuilds(game: FileSystemDirectoryHandle, pointer: CurrentPointer | null, keepStaging: string | null): Promise<void> {
  const keep = referencedDirs(pointer);
  if (keepStaging) keep.add(`${STAGING_DIR}/${keepStaging}`);
  for (const top of [BUILDS_DIR, STAGING_DIR]) {
    const d = await dirAt(game, top, true);
    for (const name of await names(d)) if (!keep.has(`${top}/${name}`)) await removeIfPresent(d, name);
  }
}

type Movable = { move?: (parent: FileSystemDirectoryHandle, name: string) => Promise<void> };

/**
 * Renames the verified staging directory `staged` to builds/<to>, which no pointer names and
 * which is removed first if a leftover holds the name: one directory move (Firefox, WebKit),
 * else file by file (Chromium, which moves only files). False where the engine moves neither;
 * a failure midway is a StorageError (the next update prunes what no pointer names).
 */
async function renameToBuild(game: FileSystemDirectoryHandle, staged: FileSystemDirectoryHandle, stagedName: string, to: string, entries: ManifestEntry[]): Promise<boolean> {
  const builds = await dirAt(game, BUILDS_DIR, true);
  await removeIfPresent(builds, to);
  if (typeof (staged as unknown as Movable).move === "function") {
    try {
      await (staged as unknown as Movable).move!(builds, to);
      return true;
    } catch {
      // A directory it cannot move (an engine that moves files only): file by file below.
      await removeIfPresent(builds, to);
    }
  }
  if (typeof (FileSystemFileHandle.prototype as unknown as Movable).move !== "function") return false;
  try {
    const target = await builds.getDirectoryHandle(to, { create: true });
    const from = new DirTree(await staged.getDirectoryHandle("files"), false);
    const files = new DirTree(await target.getDirectoryHandle("files", { create: true }), true);
    for (const e of entries) if (e.kind === "directory") await files.dir(e.path);
    await forEachLimited(entries.filter((e) => e.kind === "file"), OPFS_PARALLELISM, async (e) => {
      const i = e.path.lastIndexOf("/");
      const parent = await files.dir(i < 0 ? "" : e.path.slice(0, i));
      await ((await from.file(e.path)) as unknown as Movable).move!(parent, e.path.slice(i + 1));
    });
    await ((await staged.getFileHandle("manifest")) as unknown as Movable).move!(target, "manifest");
  } catch (e) {
    throw new StorageError(`renaming the verified build ${to} (${STAGING_DIR}/${stagedName}) failed: ${messageOf(e)}`);
  }
  await removeIfPresent(await dirAt(game, STAGING_DIR, true), stagedName);
  return true;
}

/**
 * The switch, once every byte of the staged build `to` is verified: it gets its name (renamed
 * to builds/<to> when the pointer does not name that directory, else the pointer names the
 * staging directory), then one atomic replacement of the pointer names `to` current and the
 * build it replaces previous; then the directories it no longer names are deleted.
 */
export async function switchTo(game: FileSystemDirectoryHandle, current: CurrentPointer | null, to: string, manifestBlake3: string, stagedName: string, entries: ManifestEntry[]): Promise<CurrentPointer> {
  const staged = await dirAt(game, `${STAGING_DIR}/${stagedName}`, false);
  let dir = `${STAGING_DIR}/${stagedName}`;
  // builds/<to> may still be the previous build of the same name (a channel that went back):
  // it is served until the pointer stops naming it, so the new build keeps its staging directory.
  if (!referencedDirs(current).has(`${BUILDS_DIR}/${to}`) && (await renameToBuild(game, staged, stagedName, to, entries))) dir = `${BUILDS_DIR}/${to}`;
  const previous = current ? refOf(current) : null;
  const pointer: CurrentPointer = { build: to, manifestBlake3, dir, previous };
  await writeAtomic(game, "current", JSON.stringify(pointer));
  await pruneBuilds(game, pointer, null);
  return pointer;
}

function refOf(r: BuildRef): BuildRef {
  return { build: r.build, manifestBlake3: r.manifestBlake3, dir: buildPath(r) };
}

/**
 * An update to the previous build by the very manifest it was installed with needs no
 * download: when every stored file still has the size and BLAKE3 the manifest lists, it
 * is switched back in (as rollback() does). Null when anything differs (then the update
 * downloads the build into a staging directory as usual).
 */
export async function reusePrevious(game: FileSystemDirectoryHandle, current: CurrentPointer, to: string, manifestBlake3: string, entries: ManifestEntry[]): Promise<CurrentPointer | null> {
  const prev = current.previous;
  if (!prev || prev.build !== to || prev.manifestBlake3 !== manifestBlake3) return null;
  try {
    const d = await buildDir(game, prev);
    if (blake3Hex(new Uint8Array(await (await (await d.getFileHandle("manifest")).getFile()).arrayBuffer())) !== manifestBlake3) return null;
    const files = await d.getDirectoryHandle("files");
    for (const e of entries) {
      if (e.kind !== "file") continue;
      const f = await (await fileAt(files, e.path, false)).getFile();
      if (f.size !== e.size) return null;
      const got = await blake3Of(e.size, async (buf, at) => {
        const part = new Uint8Array(await f.slice(at, at + buf.length).arrayBuffer());
        buf.set(part);
        return part.length;
      });
      if (got !== e.blake3) return null;
    }
  } catch {
    return null;
  }
  const pointer: CurrentPointer = { ...refOf(prev), previous: refOf(current) };
  await writeAtomic(game, "current", JSON.stringify(pointer));
  return pointer;
}

/** What `rollback()` checks of the previous build: its stored manifest is the one recorded, every file is there at its size. */
async function checkStoredBuild(game: FileSystemDirectoryHandle, ref: BuildRef): Promise<void> {
  const { build, manifestBlake3 } = ref;
  let bytes: Uint8Array;
  let filesDir: FileSystemDirectoryHandle;
  try {
    const d = await buildDir(game, ref);
    bytes = new Uint8Array(await (await (await d.getFileHandle("manifest")).getFile()).arrayBuffer());
    filesDir = await dirAt(d, "files", false);
  } catch (e) {
    throw new StorageError(`the previous build ${build} is not stored any more: ${messageOf(e)}`);
  }
  if (blake3Hex(bytes) !== manifestBlake3) throw new IntegrityError(`the stored manifest of the previous build ${build} is not the one it was installed with`);
  const m = new ManifestReader(bytes);
  let entries: ManifestEntry[];
  try {
    entries = m.entries();
  } finally {
    m.free();
  }
  for (const e of entries) {
    if (e.kind !== "file") continue;
    let size: number;
    try {
      size = (await (await fileAt(filesDir, e.path, false)).getFile()).size;
    } catch (err) {
      throw new StorageError(`the previous build ${build} lost ${e.path}: ${messageOf(err)}`, { path: e.path });
    }
    if (size !== e.size) throw new IntegrityError(`the previous build ${build}: ${e.path} is ${size} bytes, its manifest says ${e.size}`, { path: e.path });
  }
}

/**
 * Makes the previous build current again (and the current one previous, so the step can be
 * undone). An update in progress is discarded: it started from the build being replaced.
 * Channel records are left alone: the next `updateToLatest` updates again.
 */
export async function rollbackGame(gameName: string, updateRecordName: string): Promise<{ from: string; to: string }> {
  checkName("game", gameName);
  const g = await gameDir(gameName, false);
  const cur = g && (await readCurrent(g));
  if (!g || !cur) throw new StateError(`${gameName}: nothing is installed`);
  if (!cur.previous) throw new StateError(`${gameName}: there is no previous build to roll back to (current is ${cur.build})`);
  const prev = cur.previous;
  await checkStoredBuild(g, prev);
  const pending = await readJson<{ staging?: unknown }>(g, updateRecordName);
  const pointer: CurrentPointer = { ...refOf(prev), previous: refOf(cur) };
  await writeAtomic(g, "current", JSON.stringify(pointer));
  if (pending) {
    await removeIfPresent(g, updateRecordName);
    if (isStagingName(pending.staging) && !referencedDirs(pointer).has(`${STAGING_DIR}/${pending.staging}`)) await removeIfPresent(await dirAt(g, STAGING_DIR, true), pending.staging);
  }
  return { from: cur.build, to: prev.build };
}

/** What `update(from, to)` would cost, from the signed documents, before anything is written. */
export async function planUpdate(verifier: Verifier | null, baseUrl: string, game: string, from: string, to: string, signal: AbortSignal): Promise<UpdatePlan> {
  const { verified, patchFrom } = await fetchUpdateOrInstall(verifier, baseUrl, game, from, to, signal);
  const write = bytesToWrite(verified);
  const available = await availableBytes();
  return {
    game,
    from,
    to,
    fullInstall: patchFrom === EMPTY_BUILD && from !== EMPTY_BUILD,
    patchSize: verified.patchSize,
    newBytesTotal: fileBytes(verified.entries),
    bytesToWrite: write,
    spaceNeeded: write,
    available,
    fits: available === null ? null : write <= available,
    keyId: verified.keyId,
  };
}
