// The core, compiled by `wasm-pack build --target web` (crates/edgepatch-wasm/pkg/web).
// wrangler's bundler turns the .wasm import into a WebAssembly.Module; initSync
// instantiates it once per isolate.
import wasmModule from "../../crates/edgepatch-wasm/pkg/web/edgepatch_wasm_bg.wasm";
import { initSync, isolateLzmaWindowLimit, PatchGenerator } from "../../crates/edgepatch-wasm/pkg/web/edgepatch_wasm.js";

export * from "../../crates/edgepatch-wasm/pkg/web/edgepatch_wasm.js";

let ready = false;

export function initWasm(): void {
  if (!ready) {
    initSync({ module: wasmModule });
    ready = true;
  }
}

/**
 * A generator of one patch, set up as every generator of that patch must be (a run's one pass,
 * each fanned-out step and the assembly make its bytes alike): written for `reader` (hex, the
 * Worker's READER_FLOOR: nothing outside it is used), ops segments' streams are
 * tried as LZMA too (docs/FORMAT.md §2.3 `M`; an encoder of about 12 MiB while it runs), and
 * split wasm parts as LZMA window segments (§2.6 `L`) where window and part take at most
 * `isolateLzmaWindowLimit()` bytes (4 MiB: an encoder of about 49 MB, about 12 bytes per
 * byte, which fit in memory the generator had freed on every measured pair).
 */
export function newPatchGenerator(oldSignature: Uint8Array | null, newSignature: Uint8Array, level: number, reader: string): PatchGenerator {
  const gen = new PatchGenerator(oldSignature, newSignature, level);
  try {
    // First: the reader decides which transforms and forms the patch may use (docs/FORMAT.md §5).
    gen.setReader(reader);
    gen.setLzmaOpsStreams(true);
    gen.setLzmaWindowsUpTo(isolateLzmaWindowLimit());
  } catch (e) {
    gen.free();
    throw e;
  }
  return gen;
}
