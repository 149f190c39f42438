// Reading stored builds for a generation: a build's record, index and signature loaded and
// checked, ranges of its tar read by R2 range reads straight into the generator's buffers in
// wasm memory, and the files read checked against their BLAKE3 (the new build's as the
// generator reads them, the old build's whole and once per generation).
import * as wasm from "./wasm";
import { decodeIndex, keys, getJson, type BuildRecord, type R2RangeReader, type TarIndex } from "./store";

/** Bytes [offset, offset + length) of the file at `path` of a build (the generator's ranges). */
export type BuildRange = wasm.ByteRange;

export class GenerationError extends Error {
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

/** A stored build, its signature and index checked against the BLAKE3s its record names. */
export async function loadBuild(bucket: R2Bucket, game: string, build: string): Promise<StoredBuild> {
  const record = await getJson<BuildRecord>(bucket, keys.build(game, build));
  if (record === null) throw new GenerationError(404, `no build ${game}/${build}`);
  const [indexObj, sig] = await Promise.all([bucket.get(keys.buildIndex(game, build, record.upload)), bucket.get(keys.buildSignature(game, build, record.upload))]);
  if (indexObj === null || sig === null) throw new GenerationError(500, `build ${game}/${build}: stored data incomplete`);
  const [indexBytes, signature] = await Promise.all([indexObj.arrayBuffer(), sig.arrayBuffer()]).then((b) => b.map((x) => new Uint8Array(x)));
  if (wasm.blake3Hex(signature) !== record.signatureBlake3) throw new GenerationError(500, `build ${game}/${build}: stored signature does not match its record's BLAKE3`);
  if (wasm.blake3Hex(indexBytes) !== record.indexBlake3) throw new GenerationError(500, `build ${game}/${build}: stored index does not match its record's BLAKE3`);
  return { record, tarKey: keys.buildData(game, build, record.upload), index: decodeIndex(new TextDecoder().decode(indexBytes)), signature };
}

/** Gaps up to this size between wanted spans are read through rather than split into two R2 reads. */
const READ_GAP = 256 << 10;
const MAX_READ = 16 << 20;
export const READ_CONCURRENCY = 4;

/**
 * Groups spans of objects, sorted by key then start, into R2 reads: a span joins the read
 * before it (same object) across a gap of at most READ_GAP, while the read stays within
 * MAX_READ bytes. With `disjoint`, a span that overlaps the read before starts a read of its
 * own (a reader that walks each read's members in order needs them one after another).
 */
export function groupReads<T>(sorted: T[], at: (t: T) => [key: string, start: number, end: number], disjoint = false): { key: string; start: number; end: number; members: T[] }[] {
  const groups: { key: string; start: number; end: number; members: T[] }[] = [];
  for (const m of sorted) {
    const [key, start, end] = at(m);
    const g = groups[groups.length - 1];
    if (g && g.key === key && start - g.end <= READ_GAP && (!disjoint || start >= g.end) && Math.max(g.end, end) - g.start <= MAX_READ) {
      g.end = Math.max(g.end, end);
      g.members.push(m);
    } else {
      groups.push({ key, start, end, members: [m] });
    }
  }
  return groups;
}

/**
 * Lets the event loop go idle for a moment, so queued requests, timers and I/O run. Without it
 * (seen under local workerd, where R2 is simulated in the same process) a generation held the
 * thread from start to end: every other request to the Worker and the inspector waited for it,
 * and a connection reused right after it was dropped or stalled (worker/README.md, "Known
 * issues"). 5 ms rather than 0: with 0 some waiting requests did not get through and waited
 * for a later segment.
 */
export function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 5));
}

/** Where one stored build's ranges are in an object (`src`) and in their concatenation (`dst`). */
interface Span {
  src: number;
  len: number;
  dst: number;
}

/** The R2 range reads of a stored build's tar that fetch the concatenation of some of its ranges. */
export interface BuildReads {
  /** Bytes of the concatenation. */
  total: number;
  /**
   * One R2 read each: bytes [start, end) of the object at `key` (the build's tar, or the
   * normalized form of a module), and the spans it holds, sorted by `src`.
   */
  groups: { key: string; start: number; end: number; spans: Span[] }[];
}

/**
 * Reads `plan` of a stored build into `target()`: a view of `plan.total` bytes, taken again
 * for every chunk (it may be a view of wasm memory, which a memory growth detaches). The
 * reads run a few at a time; each chunk is scattered into its spans as it arrives, so no
 * read is ever held whole.
 */
