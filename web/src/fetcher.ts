// Downloads byte ranges of one immutable file with bounded parallelism and
// hands their bytes out strictly in order, as they arrive: the consumer applies
// range i while ranges i+1.. are still downloading. Single-range requests only
// (docs/UPDATE_PROTOCOL.md); a dropped connection is retried from the first
// byte not yet received, so nothing is fetched twice within a session.

import { AbortedError, EdgepatchError, HttpError, NetworkError, ProtocolError, messageOf } from "./errors.js";

/** Bytes [start, end) of the file. */
export interface ByteRange {
  start: number;
  end: number;
}

export interface RangeDownloadOptions {
  /** Ranges in flight at once (the one being consumed included). */
  parallelism: number;
  /** Attempts after the first, per range, for network errors and 5xx answers. */
  retries: number;
  /** Delay before the first retry; doubled for each further one. */
  retryDelayMs: number;
  signal?: AbortSignal;
  /** Called for every body chunk received (bytes over the network). */
  onBytes?: (n: number) => void;
}

class RangeState {
  chunks: Uint8Array[] = [];
  received = 0;
  done = false;
  error: unknown = null;
  started = false;
  private wake: (() => void) | null = null;
  constructor(readonly range: ByteRange) {}
  notify(): void {
    const w = this.wake;
    this.wake = null;
    w?.();
  }
  changed(): Promise<void> {
    return new Promise((resolve) => (this.wake = resolve));
  }
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => { clearTimeout(t); reject(new AbortedError(undefined, { resumable: true })); }, { once: true });
  });
}

/** "bytes a-b/total" → [a, b, total], or null. */
function parseContentRange(v: string | null): [number, number, number] | null {
  const m = v ? /^bytes (\d+)-(\d+)\/(\d+)$/.exec(v.trim()) : null;
  return m ? [Number(m[1]), Number(m[2]), Number(m[3])] : null;
}

export class RangeDownload {
  private states: RangeState[];
  private aborted = false;
  constructor(
    readonly url: string,
    readonly totalSize: number,
    ranges: ByteRange[],
    private opts: RangeDownloadOptions,
  ) {
    for (const r of ranges) {
      if (!(r.start >= 0 && r.start < r.end && r.end <= totalSize)) throw new ProtocolError(`bad range [${r.start}, ${r.end}) of ${url} (${totalSize} bytes)`);
    }
    this.states = ranges.map((r) => new RangeState(r));
  }

  /** Every byte of every range, in order. Stops the downloads when the consumer stops. */
  async *chunks(): AsyncGenerator<Uint8Array> {
    try {
      for (let i = 0; i < this.states.length; i++) {
        for (let j = i; j < Math.min(this.states.length, i + Math.max(1, this.opts.parallelism)); j++) this.start(this.states[j]!);
        const s = this.states[i]!;
        for (;;) {
          const c = s.chunks.shift();
          if (c) {
            yield c;
            continue;
          }
          if (s.error) throw s.error;
          if (s.done) break;
          await s.changed();
        }
      }
    } finally {
      this.aborted = true;
      for (const s of this.states) s.notify();
    }
  }

  private start(s: RangeState): void {
    if (s.started) return;
    s.started = true;
    this.run(s).then(
      () => { s.done = true; s.notify(); },
      (e) => { s.error = e; s.notify(); },
    );
  }

  private async run(s: RangeState): Promise<void> {
    const { start, end } = s.range;
    let failures = 0;
    for (;;) {
      if (this.opts.signal?.aborted) throw new AbortedError(undefined, { resumable: true });
      if (this.aborted) return;
      const from = start + s.received;
      try {
        await this.fetchInto(s, from, end);
        return;
      } catch (e) {
        if (e instanceof EdgepatchError && !(e instanceof NetworkError) && !(e instanceof HttpError && e.resumable)) throw e;
        if ((e as { name?: string }).name === "AbortError" || this.opts.signal?.aborted) throw new AbortedError(undefined, { resumable: true });
        if (failures >= this.opts.retries) {
          throw e instanceof EdgepatchError ? e : new NetworkError(`downloading bytes ${from}-${end - 1} of ${this.url} failed: ${messageOf(e)}`, { url: this.url, resumable: true });
        }
        await sleep(this.opts.retryDelayMs * 2 ** failures, this.opts.signal);
        failures++;
      }
    }
  }

