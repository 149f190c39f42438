// The transform phase of a generation (docs/FORMAT.md §2.8; worker/README.md, "Generation"):
// before any segment is made, each file that is a wasm module in both builds (same path,
// changed, at most MAX_TRANSFORM_MODULE_BYTES, below the format's 64 MiB cap) is read whole from
// R2 into the wasm module's own memory, checked against the BLAKE3 its upload's signer
// recorded (the bucket may serve any bytes), and normalized by the core
// (`normalizeWasmModuleFilled`, then `finishFilled` with the old module read again). The
// normalized form goes to a run object in R2, beside the run's other temporary objects
// (tmp/generations/{game}/{from}/{to}/{run}/, swept with them);
// the transform's record goes to every generator of the patch (`addWasmTransform`), whose
// ranges with `normalized: true` are answered from that object. The record carries a BLAKE3 of
// every MiB of the normalized form, which the core checks as it encodes: a normalized object
// changed in R2 fails the generation. A module the core does not transform (nothing
// renumbered, not a module it reads) is stored as it is. Where the core stores a module in the
// field-split layout (docs/FORMAT.md §2.8.7; its trial says so, for re-emitted code), the old
// module split goes to a run object too: the generator's old ranges of that file are of it
// (`oldSplit`), and it is checked whole against the BLAKE3 the core computed from the checked
// old module before any of its ranges is read (`verifySplitOld`).
import * as wasm from "./wasm";
import { GenerationError, wasmView, yieldToEventLoop, type StoredBuild } from "./reads";
import { R2PartWriter, R2RangeReader } from "./store";

/**
 * Largest module (old or new) the Worker transforms; larger ones are diffed as they are. The
 * format allows 64 MiB (MAX_WASM_TRANSFORM_BYTES, which `edgepatch diff` uses), but the phase
 * holds a module pair whole in wasm memory: about 4x the module at its peak. Measured under
 * `wrangler dev` (BENCHMARKS.md, "Worker: modules up to 20 MiB"): swc's 17.2 MiB module, a
 * 91.3 MB isolate as allocated, its patch 9,579 bytes instead of the plain diff's 163,415; the
 * same module padded to 20 MiB (a custom section of random bytes), 71.3 MiB of wasm memory and
 * a 102.5 MB isolate as allocated (77.1 MB live); onnxruntime's 27 MiB module, a 132.9 MB
 * isolate as allocated (104.2 MB live), over the limit. A module that did not fit would fail
 * its generation instead of falling back to the plain diff.
 */
export const MAX_TRANSFORM_MODULE_BYTES = 20 << 20;

/**
 * At most this many changed files are probed for the wasm magic (one 4-byte R2 read each),
 * those named *.wasm first: a tree of thousands of changed files must not spend its
 * invocation's subrequests on probes. The CLI probes every changed file (a local read).
 */
export const MAX_MAGIC_PROBES = 64;

/** A changed module of the pair that the patch stores normalized. */
export interface ModuleTransform {
  /** Its path in the new build. */
  path: string;
  /** The run object holding its normalized form. */
  normalizedKey: string;
  normalizedSize: number;
  /** The encoded transform (`PreparedWasmTransform.record`, for `addWasmTransform`). */
  record: Uint8Array;
  /** In the field-split layout: the old module split (the run object, its size and BLAKE3). */
  oldSplit?: OldSplit;
}

/** The run object of a split module's old module in the field-split layout. */
export interface OldSplit {
  key: string;
  size: number;
  blake3: string;
  /** The old module's path, where it is not the module's own (a renamed module); absent: the module's path. */
  path?: string;
}

/** The split old module at `oldPath` that one of `transforms` made (by the old file's path: a renamed module's is not its own). */
export function splitOldAt(transforms: ReadonlyMap<string, ModuleTransform>, oldPath: string): OldSplit | undefined {
  for (const t of transforms.values()) if (t.oldSplit !== undefined && (t.oldSplit.path ?? t.path) === oldPath) return t.oldSplit;
  return undefined;
}

/**
 * How a fanned-out run's transforms reach its steps and its assembly (queue messages, the
 * pair's object): the record is a run object too (it can be MiBs: the side info), pinned by
 * its BLAKE3, which the run keeps.
 */
export interface StoredTransform {
  path: string;
  normalizedKey: string;
  normalizedSize: number;
  recordKey: string;
  recordBlake3: string;
  oldSplit?: OldSplit;
}

/** A changed `.wasm` file the phase does not transform: its old or new version is larger than MAX_TRANSFORM_MODULE_BYTES. */
export interface ModuleAboveCap {
  path: string;
  /** Its size in the new build. */
  bytes: number;
}

/** At most this many modules above the cap are listed in a run's log. */
export const MAX_LISTED_ABOVE_CAP = 16;

