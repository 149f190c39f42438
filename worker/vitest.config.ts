// Tests run inside workerd (the vitest Workers pool) with the real R2, Durable Object and
// Cache bindings of ../wrangler.toml; only the secrets and limits are set for tests here.
import { cloudflareTest } from "@cloudflare/vitest-pool-workers";
import { defineConfig } from "vitest/config";

export const TEST_TOKEN = "test-token";
// base64 ed25519 seed (the public key is derived by the Worker and checked in the tests).
export const TEST_SIGNING_KEY = "5z7vZBjBsbLghijgJ/im4yg8fSsSsZH08B+jTERzFs0=";

export default defineConfig({
  plugins: [
    cloudflareTest({
      wrangler: { configPath: "../wrangler.toml" },
      miniflare: {
        bindings: {
          EDGEPATCH_TOKEN: TEST_TOKEN,
          MANIFEST_SIGNING_KEY: TEST_SIGNING_KEY,
          MAX_BUILD_BYTES: String(16 << 20),
          MAX_REQUEST_BYTES: String(12 << 20),
          PATCH_LEVEL: "3",
        },
      },
    }),
  ],
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 120_000,
    hookTimeout: 120_000,
  },
});
