// What makes the bytes of an update trustworthy (docs/UPDATE_PROTOCOL.md, "Signed
// statements" and "What a client checks"), run in the worker: signatures over the
// statements the core encodes (wasm `updateStatement`, `channelStatement`), the
// manifest against the signed statement, and channel documents against rollback
// and freeze. Steps 4-5 (the patch and every installed byte against the manifest)
// are the wasm PatchApplier's, given the manifest these checks let through.

import type { ManifestEntry, ManifestSegment } from "../../crates/edgepatch-wasm/pkg/web-apply/edgepatch_wasm.js";
import * as wasm from "../../crates/edgepatch-wasm/pkg/web-apply/edgepatch_wasm.js";
import { FrozenError, IntegrityError, ProtocolError, RollbackError, SignatureError, messageOf } from "./errors.js";
import { type TrustOptions, acceptedKeys, base64Bytes } from "./keys.js";
import { ROOT_DIR, dirAt, opfsRoot, readJson, writeAtomic } from "./layout.js";
import type { ChannelHead } from "./messages.js";
import { EMPTY_BUILD, type UpdateDescriptor, channelUrl, descriptorUrl, fetchChannel, fetchChecked, fetchDescriptor, readBounded } from "./protocol.js";

/** Clock skew allowed when judging a channel document's `expires`. */
export const EXPIRY_SKEW_SECONDS = 300;

interface AcceptedKey {
  raw: Uint8Array;
  /** The WebCrypto key, or null where WebCrypto has no Ed25519 (then the core verifies). */
  webCrypto: Promise<CryptoKey | null>;
}

/** The keys a client accepts, by key id; verifies statements signed by them. */
export class Verifier {
  private readonly keys = new Map<string, AcceptedKey>();

  constructor(raw: Uint8Array[]) {
    for (const k of raw) {
      const webCrypto = crypto.subtle
        .importKey("raw", k as BufferSource, { name: "Ed25519" }, false, ["verify"])
        .catch(() => null);
      this.keys.set(wasm.keyId(k), { raw: k, webCrypto });
    }
  }

  /** The verifier for a request's options, or null when unsigned updates are allowed (see `acceptedKeys`). */
  static fromOptions(opts: TrustOptions): Verifier | null {
    const raw = acceptedKeys(opts);
    return raw ? new Verifier(raw) : null;
  }

  get keyIds(): string[] {
    return [...this.keys.keys()];
  }

  /**
   * Checks a signed document: its base64 `signature` over the statement `statementFor`
   * builds for its `keyId`, under that accepted key. Returns the key id. `what` names
   * the document in errors.
   */
  async verify(what: string, doc: { keyId?: string; signature?: string }, statementFor: (keyId: string) => Uint8Array, url: string): Promise<string> {
    const { keyId, signature } = doc;
    if (keyId === undefined || signature === undefined) throw new SignatureError(`${what} (${url}) is not signed (no keyId/signature), and this client accepts only signed updates`, { url });
    const key = this.keys.get(keyId);
    if (!key) throw new SignatureError(`${what} (${url}) is signed by key ${keyId}, which is not an accepted key (accepted: ${this.keyIds.join(", ")})`, { url });
    const sig = base64Bytes(signature);
    if (!sig || sig.length !== 64) throw new SignatureError(`${what} (${url}): the signature is not the base64 of 64 bytes`, { url });
    let statement: Uint8Array;
    try {
      statement = statementFor(keyId);
    } catch (e) {
      throw new ProtocolError(`${what} (${url}): ${messageOf(e)}`, { url });
    }
    let ok: boolean;
    const webKey = await key.webCrypto;
    try {
      ok = webKey
        ? await crypto.subtle.verify({ name: "Ed25519" }, webKey, sig as BufferSource, statement as BufferSource)
        : wasm.verifyEd25519(key.raw, statement, sig);
    } catch (e) {
      throw new SignatureError(`${what} (${url}): checking the signature failed: ${messageOf(e)}`, { url });
    }
    if (!ok) throw new SignatureError(`${what} (${url}): the ed25519 signature does not verify under key ${keyId}`, { url });
    return keyId;
  }
}

/** An update whose documents passed steps 2-3: the manifest is the one the signed statement names. */
export interface VerifiedUpdate {
  descriptor: UpdateDescriptor;
  manifestBytes: Uint8Array;
  entries: ManifestEntry[];
  segments: ManifestSegment[];
  /** From the manifest (the descriptor's own `patchSize` is unsigned). */
  patchSize: number;
  /** The accepted key that signed the statement; null when unsigned updates were allowed. */
  keyId: string | null;
}

/**
 * Fetches the descriptor and the manifest of `game` `from` -> `to` and checks them:
 * the signature over the update statement rebuilt from what was asked for, then the
 * manifest's size, BLAKE3, kind and builds.
 */
