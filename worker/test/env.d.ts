declare module "cloudflare:test" {
  interface ProvidedEnv extends import("../src/env").Env {}
}
