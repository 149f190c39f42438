// What the Node benchmark scripts share: their command-line options, where the
// corpus and bench/run.sh's work directory are (the same defaults as run.sh),
// and the single-file pairs they measure.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** The value after `--name` on the command line, or `dflt`. */
export function arg(name, dflt) {
  const i = process.argv.indexOf(`--${name}`);
  return i < 0 ? dflt : process.argv[i + 1];
}

export const CORPUS = arg('corpus', process.env.EDGEPATCH_CORPUS || path.join(os.homedir(), '.cache/edgepatch-corpus'));
export const WORK = process.env.EDGEPATCH_BENCH_WORK || path.join(os.homedir(), '.cache/edgepatch-bench');

/** [name, directory holding old and new] for the corpus's single-file pairs and
 *  the 101 MiB pair bench/run.sh builds, restricted to `--pairs a,b` if given. */
export function filePairs() {
  const only = arg('pairs', null)?.split(',');
  return [
    ['havok-wasm', path.join(CORPUS, 'pairs/havok-wasm')],
    ['phaser-js', path.join(CORPUS, 'pairs/phaser-js')],
    ['esbuild-wasm-adj', path.join(CORPUS, 'pairs/esbuild-wasm-adj')],
    ['freedoom2-wad', path.join(CORPUS, 'pairs/freedoom2-wad')],
    ['concat-101mib', path.join(WORK, 'derived/concat-101mib')],
  ].filter(([name]) => !only || only.includes(name));
}

/** The signature of the single file `file` (one entry, no name) made by the wasm module `w`'s
 *  `Signer`, read in 1 MiB pieces, as the Worker signs an upload. */
export function signFile(w, file) {
  const s = new w.Signer();
  const fd = fs.openSync(file, 'r');
  const size = fs.fstatSync(fd).size;
  s.beginFile('', false, size);
  const buf = Buffer.allocUnsafe(1 << 20);
  for (let at = 0; at < size; ) {
    const n = fs.readSync(fd, buf, 0, buf.length, at);
    s.update(buf.subarray(0, n));
    at += n;
  }
  s.finishFile();
  fs.closeSync(fd);
  return s.finish();
}
