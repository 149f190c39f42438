// R2 layout (worker/README.md "Storage") and a writer that streams bytes into R2 in parts.

export const keys = {
  /** The build's record: the commit point of a publish (a build exists iff this exists). */
  build: (game: string, build: string) => `games/${game}/builds/${build}.json`,
  buildsPrefix: (game: string) => `games/${game}/builds/`,
  /** Everything one upload stored; `upload` keeps a retried or racing publish apart. */
  buildData: (game: string, build: string, upload: string) => `games/${game}/data/${build}/${upload}/build.tar`,
  buildIndex: (game: string, build: string, upload: string) => `games/${game}/data/${build}/${upload}/index.json`,
  buildSignature: (game: string, build: string, upload: string) => `games/${game}/data/${build}/${upload}/signature`,
  descriptor: (game: string, from: string, to: string) => `games/${game}/updates/${from}/${to}.json`,
  manifest: (game: string, from: string, to: string) => `games/${game}/manifests/${from}/${to}.manifest`,
  patch: (game: string, from: string, to: string) => `games/${game}/patches/${from}/${to}.patch`,
  /** One object per generation ever run for a pair: the count proves "exactly once". */
  generationLog: (game: string, from: string, to: string) => `log/generations/${game}/${from}/${to}/`,
};

/** What `games/{game}/builds/{build}.json` holds. */
export interface BuildRecord {
  game: string;
  build: string;
  upload: string;
  publishedAt: string;
  /** Bytes of the stored tar. */
  tarBytes: number;
  files: number;
  directories: number;
  symlinks: number;
  /** Bytes of file content. */
  fileBytes: number;
  signatureBytes: number;
  signatureBlake3: string;
  /** BLAKE3 of the stored index (the generator checks the index it reads against it). */
  indexBlake3: string;
}

/** Where one file's data is in the stored tar, and what it hashes to. */
export interface IndexEntry {
  offset: number;
  size: number;
  /** BLAKE3 of the file (hex), as the signer computed it while the build was uploaded. */
  blake3: string;
}

/** path -> its entry. A Map, never a plain object: paths are data (`__proto__` is a file name). */
export type TarIndex = Map<string, IndexEntry>;

/** The stored form of an index: a JSON array of [path, offset, size, blake3]. */
export function encodeIndex(index: TarIndex): string {
  return JSON.stringify([...index].map(([path, e]) => [path, e.offset, e.size, e.blake3]));
}

export function decodeIndex(text: string): TarIndex {
  const rows = JSON.parse(text) as unknown;
  if (!Array.isArray(rows)) throw new Error("stored index is not an array");
  const index: TarIndex = new Map();
  for (const row of rows) {
    if (!Array.isArray(row) || row.length !== 4 || typeof row[0] !== "string" || !Number.isSafeInteger(row[1]) || !Number.isSafeInteger(row[2]) || typeof row[3] !== "string") {
      throw new Error("stored index has a malformed row");
    }
    index.set(row[0], { offset: row[1], size: row[2], blake3: row[3] });
  }
  return index;
}

/** R2 multipart parts must all have the same size (at least 5 MiB), except the last. */
export const PART_BYTES = 8 << 20;

/**
 * Streams bytes into one R2 object: a single put when it all fits in one part, a
 * multipart upload of PART_BYTES parts otherwise. Holds at most one part in memory.
 * Nothing is visible at `key` until `finish()`; `abort()` leaves nothing behind.
 */
/** The first size of an R2PartWriter's buffer: it doubles up to PART_BYTES as bytes come. */
const FIRST_BUFFER_BYTES = 256 << 10;

export class R2PartWriter {
  /** Grown as needed: an object smaller than a part (a step's segments, often) never holds a whole part's buffer. */
  private buffer = new Uint8Array(0);
  private fill = 0;
  private upload: R2MultipartUpload | null = null;
  private parts: R2UploadedPart[] = [];
  private total = 0;
  private done = false;

  constructor(
    private readonly bucket: R2Bucket,
    private readonly key: string,
    private readonly options: R2PutOptions = {},
    /** Told the upload's id when a multipart upload starts (recorded, so that a sweep can abort it if this writer never ends). */
    private readonly onUploadStarted?: (uploadId: string) => Promise<void>,
  ) {}

  /** Bytes of the buffer held now (at most PART_BYTES). */
  get bufferBytes(): number {
    return this.buffer.byteLength;
  }

  get bytesWritten(): number {
    return this.total;
  }

  /**
   * Appends `bytes`, or what `source()` returns: a view that may be invalidated while a part
   * uploads (a view of wasm memory, detached when the memory grows), so it is taken again
   * after every await.
   */
  async write(bytes: Uint8Array | (() => Uint8Array)): Promise<void> {
    const source = typeof bytes === "function" ? bytes : () => bytes;
    const length = source().length;
    let i = 0;
    while (i < length) {
      const src = source();
      if (src.length !== length) throw new Error(`R2PartWriter: the bytes being written changed size (${length} -> ${src.length})`);
      const n = Math.min(PART_BYTES - this.fill, length - i);
      if (this.fill + n > this.buffer.length) {
        let size = Math.max(FIRST_BUFFER_BYTES, this.buffer.length);
        while (size < this.fill + n) size *= 2;
        const grown = new Uint8Array(Math.min(PART_BYTES, size));
        grown.set(this.buffer.subarray(0, this.fill));
        this.buffer = grown;
      }
      this.buffer.set(src.subarray(i, i + n), this.fill);
      this.fill += n;
      i += n;
      this.total += n;
      if (this.fill === PART_BYTES) await this.flushPart();
    }
  }

