// Type-checked only (npm run typecheck): what a TypeScript user of the package writes
// resolves through the exports map to the declarations, and the types say what the code does.
import { applyFile, applyStream, applyTree, diffFile, PatchApplier, wasmMemoryBytes, type ApplySummary, type BuildSink, type OldBuildSource } from '@edgepatch/js';
import { initSync, type PatchChunks } from '@edgepatch/js/core';

const controller = new AbortController();
const tree: Promise<ApplySummary> = applyTree('old', 'patch', 'new', { onProgress: (p) => p.newBytesWritten / p.newBytesTotal, signal: controller.signal });
const file: Promise<ApplySummary> = applyFile('old', new ReadableStream<Uint8Array>(), 'out', { chunkSize: 1 << 16 });
const size: number = diffFile('old', 'new', 'patch', { level: 19 });
const memory: number = wasmMemoryBytes();

const old: OldBuildSource = { fileSize: () => 0, readAt: () => new Uint8Array(0) };
const sink: BuildSink = { createDirectory() {}, createSymlink() {}, beginFile() {}, writeFile() {}, finishFile() {} };
const chunks: PatchChunks = [new Uint8Array(0)];
const summary: Promise<ApplySummary> = applyStream(new PatchApplier(old, sink), chunks);
const init: typeof initSync = initSync;

export { tree, file, size, memory, summary, init };
