// Key rotations the Worker serves in v1/public-key (docs/UPDATE_PROTOCOL.md, "Signed
// statements"): KEY_ROTATIONS, a JSON array, oldest first, of
// {"from": "<old key id>", "keyId": "<new key id>", "publicKey": "<base64 new key>",
// "signature": "<base64 ed25519 by the old key over the rotation statement>"}, made offline by
// the owner (`edgepatch key rotate`). The Worker never signs a rotation itself; it checks them
// once per isolate, before the first request: each entry is signed by its `from` key (a key of
// PREVIOUS_PUBLIC_KEYS for the first, the key the entry before it rotated to for the others), and
// the chain ends at the current signing key. Anything else stops the Worker (every response is
// 500 "server misconfigured: KEY_ROTATIONS ...", and the log says the same).
import { ConfigError, decodeBase64, settings } from "./settings";
import { base64, statementSigner } from "./signing";
import * as wasm from "./wasm";
import type { Env } from "./env";
import type { KeyRotation } from "../../crates/edgepatch-format/typescript/update_protocol.js";

/** One entry of KEY_ROTATIONS; its type is generated from the Rust one (crates/edgepatch-format, src/key_rotations.rs). */
export type Rotation = KeyRotation;

/** The most rotations listed (the clients follow at most this many: the core's MAX_ROTATIONS). */
export const MAX_ROTATIONS = 32;

const KEY_ID = /^[0-9a-f]{16}$/;

function bytes(what: string, s: unknown, length: number): Uint8Array {
  let b: Uint8Array;
  try {
    if (typeof s !== "string") throw new Error();
    b = decodeBase64(s);
  } catch {
    throw new Error(`${what} is not base64`);
  }
  if (b.length !== length) throw new Error(`${what} holds ${b.length} bytes, not ${length}`);
  return b;
}

/** Checks KEY_ROTATIONS against the retired keys and the current key id; the rotations as served. */
export function checkRotations(raw: string | undefined, previousPublicKeys: Uint8Array[], currentKeyId: string | null): Rotation[] {
  if (raw === undefined || raw.trim() === "") return [];
  let list: unknown;
  try {
    list = JSON.parse(raw);
  } catch {
    throw new Error("is not JSON");
  }
  if (!Array.isArray(list)) throw new Error("is not a JSON array");
  if (list.length === 0) return [];
  if (list.length > MAX_ROTATIONS) throw new Error(`lists ${list.length} rotations, more than the ${MAX_ROTATIONS} a client follows`);
  if (currentKeyId === null) throw new Error("is set, but this server does not sign (no MANIFEST_SIGNING_KEY)");
  wasm.initWasm();
  const out: Rotation[] = [];
  let signer: Uint8Array | null = null;
  for (const [i, entry] of list.entries()) {
    const at = `entry ${i + 1}`;
    try {
      if (typeof entry !== "object" || entry === null) throw new Error("not an object");
      const { from, keyId, publicKey, signature } = entry as Record<string, unknown>;
      if (typeof from !== "string" || !KEY_ID.test(from)) throw new Error(`"from" is not a key id (16 lowercase hex digits)`);
      if (typeof keyId !== "string" || !KEY_ID.test(keyId)) throw new Error(`"keyId" is not a key id (16 lowercase hex digits)`);
      const newKey = bytes(`"publicKey"`, publicKey, 32);
      const sig = bytes(`"signature"`, signature, 64);
      if (wasm.keyId(newKey) !== keyId) throw new Error(`"keyId" ${keyId} is not the key id of its "publicKey" (${wasm.keyId(newKey)})`);
      if (i === 0) {
        signer = previousPublicKeys.find((k) => wasm.keyId(k) === from) ?? null;
        if (signer === null) throw new Error(`its signer, key ${from}, is not in PREVIOUS_PUBLIC_KEYS (the first rotation's signer must be listed there)`);
      } else if (from !== out[i - 1].keyId) {
        throw new Error(`it rotates from key ${from}, but the entry before it rotates to key ${out[i - 1].keyId} (one chain, oldest first)`);
      }
      let statement: Uint8Array;
      try {
        statement = wasm.rotationStatement(from, newKey);
      } catch (e) {
        throw new Error(e instanceof Error ? e.message : String(e));
      }
      if (!wasm.verifyEd25519(signer!, statement, sig)) throw new Error(`its signature is not key ${from}'s over the rotation statement to key ${keyId}`);
      out.push({ from, keyId, publicKey: base64(newKey), signature: base64(sig) });
      signer = newKey;
    } catch (e) {
      throw new Error(`${at}: ${e instanceof Error ? e.message : String(e)}`);
    }
  }
  const last = out[out.length - 1];
  if (last.keyId !== currentKeyId) throw new Error(`ends at key ${last.keyId}, not at the current signing key ${currentKeyId}`);
  return out;
}

// One check per distinct environment, kept as a value (never a pending promise: see signing.ts).
const checked = new WeakMap<object, Rotation[] | ConfigError>();

/** The checked rotations of `env`, or throws ConfigError (the same one every time). */
export async function rotations(env: Env): Promise<Rotation[]> {
  let r = checked.get(env);
  if (r === undefined) {
    const s = settings(env);
    const signer = statementSigner(env.MANIFEST_SIGNING_KEY);
    const currentKeyId = signer ? (await signer).keyId : null;
    try {
      r = checkRotations(env.KEY_ROTATIONS, s.previousPublicKeys, currentKeyId);
    } catch (e) {
      const why = `KEY_ROTATIONS ${e instanceof Error ? e.message : String(e)}`;
      r = new ConfigError(why, why);
    }
    checked.set(env, r);
  }
  if (r instanceof ConfigError) throw r;
  return r;
}
