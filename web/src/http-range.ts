// One reading of an HTTP Range header (RFC 9110 §14), shared by the library's Service Worker
// (web/src/service-worker.ts) and the Cloudflare Worker (worker/src/http.ts). Single ranges
// only: several ranges, or a header that is not `bytes=`, get the whole object, as RFC 9110
// allows and as CDNs do.

/** Bytes [offset, offset + length) of an object. */
export interface ByteRange {
  offset: number;
  length: number;
}

/**
 * The range that `header` asks of an object of `size` bytes: null when there is no usable
 * range (absent, not `bytes=`, several ranges, malformed, or last before first: serve the
 * whole object), "unsatisfiable" (416: it starts at or after the end, or asks for the last 0
 * bytes), else the range, cut at the object's end.
 */
export function parseRange(header: string | null, size: number): ByteRange | "unsatisfiable" | null {
  if (header === null) return null;
  const m = /^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$/.exec(header);
  if (!m) return null;
  const [, first = "", last = ""] = m;
  if (first === "" && last === "") return null;
  if (first === "") {
    // A suffix: the last n bytes.
    const n = Number(last);
    if (n === 0 || size === 0) return "unsatisfiable";
    const length = Math.min(n, size);
    return { offset: size - length, length };
  }
  const start = Number(first);
  if (start >= size) return "unsatisfiable";
  const end = last === "" ? size - 1 : Math.min(Number(last), size - 1);
  if (end < start) return null;
  return { offset: start, length: end - start + 1 };
}