  private async fetchInto(s: RangeState, from: number, end: number): Promise<void> {
    const url = this.url;
    const init: RequestInit = { headers: { Range: `bytes=${from}-${end - 1}` }, cache: "no-store" };
    if (this.opts.signal) init.signal = this.opts.signal;
    let res: Response;
    try {
      res = await fetch(url, init);
    } catch (e) {
      throw new NetworkError(`GET ${url} (bytes ${from}-${end - 1}) failed: ${messageOf(e)}`, { url, resumable: true });
    }
    if (res.status === 200 && from === 0 && end === this.totalSize) {
      // A server may answer a range covering the whole file with the whole file.
    } else if (res.status === 206) {
      const cr = parseContentRange(res.headers.get("Content-Range"));
      if (!cr || cr[0] !== from || cr[1] !== end - 1) {
        throw new ProtocolError(`GET ${url} bytes ${from}-${end - 1}: Content-Range is ${JSON.stringify(res.headers.get("Content-Range"))}`, { url });
      }
      if (cr[2] !== this.totalSize) throw new ProtocolError(`${url} is ${cr[2]} bytes, the descriptor says ${this.totalSize}`, { url });
    } else if (res.status === 200) {
      throw new ProtocolError(`GET ${url}: the server ignored the Range header (200 instead of 206)`, { url });
    } else {
      await res.body?.cancel().catch(() => {});
      throw new HttpError(`GET ${url} (bytes ${from}-${end - 1}): ${res.status} ${res.statusText}`, { status: res.status, url, resumable: res.status >= 500 });
    }
    if (!res.body) throw new ProtocolError(`GET ${url}: no body`, { url });
    const reader = res.body.getReader();
    try {
      let pos = from;
      for (;;) {
        if (this.aborted) return;
        let r: ReadableStreamReadResult<Uint8Array>;
        try {
          r = await reader.read();
        } catch (e) {
          throw new NetworkError(`GET ${url}: connection lost at byte ${pos} (range ${from}-${end - 1}): ${messageOf(e)}`, { url, resumable: true });
        }
        if (r.done) break;
        let c = r.value;
        if (pos + c.length > end) c = c.subarray(0, end - pos); // never trust the server with more than asked
        if (c.length === 0) continue;
        pos += c.length;
        s.received += c.length;
        s.chunks.push(c);
        this.opts.onBytes?.(c.length);
        s.notify();
        if (pos === end) break;
      }
      if (pos !== end) throw new NetworkError(`GET ${url}: response ended at byte ${pos}, expected ${end}`, { url, resumable: true });
    } finally {
      reader.cancel().catch(() => {});
    }
  }
}

/**
 * Splits [start, total) at the given boundaries (segment starts), merging
 * neighbours until each range has at least `minBytes`.
 */
export function planRanges(start: number, total: number, boundaries: number[], minBytes: number): ByteRange[] {
  const cuts = [...new Set(boundaries.filter((b) => b > start && b < total))].sort((a, b) => a - b);
  const out: ByteRange[] = [];
  let s = start;
  for (const c of cuts) {
    if (c - s >= minBytes) {
      out.push({ start: s, end: c });
      s = c;
    }
  }
  if (s < total) {
    const last = out[out.length - 1];
    if (last && total - s < minBytes / 4) last.end = total; // a tiny tail (the trailer) rides with the last range
    else out.push({ start: s, end: total });
  }
  return out;
}
