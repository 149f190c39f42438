// The client side of docs/UPDATE_PROTOCOL.md: names, URLs and the JSON documents. The
// documents' types are generated from their Rust definitions (crates/edgepatch-format,
// typescript/update_protocol.d.ts), and their checks and the channel rules are the core's,
// through wasm; this file fetches them.

import type { ChannelDocument, KeyRotation, UpdateDescriptor } from "../../crates/edgepatch-format/typescript/update_protocol.js";
import {
  checkChannelDocument as coreCheckChannelDocument,
  checkName as coreCheckName,
  checkUpdateDescriptor as coreCheckUpdateDescriptor,
} from "../../crates/edgepatch-wasm/pkg/web-apply/edgepatch_wasm.js";
import { FrozenError, HttpError, IntegrityError, NetworkError, ProtocolError, RollbackError, SignatureError, messageOf } from "./errors.js";
import { EMPTY_BUILD } from "./messages.js";

export { EMPTY_BUILD };
export type { ChannelDocument, KeyRotation, UpdateDescriptor };

/**
 * Checks a game, build or channel name by the core's rule (1-64 bytes of [A-Za-z0-9._-],
 * not starting with "."); `what` names it in the error ("from" and "to" are builds).
 * "_" (the empty build) only where `allowEmptyBuild`.
 */
export function checkName(what: string, name: string, allowEmptyBuild = false): void {
  if (typeof name !== "string") throw new ProtocolError(`${what} is not a string`);
  if (name === EMPTY_BUILD && !allowEmptyBuild) throw new ProtocolError(`${what} "_" is the reserved empty build`);
  try {
    coreCheckName(what === "game" || what === "channel" ? what : "build", name);
  } catch (e) {
    throw new ProtocolError(`${what}: ${messageOf(e)}`);
  }
}

/**
 * Runs one of the core's document checks or rules on `what` (fetched from `url`), its refusal
 * rethrown as this library's error of the same code: `signature`, `frozen`, `rollback`, else
 * `protocol`. `say` words the refusal of a code in this library's terms instead of the core's.
 */
export function byCoreRule<T>(what: string, url: string, rule: () => T, say: { [code: string]: () => string } = {}): T {
  try {
    return rule();
  } catch (e) {
    const code = (e as { code?: unknown }).code;
    const own = typeof code === "string" ? say[code] : undefined;
    const message = own ? `${what} (${url}) ${own()}` : `${what} (${url}): ${messageOf(e)}`;
    switch (code) {
      case "signature":
        throw new SignatureError(message, { url });
      case "frozen":
        throw new FrozenError(message, { url });
      case "rollback":
        throw new RollbackError(message, { url });
      default:
        throw new ProtocolError(message, { url });
    }
  }
}

function baseOf(baseUrl: string | URL): URL {
  const u = new URL(String(baseUrl), typeof location !== "undefined" ? location.href : undefined);
  if (!u.pathname.endsWith("/")) u.pathname += "/";
  return u;
}

/**
 * The update descriptor's URL. `reader` is what this client applies (docs/FORMAT.md §5, the
 * wasm core's `readerCapabilities()`): a server that negotiates answers with a patch that
 * needs no more; a static site ignores the query.
 */
export function descriptorUrl(baseUrl: string | URL, game: string, from: string, to: string, reader?: string): URL {
  const url = new URL(`v1/games/${game}/updates/${from}/${to}`, baseOf(baseUrl));
  if (reader !== undefined) url.searchParams.set("reader", reader);
  return url;
}

export function channelUrl(baseUrl: string | URL, game: string, channel: string): URL {
  return new URL(`v1/games/${game}/channels/${channel}`, baseOf(baseUrl));
}

export function publicKeyUrl(baseUrl: string | URL): URL {
  return new URL("v1/public-key", baseOf(baseUrl));
}

/** The server's base URL, resolved and ending in "/": what state kept per server is keyed by. */
export function serverKey(baseUrl: string | URL): string {
  return baseOf(baseUrl).href;
}

/** Most rotations a client reads from `v1/public-key` (the core's MAX_ROTATIONS). */
export const MAX_ROTATIONS = 32;

/**
 * A list of rotations (`what` names it in errors): an array of at most MAX_ROTATIONS objects.
 * Their fields, and whether they are signed by a trusted key, are the core's to check
 * (`followRotations`).
 */
export function parseRotations(list: unknown, what: string, url?: string): KeyRotation[] {
  const extra = url ? { url } : {};
  if (list === undefined) return [];
  if (!Array.isArray(list)) throw new ProtocolError(`${what}: rotations is not an array`, extra);
  if (list.length > MAX_ROTATIONS) throw new ProtocolError(`${what}: ${list.length} rotations listed, more than the ${MAX_ROTATIONS} a client follows`, extra);
  if (!list.every((r) => r && typeof r === "object")) throw new ProtocolError(`${what}: a rotation is not an object`, extra);
  return list as KeyRotation[];
}

