// examples/worker.mjs in workerd: a patch in R2 applied to an old file in R2, byte-exact.
import { env, SELF } from 'cloudflare:test';
import { expect, it } from 'vitest';

const bytes = (base64) => Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));

it('applies a single-file patch from R2 into R2 and refuses a truncated one', async () => {
  await env.BUILDS.put('game-v1.wasm', bytes(env.OLD_BASE64));
  await env.BUILDS.put('v1-to-v2.patch', bytes(env.PATCH_BASE64));
  const ok = await SELF.fetch('https://example.test/apply?old=game-v1.wasm&patch=v1-to-v2.patch&new=game-v2.wasm', { method: 'POST' });
  expect(ok.status, await ok.clone().text()).toBe(200);
  const expected = bytes(env.NEW_BASE64);
  expect((await ok.json()).bytesWritten).toBe(expected.length);
  const stored = new Uint8Array(await (await env.BUILDS.get('game-v2.wasm')).arrayBuffer());
  expect(stored.length).toBe(expected.length);
  expect(stored.every((b, i) => b === expected[i])).toBe(true);

  await env.BUILDS.put('cut.patch', bytes(env.PATCH_BASE64).subarray(0, 100));
  const cut = await SELF.fetch('https://example.test/apply?old=game-v1.wasm&patch=cut.patch&new=bad.wasm', { method: 'POST' });
  expect(cut.status).toBe(422);
  expect((await cut.json()).kind).toBe('truncated');
  expect(await env.BUILDS.get('bad.wasm')).toBe(null);
});
