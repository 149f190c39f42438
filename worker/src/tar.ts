// A push parser for tar streams (POSIX ustar, GNU long names, pax headers) that reports
// entries with their data offsets in the stream and the file data in chunks. Paths are
// passed on as written (minus a leading "./"): the core's Signer decides what is allowed.

export interface TarHandler {
  directory(path: string): void;
  symlink(path: string, target: string): void;
  /** A regular file whose `size` bytes start at byte `dataOffset` of the tar. */
  beginFile(path: string, executable: boolean, size: number, dataOffset: number): void;
  data(bytes: Uint8Array): void;
  endFile(): void;
}

export class TarError extends Error {}

const BLOCK = 512;
const MAX_META = 1 << 20; // a long name or a pax header above 1 MiB is not a build

type State =
  | { kind: "header" }
  | { kind: "data"; left: number }
  | { kind: "meta"; type: string; left: number; parts: Uint8Array[] }
  | { kind: "skip"; left: number }
  | { kind: "end" };

const decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false });

function text(bytes: Uint8Array, what: string): string {
  const nul = bytes.indexOf(0);
  try {
    return decoder.decode(nul < 0 ? bytes : bytes.subarray(0, nul));
  } catch {
    throw new TarError(`${what} is not UTF-8`);
  }
}

function octal(field: Uint8Array, what: string): number {
  if (field[0] & 0x80) {
    // GNU base-256 for large values.
    let n = 0;
    for (let i = 1; i < field.length; i++) n = n * 256 + field[i];
    if ((field[0] & 0x7f) !== 0 || !Number.isSafeInteger(n)) throw new TarError(`${what}: base-256 value too large`);
    return n;
  }
  const s = text(field, what).trim();
  if (s === "") return 0;
  if (!/^[0-7]+$/.test(s)) throw new TarError(`${what} ${JSON.stringify(s)} is not octal`);
  return parseInt(s, 8);
}

function padded(n: number): number {
  return Math.ceil(n / BLOCK) * BLOCK;
}

export class TarParser {
  private state: State = { kind: "header" };
  private header = new Uint8Array(BLOCK);
  private headerFill = 0;
  /** Bytes consumed so far (the offset of the next byte). */
  private position = 0;
  private zeroBlocks = 0;
  private entries = 0;
  /** From a GNU 'L'/'K' entry or a pax 'x' header: applies to the next entry. */
  private nextPath: string | null = null;
  private nextLink: string | null = null;
  private nextSize: number | null = null;
  private inFile = false;
  private filePadding = 0;

  constructor(private readonly handler: TarHandler) {}

  get bytesRead(): number {
    return this.position;
  }

  push(chunk: Uint8Array): void {
    let i = 0;
    while (i < chunk.length) {
      const s = this.state;
      switch (s.kind) {
        case "header": {
          const n = Math.min(BLOCK - this.headerFill, chunk.length - i);
          this.header.set(chunk.subarray(i, i + n), this.headerFill);
          this.headerFill += n;
          i += n;
          this.position += n;
          if (this.headerFill === BLOCK) {
            this.headerFill = 0;
            this.onHeader();
          }
          break;
        }
        case "data": {
          const n = Math.min(s.left, chunk.length - i);
          if (n > 0) this.handler.data(chunk.subarray(i, i + n));
          s.left -= n;
          i += n;
          this.position += n;
          if (s.left === 0) {
            this.handler.endFile();
            this.inFile = false;
            this.state = this.filePadding > 0 ? { kind: "skip", left: this.filePadding } : { kind: "header" };
          }
          break;
        }
        case "meta": {
          const n = Math.min(s.left, chunk.length - i);
          s.parts.push(chunk.slice(i, i + n));
          s.left -= n;
          i += n;
          this.position += n;
          if (s.left === 0) this.onMeta(s.type, s.parts);
          break;
        }
        case "skip": {
          const n = Math.min(s.left, chunk.length - i);
          s.left -= n;
          i += n;
          this.position += n;
          if (s.left === 0) this.state = { kind: "header" };
          break;
        }
        case "end": {
          // After the end-of-archive blocks only zero padding may follow.
          for (; i < chunk.length; i++, this.position++) {
            if (chunk[i] !== 0) throw new TarError(`data after the end of the archive at byte ${this.position}`);
          }
          break;
        }
      }
    }
  }

  /** Call when the stream ended: throws unless the archive ended properly. */
  finish(): void {
    if (this.state.kind === "end") return;
    if (this.state.kind === "header" && this.headerFill === 0 && this.zeroBlocks === 1) return; // one zero block: tolerated
    if (this.entries === 0 && this.position === 0) throw new TarError("empty upload: not a tar archive");
    throw new TarError(`tar archive truncated at byte ${this.position}`);
  }

