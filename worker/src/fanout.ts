// Generation fanned out (worker/README.md, "Generation fanned out"): a pair with more segments
// than GENERATION_STEP_SEGMENTS is not generated in one invocation (5 min CPU, 128 MB) but in
// steps. The pair's PatchGeneration object plans the run (segment count from the two
// signatures) and queues one message per run of segments on GENERATION_STEPS; each step makes
// its segments with the core's generator started at its first segment (`startAtFilled`, given
// the 4 or 8 MiB before it as the window's history, `historyRanges`) into its own temporary R2 object; the last step
// to finish queues the assembly, which streams the steps' segments in order through the core
// (`absorbSegment`: checked, hashed, laid out in the manifest) into the patch's multipart upload.
// Every step and the assembly is idempotent (same run, same temporary key, overwritten), so a
// queue retry runs it again.
import * as wasm from "./wasm";
import { GenerationError, loadBuild, readBuildRanges, READ_CONCURRENCY, verifyFiles, wasmView, yieldToEventLoop, type StoredBuild as Build, type StoredBuild } from "./reads";
import { storePatch, type UpdateDescriptor } from "./descriptors";
import { planBuildReads } from "./read-plan";
import type { GenerateResult } from "./generate";
import { getJson, keys, putJson, R2PartWriter, R2RangeReader } from "./store";
import { settings } from "./settings";
import { addTransforms, loadTransforms, verifySplitOld, type ModuleAboveCap, type StoredTransform } from "./transform";
import type { Env } from "./env";


/** One step: segments [first, end) of a run. */
export interface StepJob {
  kind: "step";
  game: string;
  from: string;
  to: string;
  run: string;
  step: number;
  first: number;
  end: number;
  level: number;
  /** The reader the patch is written for (hex; the run's). */
  reader: string;
  /** The run's wasm transforms (transform.ts), made before the run was planned. */
  transforms?: StoredTransform[];
}

export interface AssembleJob {
  kind: "assemble";
  game: string;
  from: string;
  to: string;
  run: string;
}

export type GenerationJob = StepJob | AssembleJob;

/** What a finished step reports to its run. */
export interface StepResult {
  /** Patch bytes of each of its segments, in order (their concatenation is its temporary object). */
  lengths: number[];
  /** Unix ms when the step (its last attempt) started, and its wall seconds. */
  startedAt: number;
  seconds: number;
  newBytesRead: number;
  oldBytesRead: number;
  /** Bytes read a second time, in full, to check new files that cross the step's end against their BLAKE3. */
  bytesVerified: number;
  /**
   * The old files the step read from (a bitmap over the old index's order, base64) and the
   * ETag of the old tar it read them from: the assembly checks each of them once, in full,
   * against its BLAKE3 before any patch is stored (null: no old bytes read).
   */
  oldFiles: string | null;
  oldEtag: string | null;
  r2Reads: number;
  /** wasm linear memory after the step (the isolate's module: steps in one isolate share it). */
  peakWasmMemoryBytes: number;
}

/** A fanned-out generation in progress, kept in the pair's PatchGeneration object. */
export interface FanoutRun {
  run: string;
  game: string;
  from: string;
  to: string;
  level: number;
  /** The reader the patch is written for (hex, READER_FLOOR when the run began). */
  reader: string;
  /** The changed wasm modules the patch stores normalized (the transform phase's run objects). */
  transforms?: StoredTransform[];
  /** The changed `.wasm` files above the transform's cap, diffed as they are (TransformStats.modulesAboveCap). */
  modulesAboveCap?: ModuleAboveCap[];
  segments: number;
  steps: number;
  stepSegments: number;
  /** Step number -> its result, once done. */
  done: Record<number, StepResult>;
  /** Step attempts that failed (and were retried by the queue). */
  stepFailures: number;
  startedAt: number;
  /** When the run last made progress (started, or a step finished): the stall alarm counts from it. */
  progressAt: number;
}

export function stepJobs(run: FanoutRun): StepJob[] {
  return Array.from({ length: run.steps }, (_, step) => ({
    kind: "step" as const,
    game: run.game,
    from: run.from,
    to: run.to,
    run: run.run,
    step,
    first: step * run.stepSegments,
    end: Math.min(run.segments, (step + 1) * run.stepSegments),
    level: run.level,
    reader: run.reader,
    transforms: run.transforms ?? [],
  }));
}

