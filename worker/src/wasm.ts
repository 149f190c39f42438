// The core, compiled by `wasm-pack build --target web` (crates/edgepatch-wasm/pkg/web).
// wrangler's bundler turns the .wasm import into a WebAssembly.Module; initSync
// instantiates it once per isolate.
import wasmModule from "../../crates/edgepatch-wasm/pkg/web/edgepatch_wasm_bg.wasm";
import { initSync } from "../../crates/edgepatch-wasm/pkg/web/edgepatch_wasm.js";

export * from "../../crates/edgepatch-wasm/pkg/web/edgepatch_wasm.js";

let ready = false;

export function initWasm(): void {
  if (!ready) {
    initSync({ module: wasmModule });
    ready = true;
  }
}
