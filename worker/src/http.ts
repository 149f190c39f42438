// HTTP plumbing shared by the routes: JSON errors (docs/UPDATE_PROTOCOL.md "Errors"),
// name validation, single-range parsing.

import { checkName as coreCheckName, initWasm } from "./wasm";

export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

/** A failure of the server itself: the client gets a generic message, the log gets `cause`. */
export class InternalError extends Error {
  constructor(
    message: string,
    readonly cause?: unknown,
  ) {
    super(message);
  }
}

export function json(value: unknown, status = 200, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(value), {
    status,
    headers: { "Content-Type": "application/json", ...headers },
  });
}

export function errorResponse(status: number, message: string, headers: Record<string, string> = {}): Response {
  // One line, as the protocol says.
  return json({ error: message.replace(/\s*\n\s*/g, " "), status }, status, { "Cache-Control": "no-store", ...headers });
}

/**
 * Checks a game, build or channel name by the core's rule (through wasm: one definition for the
 * CLI, the browser library and the Worker; docs/UPDATE_PROTOCOL.md, "Names"), 400 if it breaks it;
 * "_" (the empty build) only where `allowEmptyBuild`. Returns the name. The error repeats at most
 * the name's first 80 characters (the core cuts it). Routes that otherwise need no wasm pay its
 * instantiation once per isolate: 1.9 ms and 1.2 MB of linear memory for the 1.4 MB module,
 * measured in Node with the module precompiled, as workerd has it (session 10).
 */
export function checkName(what: "game" | "build" | "channel", value: string, allowEmptyBuild = false): string {
  initWasm();
  try {
    coreCheckName(what, value);
  } catch (e) {
    throw new HttpError(400, e instanceof Error ? e.message : String(e));
  }
  if (value === "_" && !allowEmptyBuild) throw new HttpError(400, `${what} name "_" is reserved for the empty build`);
  return value;
}

export const HEX64 = /^[0-9a-f]{64}$/;

/** A byte range of an object of `size` bytes: [offset, offset + length). */
export interface ByteRange {
  offset: number;
  length: number;
}

/**
 * Parses a Range header against an object of `size` bytes. Returns null for "no usable
 * range" (absent, not bytes=, or several ranges: those get the whole object, as RFC 9110
 * allows), a ByteRange, or throws 416 when a single range cannot be satisfied.
 */
export function parseRange(header: string | null, size: number): ByteRange | null {
  if (header === null) return null;
  const m = /^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$/.exec(header);
  if (!m) return null;
  const [, a, b] = m;
  const unsatisfiable = () => new HttpError(416, `range ${header.trim()} is outside the ${size} bytes`, { "Content-Range": `bytes */${size}` });
  if (a === "" && b === "") return null;
  if (a === "") {
    // Suffix: the last b bytes.
    const n = Number(b);
    if (n === 0 || size === 0) throw unsatisfiable();
    const length = Math.min(n, size);
    return { offset: size - length, length };
  }
  const start = Number(a);
  if (start >= size) throw unsatisfiable();
  const end = b === "" ? size - 1 : Math.min(Number(b), size - 1);
  if (end < start) return null; // syntactically invalid: ignore the header
  return { offset: start, length: end - start + 1 };
}