export interface TransformStats {
  /** Modules normalized (stored so), of them in the field-split layout, and modules read whole but stored as they are. */
  modules: number;
  split: number;
  untransformed: number;
  /** Bytes of modules read whole (old and new) and of normalized forms written. */
  bytesRead: number;
  normalizedBytes: number;
  /** Files probed for the wasm magic. */
  probes: number;
  seconds: number;
  /** wasm linear memory after the phase (it only grows). */
  wasmMemoryBytes: number;
  /**
   * Changed `.wasm` files (by name, not probed) diffed as they are because a version is above
   * the cap, so that an owner sees why their patches are larger than `edgepatch diff`'s; the
   * first MAX_LISTED_ABOVE_CAP.
   */
  modulesAboveCap: ModuleAboveCap[];
}

const WASM_MAGIC = [0x00, 0x61, 0x73, 0x6d];

/**
 * Bytes of wasm memory reserved in one piece before the first module is read, when the
 * memory is smaller. The module's allocator (dlmalloc) takes each memory growth as a region of
 * its own and never serves one allocation from two: after the phase's large buffers (the
 * modules, the normalized form) are freed, the generator's largest allocation did not fit
 * any region they left and the memory grew again. Measured on esbuild-wasm-adj's 13.3 MiB
 * module (Node, this module, the Worker's order of allocations): generation after the phase
 * 88.7 MiB of wasm memory without this, 65.2 MiB with it (generation alone: 72.3 MiB);
 * reserving 56 or 60 MiB gave 89.2 / 93.9 MiB, 62 MiB 63.2 MiB (measured when this was
 * chosen; BENCHMARKS.md's history in git). An empirical fit to this allocator and
 * this generator, not a bound: re-measure when either changes.
 */
export const TRANSFORM_ARENA_BYTES = 64 << 20;

/**
 * Wasm memory the phase takes for a module of N bytes, as a multiple of N: the arena is at least
 * this, so that the phase fits in it. Below it, the phase outgrew the arena and the memory grew
 * past what it needs: swc's module padded to 20 MiB took 86.5 MiB of wasm memory in a 64 MiB
 * arena, 71.2 MiB in a 70 MiB one; padded to 24 MiB, 85.2 MiB in an 84 MiB one (Node, this
 * module; BENCHMARKS.md, "Worker: modules up to 20 MiB"). Modules up to 18.3 MiB keep the 64
 * MiB arena.
 */
export const ARENA_PER_MODULE_BYTE = 3.5;

/**
 * Grows the wasm memory once, in one region, to TRANSFORM_ARENA_BYTES or ARENA_PER_MODULE_BYTE
 * times `moduleBytes` (the larger of the pair's two modules), whichever is larger, if it is
 * smaller.
 */
function reserveArena(moduleBytes: number): void {
  const MiB = 1 << 20;
  const bytes = Math.max(TRANSFORM_ARENA_BYTES, Math.ceil((ARENA_PER_MODULE_BYTE * moduleBytes) / MiB) * MiB);
  if (wasm.wasmMemoryBytes() >= bytes) return;
  wasm.reserveWasmMemory(bytes);
}

/** The run object of the normalized form of the `n`th transformed module. */
export function normalizedKey(prefix: string, n: number): string {
  return `${prefix}wasm/${n}.normalized`;
}

/** The run object of the `n`th transformed module's old module split, in the field-split layout. */
export function oldSplitKey(prefix: string, n: number): string {
  return `${prefix}wasm/${n}.old-split`;
}

/** A new file that may be a module to normalize, and the old file it is transformed against. */
interface Candidate {
  path: string;
  /** The old file at the same path, or the one the new file replaced under another name. */
  oldPath: string;
}

/**
 * The new build's files that may be a module to normalize, *.wasm first: changed files with
 * an old file at the same path, and files renamed from an old one (content-hashed names:
 * `renamedCounterparts`, the core's rule, which the CLI's diffs use too).
 */
function candidates(oldBuild: StoredBuild, newBuild: StoredBuild): { candidates: Candidate[]; aboveCap: ModuleAboveCap[] } {
  const out: Candidate[] = [];
  const aboveCap: ModuleAboveCap[] = [];
  const add = (path: string, oldPath: string) => {
    const [e, o] = [newBuild.index.get(path)!, oldBuild.index.get(oldPath)!];
    if (o.blake3 === e.blake3) return;
    if (e.size < 8 || o.size < 8) return;
    if (e.size > MAX_TRANSFORM_MODULE_BYTES || o.size > MAX_TRANSFORM_MODULE_BYTES) {
      if (path.toLowerCase().endsWith(".wasm") && aboveCap.length < MAX_LISTED_ABOVE_CAP) aboveCap.push({ path, bytes: e.size });
      return;
    }
    out.push({ path, oldPath });
  };
  for (const path of newBuild.index.keys()) if (oldBuild.index.has(path)) add(path, path);
  const [oldPaths, newPaths] = [[...oldBuild.index.keys()], [...newBuild.index.keys()]];
  const pairs = wasm.renamedCounterparts(oldPaths, newPaths);
  for (let k = 0; k < pairs.length; k += 2) add(newPaths[pairs[k]], oldPaths[pairs[k + 1]]);
  const named = (c: Candidate) => (c.path.toLowerCase().endsWith(".wasm") ? 0 : 1);
  return { candidates: out.sort((a, b) => named(a) - named(b)).slice(0, MAX_MAGIC_PROBES), aboveCap };
}

