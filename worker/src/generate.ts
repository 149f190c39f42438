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
import { DurableObject } from "cloudflare:workers";
import * as wasm from "./wasm";
import { keys, getJson, putJson, R2PartWriter, R2RangeReader, PART_BYTES, type BuildRecord, type TarIndex } from "./store";
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
  /**
   * Bytes of the buffers the generation holds in JS: the R2 read buffers and one R2 part. The
   * segment data itself is read into wasm memory (in `peakWasmMemoryBytes`).
   */
  jsBufferBytes: number;
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
export interface StoredBuild {
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

/** Where one stored build's ranges are in its tar (`src`) and in their concatenation (`dst`). */
interface Span {
  src: number;
  len: number;
  dst: number;
}

/** The R2 range reads of a stored build's tar that fetch the concatenation of some of its ranges. */
export interface BuildReads {
  /** Bytes of the concatenation. */
  total: number;
  /** One R2 read each: tar bytes [start, end), and the spans it holds, sorted by `src`. */
  groups: { start: number; end: number; spans: Span[] }[];
}

/**
 * Plans the reads of the concatenation of `ranges` of a stored build: spans sorted, merged
 * across small gaps (tar headers, neighbouring files) into reads of at most MAX_READ bytes.
 */
export function planBuildReads(build: StoredBuild, ranges: BuildRange[]): BuildReads {
  let total = 0;
  const spans = ranges.map((r) => {
    const entry = build.index[r.path];
    if (entry === undefined) throw new GenerationError(500, `generator asked for ${r.path}, which is not a file of ${build.record.build}`);
    if (r.offset < 0 || r.length < 0 || r.offset + r.length > entry[1]) throw new GenerationError(500, `generator asked for bytes ${r.offset}+${r.length} of ${r.path} (${entry[1]} bytes)`);
    const span = { src: entry[0] + r.offset, len: r.length, dst: total };
    total += r.length;
    return span;
  });
  const sorted = spans.filter((s) => s.len > 0).sort((a, b) => a.src - b.src);
  const groups: BuildReads["groups"] = [];
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
  return { total, groups };
}

/**
 * Reads `plan` of a stored build into `target()`: a view of `plan.total` bytes, taken again
 * for every chunk (it may be a view of wasm memory, which a memory growth detaches). The
 * reads run a few at a time; each chunk is scattered into its spans as it arrives, so no
 * read is ever held whole.
 */
export async function readBuildRanges(reader: R2RangeReader, build: StoredBuild, plan: BuildReads, target: () => Uint8Array): Promise<void> {
  if (target().length !== plan.total) throw new GenerationError(500, `read target is ${target().length} bytes, the ranges ${plan.total}`);
  let next = 0;
  const lane = async () => {
    while (next < plan.groups.length) {
      const g = plan.groups[next++];
      // Chunks arrive in order: spans before `first` have all their bytes.
      let first = 0;
      await reader.read(build.tarKey, g.start, g.end - g.start, (chunk, at) => {
        const a = g.start + at;
        const b = a + chunk.length;
        const out = target();
        while (first < g.spans.length && g.spans[first].src + g.spans[first].len <= a) first++;
        for (let k = first; k < g.spans.length && g.spans[k].src < b; k++) {
          const s = g.spans[k];
          const from = Math.max(a, s.src);
          const to = Math.min(b, s.src + s.len);
          if (from < to) out.set(chunk.subarray(from - a, to - a), s.dst + (from - s.src));
        }
      });
    }
  };
  await Promise.all(Array.from({ length: Math.min(reader.lanes, plan.groups.length) }, lane));
}

/**
 * A view of a buffer in the wasm module's memory: `take()` again once the view is detached
 * (a memory growth detaches every view of the old memory; a detached view has length 0).
 */
function wasmView(take: () => Uint8Array): () => Uint8Array {
  let view = take();
  return () => (view.byteLength === 0 ? (view = take()) : view);
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
    // Segment data goes from R2 straight into the generator's own buffers in wasm memory,
    // through the reader's few reused buffers: nothing is allocated per segment or per read.
    const r2 = new R2RangeReader(bucket, READ_CONCURRENCY);
    let newBytesRead = 0;
    let oldBytesRead = 0;
    let manifest: Uint8Array;
    let segments = 0;
    try {
      await writer.write(gen.header());
      segments = gen.segmentCount;
      for (let i = 0; i < segments; i++) {
        const newReads = planBuildReads(newBuild, gen.newRanges(i));
        gen.newBytesTarget(newReads.total);
        await readBuildRanges(r2, newBuild, newReads, wasmView(() => gen.newBytesView()));
        const wanted = gen.planFilledSegment(i);
        if (wanted.length > 0 && oldBuild === null) throw new GenerationError(500, "generator asked for old data of the empty build");
        const oldReads = oldBuild === null ? { total: 0, groups: [] } : planBuildReads(oldBuild, wanted);
        gen.oldBytesTarget(oldReads.total);
        if (oldBuild !== null) await readBuildRanges(r2, oldBuild, oldReads, wasmView(() => gen.oldBytesView()));
        newBytesRead += newReads.total;
        oldBytesRead += oldReads.total;
        // Seconds of synchronous wasm follow: let everything else run first.
        await yieldToEventLoop();
        gen.encodeFilledSegment(i);
        await writer.write(wasmView(() => gen.segmentOutput()));
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
      r2Reads: r2.reads,
      patchBytes: patchSize,
      peakWasmMemoryBytes: wasm.wasmMemoryBytes(),
      jsBufferBytes: r2.bufferBytes + PART_BYTES,
      level,
    };
    await putJson(bucket, keys.descriptor(game, from, to), descriptor);
    // The log: one object per generation run (the count is what "exactly once" is tested by).
    await putJson(bucket, `${keys.generationLog(game, from, to)}${started}-${crypto.randomUUID()}`, stats);
    return { descriptor, stats };
  }
}
