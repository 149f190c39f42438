// The signed statements of docs/UPDATE_PROTOCOL.md "Signed statements", encoded by
// edgepatch-format (crates/edgepatch-format/src/statement.rs through the wasm bindings): the one encoding.
import * as wasm from "./wasm";

/** 16 hex digits: the first 8 bytes of BLAKE3(public key). */
export function keyId(publicKey: Uint8Array): string {
  wasm.initWasm();
  return wasm.keyId(publicKey);
}

export function updateStatement(keyIdHex: string, game: string, from: string, to: string, manifestSize: number, manifestBlake3: string): Uint8Array {
  wasm.initWasm();
  return wasm.updateStatement(keyIdHex, game, from, to, manifestSize, manifestBlake3);
}

export function channelStatement(keyIdHex: string, game: string, channel: string, build: string, sequence: number, expires: number): Uint8Array {
  wasm.initWasm();
  return wasm.channelStatement(keyIdHex, game, channel, build, sequence, expires);
}
