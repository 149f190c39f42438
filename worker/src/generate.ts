// PatchGeneration: one Durable Object per (game, from, to). However many requests race
// for a pair, in however many isolates, they all reach this one object, and the first
// runs the generation while the others await the same promise; the result is persisted
// (DO storage and R2), so it runs once.
//
// The generation streams: the core's PatchGenerator asks for the new bytes of one segment
// (4 MiB) and the old ranges it wants (<= 8 MiB), each read from the stored tars by R2 range
// reads straight into the generator's buffers in wasm memory; the patch leaves segment by
// segment into an R2 multipart upload. No build is ever held whole, and nothing is allocated
// per segment or per read on the JS side (garbage V8 would hold until it collects).
//
// A pair of more segments than GENERATION_STEP_SEGMENTS is not generated here in one go: this
// object plans it, queues its steps and assembles their output (fanout.ts).
//
// Reading stored builds is in reads.ts, what to read for a step in read-plan.ts, descriptors
// (signing, checking, storing a patch) in descriptors.ts.
import { DurableObject } from "cloudflare:workers";
import * as wasm from "./wasm";
import { keys, getJson, putJson, R2PartWriter, R2RangeReader, PART_BYTES } from "./store";
import { settings } from "./settings";
import type { Env } from "./env";
import type { PairJob } from "./pregenerate";
import { assembleRun, deleteStepObjects, pendingResult, runPrefix, runWriter, stallSeconds, stepJobs, sweepRunPrefix, type AssembleJob, type FanoutRun, type StepResult } from "./fanout";
import { addTransforms, prepareTransforms, storeTransforms, verifySplitOld, type ModuleAboveCap, type ModuleTransform, type StoredTransform, type TransformStats } from "./transform";
import {
  GenerationError,
  loadBuild,
  NewFileHasher,
  readBuildRanges,
  READ_CONCURRENCY,
  verifyFiles,
  wasmView,
  yieldToEventLoop,
  type BuildReads,
  type StoredBuild,
} from "./reads";
import { signedByCurrentKey, storePatch, type UpdateDescriptor } from "./descriptors";
import { planBuildReads } from "./read-plan";

/** A generation that failed: kept in the pair's Durable Object, tried again after `retryAt`. */
export interface GenerationFailure {
  attempts: number;
  /** What went wrong (for the owner: GET .../generations; never sent to anonymous callers). */
  error: string;
  failedAt: string;
  /** Unix milliseconds before which no new attempt is made. */
  retryAt: number;
}

export interface GenerationStats {
  startedAt: string;
  seconds: number;
  segments: number;
  newBytesRead: number;
  oldBytesRead: number;
  /** Bytes of old files read in full to check them against their BLAKE3 (once per file). */
  oldBytesVerified: number;
  r2Reads: number;
  patchBytes: number;
  /** wasm linear memory after the generation (it only grows): the peak of the module. */
  peakWasmMemoryBytes: number;
  /**
   * Bytes of the buffers the generation holds in JS: the R2 read buffers and one R2 part. The
   * segment data itself is read into wasm memory (in `peakWasmMemoryBytes`).
   */
  jsBufferBytes: number;
  level: number;
  /** The transform phase (transform.ts): absent for an install. */
  transform?: TransformStats;
}

export type GenerateResult =
  | { ok: true; descriptor: UpdateDescriptor; generated: boolean; stats?: GenerationStats }
  /**
   * `retryAfter`: seconds until the next attempt, when a recorded failure is in its backoff, or
   * until a fanned-out generation (`pending`) may be done.
   */
  | { ok: false; status: number; error: string; retryAfter?: number; pending?: true };


export function backoffResult(f: GenerationFailure): GenerateResult {
  const retryAfter = Math.max(1, Math.ceil((f.retryAt - Date.now()) / 1000));
  return { ok: false, status: 503, error: "this update could not be generated; it is tried again later", retryAfter };
}

export class PatchGeneration extends DurableObject<Env> {
  private inflight: Promise<GenerateResult> | null = null;
  /** The run being assembled in this instance, if any. */
  private assembling: string | null = null;
  /**
   * The run whose generation this instance is running (its transform phase, or all of it for
   * a pair made in one invocation): its temporary objects are kept from the cron sweep.
   */
  private generating: string | null = null;

