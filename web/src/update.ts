// The update engine, run inside the dedicated worker: fetch the descriptor and
// manifest, download the patch in ranges, apply it while it downloads into the
// attempt's own staging directory (layout.ts; build-files.ts: synchronous access
// handles, or writable streams where the engine lacks them), persist resume points,
// check every file, then name the build and switch the `current` pointer (builds.ts).

import { ManifestReader, PatchApplier } from "../../crates/edgepatch-wasm/pkg/web-apply/edgepatch_wasm.js";
import type { ManifestEntry, ResumePoint } from "../../crates/edgepatch-wasm/pkg/web-apply/edgepatch_wasm.js";
import { type NewBuildFiles, type OldBuildFiles, accessMode } from "./build-files.js";
import { AsyncNewBuild, AsyncOldBuild } from "./build-files-async.js";
import { SyncNewBuild, SyncOldBuild, blake3Of } from "./build-files-sync.js";
import {
  AbortedError,
  BusyError,
  EdgepatchError,
  IntegrityError,
  PatchError,
  StateError,
  StorageError,
  messageOf,
} from "./errors.js";
import { RangeDownload, planRanges } from "./fetcher.js";
import { type BuildRef, STAGING_DIR, buildDir, dirAt, fileAt, gameDir, isStagingName, newStagingName, readCurrent, readJson, removeIfPresent, writeAtomic } from "./layout.js";
import type { ChannelHead, PendingUpdate, UpdateProgress, UpdateRequest, UpdateResult, UpdateTimings } from "./messages.js";
import { EMPTY_BUILD, checkName } from "./protocol.js";
import { bytesToWrite, checkSpace, fetchUpdateOrInstall, pruneBuilds, referencedDirs, reusePrevious, switchTo } from "./builds.js";
import { Verifier, fetchVerifiedChannel, storeChannelHead } from "./trust.js";

/** update.json: what an interrupted update needs to continue. */
interface UpdateRecord {
  version: 2;
  from: string;
  to: string;
  /** The pair the patch is for: `from`, or "_" when the server had no patch for the pair (a full install). */
  patchFrom?: string;
  manifestBlake3: string;
  patchSize: number;
  /** With `patchHashState`: the patch's BLAKE3 so far, checked against the manifest at the end. */
  point: ResumePoint | null;
  /** The channel document this update follows: recorded as the newest seen once the update is switched in. */
  channel?: ChannelHead;
  baseUrl: string;
  /** The directory below staging/ this attempt writes (a record without one is not resumed). */
  staging?: string;
}

export const RECORD = "update.json";

/** Throws AbortedError once `signal` is aborted: checked after every step of an update. */
function checkAborted(signal: AbortSignal, resumable = false): void {
  if (signal.aborted) throw new AbortedError(undefined, { resumable });
}

function files(entries: ManifestEntry[]): ManifestEntry[] {
  return entries.filter((e) => e.kind === "file");
}

/** Reads a build's stored manifest (the one that produced it). */
export async function buildManifest(game: FileSystemDirectoryHandle, ref: BuildRef): Promise<ManifestReader> {
  const build = ref.build;
  let bytes: Uint8Array;
  try {
    const d = await buildDir(game, ref);
    bytes = new Uint8Array(await (await (await d.getFileHandle("manifest")).getFile()).arrayBuffer());
  } catch (e) {
    throw new StorageError(`build ${build} has no readable manifest: ${messageOf(e)}`);
  }
  try {
    return new ManifestReader(bytes);
  } catch (e) {
    throw new IntegrityError(`the stored manifest of build ${build} is damaged: ${messageOf(e)}`);
  }
}

export async function pendingUpdate(gameName: string): Promise<PendingUpdate | null> {
  const g = await gameDir(gameName, false);
  if (!g) return null;
  const r = await readJson<UpdateRecord>(g, RECORD);
  if (!r || r.version !== 2) return null;
  return { game: gameName, from: r.from, to: r.to, patchSize: r.patchSize, patchOffset: r.point?.patchOffset ?? 0, segmentsDone: r.point?.segmentsDone ?? 0 };
}