  private onHeader(): void {
    const h = this.header;
    const at = this.position - BLOCK;
    if (h.every((b) => b === 0)) {
      if (this.nextPath !== null || this.nextLink !== null || this.nextSize !== null) throw new TarError(`extended header without an entry at byte ${at}`);
      this.zeroBlocks++;
      if (this.zeroBlocks === 2) this.state = { kind: "end" };
      return;
    }
    if (this.zeroBlocks > 0) throw new TarError(`entry after an end-of-archive block at byte ${at}`);
    // Checksum: the header's bytes with the checksum field read as spaces (unsigned, or signed as some writers do).
    const stored = octal(h.subarray(148, 156), `header checksum at byte ${at}`);
    let unsigned = 0;
    let signed = 0;
    for (let k = 0; k < BLOCK; k++) {
      const b = k >= 148 && k < 156 ? 0x20 : h[k];
      unsigned += b;
      signed += b > 127 ? b - 256 : b;
    }
    if (stored !== unsigned && stored !== signed) throw new TarError(`bad tar header checksum at byte ${at} (not a tar archive?)`);
    this.entries++;

    const type = String.fromCharCode(h[156] || 0x30);
    const ustar = text(h.subarray(257, 262), "magic") === "ustar";
    let name = text(h.subarray(0, 100), `entry name at byte ${at}`);
    if (ustar && h[345] !== 0 && text(h.subarray(257, 265), "magic") !== "ustar  ") {
      // POSIX prefix field (not in the old GNU format, which uses those bytes otherwise).
      const prefix = text(h.subarray(345, 500), `name prefix at byte ${at}`);
      if (prefix) name = `${prefix}/${name}`;
    }
    let size = octal(h.subarray(124, 136), `entry size at byte ${at}`);
    const mode = octal(h.subarray(100, 108), `entry mode at byte ${at}`);
    let link = text(h.subarray(157, 257), `link name at byte ${at}`);

    if (type === "L" || type === "K" || type === "x" || type === "g") {
      if (size > MAX_META) throw new TarError(`extended header of ${size} bytes at byte ${at}`);
      if (size === 0) {
        this.state = { kind: "header" };
        return;
      }
      this.filePadding = padded(size) - size;
      this.state = { kind: "meta", type, left: size, parts: [] };
      return;
    }

    if (this.nextPath !== null) name = this.nextPath;
    if (this.nextLink !== null) link = this.nextLink;
    if (this.nextSize !== null) size = this.nextSize;
    this.nextPath = this.nextLink = this.nextSize = null;
    const path = normalize(name);

    switch (type) {
      case "0":
      case "7": {
        if (path === "") throw new TarError(`file entry without a name at byte ${at}`);
        this.handler.beginFile(path, (mode & 0o111) !== 0, size, this.position);
        this.inFile = true;
        this.filePadding = padded(size) - size;
        if (size === 0) {
          this.handler.endFile();
          this.inFile = false;
          this.state = { kind: "header" };
        } else {
          this.state = { kind: "data", left: size };
        }
        return;
      }
      case "5":
        if (path !== "") this.handler.directory(path);
        this.skipData(size);
        return;
      case "2":
        if (path === "") throw new TarError(`symlink entry without a name at byte ${at}`);
        this.handler.symlink(path, link);
        this.skipData(size);
        return;
      case "1":
        throw new TarError(`${path}: hard links are not supported (store the file itself)`);
      default:
        throw new TarError(`${path}: tar entry type ${JSON.stringify(type)} (device, FIFO or unknown) is not allowed in a build`);
    }
  }

  private skipData(size: number): void {
    const n = padded(size);
    this.state = n > 0 ? { kind: "skip", left: n } : { kind: "header" };
  }

  private onMeta(type: string, parts: Uint8Array[]): void {
    const total = parts.reduce((n, p) => n + p.length, 0);
    const bytes = new Uint8Array(total);
    let o = 0;
    for (const p of parts) {
      bytes.set(p, o);
      o += p.length;
    }
    if (type === "L") this.nextPath = text(bytes, "GNU long name");
    else if (type === "K") this.nextLink = text(bytes, "GNU long link name");
    else if (type === "x") this.applyPax(bytes);
    // "g" (global pax header): nothing in it matters for a build.
    this.state = this.filePadding > 0 ? { kind: "skip", left: this.filePadding } : { kind: "header" };
  }

  private applyPax(bytes: Uint8Array): void {
    let i = 0;
    while (i < bytes.length) {
      const space = bytes.indexOf(0x20, i);
      if (space < 0) throw new TarError("malformed pax header");
      const len = Number(text(bytes.subarray(i, space), "pax record length"));
      if (!Number.isInteger(len) || len <= space - i || i + len > bytes.length || bytes[i + len - 1] !== 0x0a) throw new TarError("malformed pax record");
      const record = text(bytes.subarray(space + 1, i + len - 1), "pax record");
      const eq = record.indexOf("=");
      if (eq < 0) throw new TarError("malformed pax record");
      const key = record.slice(0, eq);
      const value = record.slice(eq + 1);
      if (key === "path") this.nextPath = value;
      else if (key === "linkpath") this.nextLink = value;
      else if (key === "size") {
        if (!/^\d+$/.test(value) || !Number.isSafeInteger(Number(value))) throw new TarError(`pax size ${JSON.stringify(value)}`);
        this.nextSize = Number(value);
      }
      i += len;
    }
  }
}

/** Drops a leading "./" (tar -C dir .) and a directory's trailing "/"; nothing else is changed. */
function normalize(name: string): string {
  let p = name;
  while (p.startsWith("./")) p = p.slice(2);
  if (p === ".") return "";
  while (p.endsWith("/") && p.length > 1) p = p.slice(0, -1);
  return p;
}