  /** The pair's descriptor, generating it first if no one has. */
  generate(game: string, from: string, to: string): Promise<GenerateResult> {
    // Checked and set synchronously: every call that arrives while a generation runs joins it.
    if (this.inflight) return this.inflight.then((r) => (r.ok ? { ...r, generated: false, stats: undefined } : r));
    this.inflight = this.run(game, from, to).finally(() => {
      this.inflight = null;
    });
    return this.inflight;
  }

  private async run(game: string, from: string, to: string): Promise<GenerateResult> {
    const stored = await this.ctx.storage.get<UpdateDescriptor>("descriptor");
    if (stored) return { ok: true, descriptor: stored, generated: false };
    // A descriptor in the bucket without this object's record (one written just before an
    // eviction) is taken only if the current key signed its statement for this pair: the bucket
    // is not trusted, and this record is what a descriptor is re-signed from (trustedDescriptor).
    // Any other is generated again (which overwrites it).
    const persisted = await getJson<UpdateDescriptor>(this.env.BUCKET, keys.descriptor(game, from, to));
    if (persisted && (await signedByCurrentKey(this.env, game, from, to, persisted))) {
      await this.ctx.storage.put("descriptor", persisted);
      return { ok: true, descriptor: persisted, generated: false };
    }
    // A failed pair is tried again only after its backoff, however often it is asked for.
    const failure = await this.ctx.storage.get<GenerationFailure>("failure");
    if (failure && Date.now() < failure.retryAt) return backoffResult(failure);
    if (await this.ctx.storage.get<FanoutRun>("fanout")) return pendingResult();
    try {
      const generated = await this.generatePair(game, from, to);
      if (generated === null) return pendingResult();
      const { descriptor, stats } = generated;
      await this.ctx.storage.put("descriptor", descriptor);
      await this.ctx.storage.delete("failure");
      return { ok: true, descriptor, generated: true, stats };
    } catch (e) {
      // A missing build is the request's problem, not a failed generation.
      if (e instanceof GenerationError && e.status === 404) return { ok: false, status: 404, error: e.message };
      return backoffResult(await this.recordFailure(game, from, to, e));
    }
  }

  /** Records a failed generation (its attempt count and backoff); the next attempt waits for it. */
  private async recordFailure(game: string, from: string, to: string, e: unknown): Promise<GenerationFailure> {
    const failure = await this.ctx.storage.get<GenerationFailure>("failure");
    const error = e instanceof Error ? e.message : String(e);
    console.error(`generating ${game} ${from} -> ${to} failed:`, e);
    const s = settings(this.env);
    const attempts = (failure?.attempts ?? 0) + 1;
    const delay = Math.min(s.generationRetryMaxSeconds, s.generationRetrySeconds * 2 ** Math.min(attempts - 1, 30));
    const recorded: GenerationFailure = { attempts, error, failedAt: new Date().toISOString(), retryAt: Date.now() + delay * 1000 };
    await this.ctx.storage.put("failure", recorded);
    return recorded;
  }

  /** Plans a fanned-out generation: one queue message per run of `stepSegments` segments. */
  private async startFanout(
    game: string,
    from: string,
    to: string,
    level: number,
    reader: string,
    segments: number,
    stepSegments: number,
    runId: string,
    transforms: StoredTransform[],
    modulesAboveCap: ModuleAboveCap[],
  ): Promise<void> {
    const run: FanoutRun = {
      run: runId,
      transforms,
      ...(modulesAboveCap.length ? { modulesAboveCap } : {}),
      game,
      from,
      to,
      level,
      reader,
      segments,
      steps: Math.ceil(segments / stepSegments),
      stepSegments,
      done: {},
      stepFailures: 0,
      startedAt: Date.now(),
      progressAt: Date.now(),
    };
    // Stored before the messages go out: a step that finishes at once finds its run.
    await this.ctx.storage.put("fanout", run);
    const jobs = stepJobs(run);
    for (let i = 0; i < jobs.length; i += 100) {
      await this.env.GENERATION_STEPS.sendBatch(jobs.slice(i, i + 100).map((body) => ({ body, contentType: "json" as const })));
    }
    await this.ctx.storage.setAlarm(Date.now() + stallSeconds(this.env) * 1000);
  }