  private async flushPart(): Promise<void> {
    if (this.upload === null) {
      this.upload = await this.bucket.createMultipartUpload(this.key, this.options);
      await this.onUploadStarted?.(this.upload.uploadId);
    }
    const part = await this.upload.uploadPart(this.parts.length + 1, this.buffer.subarray(0, this.fill));
    this.parts.push(part);
    this.fill = 0;
  }

  async finish(): Promise<R2Object> {
    this.done = true;
    if (this.upload === null) {
      const obj = await this.bucket.put(this.key, this.buffer.subarray(0, this.fill), this.options);
      this.buffer = new Uint8Array(0);
      return obj;
    }
    if (this.fill > 0) await this.flushPart();
    this.buffer = new Uint8Array(0);
    return this.upload.complete(this.parts);
  }

  async abort(): Promise<void> {
    if (this.done) return;
    this.done = true;
    this.buffer = new Uint8Array(0);
    if (this.upload) await this.upload.abort().catch(() => {});
  }
}

/** Bytes of the buffer each concurrent R2 range read streams through. */
export const READ_CHUNK_BYTES = 256 << 10;

/**
 * Reads ranges of R2 objects through buffers allocated once, one per concurrent read ("lane"):
 * each body is read by a BYOB reader into its lane's buffer (the stream hands the buffer back
 * with every chunk), and each chunk goes to the caller's `sink` before the next read. Unlike
 * `arrayBuffer()`, which allocates a buffer the size of the body on every read (besides the
 * stream's own chunks), this leaves nothing for V8 to collect: garbage that the isolate holds
 * until a GC runs, and that may count against the Worker's memory limit meanwhile.
 */
export class R2RangeReader {
  private readonly free: ArrayBuffer[] = [];
  /** key -> the ETag of the object every read of it must get (the first read's, or `pin`'s). */
  private readonly etags = new Map<string, string>();
  /** R2 range reads made. */
  reads = 0;

  constructor(
    private readonly bucket: R2Bucket,
    readonly lanes: number,
    readonly chunkBytes = READ_CHUNK_BYTES,
  ) {
    for (let i = 0; i < lanes; i++) this.free.push(new ArrayBuffer(chunkBytes));
  }

  /**
   * Every read of `key` through this reader must get the object with this ETag (else it
   * throws): what was checked is what is read, even if the key is written meanwhile.
   */
  pin(key: string, etag: string): void {
    const had = this.etags.get(key);
    if (had !== undefined && had !== etag) throw new Error(`${key}: pinned to ETag ${had}, not ${etag}`);
    this.etags.set(key, etag);
  }

  /** The ETag the reads of `key` got (undefined before the first). */
  etagOf(key: string): string | undefined {
    return this.etags.get(key);
  }

  /** Bytes held in read buffers. */
  get bufferBytes(): number {
    return this.lanes * this.chunkBytes;
  }

  /**
   * Bytes [offset, offset + length) of the object at `key`, passed to `sink` in order, chunk
   * by chunk (`at`: the chunk's offset from `offset`). A chunk is a view of a reused buffer:
   * valid only during the call. Throws unless exactly `length` bytes arrive.
   */
  async read(key: string, offset: number, length: number, sink: (chunk: Uint8Array, at: number) => void): Promise<void> {
    let buffer: ArrayBuffer | undefined = this.free.pop();
    if (buffer === undefined) throw new Error(`R2RangeReader: more than ${this.lanes} concurrent reads`);
    try {
      const obj = await this.bucket.get(key, { range: { offset, length } });
      this.reads++;
      if (obj === null) throw new Error(`${key} disappeared`);
      const etag = this.etags.get(key);
      if (etag === undefined) this.etags.set(key, obj.etag);
      else if (obj.etag !== etag) throw new Error(`${key} changed during the generation (ETag ${etag}, now ${obj.etag})`);
      const reader = obj.body.getReader({ mode: "byob" });
      let at = 0;
      for (;;) {
        // Up to a whole buffer per turn; one byte more than the range to see its end.
        const want = Math.max(1, Math.min(buffer.byteLength, length - at));
        const { value, done }: ReadableStreamReadResult<Uint8Array> = await reader.readAtLeast(want, new Uint8Array(buffer, 0, want));
        // The read took the buffer over (detached it) and hands it back as value's buffer.
        buffer = value ? (value.buffer as ArrayBuffer) : new ArrayBuffer(this.chunkBytes);
        if (value && value.length > 0) {
          if (at + value.length > length) throw new Error(`${key}: range ${offset}+${length} returned more bytes`);
          sink(value, at);
          at += value.length;
        }
        if (done) break;
      }
      if (at !== length) throw new Error(`${key}: short read at ${offset + at} (${at} of ${length} bytes)`);
    } finally {
      this.free.push(buffer);
    }
  }
}

export async function getJson<T>(bucket: R2Bucket, key: string): Promise<T | null> {
  const obj = await bucket.get(key);
  return obj === null ? null : ((await obj.json()) as T);
}

export async function putJson(bucket: R2Bucket, key: string, value: unknown, options: R2PutOptions = {}): Promise<void> {
  await bucket.put(key, JSON.stringify(value), { httpMetadata: { contentType: "application/json" }, ...options });
}
