// The test env is the Worker's Env (bindings from ../wrangler.toml, secrets from vitest.config.ts).
type WorkerEnv = import("../src/env").Env;
declare namespace Cloudflare {
  interface Env extends WorkerEnv {
    /** Test only: fixtures/hostile as [{ name, input, kind, base64 }] (vitest.config.ts). */
    HOSTILE_VECTORS: string;
  }
}
