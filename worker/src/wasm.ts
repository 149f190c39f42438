// The core, compiled by `wasm-pack build --target web` (crates/edgepatch-wasm/pkg/web).
// wrangler's bundler turns the .wasm import into a WebAssembly.Module; initSync
// instantiates it once per isolate.
import wasmModule from "../../crates/edgepatch-wasm/pkg/web/edgepatch_wasm_bg.wasm";
import { initSync, PatchGenerator } from "../../crates/edgepatch-wasm/pkg/web/edgepatch_wasm.js";

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
 * each fanned-out step and the assembly make its bytes alike): ops segments' streams are
 * tried as LZMA too (docs/FORMAT.md §2.3 `M`; an encoder of about 12 MiB while it runs). LZMA
 * window segments are not: their encoder takes about 12 bytes per byte of window and part,
 * more than an isolate has beside the generator.
 */
export function newPatchGenerator(oldSignature: Uint8Array | null, newSignature: Uint8Array, level: number): PatchGenerator {
  const gen = new PatchGenerator(oldSignature, newSignature, level);
  try {
    gen.setLzmaOpsStreams(true);
  } catch (e) {
    gen.free();
    throw e;
  }
  return gen;
}