/** Where a step of a run keeps its segments until the assembly. */
export function stepKey(game: string, from: string, to: string, run: string, step: number): string {
  return `tmp/generations/${game}/${from}/${to}/${run}/${step}`;
}

/** Everything a run keeps under tmp/ (its steps' objects, the records of its multipart uploads). */
export function runPrefix(game: string, from: string, to: string, run: string): string {
  return `tmp/generations/${game}/${from}/${to}/${run}/`;
}

/** What a multipart upload of a run records while it is open (`<prefix>uploads/<name>`): a sweep aborts it if the run ends without it. */
export interface RunUpload {
  key: string;
  uploadId: string;
}

/** An R2PartWriter of a run's: its multipart upload, once started, is recorded under the run's prefix until it ends. */
export function runWriter(bucket: R2Bucket, prefix: string, name: string, key: string): { writer: R2PartWriter; forget: () => Promise<void> } {
  const record = `${prefix}uploads/${name}`;
  let recorded = false;
  const writer = new R2PartWriter(bucket, key, { httpMetadata: { contentType: "application/octet-stream" } }, async (uploadId) => {
    await putJson(bucket, record, { key, uploadId } satisfies RunUpload);
    recorded = true;
  });
  return { writer, forget: async () => void (recorded && (await bucket.delete(record))) };
}

/**
 * Deletes a run's temporary objects and aborts the multipart uploads it recorded as open
 * (a step or an assembly that died mid-upload: R2 keeps, and bills, the parts of an upload
 * until it is aborted). Returns the objects deleted and the uploads aborted.
 */
export async function sweepRunPrefix(bucket: R2Bucket, prefix: string): Promise<{ objects: number; uploads: number }> {
  let objects = 0;
  let uploads = 0;
  let cursor: string | undefined;
  do {
    const page = await bucket.list({ prefix, cursor, limit: 1000 });
    for (const o of page.objects) {
      if (!o.key.startsWith(`${prefix}uploads/`)) continue;
      const u = await getJson<RunUpload>(bucket, o.key).catch(() => null);
      if (u === null || typeof u.key !== "string" || typeof u.uploadId !== "string") continue;
      // Aborting an upload that completed meanwhile fails harmlessly.
      await bucket
        .resumeMultipartUpload(u.key, u.uploadId)
        .abort()
        .then(() => uploads++)
        .catch(() => {});
    }
    const doomed = page.objects.map((o) => o.key);
    if (doomed.length > 0) await bucket.delete(doomed);
    objects += doomed.length;
    cursor = page.truncated ? page.cursor : undefined;
  } while (cursor);
  return { objects, uploads };
}

export async function deleteStepObjects(bucket: R2Bucket, run: FanoutRun): Promise<void> {
  await sweepRunPrefix(bucket, runPrefix(run.game, run.from, run.to, run.run));
}

/** The set of old files a step read, as a bitmap over the old index's order (base64). */
function fileBitmap(build: Build, paths: Set<string>): string | null {
  if (paths.size === 0) return null;
  const bits = new Uint8Array(Math.ceil(build.index.size / 8));
  let i = 0;
  for (const path of build.index.keys()) {
    if (paths.has(path)) bits[i >> 3] |= 1 << (i & 7);
    i++;
  }
  let text = "";
  for (const b of bits) text += String.fromCharCode(b);
  return btoa(text);
}

/** The paths of `bitmaps` (fileBitmap's) that are set in any of them. */
function bitmapFiles(build: Build, bitmaps: string[]): string[] {
  const any = new Uint8Array(Math.ceil(build.index.size / 8));
  for (const b of bitmaps) {
    const bits = atob(b);
    if (bits.length !== any.length) throw new GenerationError(500, `assembly: a step's old-file bitmap has ${bits.length} bytes, the old build ${any.length}`);
    for (let k = 0; k < bits.length; k++) any[k] |= bits.charCodeAt(k);
  }
  const out: string[] = [];
  let i = 0;
  for (const path of build.index.keys()) {
    if (any[i >> 3] & (1 << (i & 7))) out.push(path);
    i++;
  }
  return out;
}

