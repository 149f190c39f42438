// ed25519 signatures of the protocol's statements through WebCrypto (workerd implements
// Ed25519). The key is the MANIFEST_SIGNING_KEY secret (a 32-byte seed, checked by
// settings.ts); retired keys' public halves come from PREVIOUS_PUBLIC_KEYS.
import { decodeBase64 } from "./settings";
import { keyId } from "./statements";

const PKCS8_ED25519_PREFIX = new Uint8Array([0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20]);

export interface StatementSigner {
  /** base64 ed25519 signature of `statement`. */
  sign(statement: Uint8Array): Promise<string>;
  /** base64 of the 32-byte public key. */
  publicKey: string;
  /** 16 hex digits (docs/UPDATE_PROTOCOL.md "Key id"). */
  keyId: string;
  /** Whether `signature` (base64) is this key's ed25519 signature of `statement`. */
  verify(statement: Uint8Array, signature: string): Promise<boolean>;
}

// The loaded signer, never a pending promise: in workerd a promise created by one request
// (or the Durable Object) and awaited by another stalls until the first one's context runs
// again, which is what a generation followed by GET /v1/public-key ran into.
let cached: { secret: string; signer: StatementSigner } | null = null;

export function base64(bytes: Uint8Array): string {
  let s = "";
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s);
}

function fromBase64Url(s: string): Uint8Array {
  return decodeBase64(s.replace(/-/g, "+").replace(/_/g, "/") + "=".repeat((4 - (s.length % 4)) % 4));
}

async function load(secret: string): Promise<StatementSigner> {
  const seed = decodeBase64(secret);
  const pkcs8 = new Uint8Array(48);
  pkcs8.set(PKCS8_ED25519_PREFIX);
  pkcs8.set(seed, 16);
  const key = (await crypto.subtle.importKey("pkcs8", pkcs8, { name: "Ed25519" }, true, ["sign"])) as CryptoKey;
  // The JWK form of the private key carries the public key ("x").
  const jwk = (await crypto.subtle.exportKey("jwk", key)) as JsonWebKey;
  if (!jwk.x) throw new Error("could not derive the ed25519 public key");
  const publicKey = fromBase64Url(jwk.x);
  const verifyKey = (await crypto.subtle.importKey("raw", publicKey, { name: "Ed25519" }, false, ["verify"])) as CryptoKey;
  return {
    publicKey: base64(publicKey),
    keyId: keyId(publicKey),
    async sign(statement: Uint8Array): Promise<string> {
      return base64(new Uint8Array(await crypto.subtle.sign({ name: "Ed25519" }, key, statement)));
    },
    async verify(statement: Uint8Array, signature: string): Promise<boolean> {
      let bytes: Uint8Array;
      try {
        bytes = decodeBase64(signature);
      } catch {
        return false;
      }
      if (bytes.length !== 64) return false;
      return crypto.subtle.verify({ name: "Ed25519" }, verifyKey, bytes, statement);
    },
  };
}

/** The signer for the configured key, or null when the server does not sign. */
export function statementSigner(secret: string | undefined): Promise<StatementSigner> | null {
  if (!secret) return null;
  if (cached?.secret === secret) return Promise.resolve(cached.signer);
  return load(secret).then((signer) => {
    cached = { secret, signer };
    return signer;
  });
}
