// Which ed25519 keys a client accepts, from its options. Pure (no wasm): the page
// checks the options when a GameUpdater is made, the worker again for every request.
// Keys the server rotated to are accepted only through a rotation signed by one of these
// (trust.ts, `Verifier`).

import { SignatureError } from "./errors.js";
import type { UpdateOptions } from "./messages.js";

/**
 * The options that say which keys are accepted; `baseUrl` (the server) is where a key
 * rotation is looked up, and what keys learned from one are stored under.
 */
export type TrustOptions = Pick<UpdateOptions, "publicKeys" | "publicKey" | "dangerouslyAllowUnsignedUpdates"> & { baseUrl?: string | URL };

export const UNSIGNED_WARNING =
  "edgepatch: dangerouslyAllowUnsignedUpdates is set and no public key is configured: this update is NOT authenticated " +
  "(anyone who controls the server, a CDN or the network can install anything). Local development only.";

/** Bytes of a base64 string, or null when it is not base64. */
export function base64Bytes(s: string): Uint8Array | null {
  try {
    return Uint8Array.from(atob(s.trim()), (c) => c.charCodeAt(0));
  } catch {
    return null;
  }
}

/**
 * The raw 32-byte public keys the options accept, or null when none is configured and
 * `dangerouslyAllowUnsignedUpdates` allows unsigned updates. Throws SignatureError for a
 * malformed key, or when there is neither a key nor the opt-out.
 */
export function acceptedKeys(opts: TrustOptions): Uint8Array[] | null {
  if (opts.publicKeys !== undefined && !Array.isArray(opts.publicKeys)) throw new SignatureError("publicKeys must be an array of base64 ed25519 public keys");
  const given = [...(opts.publicKeys ?? []), ...(opts.publicKey !== undefined ? [opts.publicKey] : [])];
  const keys = given.map((k, i) => {
    const raw = typeof k === "string" ? base64Bytes(k) : null;
    if (!raw || raw.length !== 32) throw new SignatureError(`public key ${i + 1} (${JSON.stringify(String(k).slice(0, 60))}) is not the base64 of 32 bytes (an ed25519 public key)`);
    return raw;
  });
  if (keys.length > 0) return keys;
  if (opts.dangerouslyAllowUnsignedUpdates === true) return null;
  throw new SignatureError(
    "no public key configured: set publicKeys (the server's ed25519 keys, base64, as `edgepatch keygen` prints them); " +
      "only for local development, dangerouslyAllowUnsignedUpdates: true accepts unsigned updates",
  );
}
