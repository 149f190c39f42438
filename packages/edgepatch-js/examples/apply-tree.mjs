// node apply-tree.mjs OLD_DIR PATCH NEW_DIR: PATCH is a file or an http(s) URL, streamed
// into the applier as it downloads. Ctrl-C stops the apply and leaves no NEW_DIR.
import { applyTree } from '@edgepatch/js';

const [oldDir, patch, newDir] = process.argv.slice(2);
const controller = new AbortController();
process.once('SIGINT', () => controller.abort(new Error('interrupted')));

const source = /^https?:/.test(patch) ? (await fetch(patch, { signal: controller.signal })).body : patch;
const summary = await applyTree(oldDir, source, newDir, {
  signal: controller.signal,
  onProgress: (p) => process.stderr.write(`\r${p.newBytesWritten} of ${p.newBytesTotal} bytes`),
});
console.log(`\n${summary.files} files, ${summary.bytesWritten} bytes written, all verified`);