  /** A step finished (its segments are in its temporary object): when it is the last, assembly is queued. */
  async stepDone(runId: string, step: number, result: StepResult): Promise<boolean> {
    const run = await this.ctx.storage.get<FanoutRun>("fanout");
    if (!run || run.run !== runId) return false;
    // A step run twice (a retry after its report was lost) must not queue a second assembly.
    const again = step in run.done;
    run.done[step] = result;
    run.progressAt = Date.now();
    await this.ctx.storage.put("fanout", run);
    if (!again && Object.keys(run.done).length === run.steps) {
      const job: AssembleJob = { kind: "assemble", game: run.game, from: run.from, to: run.to, run: run.run };
      await this.env.GENERATION_STEPS.send(job, { contentType: "json" });
    }
    return true;
  }

  /** A step failed (the queue retries it): counted for the run's statistics. */
  async stepFailed(runId: string, step: number, error: string): Promise<void> {
    const run = await this.ctx.storage.get<FanoutRun>("fanout");
    if (!run || run.run !== runId) return;
    console.error(`generating ${run.game} ${run.from} -> ${run.to}: step ${step} failed (retried):`, error);
    run.stepFailures++;
    await this.ctx.storage.put("fanout", run);
  }

  /** Whether step messages of `runId` are still wanted (a finished or abandoned run's are dropped). */
  async runWanted(runId: string): Promise<boolean> {
    if (this.generating === runId) return true;
    return (await this.ctx.storage.get<FanoutRun>("fanout"))?.run === runId;
  }

  /**
   * Assembles a fanned-out run's steps into the patch (fanout.ts `assemble`), stores manifest
   * and descriptor. A failure is recorded as any generation's, the run is dropped and the pair
   * is queued again after its backoff.
   */
  async assemble(runId: string): Promise<void> {
    // A second delivery of the message while the first assembles (the object interleaves calls
    // at every await) must not write the same patch object at the same time.
    // Set before the first await, so that two deliveries cannot both pass the check.
    if (this.assembling === runId) return;
    this.assembling = runId;
    let assembled: FanoutRun | null = null;
    try {
      const run = await this.ctx.storage.get<FanoutRun>("fanout");
      if (!run || run.run !== runId) return;
      assembled = run;
      const { descriptor, stats } = await assembleRun(this.env, run);
      await putJson(this.env.BUCKET, keys.descriptor(run.game, run.from, run.to), descriptor);
      await logGeneration(this.env.BUCKET, run.game, run.from, run.to, run.startedAt, stats);
      await this.ctx.storage.put("descriptor", descriptor);
      await this.ctx.storage.delete("failure");
      await this.ctx.storage.delete("fanout");
      await this.ctx.storage.deleteAlarm();
    } catch (e) {
      if (assembled !== null) await this.abandonRun(assembled, e);
      return;
    } finally {
      this.assembling = null;
    }
    // The pair is done: a failed clean-up is only logged (the objects are unreferenced).
    await deleteStepObjects(this.env.BUCKET, assembled).catch((e) => console.error(`deleting the steps of run ${runId}:`, e));
  }

  private async abandonRun(run: FanoutRun, e: unknown): Promise<void> {
    const failure = await this.recordFailure(run.game, run.from, run.to, e);
    await this.ctx.storage.delete("fanout");
    await this.ctx.storage.deleteAlarm();
    await deleteStepObjects(this.env.BUCKET, run);
    const job: PairJob = { game: run.game, from: run.from, to: run.to };
    const delaySeconds = Math.min(12 * 3600, Math.max(1, Math.ceil((failure.retryAt - Date.now()) / 1000)));
    await this.env.PREGENERATE.send(job, { contentType: "json", delaySeconds });
  }

