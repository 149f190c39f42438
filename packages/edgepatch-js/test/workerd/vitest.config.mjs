// The example Worker in workerd (the vitest Workers pool, a local R2): @edgepatch/js loaded
// through its `workerd` export condition, the .wasm imported as a module. The fixture's
// game.wasm pair and a patch between them reach the test as bindings (workerd has no file system).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { cloudflareTest } from '@cloudflare/vitest-pool-workers';
import { defineConfig } from 'vitest/config';

const REPO = new URL('../../../../', import.meta.url).pathname;
const dir = mkdtempSync(path.join(tmpdir(), 'edgepatch-js-workerd-'));
const member = (version) => {
  execFileSync('tar', ['-xf', path.join(REPO, `fixtures/game-v${version}.tar`), '-C', dir, 'game.wasm']);
  const bytes = readFileSync(path.join(dir, 'game.wasm'));
  rmSync(path.join(dir, 'game.wasm'));
  return bytes;
};
const [oldWasm, newWasm] = [member(1), member(2)];
rmSync(dir, { recursive: true });
// The patch, made by the package's Node entry point (the same core).
const { diffFiles } = await import('@edgepatch/js');
const patch = diffFiles(oldWasm, newWasm, 3);

export default defineConfig({
  plugins: [
    cloudflareTest({
      wrangler: { configPath: './wrangler.toml' },
      miniflare: {
        bindings: {
          OLD_BASE64: oldWasm.toString('base64'),
          NEW_BASE64: newWasm.toString('base64'),
          PATCH_BASE64: Buffer.from(patch).toString('base64'),
        },
      },
    }),
  ],
  test: { include: ['*.workerd.mjs'], testTimeout: 60_000 },
});
