// What the page and the worker say to each other, and the public result types.

import type { SerializedError } from "./errors.js";

/** The empty build: an update from `_` is an install. */
export const EMPTY_BUILD = "_";

export interface UpdateOptions {
  /** Ranges of the patch downloaded at once (default 3). */
  parallelism?: number;
  /** Retries per range after a dropped connection or a 5xx, within this call (default 2). */
  retries?: number;
  /** First retry delay in ms, doubled per further retry (default 300). */
  retryDelayMs?: number;
  /**
   * The ed25519 public keys (base64 of 32 bytes each) whose signatures this client accepts
   * (docs/UPDATE_PROTOCOL.md, "Signed statements"); a document's `keyId` picks one. Every
   * update statement and channel document must be signed by one of them. Required, unless
   * `dangerouslyAllowUnsignedUpdates` is set.
   */
  publicKeys?: string[];
  /** One accepted key: shorthand for `publicKeys: [publicKey]` (both may be given). */
  publicKey?: string;
  /**
   * LOCAL DEVELOPMENT ONLY: with no key configured, accept updates and channels without
   * checking any signature (a warning is logged for every update). Anyone who can change
   * what the server, a CDN or the network serves can then install anything. Ignored when
   * a key is configured.
   */
  dangerouslyAllowUnsignedUpdates?: boolean;
  /** Smallest range worth its own request, bytes (default 1 MiB); ranges split at segment boundaries. */
  minRangeBytes?: number;
  /**
   * How builds are written to OPFS (default "auto": what the engine offers, probed once).
   * "access-handles": synchronous access handles, small files through writable streams
   * (Chromium, Firefox, Safari 26); "access-handles-only": small files through access handles
   * too, journaled (Safari before 26, which has no createWritable); "writable-streams": no
   * synchronous access handles (WebKitGTK). Forcing one is for tests and diagnosis.
   */
  opfsAccess?: OpfsAccess;
}

export type OpfsAccess = "auto" | "access-handles" | "access-handles-only" | "writable-streams";

export interface UpdateRequest extends UpdateOptions {
  baseUrl: string;
  game: string;
  /** With `channel`: omitted, the worker takes the current build (or "_") and the channel's build. */
  from?: string;
  to?: string;
  /** Update to what this channel points at, checked (signature, rollback, freeze) and recorded after the switch. */
  channel?: string;
}

/** A verified channel document (docs/UPDATE_PROTOCOL.md, "What a client checks", 1). */
export interface ChannelHead {
  channel: string;
  build: string;
  /** Absent only from an unsigned server (with `dangerouslyAllowUnsignedUpdates`). */
  sequence?: number;
  expires?: number;
  /** The accepted key that signed it; null when unsigned updates were allowed. */
  keyId: string | null;
}

export type UpdatePhase = "checking" | "downloading" | "verifying" | "switching" | "done";

export interface UpdateProgress {
  phase: UpdatePhase;
  game: string;
  from: string;
  to: string;
  /**
   * Bytes of the new build's files written to storage so far, counting those written before
   * an interruption: rises steadily from 0 to `bytesTotal` (events at least every 2 MiB
   * written or every 100 ms while writing), whatever the patch's size. The measure for a
   * progress bar.
   */
  bytesWritten: number;
  /** Bytes of the new build's files: `bytesWritten` at the end (the same as `newBytesTotal`). */
  bytesTotal: number;
  /** Write rate over the last 3 seconds, bytes of `bytesWritten` per second (0 until known). */
  writeBytesPerSecond: number;
  /** Patch bytes received over the network in this session (the header and tree again when resuming). */
  downloadedBytes: number;
  /** Patch bytes applied so far, counting those applied before an interruption. */
  patchBytesApplied: number;
  patchSize: number;
  /** Patch offset this session started at (0 unless resumed). */
  resumedFrom: number;
  /** The same as `bytesWritten` (kept for compatibility). */
  newBytesWritten: number;
  /** Size of the new build (what a full download would cost, uncompressed). */
  newBytesTotal: number;
  filesDone: number;
  filesTotal: number;
  /** Patch segments applied and persisted as a resume point: an interruption now loses none of them. */
  segmentsDone: number;
  segmentsTotal: number;
  /** Download rate over the last 3 seconds, patch bytes/s (0 until known). */
  bytesPerSecond: number;
  /** Seconds left: bytes left to write at `writeBytesPerSecond`, or null when unknown. */
  etaSeconds: number | null;
  /** 100 * (1 - patchSize / newBytesTotal): what the patch saves against downloading the build. */
  savedPercent: number;
}

