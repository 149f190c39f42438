// Update descriptors: where a pair's manifest and patch are, signed by the server's key (its
// update statement), and checked against what this Worker generated before a re-signature.
import type { UpdateDescriptor } from "../../crates/edgepatch-format/typescript/update_protocol.js";
import * as wasm from "./wasm";
import { keys, type R2PartWriter } from "./store";
import { statementSigner } from "./signing";
import { updateStatement } from "./statements";
import type { Env } from "./env";
import { GenerationError } from "./reads";

// The descriptor's type is generated from its Rust definition (crates/edgepatch-format,
// src/descriptor.rs), the one every client reads.
export type { UpdateDescriptor };

export function descriptorUrls(game: string, from: string, to: string, manifestBlake3: string, patchBlake3: string) {
  // Relative to the descriptor's own URL, /v1/games/{game}/updates/{from}/{to}.
  return {
    manifestUrl: `../../manifests/${from}/${to}/${manifestBlake3}`,
    patchUrl: `../../patches/${from}/${to}/${patchBlake3}`,
  };
}

/**
 * The descriptor signed by the current key (its update statement: game, from, to, manifest
 * size and BLAKE3), or unsigned when the server has no key. A descriptor signed by a key
 * that has since been rotated out is signed again with this.
 */
export async function signDescriptor(env: Env, d: UpdateDescriptor): Promise<UpdateDescriptor> {
  const { keyId: _k, signature: _s, ...unsigned } = d;
  const signer = statementSigner(env.MANIFEST_SIGNING_KEY);
  if (!signer) return unsigned;
  const s = await signer;
  return { ...unsigned, keyId: s.keyId, signature: await s.sign(updateStatement(s.keyId, d.game, d.from, d.to, d.manifestSize, d.manifestBlake3)) };
}

/** Whether the current key signed `d`'s update statement, and `d` is of the pair (game, from, to). */
export async function signedByCurrentKey(env: Env, game: string, from: string, to: string, d: UpdateDescriptor): Promise<boolean> {
  const signer = statementSigner(env.MANIFEST_SIGNING_KEY);
  if (!signer || typeof d.signature !== "string" || d.game !== game || d.from !== from || d.to !== to) return false;
  if (!Number.isSafeInteger(d.manifestSize) || typeof d.manifestBlake3 !== "string" || !/^[0-9a-f]{64}$/.test(d.manifestBlake3)) return false;
  const s = await signer;
  if (d.keyId !== s.keyId) return false;
  return s.verify(updateStatement(s.keyId, game, from, to, d.manifestSize, d.manifestBlake3), d.signature);
}

/** The fields of a descriptor besides its signature: what a re-signed descriptor must repeat. */
const GENERATED_FIELDS = ["game", "from", "to", "manifestUrl", "manifestSize", "manifestBlake3", "patchUrl", "patchSize", "patchBlake3"] as const;

/**
 * Why the pair's stored descriptor, manifest or patch is not what this Worker generated
 * (`generated`: the pair's PatchGeneration record, kept in Durable Object storage, which the
 * bucket cannot write), or null when they agree. The statement a re-signature covers (game,
 * from, to, manifest size and BLAKE3) is taken from `generated` and checked against the
 * descriptor; the stored manifest is read and hashed (it binds the patch's size and BLAKE3);
 * the stored patch's size is checked (its BLAKE3 is the manifest's, checked by every client as
 * it streams: hashing it here would read the whole patch).
 */
export async function storedMismatch(env: Env, game: string, from: string, to: string, stored: UpdateDescriptor, generated: UpdateDescriptor): Promise<string | null> {
  const pair = { game, from, to };
  for (const f of ["game", "from", "to"] as const) {
    if (generated[f] !== pair[f]) return `the generated record's ${f} is ${JSON.stringify(generated[f])}, not ${JSON.stringify(pair[f])}`;
  }
  for (const f of GENERATED_FIELDS) {
    if (stored[f] !== generated[f]) return `the stored descriptor's ${f} is ${JSON.stringify(stored[f])}, the generated one's ${JSON.stringify(generated[f])}`;
  }
  const manifest = await env.BUCKET.get(keys.manifest(game, from, to));
  if (manifest === null) return "the stored manifest is missing";
  if (manifest.size !== generated.manifestSize) {
    await manifest.body.cancel();
    return `the stored manifest is ${manifest.size} bytes, the generated one ${generated.manifestSize}`;
  }
  wasm.initWasm();
  const manifestBlake3 = wasm.blake3Hex(new Uint8Array(await manifest.arrayBuffer()));
  if (manifestBlake3 !== generated.manifestBlake3) return `the stored manifest's BLAKE3 is ${manifestBlake3}, the generated one's ${generated.manifestBlake3}`;
  const patch = await env.BUCKET.head(keys.patch(game, from, to));
  if (patch === null) return "the stored patch is missing";
  if (patch.size !== generated.patchSize) return `the stored patch is ${patch.size} bytes, the generated one ${generated.patchSize}`;
  return null;
}

/**
 * Completes the patch upload (checked against the size its manifest names), stores the manifest
 * and returns the signed descriptor, not yet stored (written last: it makes the pair exist).
 */
export async function storePatch(env: Env, game: string, from: string, to: string, writer: R2PartWriter, manifest: Uint8Array, readerNeeds: string): Promise<{ descriptor: UpdateDescriptor; patchSize: number }> {
  const reader = new wasm.ManifestReader(manifest);
  const patchBlake3 = reader.patchBlake3;
  const patchSize = reader.patchSize;
  reader.free();
  await writer.finish();
  if (writer.bytesWritten !== patchSize) throw new GenerationError(500, `patch is ${writer.bytesWritten} bytes, its manifest says ${patchSize}`);
  const manifestBlake3 = wasm.blake3Hex(manifest);
  await env.BUCKET.put(keys.manifest(game, from, to), manifest, { httpMetadata: { contentType: "application/octet-stream" }, customMetadata: { blake3: manifestBlake3 } });
  const descriptor = await signDescriptor(env, {
    game,
    from,
    to,
    ...descriptorUrls(game, from, to, manifestBlake3, patchBlake3),
    manifestSize: manifest.length,
    manifestBlake3,
    patchSize,
    patchBlake3,
    readerNeeds,
  });
  return { descriptor, patchSize };
}
