// The Worker's settings (wrangler.toml [vars], secrets), parsed and checked once per isolate
// before the first request is served. A malformed value never becomes NaN or a default:
// every route answers 500 "server misconfigured" until it is fixed (fail closed).
import type { Env } from "./env";
import { initWasm, readerFromList } from "./wasm";

export interface Settings {
  /** Largest build accepted (tar bytes, all parts together). */
  maxBuildBytes: number;
  /** Largest single request body. */
  maxRequestBytes: number;
  /** zstd level of generated patches. */
  patchLevel: number;
  /** Previous heads of a channel from which anonymous callers may update (besides `_`). */
  channelHistory: number;
  /** Seconds a signed channel document stays valid (its `expires`). */
  channelTtlSeconds: number;
  /** First delay before a failed generation is tried again; doubled per failure. */
  generationRetrySeconds: number;
  /** Longest delay between two tries of a failed generation. */
  generationRetryMaxSeconds: number;
  /** Public keys (base64, 32 bytes) of retired signing keys still listed at /v1/public-key. */
  previousPublicKeys: Uint8Array[];
  /** Builds kept per game besides those a channel names (0: keep every build). */
  retainBuilds: number;
  /** Seconds after which an upload in parts that was never completed is aborted. */
  uploadTtlSeconds: number;
  /** Segments (4 MiB of new data each) per step of a fanned-out generation; pairs with more are fanned out. */
  generationStepSegments: number;
  /**
   * The oldest reader served (READER_FLOOR, docs/FORMAT.md §5), as hex: every patch is written
   * for it, so every client that reads at least this set applies every patch.
   */
  readerFloor: string;
  /**
   * Where this Worker runs (ENVIRONMENT): `development` (`wrangler dev`, the tests) accepts the
   * committed development key and token of .dev.vars.example; `staging` and `production`
   * (wrangler.toml's deployments, and any Worker that does not say) refuse to serve with them.
   */
  environment: Environment;
}

export type Environment = "development" | "staging" | "production";

/**
 * A setting that stops the Worker from serving. Its message goes to the log only; `publicReason`,
 * when set, is added to every response's "server misconfigured" (it must say nothing secret).
 */
export class ConfigError extends Error {
  constructor(
    message: string,
    readonly publicReason?: string,
  ) {
    super(message);
  }
}

/**
 * The development secrets committed in .dev.vars.example (the signing key's public key is
 * A7uEkRVTltb5Gdqhsb0Piu0KMJI4LOoKdIdcjruHpUs=, key id e3e10630bc82e42f). Anyone can read them,
 * so anyone could sign updates or publish builds with them: accepted only in development.
 */
export const DEVELOPMENT_SIGNING_KEY = "5z7vZBjBsbLghijgJ/im4yg8fSsSsZH08B+jTERzFs0=";
export const DEVELOPMENT_TOKEN = "dev-token-not-secret";