export async function fetchVerifiedUpdate(verifier: Verifier | null, baseUrl: string, game: string, from: string, to: string, signal: AbortSignal): Promise<VerifiedUpdate> {
  const desc = await fetchDescriptor(baseUrl, game, from, to, signal);
  const durl = desc.manifestUrl;
  let keyId: string | null = null;
  if (verifier) {
    // The statement is rebuilt from what was asked for, never from the descriptor's own game/from/to.
    const statementFor = (k: string) => wasm.updateStatement(k, game, from, to, desc.manifestSize, desc.manifestBlake3);
    keyId = await verifier.verify(`update descriptor ${game} ${from} -> ${to}`, desc, statementFor, descriptorUrl(baseUrl, game, from, to).href);
  }
  const res = await fetchChecked(durl, { cache: "no-store", signal });
  // Never more than the (signed) size: a hostile answer cannot cost more memory than the real manifest.
  const manifestBytes = await readBounded(res, desc.manifestSize, durl, "manifest");
  const signed = verifier ? "the signed statement" : "the descriptor";
  if (manifestBytes.length !== desc.manifestSize) throw new IntegrityError(`manifest ${durl} is ${manifestBytes.length} bytes, ${signed} says ${desc.manifestSize}`, { url: durl });
  const hash = wasm.blake3Hex(manifestBytes);
  if (hash !== desc.manifestBlake3) throw new IntegrityError(`manifest ${durl} has BLAKE3 ${hash}, ${signed} says ${desc.manifestBlake3}`, { url: durl });
  let m: wasm.ManifestReader;
  try {
    m = new wasm.ManifestReader(manifestBytes);
  } catch (e) {
    throw new IntegrityError(`manifest ${durl}: ${messageOf(e)}`, { url: durl });
  }
  try {
    if (m.kind !== "patch") throw new ProtocolError(`manifest ${durl} is a ${m.kind} manifest, not a patch manifest`, { url: durl });
    const mFrom = m.fromBuild ?? EMPTY_BUILD;
    if (mFrom !== from || m.toBuild !== to) throw new IntegrityError(`manifest ${durl} is for ${mFrom} -> ${m.toBuild}, not the requested ${from} -> ${to}`, { url: durl });
    if (m.patchSize !== desc.patchSize) throw new IntegrityError(`manifest ${durl} says the patch is ${m.patchSize} bytes, the descriptor ${desc.patchSize}`, { url: durl });
    return { descriptor: desc, manifestBytes, entries: m.entries(), segments: m.segments(), patchSize: m.patchSize, keyId };
  } finally {
    m.free();
  }
}

// --- Channels -------------------------------------------------------------------
//
// The newest channel document acted on, per (server base URL, game, channel), lives in
//   edgepatch/.channels/<game>.json   {"version": 1, "heads": {"<base URL> <channel>": {sequence, build}}}
// outside the game's own directory, so removing a game keeps its rollback protection
// (game names never start with ".").

interface StoredHeads {
  version: 1;
  heads: Record<string, { sequence: number; build: string }>;
}

const CHANNELS_DIR = ".channels";

function headKey(baseUrl: string, channel: string): string {
  return `${baseUrl} ${channel}`;
}

async function channelsDir(): Promise<FileSystemDirectoryHandle> {
  return dirAt(await opfsRoot(), `${ROOT_DIR}/${CHANNELS_DIR}`, true);
}

async function readHeads(game: string): Promise<StoredHeads> {
  const s = await readJson<StoredHeads>(await channelsDir(), `${game}.json`);
  return s && s.version === 1 && s.heads && typeof s.heads === "object" ? s : { version: 1, heads: {} };
}

/** Records `head` as the newest channel document acted on (after the update it led to was switched in). */
export async function storeChannelHead(baseUrl: string, game: string, head: ChannelHead): Promise<void> {
  if (head.sequence === undefined) return;
  const s = await readHeads(game);
  const key = headKey(baseUrl, head.channel);
  const old = s.heads[key];
  if (old && old.sequence > head.sequence) return; // never lower it
  s.heads[key] = { sequence: head.sequence, build: head.build };
  await writeAtomic(await channelsDir(), `${game}.json`, JSON.stringify(s));
}

/**
 * Fetches and checks a channel document: its signature (statement rebuilt with the
 * requested game and channel), its expiry (frozen) and its sequence against the newest
 * one stored (rolled back). Stores nothing.
 */
export async function fetchVerifiedChannel(verifier: Verifier | null, baseUrl: string, game: string, channel: string, signal?: AbortSignal, nowMs = Date.now()): Promise<ChannelHead> {
  const doc = await fetchChannel(baseUrl, game, channel, signal);
  const url = channelUrl(baseUrl, game, channel).href;
  const what = `channel ${game}/${channel}`;
  let keyId: string | null = null;
  if (verifier) {
    const { sequence, expires } = doc;
    if (sequence === undefined || expires === undefined) throw new SignatureError(`${what} (${url}) has no sequence or expires, so it is not a signed channel document`, { url });
    keyId = await verifier.verify(what, doc, (k) => wasm.channelStatement(k, game, channel, doc.build, sequence, expires), url);
  }
  if (doc.expires !== undefined && doc.expires + EXPIRY_SKEW_SECONDS < nowMs / 1000) {
    throw new FrozenError(
      `${what} (${url}) expired at ${new Date(doc.expires * 1000).toISOString()} (now ${new Date(nowMs).toISOString()}): ` +
        "the server should re-sign it; an old one may be replayed to keep this browser on an old build",
      { url },
    );
  }
  if (doc.sequence !== undefined) {
    const seen = (await readHeads(game)).heads[headKey(baseUrl, channel)];
    if (seen && (doc.sequence < seen.sequence || (doc.sequence === seen.sequence && doc.build !== seen.build))) {
      throw new RollbackError(
        `${what} (${url}) is sequence ${doc.sequence} (build ${doc.build}), but this browser already followed sequence ${seen.sequence} (build ${seen.build}): an older channel document was replayed`,
        { url },
      );
    }
  }
  const head: ChannelHead = { channel, build: doc.build, keyId };
  if (doc.sequence !== undefined) head.sequence = doc.sequence;
  if (doc.expires !== undefined) head.expires = doc.expires;
  return head;
}