/** Seconds without a finished step after which a run is abandoned: longer than a step's retries can take. */
export function stallSeconds(env: Env): number {
  const s = settings(env);
  return s.generationRetryMaxSeconds * 2 + 1800;
}

export function pendingResult(): GenerateResult {
  return { ok: false, status: 503, error: "this update is being generated; ask again shortly", retryAfter: 10, pending: true };
}

/**
 * Checks the new files a step reads against the BLAKE3 the upload's signer computed (the
 * index's). Each file is checked by the step in which it starts: from the bytes the step reads
 * when it also ends there (hashed in the generator's buffer, no copy), else by one full read
 * (`crossing`); the steps after it skip it.
 */
class StepFileHasher {
  private readonly hasher = new wasm.FileHasher();
  private current: { path: string; size: number; done: number } | null = null;
  /** Files that start in this step and end after it. */
  readonly crossing: string[] = [];

  /** The step's new-stream bytes [start, end). */
  private readonly start: number;
  private readonly end: number;

  /**
   * For the step of segments [first, end) of `gen`, whose transforms are added (a split
   * module's parts cut segments where they begin, so segments are not all 4 MiB).
   */
  constructor(
    private readonly build: StoredBuild,
    gen: wasm.PatchGenerator,
    first: number,
    end: number,
  ) {
    this.start = gen.segmentStart(first);
    this.end = gen.segmentStart(end);
  }

  /** Segment `i`'s ranges, whose concatenated bytes the generator holds (`newBytesTarget`, filled). */
  update(i: number, ranges: wasm.ByteRange[], gen: wasm.PatchGenerator): void {
    let at = 0;
    for (const r of ranges) {
      if (r.length === 0) continue;
      if (r.normalized) {
        // A module's normalized form: checked by the core against its transform's record (the
        // module itself was checked whole by the transform phase).
        at += r.length;
        continue;
      }
      const entry = this.build.index.get(r.path)!;
      const fileStart = gen.segmentStart(i) + at - r.offset;
      if (fileStart < this.start) {
        // Begun in an earlier step, which checks it.
      } else if (fileStart + entry.size > this.end) {
        if (r.offset === 0) this.crossing.push(r.path);
      } else {
        if (this.current === null) {
          if (r.offset !== 0) throw new GenerationError(500, `integrity: ${r.path} was not read from its start`);
          this.current = { path: r.path, size: entry.size, done: 0 };
        }
        if (this.current.path !== r.path || r.offset !== this.current.done) throw new GenerationError(500, `integrity: ${r.path} was not read in order`);
        gen.hashNewBytes(this.hasher, at, r.length);
        this.current.done += r.length;
        if (this.current.done === this.current.size) {
          const blake3 = this.hasher.finish();
          if (blake3 !== entry.blake3) throw new GenerationError(500, `integrity: stored bytes of ${this.build.record.build}/${r.path} do not match the BLAKE3 recorded at upload`);
          this.current = null;
        }
      }
      at += r.length;
    }
  }

  /** Throws unless every file begun was read to its end. */
  check(): void {
    if (this.current !== null) throw new GenerationError(500, `integrity: ${this.current.path} was not read to its end`);
  }

  free(): void {
    this.hasher.free();
  }
}

/**
 * Runs one step: segments [first, end) into the step's temporary object (overwritten when run
 * again). Memory is the one-pass generation's: one segment of new data, its old spans, the
 * history and one zstd context, plus the read buffers and the output (one part at most).
 *
 * Old bytes are not checked here: the step reports which old files it read and the ETag of
 * the old tar they came from (every read of it got that ETag), and the assembly checks each
 * of those files once, in full, before it stores a patch. A step's output is never served on
 * its own, so output made from tampered old bytes is refused there (fanout.test.ts).
 */