export async function readBuildRanges(reader: R2RangeReader, plan: BuildReads, target: () => Uint8Array): Promise<void> {
  if (target().length !== plan.total) throw new GenerationError(500, `read target is ${target().length} bytes, the ranges ${plan.total}`);
  let next = 0;
  const lane = async () => {
    while (next < plan.groups.length) {
      const g = plan.groups[next++];
      // Chunks arrive in order: spans before `first` have all their bytes.
      let first = 0;
      await reader.read(g.key, g.start, g.end - g.start, (chunk, at) => {
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
export function wasmView(take: () => Uint8Array): () => Uint8Array {
  let view = take();
  return () => (view.byteLength === 0 ? (view = take()) : view);
}

/**
 * Hashes the new build's files from the bytes the generator reads, in the order it reads them
 * (segments cover the new files in order), so that every file read is checked against the new
 * signature's per-file BLAKE3 (through the manifest, which copies it) before the patch is signed.
 * The bytes are hashed where they are, in the generator's buffer in wasm memory
 * (`hashNewBytes`): no copy through JS. A module stored normalized is read as its normalized
 * form, which the core checks against its transform's record; the module itself was checked
 * whole by the transform phase (transform.ts), so its ranges are skipped here.
 */
export class NewFileHasher {
  private readonly hasher = new wasm.FileHasher();
  private current: { path: string; size: number; done: number } | null = null;
  /** path -> BLAKE3 of every file read in full. */
  readonly hashed = new Map<string, string>();

  constructor(private readonly build: StoredBuild) {}

  /** The bytes of `ranges` of the segment data the generator holds (`newBytesTarget`, filled). */
  update(ranges: BuildRange[], gen: wasm.PatchGenerator): void {
    let at = 0;
    for (const r of ranges) {
      if (r.length === 0) continue;
      if (r.normalized) {
        at += r.length;
        continue;
      }
      const size = this.build.index.get(r.path)!.size;
      if (this.current === null || this.current.path !== r.path) {
        if (this.current !== null) throw new GenerationError(500, `integrity: ${this.current.path} was not read to its end before ${r.path}`);
        if (r.offset !== 0) throw new GenerationError(500, `integrity: ${r.path} was not read from its start`);
        this.current = { path: r.path, size, done: 0 };
      }
      if (r.offset !== this.current.done) throw new GenerationError(500, `integrity: ${r.path} was not read in order`);
      gen.hashNewBytes(this.hasher, at, r.length);
      at += r.length;
      this.current.done += r.length;
      if (this.current.done === size) {
        this.hashed.set(r.path, this.hasher.finish());
        this.current = null;
      }
    }
  }

  /** Throws unless every file read hashes to what `manifest` lists for it. */
  check(manifest: wasm.ManifestReader): void {
    if (this.current !== null) throw new GenerationError(500, `integrity: ${this.current.path} was not read to its end`);
    for (const [path, blake3] of this.hashed) {
      const listed = manifest.lookup(path);
      if (listed === undefined || listed.blake3 !== blake3) {
        throw new GenerationError(500, `integrity: stored bytes of ${this.build.record.build}/${path} do not match the build's signature (BLAKE3 ${blake3})`);
      }
    }
  }

  free(): void {
    this.hasher.free();
  }
}

/**
 * Checks each file of `ranges` (old files the generator reads from; in a fanned-out step new
 * files it reads only part of; in an assembly the old files its steps read), in full and once
 * per generation, against the BLAKE3 the upload's signer computed (kept in the build's index,
 * which is checked against its record): the ranges the generator reads are parts of files
 * known to be intact in R2. The reads go through `reader`, which pins the tar's ETag: the
 * object checked is the object the generator reads. Files that lie close together in the tar
 * are checked through one read (gaps of up to READ_GAP, reads of up to MAX_READ, as
 * `planBuildReads` groups): a tree with hundreds of changed files makes a few reads, not one
 * subrequest per file (three-tree: 948 R2 reads before, 25 after; BENCHMARKS.md "Generator CPU
 * through the Worker, session 15").
 */
export async function verifyFiles(reader: R2RangeReader, build: StoredBuild, ranges: Iterable<{ path: string; length: number }>, verified: Set<string>): Promise<number> {
  const files: { path: string; offset: number; size: number; blake3: string }[] = [];
  const wanted = new Set<string>();
  for (const r of ranges) {
    // A range of no bytes needs no file: every file checked here has at least one byte.
    if (r.length === 0 || verified.has(r.path) || wanted.has(r.path)) continue;
    const entry = build.index.get(r.path);
    if (entry === undefined) throw new GenerationError(500, `integrity: ${r.path} is not a file of ${build.record.build}`);
    wanted.add(r.path);
    files.push({ path: r.path, offset: entry.offset, size: entry.size, blake3: entry.blake3 });
  }
  // In tar order, grouped into reads whose files follow one another (each is its own tar member).
  files.sort((a, b) => a.offset - b.offset);
  const groups = groupReads(files, (f) => [build.tarKey, f.offset, f.offset + f.size], true);
  let bytes = 0;
  const hasher = new wasm.FileHasher();
  try {
    for (const g of groups) {
      // Let waiting requests through between reads of up to MAX_READ (see yieldToEventLoop):
      // an assembly checks gigabytes here.
      await yieldToEventLoop();
      // Chunks arrive in order: `k` is the file being hashed, `done` its bytes so far.
      const members = g.members;
      let k = 0;
      let done = 0;
      await reader.read(g.key, g.start, g.end - g.start, (chunk, at) => {
        let a = g.start + at;
        const b = a + chunk.length;
        while (a < b && k < members.length) {
          const f = members[k];
          const from = Math.max(a, f.offset + done);
          const to = Math.min(b, f.offset + f.size);
          if (from < to) {
            hasher.update(chunk.subarray(from - (g.start + at), to - (g.start + at)));
            done += to - from;
          }
          if (done < f.size) {
            a = b;
            continue;
          }
          if (hasher.finish() !== f.blake3) throw new GenerationError(500, `integrity: stored bytes of ${build.record.build}/${f.path} do not match the BLAKE3 recorded at upload`);
          verified.add(f.path);
          bytes += f.size;
          k++;
          done = 0;
        }
      });
      if (k !== members.length) throw new GenerationError(500, `integrity: stored bytes of ${build.record.build}/${members[k].path} ended early`);
    }
  } finally {
    hasher.free();
  }
  return bytes;
}