export async function withGameLock<T>(game: string, f: () => Promise<T>): Promise<T> {
  if (!navigator.locks) return f();
  return navigator.locks.request(`edgepatch:${game}`, { ifAvailable: true }, async (lock) => {
    if (!lock) throw new BusyError(`another update of ${game} is running (in this or another tab)`);
    return f();
  }) as Promise<T>;
}

/**
 * Runs one update under the game's lock. With `req.channel`, the channel document is
 * fetched and checked first and decides `to` (and `from`: the current build, or "_").
 */
export async function runUpdate(req: UpdateRequest, onProgress: (p: UpdateProgress) => void, signal: AbortSignal): Promise<UpdateResult> {
  checkName("game", req.game);
  const verifier = Verifier.fromOptions(req);
  if (req.channel !== undefined) checkName("channel", req.channel);
  else {
    checkName("from", req.from ?? "", true);
    checkName("to", req.to ?? "");
    if (req.from === req.to) throw new StateError(`from and to are both ${req.to}`);
  }
  checkAborted(signal);
  return withGameLock(req.game, async () => {
    checkAborted(signal);
    let { from, to } = req;
    let channel: ChannelHead | undefined;
    if (req.channel !== undefined) {
      channel = await fetchVerifiedChannel(verifier, req.baseUrl, req.game, req.channel, signal);
      checkAborted(signal);
      if (to !== undefined && to !== channel.build) throw new StateError(`channel ${req.game}/${req.channel} points at ${channel.build}, not ${to}`);
      to = channel.build;
      if (from === undefined) {
        const g = await gameDir(req.game, false);
        from = (g && (await readCurrent(g))?.build) ?? EMPTY_BUILD;
        checkAborted(signal);
      }
      checkName("from", from, true);
    }
    const job: UpdateJob = { baseUrl: req.baseUrl, game: req.game, from: from!, to: to!, tuning: req };
    try {
      return await update(job, verifier, channel, onProgress, signal);
    } catch (e) {
      if (!(e instanceof ResumeDiscarded)) throw e;
      // What the earlier attempt wrote did not check out with what this one brought (bytes
      // from another source, or damaged where they were kept): both are gone now, and the
      // update runs again from its first byte, once.
      return update(job, verifier, channel, onProgress, signal);
    }
  });
}

/**
 * A resumed update whose result failed its check while the installed build is intact: the
 * bytes an earlier attempt wrote (never checked whole: the patch is checked at its end) may
 * be what another server sent, so the record and staging directory are dropped and the
 * update starts over. Never seen outside this module.
 */
class ResumeDiscarded extends Error {}

interface UpdateJob {
  baseUrl: string;
  game: string;
  from: string;
  to: string;
  tuning: Pick<UpdateRequest, "parallelism" | "retries" | "retryDelayMs" | "minRangeBytes" | "opfsAccess">;
}