export async function runStep(env: Env, job: StepJob): Promise<StepResult> {
  const started = Date.now();
  const bucket = env.BUCKET;
  wasm.initWasm();
  const [newBuild, oldBuild, transforms] = await Promise.all([
    loadBuild(bucket, job.game, job.to),
    job.from === "_" ? null : loadBuild(bucket, job.game, job.from),
    loadTransforms(bucket, job.transforms),
  ]);
  const normalized = new Map(transforms.map((t) => [t.path, t]));
  const gen = wasm.newPatchGenerator(oldBuild?.signature ?? null, newBuild.signature, job.level, job.reader);
  // The generator holds its own copies of the signatures.
  newBuild.signature = new Uint8Array(0);
  if (oldBuild !== null) oldBuild.signature = new Uint8Array(0);
  let hasher: StepFileHasher | null = null;
  const r2 = new R2RangeReader(bucket, READ_CONCURRENCY);
  const prefix = runPrefix(job.game, job.from, job.to, job.run);
  const { writer, forget } = runWriter(bucket, prefix, `step-${job.step}`, stepKey(job.game, job.from, job.to, job.run, job.step));
  const oldFiles = new Set<string>();
  const splitVerified = new Set<string>();
  const lengths: number[] = [];
  let newBytesRead = 0;
  let oldBytesRead = 0;
  let bytesVerified = 0;
  try {
    addTransforms(gen, transforms);
    if (job.end > gen.segmentCount || job.first >= job.end) throw new GenerationError(500, `step ${job.step}: segments ${job.first}..${job.end} of ${gen.segmentCount}`);
    const stepHasher = new StepFileHasher(newBuild, gen, job.first, job.end);
    hasher = stepHasher;
    // The window's history: the 4 MiB of new data before the step, or 8 MiB where the patch
    // declares the text reach (its files are checked by the steps they start in).
    const history = planBuildReads(newBuild, gen.historyRanges(job.first), normalized);
    gen.newBytesTarget(history.total);
    await readBuildRanges(r2, history, wasmView(() => gen.newBytesView()));
    newBytesRead += history.total;
    gen.startAtFilled(job.first);
    for (let i = job.first; i < job.end; i++) {
      const newRanges = gen.newRanges(i);
      const newReads = planBuildReads(newBuild, newRanges, normalized);
      gen.newBytesTarget(newReads.total);
      await readBuildRanges(r2, newReads, wasmView(() => gen.newBytesView()));
      stepHasher.update(i, newRanges, gen);
      const wanted = gen.planFilledSegment(i);
      if (wanted.length > 0 && oldBuild === null) throw new GenerationError(500, "generator asked for old data of the empty build");
      const oldReads = oldBuild === null ? { total: 0, groups: [] } : planBuildReads(oldBuild, wanted, normalized);
      // Old files as they are are checked by the assembly; split old modules here, before they are read.
      for (const r of wanted) if (r.length > 0 && !r.oldSplit) oldFiles.add(r.path);
      bytesVerified += await verifySplitOld(r2, normalized, wanted, splitVerified);
      gen.oldBytesTarget(oldReads.total);
      if (oldBuild !== null) await readBuildRanges(r2, oldReads, wasmView(() => gen.oldBytesView()));
      newBytesRead += newReads.total;
      oldBytesRead += oldReads.total;
      await yieldToEventLoop();
      lengths.push(gen.encodeFilledSegment(i));
      await writer.write(wasmView(() => gen.segmentOutput()));
    }
    stepHasher.check();
    // Checked through the same reader: the object checked is the one the segments came from.
    bytesVerified += await verifyFiles(
      r2,
      newBuild,
      stepHasher.crossing.map((path) => ({ path, length: 1 })),
      new Set(),
    );
    await writer.finish();
    await forget();
  } catch (e) {
    await writer.abort();
    await forget().catch(() => {});
    throw e;
  } finally {
    gen.free();
    hasher?.free();
  }
  return {
    lengths,
    startedAt: started,
    seconds: (Date.now() - started) / 1000,
    newBytesRead,
    oldBytesRead,
    bytesVerified,
    oldFiles: oldBuild === null ? null : fileBitmap(oldBuild, oldFiles),
    oldEtag: oldBuild === null ? null : (r2.etagOf(oldBuild.tarKey) ?? null),
    r2Reads: r2.reads,
    peakWasmMemoryBytes: wasm.wasmMemoryBytes(),
  };
}

