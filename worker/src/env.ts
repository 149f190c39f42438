import type { GameRegistry } from "./registry";
import type { PatchGeneration } from "./generate";

export interface Env {
  BUCKET: R2Bucket;
  GENERATIONS: DurableObjectNamespace<PatchGeneration>;
  REGISTRY: DurableObjectNamespace<GameRegistry>;
  /** Secret: bearer token for publishing. */
  EDGEPATCH_TOKEN?: string;
  /** Secret: base64 of the 32-byte ed25519 seed that signs manifests. */
  MANIFEST_SIGNING_KEY?: string;
  MAX_BUILD_BYTES?: string;
  MAX_REQUEST_BYTES?: string;
  PATCH_LEVEL?: string;
}
