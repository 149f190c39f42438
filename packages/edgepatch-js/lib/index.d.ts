export { PatchApplier, diffFiles, wasmMemoryBytes } from '../wasm/edgepatch_wasm';
export type { OldBuildSource, BuildSink, ApplyProgress, ApplySummary } from '../wasm/edgepatch_wasm';
import type { ApplyProgress, ApplySummary } from '../wasm/edgepatch_wasm';

/** Applies a single-file patch; OUT must not exist and appears only once verified. */
export function applyFile(
  oldPath: string,
  patchPath: string,
  outPath: string,
  options?: { chunkSize?: number; onProgress?: (p: ApplyProgress) => void },
): ApplySummary;

/** Makes a single-file patch (the native CLI's bytes for the same level); returns its size. */
export function diffFile(oldPath: string, newPath: string, patchPath: string, options?: { level?: number }): number;