function environment(raw: string | undefined): Environment {
  // Unset means deployed: only an explicit "development" accepts the development secrets.
  if (raw === undefined || raw.trim() === "") return "production";
  const v = raw.trim();
  if (v === "development" || v === "staging" || v === "production") return v;
  throw new ConfigError(`ENVIRONMENT=${JSON.stringify(raw)} is not development, staging or production`);
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/** Refuses the development key or token outside development (the log and the answer say which). */
function refuseDevelopmentSecrets(env: Env, where: Environment, seed: Uint8Array | null): void {
  if (where === "development") return;
  const found: string[] = [];
  if (seed !== null && sameBytes(seed, decodeBase64(DEVELOPMENT_SIGNING_KEY))) found.push("signing key (key id e3e10630bc82e42f)");
  if (env.EDGEPATCH_TOKEN !== undefined && env.EDGEPATCH_TOKEN.trim() === DEVELOPMENT_TOKEN) found.push("token");
  if (found.length === 0) return;
  const what = `the development ${found.join(" and ")} of .dev.vars.example ${found.length > 1 ? "are" : "is"} configured in ${where}`;
  throw new ConfigError(
    `${what} (ENVIRONMENT=${where}): set real secrets with \`wrangler secret put MANIFEST_SIGNING_KEY\` / \`EDGEPATCH_TOKEN\`${where === "production" ? " (or ENVIRONMENT=development for a local run)" : ""}`,
    what,
  );
}

function integer(env: Env, name: keyof Env, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  if (typeof raw !== "string" || !/^\d+$/.test(raw.trim())) throw new ConfigError(`${name}=${JSON.stringify(raw)} is not a whole number`);
  const n = Number(raw.trim());
  if (!Number.isSafeInteger(n) || n < min || n > max) throw new ConfigError(`${name}=${raw} is outside ${min}..${max}`);
  return n;
}

export function decodeBase64(s: string): Uint8Array {
  return Uint8Array.from(atob(s.trim()), (c) => c.charCodeAt(0));
}

function publicKeys(raw: string | undefined): Uint8Array[] {
  if (raw === undefined || raw.trim() === "") return [];
  return raw.split(",").map((s, i) => {
    let key: Uint8Array;
    try {
      key = decodeBase64(s);
    } catch {
      throw new ConfigError(`PREVIOUS_PUBLIC_KEYS entry ${i + 1} is not base64`);
    }
    if (key.length !== 32) throw new ConfigError(`PREVIOUS_PUBLIC_KEYS entry ${i + 1} holds ${key.length} bytes, not a 32-byte ed25519 public key`);
    return key;
  });
}

function readerFloor(raw: string | undefined): string {
  initWasm();
  try {
    return readerFromList(raw === undefined || raw.trim() === "" ? "v0.1" : raw);
  } catch (e) {
    throw new ConfigError(`READER_FLOOR=${JSON.stringify(raw)}: ${e instanceof Error ? e.message : String(e)}`);
  }
}

export function parseSettings(env: Env): Settings {
  const settings: Settings = {
    maxBuildBytes: integer(env, "MAX_BUILD_BYTES", 2 ** 31, 1, Number.MAX_SAFE_INTEGER),
    maxRequestBytes: integer(env, "MAX_REQUEST_BYTES", 100 * 2 ** 20, 5 << 20, 5 * 2 ** 30),
    patchLevel: integer(env, "PATCH_LEVEL", 17, 1, 22),
    channelHistory: integer(env, "CHANNEL_HISTORY", 8, 0, 64),
    channelTtlSeconds: integer(env, "CHANNEL_TTL_SECONDS", 86400, 60, 366 * 86400),
    generationRetrySeconds: integer(env, "GENERATION_RETRY_SECONDS", 60, 1, 86400),
    generationRetryMaxSeconds: integer(env, "GENERATION_RETRY_MAX_SECONDS", 6 * 3600, 1, 7 * 86400),
    previousPublicKeys: publicKeys(env.PREVIOUS_PUBLIC_KEYS),
    retainBuilds: integer(env, "RETAIN_BUILDS", 0, 0, 1_000_000),
    uploadTtlSeconds: integer(env, "UPLOAD_TTL_SECONDS", 86400, 60, 30 * 86400),
    generationStepSegments: integer(env, "GENERATION_STEP_SEGMENTS", 32, 1, 4096),
    environment: environment(env.ENVIRONMENT),
    readerFloor: readerFloor(env.READER_FLOOR),
  };
  if (settings.generationRetryMaxSeconds < settings.generationRetrySeconds) {
    throw new ConfigError(`GENERATION_RETRY_MAX_SECONDS=${settings.generationRetryMaxSeconds} is below GENERATION_RETRY_SECONDS=${settings.generationRetrySeconds}`);
  }
  let seed: Uint8Array | null = null;
  if (env.MANIFEST_SIGNING_KEY !== undefined) {
    try {
      seed = decodeBase64(env.MANIFEST_SIGNING_KEY);
    } catch {
      throw new ConfigError("MANIFEST_SIGNING_KEY is not base64");
    }
    if (seed.length !== 32) throw new ConfigError(`MANIFEST_SIGNING_KEY holds ${seed.length} bytes, not a 32-byte ed25519 seed`);
  }
  refuseDevelopmentSecrets(env, settings.environment, seed);
  return settings;
}

// One parse per distinct environment (tests run several in one isolate; production has one).
const parsed = new WeakMap<object, Settings | ConfigError>();

/** The settings of `env`, or throws ConfigError (the same one every time) when malformed. */
export function settings(env: Env): Settings {
  let s = parsed.get(env);
  if (s === undefined) {
    try {
      s = parseSettings(env);
    } catch (e) {
      if (!(e instanceof ConfigError)) throw e;
      s = e;
    }
    parsed.set(env, s);
  }
  if (s instanceof ConfigError) throw s;
  return s;
}