  /**
   * A run with no step finished for `stallSeconds` (a step that used up its queue retries, a
   * lost message) is abandoned as a failed generation, so a later attempt starts over.
   */
  async alarm(): Promise<void> {
    const run = await this.ctx.storage.get<FanoutRun>("fanout");
    if (!run) return;
    const stall = stallSeconds(this.env) * 1000;
    if (Date.now() - run.progressAt < stall) {
      await this.ctx.storage.setAlarm(run.progressAt + stall);
      return;
    }
    const missing = Array.from({ length: run.steps }, (_, i) => i).filter((i) => !(i in run.done));
    await this.abandonRun(run, new GenerationError(500, `fanned-out generation stalled: steps ${missing.join(", ")} not done after ${stall / 1000} s`));
  }

  /** Forgets the pair's descriptor and failure (its build was deleted: operations.ts). */
  async forget(): Promise<void> {
    await this.ctx.storage.deleteAlarm();
    await this.ctx.storage.deleteAll();
  }

  /** What the owner sees at GET .../generations of a fanned-out generation in progress. */
  async fanoutProgress(): Promise<{ run: string; steps: number; stepsDone: number; stepFailures: number; startedAt: string } | null> {
    const run = await this.ctx.storage.get<FanoutRun>("fanout");
    if (!run) return null;
    return { run: run.run, steps: run.steps, stepsDone: Object.keys(run.done).length, stepFailures: run.stepFailures, startedAt: new Date(run.startedAt).toISOString() };
  }

  /** What the owner sees at GET .../generations: the recorded failure, if any. */
  async failure(): Promise<GenerationFailure | null> {
    return (await this.ctx.storage.get<GenerationFailure>("failure")) ?? null;
  }

  /**
   * Generates the pair in this invocation, or starts a fanned-out generation (null). Either
   * way a run: its temporary objects (the normalized modules of the transform phase, a
   * fanned-out run's steps) are under its prefix, swept when it ends.
   */
  private async generatePair(game: string, from: string, to: string): Promise<{ descriptor: UpdateDescriptor; stats: GenerationStats } | null> {
    const bucket = this.env.BUCKET;
    const started = Date.now();
    wasm.initWasm();
    const [newBuild, oldBuild] = await Promise.all([loadBuild(bucket, game, to), from === "_" ? null : loadBuild(bucket, game, from)]);
    wasm.initWasm();
    const runId = crypto.randomUUID();
    const prefix = runPrefix(game, from, to, runId);
    // Set before the first run object is written: the cron sweep keeps the run's objects.
    this.generating = runId;
    let fannedOut = false;
    try {
      const phase = oldBuild === null ? null : await prepareTransforms(bucket, oldBuild, newBuild, prefix, (name, key) => runWriter(bucket, prefix, name, key));
      const { patchLevel: level, readerFloor: reader } = settings(this.env);
      // Only the transforms the reader applies: the other modules are stored as they are.
      const transforms = (phase?.transforms ?? []).filter((t) => wasm.readerCovers(reader, wasm.PatchGenerator.wasmTransformNeeds(t.record)));
      const gen = wasm.newPatchGenerator(oldBuild?.signature ?? null, newBuild.signature, level, reader);
      try {
        addTransforms(gen, transforms);
      } catch (e) {
        gen.free();
        throw e;
      }
      const segmentCount = gen.segmentCount;
      const stepSegments = settings(this.env).generationStepSegments;
      if (segmentCount > stepSegments) {
        // Too large for one invocation: steps on the queue, then one assembly (fanout.ts).
        gen.free();
        await this.startFanout(game, from, to, level, reader, segmentCount, stepSegments, runId, await storeTransforms(bucket, transforms), phase?.stats.modulesAboveCap ?? []);
        fannedOut = true;
        return null;
      }
      return await this.generateInOne(game, from, to, started, level, gen, newBuild, oldBuild, transforms, phase?.stats);
    } finally {
      this.generating = null;
      // A run made here is over, whatever its outcome: its objects go now (the cron sweep
      // takes them if this fails). A fanned-out run's go when it is assembled or abandoned.
      if (!fannedOut) await sweepRunPrefix(bucket, prefix).catch((e) => console.error(`deleting the objects of run ${runId}:`, e));
    }
  }

