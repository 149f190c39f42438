// What makes the bytes of an update trustworthy (docs/UPDATE_PROTOCOL.md, "Signed
// statements" and "What a client checks"), run in the worker: the descriptor's signature
// over its update statement and the channel rules (signature, freeze, rollback), both the
// core's (wasm `checkUpdateDescriptor`, `acceptChannel`) given the accepted key and the
// newest channel position stored here, then the manifest against the signed statement.
// Steps 4-5 (the patch and every installed byte against the manifest)
// are the wasm PatchApplier's, given the manifest these checks let through.
//
// Key rotation: a document signed by a key id that is not accepted sends the Verifier to
// the server's `v1/public-key`, whose `rotations` it follows from the accepted keys, each
// step signed by a key already trusted (wasm `rotationStatement`); keys learned so are
// stored per server and trusted again only through the same chain from the configured keys.

import type { ManifestEntry, ManifestSegment } from "../../crates/edgepatch-wasm/pkg/web-apply/edgepatch_wasm.js";
import * as wasm from "../../crates/edgepatch-wasm/pkg/web-apply/edgepatch_wasm.js";
import { IntegrityError, ProtocolError, SignatureError, messageOf } from "./errors.js";
import { type TrustOptions, acceptedKeys } from "./keys.js";
import { ROOT_DIR, dirAt, opfsRoot, readJson, writeAtomic } from "./layout.js";
import type { ChannelHead } from "./messages.js";
import {
  EMPTY_BUILD,
  type KeyRotation,
  MAX_ROTATIONS,
  type UpdateDescriptor,
  byCoreRule,
  fetchChannel,
  fetchChecked,
  fetchDescriptor,
  fetchRotations,
  parseRotations,
  readBounded,
  serverKey,
} from "./protocol.js";

/** The keys a client accepts, by key id; finds the key a signed document names. */
export class Verifier {
  /** Accepted ed25519 public keys (32 bytes), by key id. */
  private readonly keys = new Map<string, Uint8Array>();
  /** Rotations this verifier followed (stored ones and fetched ones), in order. */
  private readonly followed: KeyRotation[] = [];
  private storedTried = false;

  /** `baseUrl`: the server, where rotations are looked up (none: only the given keys). */
  constructor(raw: Uint8Array[], private readonly baseUrl: string | null = null) {
    for (const k of raw) this.keys.set(wasm.keyId(k), k);
  }

  /** The verifier for a request's options, or null when unsigned updates are allowed (see `acceptedKeys`). */
  static fromOptions(opts: TrustOptions): Verifier | null {
    const raw = acceptedKeys(opts);
    return raw ? new Verifier(raw, opts.baseUrl !== undefined ? String(opts.baseUrl) : null) : null;
  }

  get keyIds(): string[] {
    return [...this.keys.keys()];
  }

  /**
   * The accepted public key (32 bytes) a signed document names by `keyId`, or one reached
   * by the server's key rotations (see `followRotations`); the signature itself is the core's
   * to check. `what` names the document in errors.
   */
  async keyFor(what: string, keyId: string | undefined, url: string): Promise<Uint8Array> {
    if (keyId === undefined) throw new SignatureError(`${what} (${url}) is not signed (no keyId/signature), and this client accepts only signed updates`, { url });
    return this.keys.get(keyId) ?? (await this.followRotations(what, keyId, url));
  }

  /**
   * The key `target` names, reached from the accepted keys by key rotations (the core's
   * `followRotations`): first those stored for this server, then the server's
   * `v1/public-key`. Each rotation whose signer is trusted (at the start or through an
   * earlier rotation) must verify, and its new key becomes trusted; rotations from other keys
   * are passed over. Throws SignatureError when `target` is not reached, saying why.
   */
  private async followRotations(what: string, target: string, url: string): Promise<Uint8Array> {
    const notAccepted = `${what} (${url}) is signed by key ${target}, which is not an accepted key (accepted: ${this.keyIds.join(", ")})`;
    if (this.baseUrl === null) throw new SignatureError(notAccepted, { url });
    if (!this.storedTried) {
      this.storedTried = true;
      // Stored rotations were verified when learned; they count only from the keys configured now.
      try {
        this.learn(await readStoredRotations(this.baseUrl), target);
      } catch {
        /* stored entries that no longer lead to it: the server's document decides */
      }
      const k = this.keys.get(target);
      if (k) return k;
    }
    let fetched: { url: string; rotations: KeyRotation[] };
    try {
      fetched = await fetchRotations(this.baseUrl);
    } catch (e) {
      if ((e as { name?: string }).name === "AbortError") throw e;
      throw new SignatureError(`${notAccepted}; no key rotation to it could be read: ${messageOf(e)}`, { url });
    }
    const { url: pkUrl, rotations } = fetched;
    try {
      this.learn(rotations, target);
    } catch (e) {
      const message = `${notAccepted}; ${messageOf(e)} (${pkUrl})`;
      throw (e as { code?: unknown }).code === "signature" ? new SignatureError(message, { url }) : new ProtocolError(message, { url });
    }
    await storeRotations(this.baseUrl, this.followed).catch(() => {});
    return this.keys.get(target) as Uint8Array;
  }

