import type { GameRegistry } from "./registry";
import type { PatchGeneration } from "./generate";
import type { PairJob } from "./pregenerate";
import type { GenerationJob } from "./fanout";

export interface Env {
  BUCKET: R2Bucket;
  GENERATIONS: DurableObjectNamespace<PatchGeneration>;
  REGISTRY: DurableObjectNamespace<GameRegistry>;
  /** Queue of pairs to generate ahead of requests (producer; this Worker also consumes it). */
  PREGENERATE: Queue<PairJob>;
  /** Queue of the steps and assemblies of fanned-out generations (fanout.ts; this Worker consumes it). */
  GENERATION_STEPS: Queue<GenerationJob>;
  /** Rate limit of anonymous requests, keyed by the client's address. */
  ANONYMOUS_RATE_LIMITER: RateLimit;
  /** Secret: bearer token of the owner (publishing, unreleased builds, listings). */
  EDGEPATCH_TOKEN?: string;
  /** Secret: base64 of the 32-byte ed25519 seed that signs update and channel statements. */
  MANIFEST_SIGNING_KEY?: string;
  /** Comma-separated base64 public keys of retired signing keys (listed at /v1/public-key). */
  PREVIOUS_PUBLIC_KEYS?: string;
  MAX_BUILD_BYTES?: string;
  MAX_REQUEST_BYTES?: string;
  PATCH_LEVEL?: string;
  CHANNEL_HISTORY?: string;
  CHANNEL_TTL_SECONDS?: string;
  GENERATION_RETRY_SECONDS?: string;
  GENERATION_RETRY_MAX_SECONDS?: string;
  RETAIN_BUILDS?: string;
  UPLOAD_TTL_SECONDS?: string;
  GENERATION_STEP_SEGMENTS?: string;
  /** JSON array of key rotations, oldest first, served in /v1/public-key (rotations.ts). */
  KEY_ROTATIONS?: string;
  /**
   * The oldest reader this Worker serves (docs/FORMAT.md §5): a list of capability names, or
   * `v0.1`, `current`, `baseline`, `current,-name` (unset: `v0.1`). Every patch is written for it.
   */
  READER_FLOOR?: string;
  /** "development" (wrangler dev, tests), "staging" or "production" (unset: production). */
  ENVIRONMENT?: string;
}