  /** The pair in this invocation: `gen` (its transforms added; freed here) segment by segment. */
  private async generateInOne(
    game: string,
    from: string,
    to: string,
    started: number,
    level: number,
    gen: wasm.PatchGenerator,
    newBuild: StoredBuild,
    oldBuild: StoredBuild | null,
    transforms: ModuleTransform[],
    transformStats: TransformStats | undefined,
  ): Promise<{ descriptor: UpdateDescriptor; stats: GenerationStats }> {
    const bucket = this.env.BUCKET;
    const normalized = new Map(transforms.map((t) => [t.path, t]));
    // The generator holds its own copies of the signatures: the JS ones are garbage now.
    newBuild.signature = new Uint8Array(0);
    if (oldBuild !== null) oldBuild.signature = new Uint8Array(0);
    const newHasher = new NewFileHasher(newBuild);
    const oldVerified = new Set<string>();
    const splitVerified = new Set<string>();
    let oldBytesVerified = 0;
    const patchKey = keys.patch(game, from, to);
    const writer = new R2PartWriter(bucket, patchKey, { httpMetadata: { contentType: "application/octet-stream" } });
    // Segment data goes from R2 straight into the generator's own buffers in wasm memory,
    // through the reader's few reused buffers: nothing is allocated per segment or per read.
    const r2 = new R2RangeReader(bucket, READ_CONCURRENCY);
    let newBytesRead = 0;
    let oldBytesRead = 0;
    let manifest: Uint8Array;
    let readerNeeds: string;
    let segments = 0;
    try {
      await writer.write(gen.header());
      segments = gen.segmentCount;
      for (let i = 0; i < segments; i++) {
        const newRanges = gen.newRanges(i);
        const newReads = planBuildReads(newBuild, newRanges, normalized);
        gen.newBytesTarget(newReads.total);
        const newView = wasmView(() => gen.newBytesView());
        await readBuildRanges(r2, newReads, newView);
        newHasher.update(newRanges, gen);
        const wanted = gen.planFilledSegment(i);
        if (wanted.length > 0 && oldBuild === null) throw new GenerationError(500, "generator asked for old data of the empty build");
        const oldReads = oldBuild === null ? { total: 0, groups: [] } : planBuildReads(oldBuild, wanted, normalized);
        if (oldBuild !== null) {
          oldBytesVerified += await verifyFiles(r2, oldBuild, wanted.filter((r) => !r.oldSplit), oldVerified);
          oldBytesVerified += await verifySplitOld(r2, normalized, wanted, splitVerified);
        }
        gen.oldBytesTarget(oldReads.total);
        if (oldBuild !== null) await readBuildRanges(r2, oldReads, wasmView(() => gen.oldBytesView()));
        newBytesRead += newReads.total;
        oldBytesRead += oldReads.total;
        // Seconds of synchronous wasm follow: let everything else run first.
        await yieldToEventLoop();
        gen.encodeFilledSegment(i);
        await writer.write(wasmView(() => gen.segmentOutput()));
      }
      await writer.write(gen.finish());
      manifest = gen.manifest(from, to);
      readerNeeds = gen.requiredCapabilities;
      const reader = new wasm.ManifestReader(manifest);
      try {
        newHasher.check(reader);
      } finally {
        reader.free();
      }
    } catch (e) {
      await writer.abort();
      throw e;
    } finally {
      gen.free();
      newHasher.free();
    }
    const { descriptor, patchSize } = await storePatch(this.env, game, from, to, writer, manifest, readerNeeds);
    const stats: GenerationStats = {
      startedAt: new Date(started).toISOString(),
      seconds: (Date.now() - started) / 1000,
      segments,
      newBytesRead,
      oldBytesRead,
      oldBytesVerified,
      r2Reads: r2.reads,
      patchBytes: patchSize,
      peakWasmMemoryBytes: wasm.wasmMemoryBytes(),
      jsBufferBytes: r2.bufferBytes + PART_BYTES,
      level,
      transform: transformStats,
    };
    await putJson(bucket, keys.descriptor(game, from, to), descriptor);
    await logGeneration(bucket, game, from, to, started, stats);
    return { descriptor, stats };
  }
}

/** The log: one object per generation run (the count is what "exactly once" is tested by). */
export async function logGeneration(bucket: R2Bucket, game: string, from: string, to: string, started: number, stats: object): Promise<void> {
  await putJson(bucket, `${keys.generationLog(game, from, to)}${started}-${crypto.randomUUID()}`, stats);
}
