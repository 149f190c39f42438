// The test env is the Worker's Env (bindings from ../wrangler.toml, secrets from vitest.config.ts).
type WorkerEnv = import("../src/env").Env;
declare namespace Cloudflare {
  interface Env extends WorkerEnv {
    /** Test only: fixtures/hostile as [{ name, input, kind, base64 }] (vitest.config.ts). */
    HOSTILE_VECTORS: string;
    /** Test only: fixtures/arcade/{v1,v2}/logic.wasm as [base64, base64] (vitest.config.ts). */
    ARCADE_LOGIC: string;
  }
}