/**
 * The old files a run's steps read, checked once each, in full, against the BLAKE3 recorded at
 * upload, from the object (ETag) the steps read them from. Returns the bytes read.
 */
async function verifyRunOldFiles(r2: R2RangeReader, oldBuild: StoredBuild | null, results: StepResult[]): Promise<number> {
  const used = results.filter((r) => r.oldFiles !== null && r.oldFiles !== undefined);
  if (used.length === 0) return 0;
  if (oldBuild === null) throw new GenerationError(500, "assembly: a step read old data of the empty build");
  for (const r of used) {
    if (typeof r.oldEtag !== "string") throw new GenerationError(500, "assembly: a step read old data without recording its ETag");
    // Throws when steps read different objects: the old tar was replaced during the run.
    try {
      r2.pin(oldBuild.tarKey, r.oldEtag);
    } catch (e) {
      throw new GenerationError(500, `integrity: the run's steps read different objects of ${oldBuild.record.build}: ${(e as Error).message}`);
    }
  }
  const files = bitmapFiles(oldBuild, used.map((r) => r.oldFiles!));
  try {
    return await verifyFiles(
      r2,
      oldBuild,
      files.map((path) => ({ path, length: 1 })),
      new Set(),
    );
  } catch (e) {
    if (e instanceof GenerationError) throw e;
    throw new GenerationError(500, `integrity: ${(e as Error).message}`);
  }
}

/**
 * The patch of a run whose steps are all done: the old files the steps read checked first
 * (once each); then header, every step's segments in order (each read into one reused
 * buffer, checked and hashed by the core, appended to the patch's multipart upload in equal
 * 8 MiB parts whatever the segment sizes), end and checksum. Returns the descriptor (not yet
 * stored) and the run's statistics.
 */
export async function assembleRun(env: Env, run: FanoutRun): Promise<{ descriptor: UpdateDescriptor; stats: object }> {
  const bucket = env.BUCKET;
  wasm.initWasm();
  const assembleStarted = Date.now();
  const [newBuild, oldBuild] = await Promise.all([loadBuild(bucket, run.game, run.to), run.from === "_" ? null : loadBuild(bucket, run.game, run.from)]);
  const results = Array.from({ length: run.steps }, (_, step) => {
    const r = run.done[step];
    if (r === undefined) throw new GenerationError(500, `assembly: step ${step} is not done`);
    return r;
  });
  const verifyReader = new R2RangeReader(bucket, 1);
  const oldBytesVerified = await verifyRunOldFiles(verifyReader, oldBuild, results);
  const verifySeconds = (Date.now() - assembleStarted) / 1000;
  const transforms = await loadTransforms(bucket, run.transforms);
  const gen = wasm.newPatchGenerator(oldBuild?.signature ?? null, newBuild.signature, run.level, run.reader);
  const { writer, forget } = runWriter(bucket, runPrefix(run.game, run.from, run.to, run.run), "patch", keys.patch(run.game, run.from, run.to));
  const r2 = new R2RangeReader(bucket, 1);
  let manifest: Uint8Array;
  let readerNeeds: string;
  try {
    addTransforms(gen, transforms);
    if (gen.segmentCount !== run.segments) throw new GenerationError(500, `assembly: the builds have ${gen.segmentCount} segments, the run ${run.segments}`);
    await writer.write(gen.header());
    const segment = new Uint8Array(Math.max(0, ...results.flatMap((r) => r.lengths)));
    let i = 0;
    for (const [step, r] of results.entries()) {
      const key = stepKey(run.game, run.from, run.to, run.run, step);
      let at = 0;
      for (const length of r.lengths) {
        // As the generation does before each segment: requests that arrive during an
        // assembly are answered between its segments (worker/README.md, "Known issues").
        await yieldToEventLoop();
        await r2.read(key, at, length, (chunk, offset) => segment.set(chunk, offset));
        const bytes = segment.subarray(0, length);
        gen.absorbSegment(i++, bytes);
        await writer.write(bytes);
        at += length;
      }
    }
    await writer.write(gen.finish());
    manifest = gen.manifest(run.from, run.to);
    readerNeeds = gen.requiredCapabilities;
  } catch (e) {
    await writer.abort();
    await forget().catch(() => {});
    throw e;
  } finally {
    gen.free();
  }
  const outputBufferBytes = writer.bufferBytes;
  const { descriptor, patchSize } = await storePatch(env, run.game, run.from, run.to, writer, manifest, readerNeeds);
  await forget();
  const sum = (f: (r: StepResult) => number) => results.reduce((n, r) => n + f(r), 0);
  const stats = {
    startedAt: new Date(run.startedAt).toISOString(),
    seconds: (Date.now() - run.startedAt) / 1000,
    segments: run.segments,
    steps: run.steps,
    stepSegments: run.stepSegments,
    stepFailures: run.stepFailures,
    stepSeconds: results.map((r) => r.seconds),
    stepStartedMs: results.map((r) => r.startedAt - run.startedAt),
    stepPeakWasmMemoryBytes: results.map((r) => r.peakWasmMemoryBytes),
    assembleSeconds: (Date.now() - assembleStarted) / 1000,
    assembleVerifySeconds: verifySeconds,
    newBytesRead: sum((r) => r.newBytesRead),
    oldBytesRead: sum((r) => r.oldBytesRead),
    // Old files checked by the assembly, once each; new files crossing a step's end, by the step they start in.
    oldBytesVerified,
    newBytesVerified: sum((r) => r.bytesVerified),
    r2Reads: sum((r) => r.r2Reads) + r2.reads + verifyReader.reads,
    patchBytes: patchSize,
    peakWasmMemoryBytes: Math.max(wasm.wasmMemoryBytes(), ...results.map((r) => r.peakWasmMemoryBytes)),
    jsBufferBytes: r2.bufferBytes + outputBufferBytes,
    level: run.level,
    transformedModules: transforms.length,
    // Of them, stored in the field-split layout (their old modules read split by the steps).
    splitModules: transforms.filter((t) => t.oldSplit !== undefined).length,
    ...(run.modulesAboveCap?.length ? { modulesAboveCap: run.modulesAboveCap } : {}),
  };
  return { descriptor, stats };
}