  /** Follows `rotations` from the keys trusted now to `target` (the core's rule); trusts the keys learned. */
  private learn(rotations: KeyRotation[], target: string): void {
    const trusted = new Uint8Array(32 * this.keys.size);
    [...this.keys.values()].forEach((k, i) => trusted.set(k, 32 * i));
    const learned = wasm.followRotations(trusted, rotations, target);
    for (let i = 0; i < learned.length; i += 32) {
      const key = learned.slice(i, i + 32);
      const id = wasm.keyId(key);
      this.keys.set(id, key);
      const r = rotations.find((x) => x.keyId.toLowerCase() === id);
      if (r) this.followed.push(r);
    }
  }
}

// Rotations followed, per server (its resolved base URL), live in
//   edgepatch/.keys/rotations.json   {"version": 1, "servers": {"<base URL>": [rotation, ...]}}
// beside .channels (never a game name). Only followed rotations are stored, and they are
// followed again from the configured keys each time: a portal that stops configuring a
// key stops trusting what it rotated to.

interface StoredRotations {
  version: 1;
  servers: Record<string, KeyRotation[]>;
}

const KEYS_DIR = ".keys";
const ROTATIONS_FILE = "rotations.json";

async function keysDir(): Promise<FileSystemDirectoryHandle> {
  return dirAt(await opfsRoot(), `${ROOT_DIR}/${KEYS_DIR}`, true);
}

async function readAllRotations(): Promise<StoredRotations> {
  const s = await readJson<StoredRotations>(await keysDir(), ROTATIONS_FILE);
  return s && s.version === 1 && s.servers && typeof s.servers === "object" ? s : { version: 1, servers: {} };
}

async function readStoredRotations(baseUrl: string): Promise<KeyRotation[]> {
  try {
    return parseRotations((await readAllRotations()).servers[serverKey(baseUrl)], "stored key rotations");
  } catch {
    return [];
  }
}

/** Adds `followed` to the rotations stored for `baseUrl` (each once, at most MAX_ROTATIONS). */
async function storeRotations(baseUrl: string, followed: KeyRotation[]): Promise<void> {
  const s = await readAllRotations();
  const key = serverKey(baseUrl);
  let list: KeyRotation[];
  try {
    list = parseRotations(s.servers[key], "stored key rotations");
  } catch {
    list = [];
  }
  const same = (a: KeyRotation, b: KeyRotation) => a.from === b.from && a.keyId === b.keyId && a.signature === b.signature;
  const added = followed.filter((r) => !list.some((o) => same(o, r)));
  if (added.length === 0) return;
  s.servers[key] = [...list, ...added].slice(-MAX_ROTATIONS);
  await writeAtomic(await keysDir(), ROTATIONS_FILE, JSON.stringify(s));
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
  const reader = wasm.readerCapabilities();
  const { doc: desc, url } = await fetchDescriptor(baseUrl, game, from, to, reader, signal);
  // Before anything else is fetched: a patch made for newer readers than this library.
  if (desc.readerNeeds !== undefined && !wasm.readerCovers(reader, desc.readerNeeds)) {
    throw new ProtocolError(
      `${url}: this update's patch needs format features this library does not read (${wasm.capabilityNames(desc.readerNeeds)}; it reads ${wasm.capabilityNames(reader)}): update @edgepatch/web to a newer version`,
      { url },
    );
  }
  const durl = desc.manifestUrl;
  let keyId: string | null = null;
  if (verifier) {
    // The core rebuilds the statement from what was asked for, never from the descriptor's own game/from/to.
    const what = `update descriptor ${game} ${from} -> ${to}`;
    const key = await verifier.keyFor(what, desc.keyId, url);
    byCoreRule(what, url, () => wasm.checkUpdateDescriptor(desc, game, from, to, key));
    keyId = wasm.keyId(key);
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
 * Fetches a channel document and applies the channel rules (the core's `acceptChannel`): its
 * signature (statement rebuilt with the requested game and channel), its expiry (frozen) and
 * its sequence against the newest one stored (rolled back). Stores nothing.
 */
export async function fetchVerifiedChannel(verifier: Verifier | null, baseUrl: string, game: string, channel: string, signal?: AbortSignal, nowMs = Date.now()): Promise<ChannelHead> {
  const { doc, url } = await fetchChannel(baseUrl, game, channel, signal);
  const what = `channel ${game}/${channel}`;
  const key = verifier ? await verifier.keyFor(what, doc.keyId, url) : undefined;
  const seen = (await readHeads(game)).heads[headKey(baseUrl, channel)];
  byCoreRule(what, url, () => wasm.acceptChannel(doc, game, channel, key, seen?.sequence, seen?.build, nowMs / 1000), {
    rollback: () =>
      `is sequence ${doc.sequence} (build ${doc.build}), but this browser already followed sequence ${seen?.sequence} (build ${seen?.build}): an older channel document was replayed`,
  });
  const head: ChannelHead = { channel, build: doc.build, keyId: key ? wasm.keyId(key) : null };
  if (doc.sequence !== undefined) head.sequence = doc.sequence;
  if (doc.expires !== undefined) head.expires = doc.expires;
  return head;
}
