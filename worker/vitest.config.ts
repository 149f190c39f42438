// Tests run inside workerd (the vitest Workers pool) with the real R2, Durable Object and
// Cache bindings of ../wrangler.toml; only the secrets and limits are set for tests here.
import { readFileSync } from "node:fs";
import { cloudflareTest } from "@cloudflare/vitest-pool-workers";
import { defineConfig } from "vitest/config";

import { RETIRED_PUBLIC_KEY, TEST_SIGNING_KEY, TEST_TOKEN } from "./test/keys";

// The shared hostile vectors (fixtures/hostile, docs/FORMAT.md §2.7), handed to the tests in
// workerd as one JSON binding: workerd has no file system to read them from.
const HOSTILE = new URL("../fixtures/hostile/", import.meta.url);
const hostileVectors = JSON.stringify(
  (JSON.parse(readFileSync(new URL("vectors.json", HOSTILE), "utf8")) as { vectors: { name: string; file: string; input: string; kind: string }[] }).vectors.map(
    (v) => ({ name: v.name, input: v.input, kind: v.kind, base64: readFileSync(new URL(v.file, HOSTILE)).toString("base64") }),
  ),
);

// The playable arcade's engine module in both versions (fixtures/arcade): v2 re-emits its
// code, so the generator stores it in the field-split layout (docs/FORMAT.md §2.8.7).
const ARCADE = new URL("../fixtures/arcade/", import.meta.url);
const arcadeLogic = JSON.stringify(["v1", "v2"].map((v) => readFileSync(new URL(`${v}/logic.wasm`, ARCADE)).toString("base64")));

export default defineConfig({
  plugins: [
    cloudflareTest({
      wrangler: { configPath: "../wrangler.toml" },
      miniflare: {
        // The rate limit test sends 2 * limit + 1 requests: 100 keeps it short (wrangler.toml: 600).
        ratelimits: { ANONYMOUS_RATE_LIMITER: { namespace_id: "1001", simple: { limit: 100, period: 60 } } },
        bindings: {
          HOSTILE_VECTORS: hostileVectors,
          ARCADE_LOGIC: arcadeLogic,
          // wrangler.toml says production, which refuses the development key (TEST_SIGNING_KEY is it).
          ENVIRONMENT: "development",
          EDGEPATCH_TOKEN: TEST_TOKEN,
          MANIFEST_SIGNING_KEY: TEST_SIGNING_KEY,
          // 32 MiB: room for the fanned-out pairs (more than 3 segments of 4 MiB).
          MAX_BUILD_BYTES: String(32 << 20),
          MAX_REQUEST_BYTES: String(12 << 20),
          PATCH_LEVEL: "3",
          CHANNEL_HISTORY: "2",
          PREVIOUS_PUBLIC_KEYS: RETIRED_PUBLIC_KEY,
          // Short backoffs, so the retry tests do not wait a minute.
          GENERATION_RETRY_SECONDS: "3",
          GENERATION_RETRY_MAX_SECONDS: "6",
          // Pairs of more than 3 segments (12 MiB of new data) are fanned out; the other tests' stay under.
          GENERATION_STEP_SEGMENTS: "3",
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
