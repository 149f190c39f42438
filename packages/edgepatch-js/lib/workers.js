// The Cloudflare Workers entry point (the `workerd` export condition): wrangler's bundler
// turns the .wasm import into a WebAssembly.Module, which is instantiated here, once per
// isolate (workerd compiles no wasm from bytes at run time).

import wasmModule from '../wasm/edgepatch_wasm_bg.wasm';
import { initSync } from '../wasm/edgepatch_wasm.js';

initSync({ module: wasmModule });

export * from './core.js';
