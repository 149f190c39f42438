// The builds a game keeps, and the decisions around them that are not the patching
// itself: which pair to download (a patch, or a full install when the server has no
// patch for this pair), whether storage has room for it, the switch that keeps the
// replaced build for rollback, the rollback, and the plan of an update before it runs.
//
// Kept builds: the current one, the one it replaced ("previous": for rollback() and
// for a game still running it, see service-worker.ts), and the one being written.
// A build older than previous is deleted when a newer build is verified and switched in.

import { ManifestReader, blake3Hex } from "../../crates/edgepatch-wasm/pkg/web-apply/edgepatch_wasm.js";
import type { ManifestEntry } from "../../crates/edgepatch-wasm/pkg/web-apply/edgepatch_wasm.js";
import { HttpError, IntegrityError, QuotaError, StateError, StorageError, messageOf } from "./errors.js";
import { CurrentPointer, dirAt, fileAt, gameDir, readCurrent, readJson, removeIfPresent, writeAtomic } from "./layout.js";
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

/** Build directories an update may not delete: current, previous, and the one being resumed. */
export function keptBuilds(current: CurrentPointer | null, resuming: string | null): Set<string> {
  const keep = new Set<string>();
  if (current) keep.add(current.build);
  if (current?.previous) keep.add(current.previous.build);
  if (resuming) keep.add(resuming);
  return keep;
}

async function names(dir: FileSystemDirectoryHandle): Promise<string[]> {
  const out: string[] = [];
  for await (const name of dir.keys()) out.push(name);
  return out;
}

/** Deletes every build directory not in `keep`. */
export async function pruneBuilds(builds: FileSystemDirectoryHandle, keep: Set<string>): Promise<void> {
  for (const name of await names(builds)) if (!keep.has(name)) await removeIfPresent(builds, name);
}

/**
 * Before writing build `to`: a previous build of the same name is about to be overwritten,
 * so it stops being previous first (the pointer never names a build being rewritten).
 */
export async function releasePrevious(game: FileSystemDirectoryHandle, current: CurrentPointer | null, to: string): Promise<CurrentPointer | null> {
  if (!current?.previous || current.previous.build !== to) return current;
  const next: CurrentPointer = { ...current, previous: null };
  await writeAtomic(game, "current", JSON.stringify(next));
  return next;
}

/**
 * The switch: one atomic replacement of the pointer, naming `to` current and the build it
 * replaces previous; then builds older than previous are deleted.
 */
export async function switchTo(game: FileSystemDirectoryHandle, builds: FileSystemDirectoryHandle, current: CurrentPointer | null, to: string, manifestBlake3: string): Promise<CurrentPointer> {
  const previous = current && current.build !== to ? { build: current.build, manifestBlake3: current.manifestBlake3 } : null;
  const pointer: CurrentPointer = { build: to, manifestBlake3, previous };
  await writeAtomic(game, "current", JSON.stringify(pointer));
  await pruneBuilds(builds, keptBuilds(pointer, null));
  return pointer;
}

/** What `rollback()` checks of the previous build: its stored manifest is the one recorded, every file is there at its size. */
async function checkStoredBuild(game: FileSystemDirectoryHandle, build: string, manifestBlake3: string): Promise<void> {
  let bytes: Uint8Array;
  let filesDir: FileSystemDirectoryHandle;
  try {
    const d = await dirAt(game, `builds/${build}`, false);
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
      throw new StorageError(`the previous build ${build} lost ${e.path}: ${messageOf(err)}`);
    }
    if (size !== e.size) throw new IntegrityError(`the previous build ${build}: ${e.path} is ${size} bytes, its manifest says ${e.size}`);
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
  await checkStoredBuild(g, prev.build, prev.manifestBlake3);
  const pending = await readJson<{ to?: unknown }>(g, updateRecordName);
  const pointer: CurrentPointer = { build: prev.build, manifestBlake3: prev.manifestBlake3, previous: { build: cur.build, manifestBlake3: cur.manifestBlake3 } };
  await writeAtomic(g, "current", JSON.stringify(pointer));
  if (pending) {
    await removeIfPresent(g, updateRecordName);
    if (typeof pending.to === "string" && pending.to !== prev.build && pending.to !== cur.build) await removeIfPresent(await dirAt(g, "builds", true), pending.to);
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
