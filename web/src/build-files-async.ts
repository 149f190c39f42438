// Builds read and written without synchronous access handles (WebKitGTK has no backend for
// them), for an applier whose callbacks are synchronous:
//
// - old files are read from File snapshots with FileReaderSync (dedicated workers);
// - new bytes are queued during a push and written through writable streams after it
//   (`settle`), a piece of patch at a time (`pushBytes`), so the queue stays small;
// - files the patch keeps unchanged are copied by the sink itself (`copyOldFile`), read from
//   the old snapshot and hashed as they are written: their bytes never pass through the
//   module or the queue, and a copy whose BLAKE3 is not the manifest's fails the update;
// - a writable stream commits on close(), so `durable` closes the open one (the next write
//   reopens it keeping its data), and a resume reads back from File snapshots. Reopening
//   keeps the data by copying it (Chromium does; measured in BENCHMARKS.md), so inside a
//   file a resume point is made durable only once the file has doubled since its stream
//   was opened: copies stay under twice the file's size, and an interruption loses at
//   most half of a file's progress.

import { Signer } from "../../crates/edgepatch-wasm/pkg/web-apply/edgepatch_wasm.js";
import type { ListedEntry, ManifestEntry } from "../../crates/edgepatch-wasm/pkg/web-apply/edgepatch_wasm.js";
import { type NewBuildFiles, NewBuildEntries, type OldBuildFiles } from "./build-files.js";
import { blake3Of } from "./build-files-sync.js";
import { IntegrityError } from "./errors.js";
import { DirTree, OPFS_PARALLELISM, forEachLimited } from "./layout.js";

/** FileReaderSync (dedicated workers; not in TypeScript's DOM lib). */
interface FileReaderSyncLike {
  readAsArrayBuffer(blob: Blob): ArrayBuffer;
}
function readerSync(): FileReaderSyncLike {
  const R = (globalThis as { FileReaderSync?: new () => FileReaderSyncLike }).FileReaderSync;
  if (!R) throw new Error("FileReaderSync is missing (the applier runs in a dedicated worker)");
  return new R();
}

/** Fills all of `target` from `file` at `offset`, synchronously. */
function readSlice(reader: FileReaderSyncLike, file: File, offset: number, target: Uint8Array, what: string): number {
  if (offset + target.length > file.size) throw new Error(`${what}: ${target.length} bytes at ${offset} are past its end (${file.size} bytes)`);
  const got = reader.readAsArrayBuffer(file.slice(offset, offset + target.length));
  if (got.byteLength !== target.length) throw new Error(`${what}: read ${got.byteLength} of ${target.length} bytes at ${offset}`);
  target.set(new Uint8Array(got));
  return target.length;
}

/** Reading 4 MiB at a time when copying or hashing. */
const COPY_CHUNK = 4 << 20;
/** Consecutive writes to a file are joined up to this size before they reach the stream. */
const JOIN_BYTES = 1 << 20;

/** The old build, from File snapshots (old files never change while it is read). */
export class AsyncOldBuild implements OldBuildFiles {
  readonly files = new Map<string, File>();
  /** Each old file's BLAKE3 as its stored manifest lists it (what a kept copy must hash to). */
  readonly blake3 = new Map<string, string>();
  entries: ListedEntry[] = [];
  private reader: FileReaderSyncLike | null = null;

  async open(dir: FileSystemDirectoryHandle, entries: ManifestEntry[]): Promise<void> {
    this.entries = entries;
    const tree = new DirTree(dir, false);
    const files = entries.filter((e) => e.kind === "file");
    const snapshots: File[] = new Array(files.length);
    await forEachLimited(files, OPFS_PARALLELISM, async (e, i) => {
      snapshots[i] = await (await tree.file(e.path)).getFile();
    });
    files.forEach((e, i) => {
      this.files.set(e.path, snapshots[i]!);
      this.blake3.set(e.path, e.blake3);
    });
  }
  listing(): ListedEntry[] {
    return this.entries;
  }
  file(path: string): File {
    const f = this.files.get(path);
    if (!f) throw new Error(`the old build has no file ${path}`);
    return f;
  }
  fileSize(path: string): number {
    return this.file(path).size;
  }
  readInto(path: string, offset: number, target: Uint8Array): number {
    return readSlice((this.reader ??= readerSync()), this.file(path), offset, target, `old file ${path}`);
  }
  readAt(path: string, offset: number, length: number): Uint8Array {
    const buf = new Uint8Array(length);
    this.readInto(path, offset, buf);
    return buf;
  }
  close(): void {
    this.files.clear();
  }
}