async function update(job: UpdateJob, verifier: Verifier | null, channel: ChannelHead | undefined, onProgress: (p: UpdateProgress) => void, signal: AbortSignal): Promise<UpdateResult> {
  const t0 = performance.now();
  const clock = new PhaseClock(t0);
  const { game, from, to, tuning: req } = job;
  const g = (await gameDir(game, true))!;
  const current = await readCurrent(g);
  checkAborted(signal);
  const base: Omit<UpdateResult, "alreadyCurrent"> = { game, from, to, resumed: false, resumedFrom: 0, downloadedBytes: 0, patchSize: 0, newBytesTotal: 0, files: 0, filesRehashed: 0, seconds: 0, savedPercent: 0, keyId: null, fullInstall: false, previous: current?.previous?.build ?? null, ...(channel ? { channel } : {}) };
  if (current?.build === to) {
    // The channel's build is current: it is switched in, so its sequence is now the newest.
    if (channel) await storeChannelHead(job.baseUrl, game, channel);
    return { ...base, alreadyCurrent: true };
  }
  if (from === to) throw new StateError(`from and to are both ${to}`);
  if (from !== EMPTY_BUILD && current?.build !== from) {
    throw new StateError(current ? `${game}: the current build is ${current.build}, not ${from}` : `${game}: nothing is installed, so there is no build ${from} to update`);
  }

  // Documents (steps 2-3 of "What a client checks"): the signed statement, then the manifest it names
  // (of the install patch "_" -> to when the server has no patch for the pair).
  const { verified, patchFrom } = await fetchUpdateOrInstall(verifier, job.baseUrl, game, from, to, signal);
  clock.end("documents");
  checkAborted(signal);
  const { descriptor: desc, manifestBytes, segments } = verified;
  const entries = verified.entries;
  const patchSize = verified.patchSize;
  const newFiles = files(entries);
  const newBytesTotal = newFiles.reduce((a, e) => a + e.size, 0);
  const savedPercent = newBytesTotal > 0 ? 100 * (1 - patchSize / newBytesTotal) : 0;

  // Resume record: continue only the very same update (same manifest bytes), and only from
  // a point that carries the patch's hash so far (the patch is checked whole at the end).
  let record = await readJson<UpdateRecord>(g, RECORD);
  if (!(record && record.version === 2 && record.from === from && (record.patchFrom ?? record.from) === patchFrom && record.to === to && record.manifestBlake3 === desc.manifestBlake3 && isStagingName(record.staging))) record = null;
  // A resume continues in the staging directory its record names, if it is still there
  // (and never one the pointer names: that is a verified build, not an update in progress).
  const staging = await dirAt(g, STAGING_DIR, true);
  let stagingDir: FileSystemDirectoryHandle | null = null;
  if (record && !referencedDirs(current).has(`${STAGING_DIR}/${record.staging}`)) stagingDir = await staging.getDirectoryHandle(record.staging!).catch(() => null);
  const point = stagingDir && record?.point && record.point.segmentsDone > 0 && typeof record.point.patchHashState === "string" && segments.length > 0 ? record.point : null;
  // A resumed update keeps the channel it was following (the page reloaded without one),
  // if it was checked against this same server.
  if (record?.baseUrl === job.baseUrl) channel ??= record.channel;
  checkAborted(signal, record !== null);
  // The previous build by the very manifest it was installed with: switched back in once its files check.
  if (!point && current && (await reusePrevious(g, current, to, desc.manifestBlake3, entries))) {
    if (channel) await storeChannelHead(job.baseUrl, game, channel);
    await removeIfPresent(g, RECORD);
    await pruneBuilds(g, await readCurrent(g), null);
    return { ...base, alreadyCurrent: false, keyId: verified.keyId, fullInstall: patchFrom !== from, previous: current.build, patchSize: 0, newBytesTotal, files: newFiles.length, seconds: (performance.now() - t0) / 1000, savedPercent: 100 };
  }
  // Each attempt writes a staging directory of its own; anything the pointer does not name,
  // but the staging directory being resumed, is leftover.
  const stagingName = point ? record!.staging! : newStagingName(to);
  await pruneBuilds(g, current, point ? stagingName : null);
  // Room for the new build before the first byte (QuotaError names the bytes).
  await checkSpace(bytesToWrite(verified) - (point?.newOffset ?? 0), `updating ${game} ${from} -> ${to}`);
  checkAborted(signal, point !== null);
  record = { version: 2, from, patchFrom, to, manifestBlake3: desc.manifestBlake3, patchSize, point, baseUrl: job.baseUrl, ...(channel ? { channel } : {}), staging: stagingName };
  await writeAtomic(g, RECORD, JSON.stringify(record));

  const stagedDir = await dirAt(staging, stagingName, true);
  await writeAtomic(stagedDir, "manifest", manifestBytes);
  const filesDir = await dirAt(stagedDir, "files", true);

  // Synchronous access handles where the engine has them, else writable streams (build-files.ts).
  const mode = await accessMode(req.opfsAccess);
  const old: OldBuildFiles = mode === "writable-streams" ? new AsyncOldBuild() : new SyncOldBuild();
  const sink: NewBuildFiles = old instanceof AsyncOldBuild ? new AsyncNewBuild(old) : new SyncNewBuild();
  let applier: PatchApplier | null = null;
  let downloaded = 0;
  const resumedFrom = point?.patchOffset ?? 0;
  let keepForResume = false;
  /** The old build's files are open: a patch or integrity failure from here on may be a wrong old build. */
  let applying = false;
  try {
    clock.end("prepare");
    // Old build: every regular file, read-only (none for an install).
    if (patchFrom !== EMPTY_BUILD) {
      const oldManifest = await buildManifest(g, current!);
      const oldEntries = oldManifest.entries();
      oldManifest.free();
      await old.open(await dirAt(await buildDir(g, current!), "files", false), oldEntries);
      applying = true;
    }
    clock.end("openOld");
    checkAborted(signal, true);
    // New build: directories created, every file opened, before any byte is applied.
    await sink.open(filesDir, entries, point !== null);
    await sink.openScratch?.(stagedDir);
    clock.end("openNew");
    checkAborted(signal, true);

    const filesBefore = point ? newFiles.filter((e) => e.source.type !== "delta" || e.source.newOffset + e.size <= point.newOffset).length : 0;
    const progress = new ProgressReporter(onProgress, { game, from, to, patchSize, resumedFrom, newBytesTotal, filesTotal: newFiles.length, segmentsTotal: segments.length, savedPercent });
    progress.segmentsDone = point?.segmentsDone ?? 0;
    // Bytes of the new build written before this session: what the resume point says is done
    // (the delta stream up to its offset), then exactly what the resumed applier counts.
    let writtenBefore = point ? newFiles.reduce((a, e) => a + (e.source.type !== "delta" ? e.size : Math.min(e.size, Math.max(0, point.newOffset - e.source.newOffset))), 0) : 0;
    const report = (force: boolean) => {
      progress.report(force, { downloadedBytes: downloaded, bytesWritten: writtenBefore + sink.bytesWritten, filesDone: Math.min(newFiles.length, filesBefore + sink.filesDone) });
    };
    // As bytes are written (inside a push where writes are synchronous): the reporter keeps
    // events to every 100 ms or 2 MiB written.
    sink.onWrite = () => report(false);
    report(true);

    const dl = { parallelism: req.parallelism ?? 3, retries: req.retries ?? 2, retryDelayMs: req.retryDelayMs ?? 300, signal, onBytes: (n: number) => { downloaded += n; } };
    const callApplier = async (f: () => void, behind = false) => {
      try {
        const callFrom = performance.now();
        f();
        clock.detail("applierCalls", callFrom);
        // What the call queued (writable streams) is written before the next one, or (pushes)
        // while the next one decodes.
        const settleFrom = performance.now();
        await sink.settle(behind);
        clock.detail("queuedWrites", settleFrom);
      } catch (e) {
        if (e instanceof EdgepatchError) throw e;
        if (sink.failure) throw new StorageError(`writing build ${to} failed: ${messageOf(sink.failure)}`, { resumable: true });
        const msg = messageOf(e);
        // The binding's errors carry the core's error kind; "unvouched" is what the signed
        // manifest does not vouch for: forged, not damaged, data.
        if ((e as { kind?: unknown } | null)?.kind === "unvouched") throw new IntegrityError(`applying ${game} ${from} -> ${to}: ${msg}`, { url: desc.patchUrl });
        throw new PatchError(`applying ${game} ${from} -> ${to}: ${msg}`);
      }
    };
    if (point) {
      // The header and tree again (the applier needs them), then the rest from the resume point.
      const headerAndTree = await download(new RangeDownload(desc.patchUrl, patchSize, [{ start: 0, end: segments[0]!.patchOffset }], dl));
      await callApplier(() => { applier = PatchApplier.resume(old, sink, headerAndTree, point, manifestBytes); });
      writtenBefore = (applier as PatchApplier | null)?.progress().newBytesWritten ?? writtenBefore;
    } else {
      await callApplier(() => { applier = new PatchApplier(old, sink, manifestBytes); });
    }
    keepForResume = true;
    // Room for the scratch space too (wasm modules stored transformed: their normalized forms
    // and split old modules, docs/FORMAT.md §2.8), checked once the applier has read the
    // patch's header and tree and before it writes any of it: a resumed applier has them now,
    // a new one after the bytes before the first segment, which are pushed alone.
    const headerEnd = segments.length > 0 ? segments[0]!.patchOffset : 0;
    let scratchChecked = false;
    const checkScratch = async () => {
      const scratch = applier!.scratchBytes();
      if (scratchChecked || scratch === undefined) return;
      scratchChecked = true;
      if (scratch > 0 && sink.hasScratch) {
        await checkSpace(bytesToWrite(verified) - (point?.newOffset ?? 0) + scratch, `updating ${game} ${from} -> ${to} (with ${scratch} bytes of scratch space)`);
      }
    };
    await checkScratch();
    // progress.applied: the patch offset the next piece starts at.
    const push = async (piece: Uint8Array) => {
      await callApplier(() => applier!.push(piece), true);
      progress.applied += piece.length;
      await checkScratch();
    };
    const ranges = planRanges(resumedFrom, patchSize, segments.map((s) => s.patchOffset), req.minRangeBytes ?? 1 << 20);
    let nextResumePoint = 0;
    /** Makes the applier's latest resume point durable, when it is past the last one and `due`. */
    const resumePoint = async (due: boolean) => {
      const rp = applier!.resumePoint();
      if (!rp || rp.segmentsDone <= progress.segmentsDone || !sink.worthDurable() || !due) return;
      // The sink's bytes must be durable before the point that relies on them.
      const durableFrom = performance.now();
      await sink.durable();
      record.point = rp;
      await writeAtomic(g, RECORD, JSON.stringify(record));
      clock.detail("resumePoints", durableFrom);
      // Resume points cost at most a tenth of the time: a flush is a few milliseconds in one
      // engine and tens in another, so the spacing follows what the last one cost.
      nextResumePoint = performance.now() + RESUME_POINT_SPACING * (performance.now() - durableFrom);
      progress.segmentsDone = rp.segmentsDone;
      report(true);
    };
    const chunks = new RangeDownload(desc.patchUrl, patchSize, ranges, dl).chunks()[Symbol.asyncIterator]();
    for (;;) {
      const waitFrom = performance.now();
      const next = chunks.next();
      // While the patch does not arrive, a point the spacing held back is made durable: a
      // stalled or cut download loses nothing it had applied.
      if (!(await settlesWithin(next, RESUME_POINT_IDLE_MS))) await resumePoint(true);
      const { value: chunk, done } = await next;
      clock.detail("waitingForPatch", waitFrom);
      if (done) break;
      checkAborted(signal, true);
      // In pieces where writes are queued (sink.pushBytes), so one push queues little.
      for (let at = 0; at < chunk.length; at += sink.pushBytes) {
        if (at > 0) checkAborted(signal, true);
        const piece = sink.pushBytes >= chunk.length ? chunk : chunk.subarray(at, at + sink.pushBytes);
        const cut = headerEnd - progress.applied;
        if (!scratchChecked && cut > 0 && cut < piece.length) {
          await push(piece.subarray(0, cut));
          await push(piece.subarray(cut));
        } else {
          await push(piece);
        }
        await resumePoint(performance.now() >= nextResumePoint);
        report(false);
      }
    }
    await callApplier(() => { applier!.finish(); });
    keepForResume = false;
    clock.end("apply");

    // Every file verified: this session's by the applier as it wrote them, an
    // earlier session's (before a resume) re-hashed here.
    progress.phase = "verifying";
    report(true);
    await sink.durable();
    let rehashed = 0;
    for (const e of newFiles) {
      checkAborted(signal);
      const size = await sink.size(e.path);
      if (size !== e.size) throw new IntegrityError(`${e.path} is ${size} bytes, the manifest says ${e.size}`, { path: e.path });
      if (!sink.finishedNow.has(e.path)) {
        const got = await sink.blake3(e.path, e.size);
        rehashed++;
        if (got !== e.blake3) throw new IntegrityError(`${e.path} has BLAKE3 ${got}, the manifest says ${e.blake3}`, { path: e.path });
      }
    }
    await sink.close();
    old.close();
    applying = false;
    clock.end("verify");
    // The last point an abort stops the update: the switch is not interrupted.
    checkAborted(signal);

    // The switch: the build gets its name, then one atomic replacement of the pointer. The
    // resume record goes first: a staging directory cut short while it is renamed is never resumed.
    progress.phase = "switching";
    report(true);
    await removeIfPresent(g, RECORD);
    const pointer = await switchTo(g, current, to, desc.manifestBlake3, stagingName, entries);
    if (channel) await storeChannelHead(record.baseUrl, game, channel);
    await removeIfPresent(g, RECORD);
    clock.end("switch");
    progress.phase = "done";
    report(true);
    return {
      ...base,
      alreadyCurrent: false,
      keyId: verified.keyId,
      ...(channel ? { channel } : {}),
      fullInstall: patchFrom !== from,
      previous: pointer.previous?.build ?? null,
      resumed: point !== null,
      resumedFrom,
      downloadedBytes: downloaded,
      patchSize,
      newBytesTotal,
      files: newFiles.length,
      filesRehashed: rehashed,
      seconds: (performance.now() - t0) / 1000,
      savedPercent,
      timings: clock.timings,
    };
  } catch (e) {
    const writing = sink.currentPath;
    await sink.close().catch(() => undefined);
    old.close();
    (applier as PatchApplier | null)?.free();
    applier = null;
    let err = e instanceof EdgepatchError ? e
      : (e as { name?: string }).name === "AbortError" ? new AbortedError(undefined, { resumable: true })
      : new StorageError(`update ${game} ${from} -> ${to} failed: ${messageOf(e)}`, { resumable: true });
    const badData = err.code === "patch" || err.code === "integrity";
    const damaged = applying && badData ? await damagedFile(g, current!).catch(() => null) : null;
    if (applying && badData) err = nameTheFile(err, from, damaged, writing);
    const resumable = keepForResume && err.resumable;
    if (!resumable) {
      // Bad data or a refused patch: nothing of it is kept. The current build was never touched.
      if (!referencedDirs(await readCurrent(g)).has(`${STAGING_DIR}/${stagingName}`)) await removeIfPresent(staging, stagingName);
      await removeIfPresent(g, RECORD);
    }
    err.resumable = resumable;
    // A resumed attempt's bad data may be the earlier attempt's: once, from the start.
    if (point && badData && !resumable && !damaged) throw new ResumeDiscarded(err.message);
    throw err;
  }
}