function isJob(v: unknown): v is GenerationJob {
  const j = v as GenerationJob;
  if (typeof j !== "object" || j === null || typeof j.game !== "string" || typeof j.from !== "string" || typeof j.to !== "string" || typeof j.run !== "string") return false;
  if (j.kind === "assemble") return true;
  return (
    j.kind === "step" &&
    [j.step, j.first, j.end, j.level].every((n) => Number.isSafeInteger(n) && n >= 0) &&
    typeof j.reader === "string" &&
    (j.transforms === undefined || Array.isArray(j.transforms))
  );
}

/**
 * The GENERATION_STEPS consumer (max_batch_size 1: each step has an invocation's CPU and memory
 * to itself). A failed step is retried by the queue after a backoff; a step or assembly of a
 * run that is over (done, or abandoned) is dropped.
 */
export async function consumeSteps(batch: MessageBatch<unknown>, env: Env): Promise<void> {
  for (const message of batch.messages) {
    const job = message.body;
    if (!isJob(job)) {
      console.error("generation steps: dropping a malformed message", job);
      message.ack();
      continue;
    }
    const stub = env.GENERATIONS.get(env.GENERATIONS.idFromName(`${job.game}/${job.from}/${job.to}`));
    if (job.kind === "assemble") {
      // Failures are handled by the object (recorded, the pair queued again after its backoff).
      await stub.assemble(job.run);
      message.ack();
      continue;
    }
    if (!(await stub.runWanted(job.run))) {
      message.ack();
      continue;
    }
    try {
      const result = await runStep(env, job);
      await stub.stepDone(job.run, job.step, result);
      message.ack();
    } catch (e) {
      await stub.stepFailed(job.run, job.step, e instanceof Error ? e.message : String(e));
      const s = settings(env);
      const delay = Math.min(s.generationRetryMaxSeconds, s.generationRetrySeconds * 2 ** Math.min(message.attempts - 1, 30), 12 * 3600);
      message.retry({ delaySeconds: delay });
    }
  }
}