type QueuedOp =
  | { op: "begin"; path: string }
  | { op: "resume"; path: string; written: number }
  | { op: "write"; path: string; at: number; parts: Uint8Array[]; length: number }
  | { op: "finish"; path: string }
  | { op: "copy"; from: string; path: string; size: number; blake3: string };

/** The new build: callbacks queue, `settle` writes. */
export class AsyncNewBuild extends NewBuildEntries<FileSystemFileHandle> implements NewBuildFiles {
  /** A push of 64 KiB of patch queues at most what its segments decode to (a few MiB in practice). */
  readonly pushBytes = 64 << 10;
  private queue: QueuedOp[] = [];
  /** The writes `settle` started, in order: at most one push's behind the applier. */
  private writing: Promise<void> = Promise.resolve();
  /** The file the applier is writing (synchronous side) and the next byte's position. */
  private cur: { path: string; pos: number } | null = null;
  /** The stream open on the asynchronous side. */
  private stream: { path: string; w: FileSystemWritableFileStream; base: number; end: number } | null = null;
  /** Resuming only: what was written before the interruption, read back by the applier. */
  private snapshots = new Map<string, File>();
  private copies: string[] = [];
  private reader: FileReaderSyncLike | null = null;

  constructor(private readonly old: AsyncOldBuild) {
    super();
  }

  get currentPath(): string | null {
    return this.cur?.path ?? null;
  }

  protected async openFile(fh: FileSystemFileHandle, path: string, resuming: boolean): Promise<FileSystemFileHandle> {
    if (resuming) this.snapshots.set(path, await fh.getFile());
    return fh;
  }
  beginFile(path: string, _executable: boolean, _size: number): void {
    this.guard(() => {
      this.handle(path);
      this.cur = { path, pos: 0 };
      this.queue.push({ op: "begin", path });
    });
  }
  resumeFile(path: string, _executable: boolean, _size: number, written: number): void {
    this.guard(() => {
      const f = this.snapshots.get(path);
      if (!f) throw new Error(`${path} was not opened for resuming`);
      if (f.size < written) throw new Error(`${path} has ${f.size} bytes, the resume point needs ${written}`);
      this.cur = { path, pos: written };
      this.queue.push({ op: "resume", path, written });
    });
  }
  writeFile(bytes: Uint8Array): void {
    this.guard(() => {
      const c = this.cur;
      if (!c) throw new Error("writeFile outside a file");
      // `bytes` is the binding's own copy: it may be kept.
      const last = this.queue[this.queue.length - 1];
      if (last?.op === "write" && last.path === c.path && last.at + last.length === c.pos && last.length < JOIN_BYTES) {
        last.parts.push(bytes);
        last.length += bytes.length;
      } else {
        this.queue.push({ op: "write", path: c.path, at: c.pos, parts: [bytes], length: bytes.length });
      }
      c.pos += bytes.length;
    });
  }
  finishFile(): void {
    const c = this.cur;
    if (!c) throw new Error("finishFile outside a file");
    this.finishedNow.add(c.path);
    this.filesDone++;
    this.queue.push({ op: "finish", path: c.path });
    this.cur = null;
  }
  readWritten(path: string, offset: number, target: Uint8Array): number {
    return this.guard(() => {
      const f = this.snapshots.get(path);
      if (!f) throw new Error(`${path} was not opened for resuming`);
      return readSlice((this.reader ??= readerSync()), f, offset, target, path);
    });
  }
  copyOldFile(from: string, path: string, _executable: boolean, size: number): boolean {
    return this.guard(() => {
      this.handle(path);
      const src = this.old.file(from);
      const blake3 = this.old.blake3.get(from);
      if (src.size !== size || blake3 === undefined) throw new Error(`the patch copies old file ${from} (${src.size} bytes) as ${path} of ${size} bytes`);
      this.queue.push({ op: "copy", from, path, size, blake3 });
      this.copies.push(blake3);
      this.finishedNow.add(path);
      return true;
    });
  }
  /** The old manifest's BLAKE3 of each copy: the bound applier checks them against the new manifest; `settle` checks the bytes. */
  finishCopies(): string[] {
    const c = this.copies;
    this.copies = [];
    return c;
  }