/**
 * A patch or integrity failure while applying, with the file it is about (`path`, and in the
 * message): `damaged`, the first file of the installed build `from` that is not what its
 * stored manifest lists (size or BLAKE3), which the patch, made for that build, cannot fit;
 * else the new file being written (`writing`) when the message names it.
 */
function nameTheFile(err: EdgepatchError, from: string, damaged: { path: string; why: string } | null, writing: string | null): EdgepatchError {
  const extra = { ...(err.url !== undefined ? { url: err.url } : {}) };
  if (damaged) {
    const message = `the installed build ${from} is not the one the patch was made for: ${damaged.why} (${err.message})`;
    return err.code === "integrity" ? new IntegrityError(message, { ...extra, path: damaged.path }) : new PatchError(message, { path: damaged.path });
  }
  if (err.path === undefined && writing !== null && err.message.includes(writing)) {
    return err.code === "integrity" ? new IntegrityError(err.message, { ...extra, path: writing }) : new PatchError(err.message, { path: writing });
  }
  return err;
}

/** The first file of a stored build whose size or BLAKE3 is not its manifest's (or that is missing), or null. */
async function damagedFile(g: FileSystemDirectoryHandle, ref: BuildRef): Promise<{ path: string; why: string } | null> {
  const m = await buildManifest(g, ref);
  let entries: ManifestEntry[];
  try {
    entries = m.entries();
  } finally {
    m.free();
  }
  const dir = await dirAt(await buildDir(g, ref), "files", false);
  for (const e of files(entries)) {
    let f: File;
    try {
      f = await (await fileAt(dir, e.path, false)).getFile();
    } catch (err) {
      // Only a file that is not there; any other failure says nothing about the build.
      if ((err as { name?: string } | null)?.name === "NotFoundError") return { path: e.path, why: `${e.path} is missing` };
      throw err;
    }
    if (f.size !== e.size) return { path: e.path, why: `${e.path} is ${f.size} bytes, its manifest says ${e.size}` };
    const got = await blake3Of(e.size, async (buf, at) => {
      const part = new Uint8Array(await f.slice(at, at + buf.length).arrayBuffer());
      buf.set(part);
      return part.length;
    });
    if (got !== e.blake3) return { path: e.path, why: `${e.path} has BLAKE3 ${got}, its manifest says ${e.blake3}` };
  }
  return null;
}

