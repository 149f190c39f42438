// Key rotations (KEY_ROTATIONS) in workerd: the Worker serves, in /v1/public-key, the rotations
// the owner made offline, after checking before the first request that each is signed by the key
// it rotates from (the first one's in PREVIOUS_PUBLIC_KEYS) and that the chain ends at the current
// signing key. A forged, broken or dangling chain stops the Worker: every route answers 500
// "server misconfigured: KEY_ROTATIONS ..." and the log says the same.
import { createExecutionContext, createScheduledController, env, waitOnExecutionContext } from "cloudflare:test";
import { afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import worker from "../src/index";
import { statementSigner, type StatementSigner } from "../src/signing";
import { initWasm, rotationStatement, verifyEd25519 } from "../src/wasm";
import { PUBLIC_KEY, TEST_SIGNING_KEY, TEST_TOKEN } from "./keys";

const BASE = "https://edgepatch.test";
const auth = { Authorization: `Bearer ${TEST_TOKEN}` };
const b64 = (s: string) => Uint8Array.from(atob(s), (c) => c.charCodeAt(0));
const seed = (fill: number) => btoa(String.fromCharCode(...new Uint8Array(32).fill(fill)));

// A: the tests' key (the first), B and C: the keys it is rotated to in turn; X: a stranger.
const A = TEST_SIGNING_KEY;
const B = seed(0x0b);
const C = seed(0x0c);
const X = seed(0x58);

interface RotationEntry {
  from: string;
  keyId: string;
  publicKey: string;
  signature: string;
}

async function signerOf(s: string): Promise<StatementSigner> {
  return (await statementSigner(s))!;
}

/** The rotation from `oldSeed`'s key to `newSeed`'s, signed by `by` (the old key unless forged). */
async function rotation(oldSeed: string, newSeed: string, by = oldSeed): Promise<RotationEntry> {
  const [oldKey, newKey, signer] = [await signerOf(oldSeed), await signerOf(newSeed), await signerOf(by)];
  return { from: oldKey.keyId, keyId: newKey.keyId, publicKey: newKey.publicKey, signature: await signer.sign(rotationStatement(oldKey.keyId, b64(newKey.publicKey))) };
}

async function call(overrides: Record<string, string>, path: string, method = "GET"): Promise<Response> {
  const ctx = createExecutionContext();
  const res = await worker.fetch(new Request(`${BASE}${path}`, { method, headers: { ...auth, "CF-Connecting-IP": "198.51.100.88" } }), { ...env, ...overrides }, ctx);
  await waitOnExecutionContext(ctx);
  return res;
}

afterEach(() => {
  vi.restoreAllMocks();
});

beforeAll(() => initWasm());

describe("key rotations", () => {
  it("are served in /v1/public-key when each is signed by the key before and the chain ends at the current key", async () => {
    const ab = await rotation(A, B);
    const bc = await rotation(B, C);
    const [a, b, c] = [await signerOf(A), await signerOf(B), await signerOf(C)];
    for (const [current, chain, retired] of [
      [B, [ab], PUBLIC_KEY],
      [C, [ab, bc], PUBLIC_KEY],
      [C, [ab, bc], `${PUBLIC_KEY},${b.publicKey}`],
    ] as const) {
      const overrides = { MANIFEST_SIGNING_KEY: current, PREVIOUS_PUBLIC_KEYS: retired, KEY_ROTATIONS: JSON.stringify(chain) };
      const res = await call(overrides, "/v1/public-key");
      expect(res.status, await res.clone().text()).toBe(200);
      const doc = (await res.json()) as { keyId: string; rotations: RotationEntry[] };
      expect(doc.keyId).toBe(current === B ? b.keyId : c.keyId);
      expect(doc.rotations).toEqual(chain);
      // What a client does: from the key it trusts (A), each rotation under the key before.
      let trusted = b64(PUBLIC_KEY);
      for (const r of doc.rotations) {
        expect(verifyEd25519(trusted, rotationStatement(r.from, b64(r.publicKey)), b64(r.signature))).toBe(true);
        trusted = b64(r.publicKey);
      }
      expect((await call(overrides, "/v1/health")).status).toBe(200);
      expect((await call(overrides, "/v1/games/rotx/builds")).status).toBe(200);
    }
    expect(a.keyId).toBe("e3e10630bc82e42f");
  });

  it("are left out of /v1/public-key when there are none", async () => {
    for (const none of ["", " ", "[]"]) {
      const doc = (await (await call({ KEY_ROTATIONS: none }, "/v1/public-key")).json()) as object;
      expect(doc).not.toHaveProperty("rotations");
    }
  });

  it("stop the Worker when they do not verify or do not end at the current key", async () => {
    const ab = await rotation(A, B);
    const bc = await rotation(B, C);
    const [b, c, x] = [await signerOf(B), await signerOf(C), await signerOf(X)];
    const cases: { name: string; overrides: Record<string, string>; why: RegExp }[] = [
      { name: "signed by the new key itself", overrides: { MANIFEST_SIGNING_KEY: B, KEY_ROTATIONS: JSON.stringify([await rotation(A, B, B)]) }, why: /entry 1: its signature is not key e3e10630bc82e42f's/ },
      { name: "signed by a stranger", overrides: { MANIFEST_SIGNING_KEY: C, KEY_ROTATIONS: JSON.stringify([ab, await rotation(B, C, X)]) }, why: /entry 2: its signature is not key/ },
      { name: "to a key swapped after signing", overrides: { MANIFEST_SIGNING_KEY: X, KEY_ROTATIONS: JSON.stringify([{ ...ab, keyId: x.keyId, publicKey: x.publicKey }]) }, why: /entry 1: its signature is not/ },
      { name: "ending at another key than the current one", overrides: { MANIFEST_SIGNING_KEY: C, KEY_ROTATIONS: JSON.stringify([ab]) }, why: new RegExp(`ends at key ${b.keyId}, not at the current signing key ${c.keyId}`) },
      { name: "from a key not in PREVIOUS_PUBLIC_KEYS", overrides: { MANIFEST_SIGNING_KEY: C, KEY_ROTATIONS: JSON.stringify([bc]) }, why: /entry 1: its signer, key [0-9a-f]{16}, is not in PREVIOUS_PUBLIC_KEYS/ },
      { name: "out of order", overrides: { MANIFEST_SIGNING_KEY: C, PREVIOUS_PUBLIC_KEYS: `${PUBLIC_KEY},${b.publicKey}`, KEY_ROTATIONS: JSON.stringify([bc, ab]) }, why: /entry 2: it rotates from key e3e10630bc82e42f, but the entry before it rotates to key/ },
      { name: "a key id that is not its key's", overrides: { MANIFEST_SIGNING_KEY: B, KEY_ROTATIONS: JSON.stringify([{ ...ab, keyId: c.keyId }]) }, why: /entry 1: "keyId" [0-9a-f]{16} is not the key id of its "publicKey"/ },
      { name: "a short signature", overrides: { MANIFEST_SIGNING_KEY: B, KEY_ROTATIONS: JSON.stringify([{ ...ab, signature: "AAAA" }]) }, why: /entry 1: "signature" holds 3 bytes, not 64/ },
      { name: "not JSON", overrides: { MANIFEST_SIGNING_KEY: B, KEY_ROTATIONS: "[{from:" }, why: /KEY_ROTATIONS is not JSON/ },
      { name: "not an array", overrides: { MANIFEST_SIGNING_KEY: B, KEY_ROTATIONS: JSON.stringify(ab) }, why: /KEY_ROTATIONS is not a JSON array/ },
      { name: "too many", overrides: { MANIFEST_SIGNING_KEY: B, KEY_ROTATIONS: JSON.stringify(Array(33).fill(ab)) }, why: /lists 33 rotations, more than the 32/ },
    ];
    for (const { name, overrides, why } of cases) {
      const logged = vi.spyOn(console, "error").mockImplementation(() => {});
      const all = { PREVIOUS_PUBLIC_KEYS: PUBLIC_KEY, ...overrides };
      for (const [method, path] of [["GET", "/v1/public-key"], ["GET", "/v1/health"], ["GET", "/v1/games/rotx/channels/main"], ["GET", "/v1/games/rotx/updates/_/v1"], ["OPTIONS", "/v1/health"]]) {
        const res = await call(all, path, method);
        expect(res.status, `${name}: ${method} ${path}`).toBe(500);
        const body = (await res.json()) as { error: string };
        expect(body.error, name).toMatch(/^server misconfigured: KEY_ROTATIONS /);
        expect(body.error, name).toMatch(why);
      }
      const lines = logged.mock.calls.map((l) => l.map(String).join(" "));
      expect(lines.length, name).toBe(5);
      for (const l of lines) expect(l, name).toMatch(why);
      const prod = { ...env, ...all } as typeof env;
      await expect(worker.scheduled(createScheduledController({ scheduledTime: Date.now(), cron: "23 4 * * *" }), prod), name).rejects.toThrow(why);
      vi.restoreAllMocks();
    }
  });
});