/** The server's `v1/public-key` document: its `rotations`, shape-checked. */
export async function fetchRotations(baseUrl: string | URL, signal?: AbortSignal): Promise<{ url: string; rotations: KeyRotation[] }> {
  const url = publicKeyUrl(baseUrl).href;
  const doc = await fetchJson(url, signal);
  return { url, rotations: parseRotations(doc.rotations, url, url) };
}

/** A fetch whose failures are typed: NetworkError for the transport, HttpError for a status. */
export async function fetchChecked(url: string, init: RequestInit = {}): Promise<Response> {
  let res: Response;
  try {
    res = await fetch(url, init);
  } catch (e) {
    if ((e as { name?: string }).name === "AbortError") throw e;
    throw new NetworkError(`GET ${url} failed: ${messageOf(e)}`, { url, resumable: true });
  }
  if (!res.ok) {
    // Servers answer errors as JSON {"error", "status"}; fall back to the status text.
    let detail = res.statusText;
    try {
      const body: unknown = await res.json();
      if (body && typeof body === "object" && typeof (body as { error?: unknown }).error === "string") detail = (body as { error: string }).error;
    } catch {
      /* not JSON */
    }
    throw new HttpError(`GET ${url}: ${res.status} ${detail}`, { status: res.status, url, resumable: res.status >= 500 });
  }
  return res;
}

/** Largest descriptor or channel document read (they are a few hundred bytes). */
const MAX_JSON_BYTES = 64 * 1024;

/**
 * The whole body of `res`, refused (IntegrityError) as soon as it passes `max` bytes:
 * a server's answer never costs more memory than the caller expects of it.
 */
export async function readBounded(res: Response, max: number, url: string, what: string): Promise<Uint8Array> {
  const declared = Number(res.headers.get("Content-Length") ?? "NaN");
  if (declared > max) {
    await res.body?.cancel().catch(() => {});
    throw new IntegrityError(`${what} ${url} is ${declared} bytes, more than the ${max} bytes expected`, { url });
  }
  const out = new Uint8Array(Number.isSafeInteger(declared) && declared >= 0 ? declared : Math.min(max, 64 * 1024));
  let buf = out;
  let len = 0;
  const reader = res.body?.getReader();
  if (!reader) return new Uint8Array(0);
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (len + value.length > max) {
      await reader.cancel().catch(() => {});
      throw new IntegrityError(`${what} ${url} is more than the ${max} bytes expected`, { url });
    }
    if (len + value.length > buf.length) {
      const bigger = new Uint8Array(Math.min(max, Math.max(buf.length * 2, len + value.length)));
      bigger.set(buf.subarray(0, len));
      buf = bigger;
    }
    buf.set(value, len);
    len += value.length;
  }
  return buf.subarray(0, len);
}

async function fetchJson(url: string, signal?: AbortSignal): Promise<Record<string, unknown>> {
  const res = await fetchChecked(url, { cache: "no-cache", ...(signal ? { signal } : {}) });
  const bytes = await readBounded(res, MAX_JSON_BYTES, url, "document");
  let body: unknown;
  try {
    body = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch (e) {
    throw new ProtocolError(`${url} is not JSON: ${messageOf(e)}`, { url });
  }
  if (!body || typeof body !== "object" || Array.isArray(body)) throw new ProtocolError(`${url} is not a JSON object`, { url });
  return body as Record<string, unknown>;
}

/**
 * The descriptor of `game` `from` -> `to` (from `url`), its fields checked by the core (and that
 * it is of that update), its URLs resolved against its own, its hex in lowercase. Its signature
 * is the caller's to check (the core's `checkUpdateDescriptor` with the accepted key).
 */
export async function fetchDescriptor(baseUrl: string | URL, game: string, from: string, to: string, reader: string, signal?: AbortSignal): Promise<{ doc: UpdateDescriptor; url: string }> {
  const url = descriptorUrl(baseUrl, game, from, to, reader).href;
  const body = await fetchJson(url, signal);
  byCoreRule(`update descriptor ${game} ${from} -> ${to}`, url, () => coreCheckUpdateDescriptor(body, game, from, to));
  const doc = body as unknown as UpdateDescriptor;
  doc.manifestUrl = new URL(doc.manifestUrl, url).href;
  doc.patchUrl = new URL(doc.patchUrl, url).href;
  doc.manifestBlake3 = doc.manifestBlake3.toLowerCase();
  if (doc.keyId !== undefined) doc.keyId = doc.keyId.toLowerCase();
  return { doc, url };
}

/**
 * The channel document of `channel` of `game` (from `url`), its fields checked by the core. The
 * channel rules are the caller's to apply (the core's `acceptChannel`).
 */
export async function fetchChannel(baseUrl: string | URL, game: string, channel: string, signal?: AbortSignal): Promise<{ doc: ChannelDocument; url: string }> {
  checkName("game", game);
  checkName("channel", channel);
  const url = channelUrl(baseUrl, game, channel).href;
  const body = await fetchJson(url, signal);
  byCoreRule(`channel ${game}/${channel}`, url, () => coreCheckChannelDocument(body, game, channel));
  const doc = body as unknown as ChannelDocument;
  if (doc.keyId !== undefined) doc.keyId = doc.keyId.toLowerCase();
  return { doc, url };
}
