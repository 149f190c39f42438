// The signed statements of docs/UPDATE_PROTOCOL.md "Signed statements".
// TEMPORARY: encoded here until the core's `updateStatement`/`channelStatement`/`keyId` wasm
// exports land on main; then this file only forwards to them (one encoding, in the core).
import * as wasm from "./wasm";

const MAGIC = new TextEncoder().encode("EPSTMT1\0");

/** 16 hex digits: the first 8 bytes of BLAKE3(public key). */
export function keyId(publicKey: Uint8Array): string {
  wasm.initWasm();
  return wasm.blake3Hex(publicKey).slice(0, 16);
}

class StatementWriter {
  private parts: number[] = [];
  constructor(kind: number, keyIdHex: string) {
    this.parts.push(...MAGIC, kind);
    this.hex(keyIdHex, 8);
  }
  hex(h: string, n: number): void {
    if (!new RegExp(`^[0-9a-f]{${2 * n}}$`).test(h)) throw new Error(`not ${n} bytes of hex: ${h}`);
    for (let i = 0; i < n; i++) this.parts.push(parseInt(h.slice(2 * i, 2 * i + 2), 16));
  }
  str16(s: string): void {
    const b = new TextEncoder().encode(s);
    if (b.length > 0xffff) throw new Error("string too long for a statement");
    this.parts.push(b.length & 0xff, b.length >> 8, ...b);
  }
  u64(n: number): void {
    if (!Number.isSafeInteger(n) || n < 0) throw new Error(`${n} is not a u64 JS can hold`);
    let v = BigInt(n);
    for (let i = 0; i < 8; i++) {
      this.parts.push(Number(v & 0xffn));
      v >>= 8n;
    }
  }
  bytes(): Uint8Array {
    return Uint8Array.from(this.parts);
  }
}

export function updateStatement(keyIdHex: string, game: string, from: string, to: string, manifestSize: number, manifestBlake3: string): Uint8Array {
  const w = new StatementWriter(1, keyIdHex);
  w.str16(game);
  w.str16(from);
  w.str16(to);
  w.u64(manifestSize);
  w.hex(manifestBlake3, 32);
  return w.bytes();
}

export function channelStatement(keyIdHex: string, game: string, channel: string, build: string, sequence: number, expires: number): Uint8Array {
  const w = new StatementWriter(2, keyIdHex);
  w.str16(game);
  w.str16(channel);
  w.str16(build);
  w.u64(sequence);
  w.u64(expires);
  return w.bytes();
}