/**
 * After a resume point that took `t`, the next one waits `RESUME_POINT_SPACING * t`: making
 * written bytes durable stays under a tenth of an update's time in every engine, and an
 * interruption loses at most that many times one flush's time of work.
 */
const RESUME_POINT_SPACING = 9;
/** Milliseconds without patch bytes after which a held-back resume point is made durable anyway. */
const RESUME_POINT_IDLE_MS = 100;

/** Whether `p` settles within `ms` milliseconds (its failure is left to whoever awaits it). */
async function settlesWithin(p: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<false>((resolve) => { timer = setTimeout(() => resolve(false), ms); });
  try {
    return await Promise.race([p.then(() => true, () => true), late]);
  } finally {
    clearTimeout(timer);
  }
}

/** Seconds spent in each phase of an update (UpdateResult.timings), as the phases end. */
class PhaseClock {
  readonly timings: UpdateTimings = { documents: 0, prepare: 0, openOld: 0, openNew: 0, apply: 0, verify: 0, switch: 0, waitingForPatch: 0, resumePoints: 0, applierCalls: 0, queuedWrites: 0 };
  constructor(private last: number) {}
  /** Adds the time since `from` to a part of a phase (counted in its phase too). */
  detail(part: "waitingForPatch" | "resumePoints" | "applierCalls" | "queuedWrites", from: number): void {
    this.timings[part] += (performance.now() - from) / 1000;
  }
  /** Adds the time since the previous phase ended to `phase`. */
  end(phase: keyof UpdateTimings): void {
    const now = performance.now();
    this.timings[phase] += (now - this.last) / 1000;
    this.last = now;
  }
}