  async settle(behind = false): Promise<void> {
    const ops = this.queue;
    this.queue = [];
    const before = this.writing;
    // In order, after what earlier pushes queued; nothing more once one write failed.
    const now = before.then(async () => {
      for (const op of ops) await this.run(op);
    });
    now.catch((e: unknown) => { this.failure ??= e; });
    this.writing = now;
    await (behind ? before : now);
  }
  /** `base`: the bytes the file keeps when the stream opens (what a reopen copies). */
  private async openStream(path: string, keep: boolean, base = 0): Promise<FileSystemWritableFileStream> {
    await this.closeStream();
    const w = await this.handle(path).createWritable({ keepExistingData: keep });
    this.stream = { path, w, base, end: base };
    return w;
  }
  private async closeStream(): Promise<void> {
    const s = this.stream;
    this.stream = null;
    if (s) await s.w.close();
  }
  private async run(op: QueuedOp): Promise<void> {
    switch (op.op) {
      case "begin":
        await this.openStream(op.path, false);
        return;
      case "resume": {
        const w = await this.openStream(op.path, true, op.written);
        await w.truncate(op.written);
        return;
      }
      case "write": {
        // After `durable` closed it, the file's stream is reopened keeping what was committed.
        const w = this.stream?.path === op.path ? this.stream.w : await this.openStream(op.path, true, op.at);
        const data = op.parts.length === 1 ? op.parts[0]! : joined(op.parts, op.length);
        await w.write({ type: "write", position: op.at, data: data as Uint8Array<ArrayBuffer> });
        this.stream!.end = Math.max(this.stream!.end, op.at + op.length);
        this.wrote(op.length);
        return;
      }
      case "finish":
        if (this.stream?.path === op.path) await this.closeStream();
        return;
      case "copy":
        await this.copy(op);
        return;
    }
  }
  private async copy(op: Extract<QueuedOp, { op: "copy" }>): Promise<void> {
    const src = this.old.file(op.from);
    const w = await this.openStream(op.path, false);
    const signer = new Signer();
    try {
      signer.beginFile("f", false, op.size);
      for (let at = 0; at < op.size; ) {
        const chunk = new Uint8Array(await src.slice(at, Math.min(op.size, at + COPY_CHUNK)).arrayBuffer());
        if (chunk.length === 0) throw new Error(`old file ${op.from}: short read at ${at}`);
        signer.update(chunk);
        await w.write(chunk);
        at += chunk.length;
        this.wrote(chunk.length);
      }
      const got = signer.finishFile();
      if (got !== op.blake3) {
        // Closed, not aborted (see `close`): the staging directory holding it is removed.
        await this.closeStream();
        throw new IntegrityError(`${op.path} (kept from the old build's ${op.from}) has BLAKE3 ${got}, the manifest says ${op.blake3}`, { path: op.path });
      }
    } finally {
      signer.free();
    }
    await this.closeStream();
  }
  worthDurable(): boolean {
    const s = this.stream;
    return !s || s.end >= 2 * s.base;
  }
  async durable(): Promise<void> {
    await this.settle();
    await this.closeStream();
  }
  async size(path: string): Promise<number> {
    return (await this.handle(path).getFile()).size;
  }
  async blake3(path: string, size: number): Promise<string> {
    const f = await this.handle(path).getFile();
    return blake3Of(size, async (buf, at) => {
      const got = new Uint8Array(await f.slice(at, at + buf.length).arrayBuffer());
      buf.set(got);
      return got.length;
    });
  }
  async close(): Promise<void> {
    this.queue = [];
    await this.writing.catch(() => undefined);
    // Closed, not aborted: a resume truncates the file to what its resume point relies on, so
    // the bytes past it do no harm. WebKitGTK's abort() of a stream opened with
    // keepExistingData leaves the file as it was, then later (when the stream is collected,
    // seconds after) commits the aborted stream's data over whatever the file holds by then:
    // a resumed update that had finished the file found it cut back to the aborted session's
    // length (tests/e2e/api.test.mjs, "aborting mid-update").
    await this.closeStream().catch(() => undefined);
    this.snapshots.clear();
  }
}

function joined(parts: Uint8Array[], length: number): Uint8Array {
  const out = new Uint8Array(length);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}