async function startsWasm(reader: R2RangeReader, build: StoredBuild, path: string): Promise<boolean> {
  const e = build.index.get(path)!;
  let magic = true;
  await reader.read(build.tarKey, e.offset, 4, (chunk, at) => {
    for (let k = 0; k < chunk.length; k++) if (chunk[k] !== WASM_MAGIC[at + k]) magic = false;
  });
  return magic;
}

/**
 * The whole file at `path` of `build`, read into a buffer in the wasm module's memory and
 * checked against the BLAKE3 recorded at upload (hashed as it arrives: no second read).
 */
async function readModule(reader: R2RangeReader, build: StoredBuild, path: string): Promise<wasm.ModuleBuffer> {
  const e = build.index.get(path)!;
  const buffer = new wasm.ModuleBuffer(e.size);
  const hasher = new wasm.FileHasher();
  try {
    let view = buffer.view();
    await reader.read(build.tarKey, e.offset, e.size, (chunk, at) => {
      hasher.update(chunk);
      // The hasher may grow the memory, which detaches the view.
      if (view.byteLength === 0) view = buffer.view();
      view.set(chunk, at);
    });
    if (hasher.finish() !== e.blake3) throw new GenerationError(500, `integrity: stored bytes of ${build.record.build}/${path} do not match the BLAKE3 recorded at upload`);
    return buffer;
  } catch (e) {
    buffer.free();
    throw e;
  } finally {
    hasher.free();
  }
}

/**
 * The transform phase: every changed module of the pair the core normalizes, its normalized
 * form written to `normalizedKey(prefix, n)` through `writer(key)` (a writer whose multipart
 * upload the run records, so that a sweep aborts it if this dies). Modules are done one at a
 * time; each is held whole only in the wasm module's memory (old and new, then the normalized
 * form), never in JS.
 */
export async function prepareTransforms(
  bucket: R2Bucket,
  oldBuild: StoredBuild,
  newBuild: StoredBuild,
  prefix: string,
  writer: (name: string, key: string) => { writer: R2PartWriter; forget: () => Promise<void> },
): Promise<{ transforms: ModuleTransform[]; stats: TransformStats }> {
  const started = Date.now();
  const reader = new R2RangeReader(bucket, 1);
  const transforms: ModuleTransform[] = [];
  const found = candidates(oldBuild, newBuild);
  const stats: TransformStats = { modules: 0, split: 0, untransformed: 0, bytesRead: 0, normalizedBytes: 0, probes: 0, seconds: 0, wasmMemoryBytes: 0, modulesAboveCap: found.aboveCap };
  for (const { path, oldPath } of found.candidates) {
    stats.probes += 2;
    if (!(await startsWasm(reader, newBuild, path)) || !(await startsWasm(reader, oldBuild, oldPath))) continue;
    reserveArena(Math.max(newBuild.index.get(path)!.size, oldBuild.index.get(oldPath)!.size));
    const oldModule = await readModule(reader, oldBuild, oldPath);
    let newModule: wasm.ModuleBuffer;
    try {
      newModule = await readModule(reader, newBuild, path);
    } catch (e) {
      oldModule.free();
      throw e;
    }
    stats.bytesRead += oldBuild.index.get(oldPath)!.size + newBuild.index.get(path)!.size;
    // Seconds of synchronous wasm follow (4-6 s for a 14 MB module): let everything else run first.
    await yieldToEventLoop();
    // Consumes both buffers (the core frees each as soon as it is done with it: the old one
    // before the new one's forward transform, the phase's peak).
    const normalized = wasm.normalizeWasmModuleFilled(path, oldModule, newModule);
    if (normalized === undefined) {
      stats.untransformed++;
      continue;
    }
    // The old module again, read and checked anew, for the core to choose the layout (the
    // field-split one needs it split): held with the normalized form, not through the
    // forward transform. Holding it there cost 13 MiB more wasm memory on esbuild-wasm-adj
    // (BENCHMARKS.md, "Generator: the field-split layout").
    let prepared: wasm.PreparedWasmTransform | undefined;
    try {
      const oldAgain = await readModule(reader, oldBuild, oldPath);
      stats.bytesRead += oldBuild.index.get(oldPath)!.size;
      await yieldToEventLoop();
      // A renamed module's patch names its old file as the one read split (docs/FORMAT.md §2.8.1).
      if (oldPath !== path) normalized.renamed(oldPath);
      prepared = normalized.finishFilled(oldAgain);
    } finally {
      normalized.free();
    }
    if (prepared === undefined) {
      stats.untransformed++;
      continue;
    }
    try {
      const n = transforms.length;
      const store = async (name: string, key: string, view: () => Uint8Array) => {
        const { writer: w, forget } = writer(name, key);
        try {
          await w.write(wasmView(view));
          await w.finish();
          await forget();
        } catch (e) {
          await w.abort();
          await forget().catch(() => {});
          throw e;
        }
      };
      const key = normalizedKey(prefix, n);
      await store(`wasm-${n}`, key, () => prepared.normalizedView());
      const splitBlake3 = prepared.oldSplitBlake3;
      let oldSplit: OldSplit | undefined;
      if (splitBlake3 !== undefined) {
        oldSplit = { key: oldSplitKey(prefix, n), size: oldBuild.index.get(oldPath)!.size, blake3: splitBlake3, ...(oldPath !== path ? { path: oldPath } : {}) };
        await store(`wasm-${n}-old-split`, oldSplit.key, () => prepared.oldSplitView());
        stats.split++;
      }
      transforms.push({ path, normalizedKey: key, normalizedSize: prepared.normalizedSize, record: prepared.record, oldSplit });
      stats.modules++;
      stats.normalizedBytes += prepared.normalizedSize;
    } finally {
      prepared.free();
    }
  }
  stats.seconds = (Date.now() - started) / 1000;
  stats.wasmMemoryBytes = wasm.wasmMemoryBytes();
  return { transforms, stats };
}