export interface UpdateResult {
  game: string;
  from: string;
  to: string;
  /** `to` was already current; nothing was done. */
  alreadyCurrent: boolean;
  /** This call continued an interrupted update. */
  resumed: boolean;
  resumedFrom: number;
  /** Patch bytes downloaded by this call: 0 when `to` was the previous build, stored by the same manifest and switched back in. */
  downloadedBytes: number;
  patchSize: number;
  newBytesTotal: number;
  files: number;
  /** Files re-hashed before the switch because an earlier session wrote them. */
  filesRehashed: number;
  seconds: number;
  savedPercent: number;
  /** The accepted key that signed the update statement; null when unsigned updates were allowed. */
  keyId: string | null;
  /** The channel this update followed (after the switch, its sequence is the newest this browser accepts). */
  channel?: ChannelHead;
  /** The server had no patch for from -> to (404/410/401/403), so the build was installed whole ("_" -> to). */
  fullInstall: boolean;
  /** The build `to` replaced, kept for `rollback()` (and a game still running it) until a newer one is verified. */
  previous: string | null;
  /** Where the time went, in seconds, when the update wrote a build (absent when nothing was written). */
  timings?: UpdateTimings;
}

/**
 * Seconds per phase of an update that wrote a build: `documents` (descriptor and manifest
 * fetched and checked), `prepare` (leftovers pruned, room checked, resume record), `openOld`
 * and `openNew` (every file of the old and new build opened), `apply` (the patch downloaded
 * and applied, files written and checked as they are), `verify` (everything durable, sizes
 * checked, files of an earlier session re-hashed), `switch` (the build named and switched in).
 * Parts of `apply`: `waitingForPatch` (waiting for the next piece of patch to arrive) and
 * `resumePoints` (written bytes made durable and the resume record written, per segment),
 * `applierCalls` (inside the applier: decoding, hashing, reading old files, and writing where
 * writes are synchronous) and `queuedWrites` (writes the applier queued, where they are not).
 */
export interface UpdateTimings {
  documents: number;
  prepare: number;
  openOld: number;
  openNew: number;
  apply: number;
  verify: number;
  switch: number;
  waitingForPatch: number;
  resumePoints: number;
  applierCalls: number;
  queuedWrites: number;
}

/** What an update would cost (`GameUpdater.plan`), from its signed documents; nothing is written. */
export interface UpdatePlan {
  game: string;
  from: string;
  to: string;
  /** No patch for the pair on the server: the update would install `to` whole. */
  fullInstall: boolean;
  /** Bytes to download (the patch, or the install patch). */
  patchSize: number;
  /** Size of the new build's files. */
  newBytesTotal: number;
  /** Bytes written to storage: every file of the new build and its manifest. */
  bytesToWrite: number;
  /** Free storage the update needs (the current and previous builds stay until the switch). */
  spaceNeeded: number;
  /** Free bytes the browser reports (quota - usage), or null when it does not say. */
  available: number | null;
  /** spaceNeeded <= available, or null when unknown. */
  fits: boolean | null;
  keyId: string | null;
}

export interface PendingUpdate {
  game: string;
  from: string;
  to: string;
  patchSize: number;
  /** Patch bytes already applied and persisted (0 when nothing is resumable yet). */
  patchOffset: number;
  segmentsDone: number;
}

export interface BuildEntry {
  path: string;
  kind: "file" | "directory" | "symlink";
  executable: boolean;
  size: number;
  blake3: string;
  symlinkTarget?: string;
}

/** The page's first message to a new worker: where the wasm module is (null: beside the worker). */
export interface WorkerInit {
  op: "init";
  wasmUrl: string | null;
}

export type WorkerRequest =
  | { id: number; op: "update"; request: UpdateRequest }
  | { id: number; op: "abort"; target: number }
  | { id: number; op: "current"; game: string }
  | { id: number; op: "pending"; game: string }
  | { id: number; op: "latest"; request: UpdateRequest & { channel: string } }
  | { id: number; op: "entries"; game: string }
  | { id: number; op: "readFile"; game: string; path: string }
  | { id: number; op: "remove"; game: string }
  | { id: number; op: "previous"; game: string }
  | { id: number; op: "rollback"; game: string }
  | { id: number; op: "plan"; request: UpdateRequest & { from: string; to: string } };

export type WorkerReply =
  | { id: number; type: "progress"; progress: UpdateProgress }
  | { id: number; type: "result"; value: unknown }
  | { id: number; type: "error"; error: SerializedError };
