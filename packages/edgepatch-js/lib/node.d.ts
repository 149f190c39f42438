/**
 * edgepatch in Node and Deno: apply a patch to a file or a build directory on disk,
 * streaming, or make a single-file patch. The WebAssembly module is loaded when this is
 * imported; the core's whole API (`PatchApplier`, `diffFiles`, `Signer`, ...) is
 * exported too.
 *
 * @module
 */
export * from './core.js';
import type { ApplySummary } from '../wasm/edgepatch_wasm.js';
import type { PatchChunks, StreamOptions } from './core.js';

export interface ApplyOptions extends StreamOptions {
  /** Bytes read from a patch file at a time (default 1 MiB). */
  chunkSize?: number;
  /**
   * The patch is one you made (default false): its gzip/zlib files may be rebuilt from
   * preflate's side infos, which a hostile patch could keep running without end. A patch
   * that needs them is refused without this (error code `unvouched`). A patch given as a
   * path is then read twice: its checksum first, so a copy damaged since it was made is
   * refused (`corrupt`) before any of it is used; a stream is used as it arrives.
   */
  trustPatch?: boolean;
}

/**
 * Applies the single-file patch `patch` (a path, or its bytes as a stream) to the file
 * `oldPath`, creating the file `outPath`, which must not exist. The output is staged
 * beside `outPath` and renamed into place only once it verified; a failed apply leaves
 * nothing behind.
 */
export function applyFile(oldPath: string, patch: string | PatchChunks, outPath: string, options?: ApplyOptions): Promise<ApplySummary>;

/**
 * Applies the tree patch `patch` (a path, or its bytes as a stream) to the build directory
 * `oldDir`, creating the directory `newDir`, which must not exist, as `edgepatch apply`
 * does: the new build is staged in a directory beside `newDir`, every file's BLAKE3 and
 * the patch's checksum are checked, links are created last, and the staging directory is
 * renamed to `newDir` only then. A failed or aborted apply leaves nothing behind. Paths
 * the patch names never leave `newDir` (the core refuses them first), and no link is
 * followed while reading `oldDir` or writing `newDir`.
 */
export function applyTree(oldDir: string, patch: string | PatchChunks, newDir: string, options?: ApplyOptions): Promise<ApplySummary>;

/**
 * Makes a single-file patch from `oldPath` to `newPath` at zstd `level` (1..=22, default
 * 19): the same bytes as `edgepatch diff --level N`. Both files are held in memory.
 * Returns the patch's size.
 */
export function diffFile(oldPath: string, newPath: string, patchPath: string, options?: { level?: number }): number;
