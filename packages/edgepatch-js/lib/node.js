// The Node and Deno entry point: the module is read from the package's .wasm file and
// instantiated at import, then the core's API and the file system functions are exported.

import { readFileSync } from 'node:fs';
import { initSync } from '../wasm/edgepatch_wasm.js';

initSync({ module: readFileSync(new URL('../wasm/edgepatch_wasm_bg.wasm', import.meta.url)) });

export * from './core.js';
export { applyFile, applyTree } from './apply.js';
export { diffFile } from './diff.js';
