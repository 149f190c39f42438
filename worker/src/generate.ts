// PatchGeneration: one Durable Object per (game, from, to). However many requests race
// for a pair, in however many isolates, they all reach this one object, and the first
// runs the generation while the others await the same promise; the result is persisted
// (DO storage and R2), so it runs once.
//
// The generation streams: the core's PatchGenerator asks for the new bytes of one segment
// (<= 16 MiB) and the old ranges it wants (<= 8 MiB), each read from the stored tars by
// R2 range reads; the patch leaves segment by segment into an R2 multipart upload. No
// build is ever held whole.
import { DurableObject } from "cloudflare:workers";
import * as wasm from "./wasm";
import { keys, getJson, putJson, R2PartWriter, type BuildRecord, type TarIndex } from "./store";
import { manifestSigner } from "./signing";
import type { Env } from "./env";

export interface UpdateDescriptor {
  game: string;
  from: string;
  to: string;
  manifestUrl: string;
  manifestSize: number;
  manifestBlake3: string;
  patchUrl: string;
  patchSize: number;
  patchBlake3: string;
  manifestSignature?: string;
}

export interface GenerationStats {
  startedAt: string;
  seconds: number;
  segments: number;
  newBytesRead: number;
  oldBytesRead: number;
  r2Reads: number;
  patchBytes: number;
  /** wasm linear memory after the generation (it only grows): the peak of the module. */
  peakWasmMemoryBytes: number;
  /** Largest bytes of segment data held in JS at once (new + old bytes + one R2 part buffer). */
  peakJsBufferBytes: number;
  level: number;
}

export type GenerateResult =
  | { ok: true; descriptor: UpdateDescriptor; generated: boolean; stats?: GenerationStats }
  | { ok: false; status: number; error: string };

/** Bytes [offset, offset + length) of the file at `path` of a build (the generator's ranges). */
type BuildRange = wasm.ByteRange;

class GenerationError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** A stored build as the generator reads it: its tar, and where each file's data is in it. */
interface StoredBuild {
  record: BuildRecord;
  tarKey: string;
  index: TarIndex;
  signature: Uint8Array;
}

async function loadBuild(bucket: R2Bucket, game: string, build: string): Promise<StoredBuild> {
  const record = await getJson<BuildRecord>(bucket, keys.build(game, build));
  if (record === null) throw new GenerationError(404, `no build ${game}/${build}`);
  const [index, sig] = await Promise.all([
    getJson<TarIndex>(bucket, keys.buildIndex(game, build, record.upload)),
    bucket.get(keys.buildSignature(game, build, record.upload)),
  ]);
  if (index === null || sig === null) throw new GenerationError(500, `build ${game}/${build}: stored data incomplete`);
  return { record, tarKey: keys.buildData(game, build, record.upload), index, signature: new Uint8Array(await sig.arrayBuffer()) };
}

/** Gaps up to this size between wanted spans are read through rather than split into two R2 reads. */
const READ_GAP = 256 << 10;
const MAX_READ = 16 << 20;
const READ_CONCURRENCY = 4;

/**
 * Lets the event loop go idle for a moment, so queued requests, timers and I/O run. Without it
 * (seen under local workerd, where R2 is simulated in the same process) a generation held the
 * thread from start to end: every other request to the Worker and the inspector waited for it,
 * and a connection reused right after it was dropped or stalled (worker/README.md, "Known
 * issues"). 5 ms rather than 0: with 0 some waiting requests did not get through and waited
 * for a later segment.
 */
function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 5));
}

/**
 * The concatenation of `ranges` of a stored build, by R2 range reads of its tar: spans
 * are sorted, merged across small gaps (tar headers, neighbouring files), read a few at a
 * time and scattered into place.
 */
export async function readBuildRanges(bucket: R2Bucket, build: StoredBuild, ranges: BuildRange[], counters: { reads: number }): Promise<Uint8Array> {
  let total = 0;
  const spans = ranges.map((r) => {
    const entry = build.index[r.path];
    if (entry === undefined) throw new GenerationError(500, `generator asked for ${r.path}, which is not a file of ${build.record.build}`);
    if (r.offset < 0 || r.length < 0 || r.offset + r.length > entry[1]) throw new GenerationError(500, `generator asked for bytes ${r.offset}+${r.length} of ${r.path} (${entry[1]} bytes)`);
    const span = { src: entry[0] + r.offset, len: r.length, dst: total };
    total += r.length;
    return span;
  });
  const out = new Uint8Array(total);
  const sorted = spans.filter((s) => s.len > 0).sort((a, b) => a.src - b.src);
  const groups: { start: number; end: number; spans: typeof spans }[] = [];
  for (const s of sorted) {
    const g = groups[groups.length - 1];
    const end = s.src + s.len;
    if (g && s.src - g.end <= READ_GAP && Math.max(g.end, end) - g.start <= MAX_READ) {
      g.end = Math.max(g.end, end);
      g.spans.push(s);
    } else {
      groups.push({ start: s.src, end, spans: [s] });
    }
  }
  let next = 0;
  const worker = async () => {
    while (next < groups.length) {
      const g = groups[next++];
      const obj = await bucket.get(build.tarKey, { range: { offset: g.start, length: g.end - g.start } });
      counters.reads++;
      if (obj === null) throw new GenerationError(500, `${build.tarKey} disappeared`);
      const bytes = new Uint8Array(await obj.arrayBuffer());
      if (bytes.length !== g.end - g.start) throw new GenerationError(500, `${build.tarKey}: short read at ${g.start}`);
      for (const s of g.spans) out.set(bytes.subarray(s.src - g.start, s.src - g.start + s.len), s.dst);
    }
  };
  await Promise.all(Array.from({ length: Math.min(READ_CONCURRENCY, groups.length) }, worker));
  return out;
}