/** Stores each transform's record as a run object (`<normalized key>.record`), for a fanned-out run. */
export async function storeTransforms(bucket: R2Bucket, transforms: ModuleTransform[]): Promise<StoredTransform[]> {
  const out: StoredTransform[] = [];
  for (const t of transforms) {
    const recordKey = `${t.normalizedKey}.record`;
    await bucket.put(recordKey, t.record);
    out.push({ path: t.path, normalizedKey: t.normalizedKey, normalizedSize: t.normalizedSize, recordKey, recordBlake3: wasm.blake3Hex(t.record), oldSplit: t.oldSplit });
  }
  return out;
}

/** A fanned-out run's transforms, each record read back and checked against the BLAKE3 the run kept. */
export async function loadTransforms(bucket: R2Bucket, stored: StoredTransform[] | undefined): Promise<ModuleTransform[]> {
  const out: ModuleTransform[] = [];
  for (const s of stored ?? []) {
    const obj = await bucket.get(s.recordKey);
    if (obj === null) throw new GenerationError(500, `the wasm transform record of ${s.path} is missing (${s.recordKey})`);
    const record = new Uint8Array(await obj.arrayBuffer());
    if (wasm.blake3Hex(record) !== s.recordBlake3) throw new GenerationError(500, `integrity: the stored wasm transform record of ${s.path} does not match its BLAKE3`);
    out.push({ path: s.path, normalizedKey: s.normalizedKey, normalizedSize: s.normalizedSize, record, oldSplit: s.oldSplit });
  }
  return out;
}

/** Hands `transforms` to a generator (before its header or its first segment). */
export function addTransforms(gen: wasm.PatchGenerator, transforms: ModuleTransform[]): void {
  for (const t of transforms) gen.addWasmTransform(t.record);
}

/**
 * Checks each split old module that `ranges` (old ranges of a segment) read from, in full and
 * once per `verified` set (a generation, or a fanned-out step), against the BLAKE3 the core
 * computed from the checked old module. Through `reader`, which pins the object's ETag: the
 * bytes checked are the bytes the segments then read. Returns the bytes read.
 */
export async function verifySplitOld(reader: R2RangeReader, transforms: ReadonlyMap<string, ModuleTransform>, ranges: Iterable<wasm.ByteRange>, verified: Set<string>): Promise<number> {
  let bytes = 0;
  for (const r of ranges) {
    if (!r.oldSplit || r.length === 0 || verified.has(r.path)) continue;
    const split = splitOldAt(transforms, r.path);
    if (split === undefined) throw new GenerationError(500, `generator asked for the split old module of ${r.path}, which this generation did not make`);
    const hasher = new wasm.FileHasher();
    try {
      await reader.read(split.key, 0, split.size, (chunk) => hasher.update(chunk));
      if (hasher.finish() !== split.blake3) throw new GenerationError(500, `integrity: the stored split old module of ${r.path} does not match the BLAKE3 its transform recorded`);
    } finally {
      hasher.free();
    }
    verified.add(r.path);
    bytes += split.size;
  }
  return bytes;
}
