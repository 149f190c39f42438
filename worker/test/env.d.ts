// The test env is the Worker's Env (bindings from ../wrangler.toml, secrets from vitest.config.ts).
type WorkerEnv = import("../src/env").Env;
declare namespace Cloudflare {
  interface Env extends WorkerEnv {}
}