/** Every byte of a download, in one array. */
async function download(d: RangeDownload): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  let total = 0;
  for await (const c of d.chunks()) {
    parts.push(c);
    total += c.length;
  }
  const out = new Uint8Array(total);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

type ProgressFixed = Pick<UpdateProgress, "game" | "from" | "to" | "patchSize" | "resumedFrom" | "newBytesTotal" | "filesTotal" | "segmentsTotal" | "savedPercent">;
type ProgressNow = Pick<UpdateProgress, "downloadedBytes" | "bytesWritten" | "filesDone">;

/** Unforced progress events come at least this far apart, unless STEP_BYTES were written since the last. */
const INTERVAL_MS = 100;
/** Bytes written that earn an event before INTERVAL_MS passed. */
const STEP_BYTES = 2 << 20;
/** Rates are measured over this window. */
const RATE_WINDOW_MS = 3000;

/**
 * Progress events: forced ones, else once 100 ms passed or 2 MiB were written since the last;
 * bytes written never go back and reach the total at "done"; rates over the last 3 seconds.
 */
class ProgressReporter {
  phase: UpdateProgress["phase"] = "downloading";
  /** Patch bytes applied, counting those applied before an interruption. */
  applied: number;
  segmentsDone = 0;
  /** [time, patch bytes downloaded, bytes written] of the events sent in the window. */
  private samples: [number, number, number][] = [];
  private lastSent = -Infinity;
  private lastWritten = 0;
  private written = 0;

