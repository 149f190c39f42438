/**
 * edgepatch in Cloudflare Workers (the `workerd` export condition): the WebAssembly
 * module is imported as a module and instantiated when this is imported, then the core's
 * API is exported as in `@edgepatch/js/core`. There is no file system: read old data from
 * R2 or memory through an `OldBuildSource`, write through a `BuildSink`.
 *
 * @module
 */
export * from './core.js';
