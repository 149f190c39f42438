// A Cloudflare Worker that updates a single-file build stored in R2 (binding BUILDS):
//   POST /apply?old=KEY&patch=KEY&new=KEY
// The patch streams from R2 into the applier; the old file is read into memory (the
// applier's reads are synchronous, R2's are not). wrangler bundles @edgepatch/js's
// `workerd` entry point, which imports the .wasm as a module.
import { PatchApplier, applyStream } from '@edgepatch/js';

export default {
  async fetch(request, env) {
    const q = new URL(request.url).searchParams;
    const [oldObject, patchObject] = await Promise.all([env.BUILDS.get(q.get('old')), env.BUILDS.get(q.get('patch'))]);
    if (!oldObject || !patchObject) return new Response('no such old build or patch', { status: 404 });
    const oldBytes = new Uint8Array(await oldObject.arrayBuffer());
    const chunks = [];
    const applier = new PatchApplier(
      { fileSize: () => oldBytes.length, readAt: (_, offset, length) => oldBytes.subarray(offset, offset + length) },
      {
        createDirectory() { throw new Error('a tree patch; this Worker applies single files'); },
        createSymlink() { throw new Error('a tree patch; this Worker applies single files'); },
        beginFile() {},
        writeFile: (bytes) => chunks.push(bytes),
        finishFile() {},
      },
    );
    try {
      const summary = await applyStream(applier, patchObject.body);
      await env.BUILDS.put(q.get('new'), new Blob(chunks)); // stored only once verified
      return Response.json(summary);
    } catch (e) {
      // e.kind names what was wrong: "truncated", "corrupt", "old_build", ...
      return Response.json({ kind: e.kind ?? 'internal', message: e.message }, { status: e.kind ? 422 : 500 });
    } finally {
      applier.free();
    }
  },
};