  constructor(private readonly send: (p: UpdateProgress) => void, private readonly fixed: ProgressFixed) {
    this.applied = fixed.resumedFrom;
  }

  report(force: boolean, now: ProgressNow): void {
    const total = this.fixed.newBytesTotal;
    this.written = Math.min(total, Math.max(this.written, this.phase === "done" ? total : now.bytesWritten));
    const t = performance.now();
    if (!force && t - this.lastSent < INTERVAL_MS && this.written - this.lastWritten < STEP_BYTES) return;
    this.lastSent = t;
    this.lastWritten = this.written;
    this.samples.push([t, now.downloadedBytes, this.written]);
    while (this.samples.length > 2 && t - this.samples[0]![0] > RATE_WINDOW_MS) this.samples.shift();
    const [t1, d1, w1] = this.samples[0]!;
    const known = t - t1 >= 50;
    const rate = known ? ((now.downloadedBytes - d1) * 1000) / (t - t1) : 0;
    const writeRate = known ? ((this.written - w1) * 1000) / (t - t1) : 0;
    this.send({
      ...this.fixed,
      ...now,
      phase: this.phase,
      bytesWritten: this.written,
      bytesTotal: total,
      newBytesWritten: this.written,
      writeBytesPerSecond: writeRate,
      patchBytesApplied: this.applied,
      segmentsDone: this.segmentsDone,
      bytesPerSecond: rate,
      etaSeconds: this.phase === "done" ? 0 : writeRate > 0 ? (total - this.written) / writeRate : null,
    });
  }
}