export function descriptorUrls(game: string, from: string, to: string, manifestBlake3: string, patchBlake3: string) {
  // Relative to the descriptor's own URL, /v1/games/{game}/updates/{from}/{to}.
  return {
    manifestUrl: `../../manifests/${from}/${to}/${manifestBlake3}`,
    patchUrl: `../../patches/${from}/${to}/${patchBlake3}`,
  };
}

export class PatchGeneration extends DurableObject<Env> {
  private inflight: Promise<GenerateResult> | null = null;

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
    try {
      const stored = await this.ctx.storage.get<UpdateDescriptor>("descriptor");
      if (stored) return { ok: true, descriptor: stored, generated: false };
      const persisted = await getJson<UpdateDescriptor>(this.env.BUCKET, keys.descriptor(game, from, to));
      if (persisted) {
        await this.ctx.storage.put("descriptor", persisted);
        return { ok: true, descriptor: persisted, generated: false };
      }
      const { descriptor, stats } = await this.generatePair(game, from, to);
      await this.ctx.storage.put("descriptor", descriptor);
      return { ok: true, descriptor, generated: true, stats };
    } catch (e) {
      if (e instanceof GenerationError) return { ok: false, status: e.status, error: e.message };
      return { ok: false, status: 500, error: `generating ${game} ${from} -> ${to} failed: ${e instanceof Error ? e.message : String(e)}` };
    }
  }

  private async generatePair(game: string, from: string, to: string): Promise<{ descriptor: UpdateDescriptor; stats: GenerationStats }> {
    const bucket = this.env.BUCKET;
    const started = Date.now();
    const [newBuild, oldBuild] = await Promise.all([loadBuild(bucket, game, to), from === "_" ? null : loadBuild(bucket, game, from)]);
    wasm.initWasm();
    const level = Number(this.env.PATCH_LEVEL ?? "19");
    const gen = new wasm.PatchGenerator(oldBuild?.signature ?? null, newBuild.signature, level);
    const patchKey = keys.patch(game, from, to);
    const writer = new R2PartWriter(bucket, patchKey, { httpMetadata: { contentType: "application/octet-stream" } });
    const counters = { reads: 0 };
    let newBytesRead = 0;
    let oldBytesRead = 0;
    let peakJs = 0;
    let manifest: Uint8Array;
    let segments = 0;
    try {
      await writer.write(gen.header());
      segments = gen.segmentCount;
      for (let i = 0; i < segments; i++) {
        const newBytes = await readBuildRanges(bucket, newBuild, gen.newRanges(i), counters);
        const wanted = gen.planSegment(i, newBytes);
        if (wanted.length > 0 && oldBuild === null) throw new GenerationError(500, "generator asked for old data of the empty build");
        const oldBytes = oldBuild === null ? new Uint8Array(0) : await readBuildRanges(bucket, oldBuild, wanted, counters);
        newBytesRead += newBytes.length;
        oldBytesRead += oldBytes.length;
        peakJs = Math.max(peakJs, newBytes.length + oldBytes.length);
        // Seconds of synchronous wasm follow: let everything else run first.
        await yieldToEventLoop();
        await writer.write(gen.encodeSegment(i, newBytes, oldBytes));
      }
      await writer.write(gen.finish());
      manifest = gen.manifest(from, to);
    } catch (e) {
      await writer.abort();
      throw e;
    } finally {
      gen.free();
    }
    const reader = new wasm.ManifestReader(manifest);
    const patchBlake3 = reader.patchBlake3;
    const patchSize = reader.patchSize;
    reader.free();
    await writer.finish();
    if (writer.bytesWritten !== patchSize) throw new GenerationError(500, `patch is ${writer.bytesWritten} bytes, its manifest says ${patchSize}`);
    const manifestBlake3 = wasm.blake3Hex(manifest);
    await bucket.put(keys.manifest(game, from, to), manifest, { httpMetadata: { contentType: "application/octet-stream" }, customMetadata: { blake3: manifestBlake3 } });
    const signer = manifestSigner(this.env.MANIFEST_SIGNING_KEY);
    const descriptor: UpdateDescriptor = {
      game,
      from,
      to,
      ...descriptorUrls(game, from, to, manifestBlake3, patchBlake3),
      manifestSize: manifest.length,
      manifestBlake3,
      patchSize,
      patchBlake3,
      ...(signer ? { manifestSignature: await (await signer).sign(manifest) } : {}),
    };
    const stats: GenerationStats = {
      startedAt: new Date(started).toISOString(),
      seconds: (Date.now() - started) / 1000,
      segments,
      newBytesRead,
      oldBytesRead,
      r2Reads: counters.reads,
      patchBytes: patchSize,
      peakWasmMemoryBytes: wasm.wasmMemoryBytes(),
      peakJsBufferBytes: peakJs + (8 << 20),
      level,
    };
    await putJson(bucket, keys.descriptor(game, from, to), descriptor);
    // The log: one object per generation run (the count is what "exactly once" is tested by).
    await putJson(bucket, `${keys.generationLog(game, from, to)}${started}-${crypto.randomUUID()}`, stats);
    return { descriptor, stats };
  }
}
