#!/usr/bin/env node
// edgepatch-js: the native `edgepatch diff` (single files) and `edgepatch apply` (single
// files and build directories), running the WebAssembly build of the core in Node.

import fs from 'node:fs';

const USAGE = `usage:
  edgepatch-js diff [--level N] [--stats] OLD NEW PATCH   make a patch from file OLD to file NEW
  edgepatch-js apply [--stats] [--trust-patch] OLD PATCH OUT
                                                          create OUT (must not exist) from OLD and PATCH;
                                                          OLD is a file or a build directory (then OUT is one)

  --level N   zstd level 1..=22 (default 19); the same N gives the native CLI's bytes
  --stats     print timing, throughput and memory (wasm linear memory, peak RSS) as JSON on stderr
  --trust-patch  PATCH is one you made: rebuild its gzip/zlib files from its side infos
              (refused without it: a hostile patch's could run without end)`;

function fail(message, code = 1) {
  process.stderr.write(`edgepatch-js: error: ${message}\n`);
  process.exit(code);
}

function parse(argv) {
  const opts = { level: 19, stats: false, trustPatch: false, positional: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--stats') opts.stats = true;
    else if (a === '--trust-patch') opts.trustPatch = true;
    else if (a === '--level' || a.startsWith('--level=')) {
      const v = a === '--level' ? argv[++i] : a.slice('--level='.length);
      if (v === undefined || !/^\d+$/.test(v)) fail(`--level needs a number 1..=22\n${USAGE}`, 2);
      opts.level = Number(v);
    } else if (a === '-h' || a === '--help') {
      process.stdout.write(`${USAGE}\n`);
      process.exit(0);
    } else if (a.startsWith('-') && a !== '-') fail(`unknown option ${a}\n${USAGE}`, 2);
    else opts.positional.push(a);
  }
  return opts;
}

async function main() {
  const [command, ...rest] = process.argv.slice(2);
  if (command === '-h' || command === '--help') parse([command]);
  if (command !== 'diff' && command !== 'apply') fail(`${command ? `unknown command ${command}` : 'no command'}\n${USAGE}`, 2);
  const opts = parse(rest);
  if (opts.positional.length !== 3) fail(`${command} takes three paths\n${USAGE}`, 2);
  if (command === 'apply' && rest.some((a) => a === '--level' || a.startsWith('--level='))) fail('--level is for diff', 2);
  if (command === 'diff' && opts.trustPatch) fail('--trust-patch is for apply', 2);

  let lib;
  try {
    lib = await import('../lib/node.js');
  } catch (e) {
    if (e.code !== 'ERR_MODULE_NOT_FOUND' && e.code !== 'ENOENT') throw e;
    fail(`the WebAssembly build is missing (${e.message}); in the repository, run scripts/setup.sh`);
  }
  const started = process.hrtime.bigint();
  const seconds = () => Number(process.hrtime.bigint() - started) / 1e9;
  const [a, b, c] = opts.positional;
  let stats;
  try {
    if (command === 'diff') {
      const bytes = lib.diffFile(a, b, c, { level: opts.level });
      const secs = seconds();
      console.log(`patch ${bytes} bytes; ${secs.toFixed(2)}s`);
      stats = { command, patchBytes: bytes, seconds: secs };
    } else {
      const apply = fs.statSync(a).isDirectory() ? lib.applyTree : lib.applyFile;
      const s = await apply(a, b, c, { trustPatch: opts.trustPatch });
      const secs = seconds();
      console.log(`applied: ${s.entries} entries, ${s.files} files, ${s.bytesWritten} bytes written, all verified; ${secs.toFixed(2)}s`);
      stats = { command, bytesWritten: s.bytesWritten, patchBytes: s.patchBytes, seconds: secs, outputMBps: s.bytesWritten / 1e6 / secs };
    }
  } catch (e) {
    fail(e && e.message ? e.message : String(e));
  }
  if (opts.stats) {
    stats.wasmMemoryBytes = lib.wasmMemoryBytes();
    stats.peakRssBytes = process.resourceUsage().maxRSS * 1024;
    process.stderr.write(`${JSON.stringify(stats)}\n`);
  }
}

await main();
