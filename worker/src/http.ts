// HTTP plumbing shared by the routes: JSON errors (docs/UPDATE_PROTOCOL.md "Errors"),
// name validation, single-range parsing.

import { parseRange as parseRangeHeader, type ByteRange } from "../../web/src/http-range.js";
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
 * measured in Node with the module precompiled, as workerd has it.
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

export type { ByteRange };

/**
 * Parses a Range header against an object of `size` bytes (web/src/http-range.ts: one reading
 * for this Worker and the library's Service Worker): null for "no usable range" (the whole
 * object), a ByteRange, or throws 416 when a single range cannot be satisfied.
 */
export function parseRange(header: string | null, size: number): ByteRange | null {
  const range = parseRangeHeader(header, size);
  if (range === "unsatisfiable") throw new HttpError(416, `range ${header?.trim()} is outside the ${size} bytes`, { "Content-Range": `bytes */${size}` });
  return range;
}
