// ed25519 manifest signatures through WebCrypto (workerd implements Ed25519).
import { HttpError } from "./http";

const PKCS8_ED25519_PREFIX = new Uint8Array([0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20]);

export interface ManifestSigner {
  sign(bytes: Uint8Array): Promise<string>;
  publicKey: string;
}

// The loaded signer, never a pending promise: in workerd a promise created by one request
// (or the Durable Object) and awaited by another stalls until the first one's context runs
// again, which is what a generation followed by GET /v1/public-key ran into.
let cached: { secret: string; signer: ManifestSigner } | null = null;

export function base64(bytes: Uint8Array): string {
  let s = "";
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s);
}

function fromBase64(s: string): Uint8Array {
  return Uint8Array.from(atob(s.trim()), (c) => c.charCodeAt(0));
}

function fromBase64Url(s: string): Uint8Array {
  return fromBase64(s.replace(/-/g, "+").replace(/_/g, "/") + "=".repeat((4 - (s.length % 4)) % 4));
}

async function load(secret: string): Promise<ManifestSigner> {
  let seed: Uint8Array;
  try {
    seed = fromBase64(secret);
  } catch {
    throw new HttpError(500, "MANIFEST_SIGNING_KEY is not base64");
  }
  if (seed.length !== 32) throw new HttpError(500, `MANIFEST_SIGNING_KEY holds ${seed.length} bytes, not a 32-byte ed25519 seed`);
  const pkcs8 = new Uint8Array(48);
  pkcs8.set(PKCS8_ED25519_PREFIX);
  pkcs8.set(seed, 16);
  const key = (await crypto.subtle.importKey("pkcs8", pkcs8, { name: "Ed25519" }, true, ["sign"])) as CryptoKey;
  // The JWK form of the private key carries the public key ("x").
  const jwk = (await crypto.subtle.exportKey("jwk", key)) as JsonWebKey;
  if (!jwk.x) throw new HttpError(500, "could not derive the ed25519 public key");
  const publicKey = base64(fromBase64Url(jwk.x));
  return {
    publicKey,
    async sign(bytes: Uint8Array): Promise<string> {
      const sig = await crypto.subtle.sign({ name: "Ed25519" }, key, bytes);
      return base64(new Uint8Array(sig));
    },
  };
}

/** The signer for the configured key, or null when the server does not sign. */
export function manifestSigner(secret: string | undefined): Promise<ManifestSigner> | null {
  if (!secret) return null;
  if (cached?.secret === secret) return Promise.resolve(cached.signer);
  return load(secret).then((signer) => {
    cached = { secret, signer };
    return signer;
  });
}