/** Every entry of the current build, or null when nothing is installed. */
export async function currentEntries(gameName: string): Promise<{ build: string; entries: ManifestEntry[] } | null> {
  const g = await gameDir(gameName, false);
  const cur = g && (await readCurrent(g));
  if (!g || !cur) return null;
  const m = await buildManifest(g, cur);
  try {
    return { build: cur.build, entries: m.entries() };
  } finally {
    m.free();
  }
}

/** The bytes of `path` in the current build, following symlinks (as the manifest records them). */
export async function readCurrentFile(gameName: string, path: string): Promise<Uint8Array> {
  const g = await gameDir(gameName, false);
  const cur = g && (await readCurrent(g));
  if (!g || !cur) throw new StateError(`${gameName}: nothing is installed`);
  const m = await buildManifest(g, cur);
  try {
    let p = path;
    for (let hops = 0; ; hops++) {
      const e = m.lookup(p);
      if (!e) throw new StateError(`${gameName} ${cur.build} has no ${p}`, { path: p });
      if (e.kind === "directory") throw new StateError(`${gameName} ${cur.build}: ${p} is a directory`, { path: p });
      if (e.kind === "file") {
        const fh = await fileAt(await dirAt(await buildDir(g, cur), "files", false), p, false);
        return new Uint8Array(await (await fh.getFile()).arrayBuffer());
      }
      if (hops >= 40) throw new StateError(`${path}: too many levels of symlinks`);
      // Targets are relative to the link's directory and stay inside the build (FORMAT.md §1).
      const parts = p.split("/").slice(0, -1);
      for (const c of (e.symlinkTarget ?? "").split("/")) {
        if (c === "..") parts.pop();
        else if (c !== "." && c !== "") parts.push(c);
      }
      p = parts.join("/");
    }
  } finally {
    m.free();
  }
}

export async function removeGame(gameName: string): Promise<void> {
  await withGameLock(gameName, async () => {
    const top = await (await navigator.storage.getDirectory()).getDirectoryHandle("edgepatch", { create: true });
    await removeIfPresent(top, gameName);
  });
}
