// GameRegistry: one Durable Object per game that serializes the commits of its builds
// and the moves of its channels, so that two racing publishes of one build name cannot
// both win (R2 alone has no put-if-absent that the local simulator gets right).
import { DurableObject } from "cloudflare:workers";
import { keys, putJson, type BuildRecord } from "./store";
import type { Env } from "./env";

export type CommitResult = { ok: true } | { ok: false; status: number; error: string };

export class GameRegistry extends DurableObject<Env> {
  private queue: Promise<unknown> = Promise.resolve();

  /** Runs `f` after everything queued before it (R2 awaits would otherwise interleave). */
  private serialized<T>(f: () => Promise<T>): Promise<T> {
    const run = this.queue.then(f, f);
    this.queue = run.catch(() => {});
    return run;
  }

  /** Commits a build record unless that build name exists; then moves `channel` to it. */
  commitBuild(record: BuildRecord, channel: string | null): Promise<CommitResult> {
    return this.serialized(async () => {
      const bucket = this.env.BUCKET;
      const key = keys.build(record.game, record.build);
      if ((await bucket.head(key)) !== null) {
        return { ok: false, status: 409, error: `build ${record.game}/${record.build} exists; builds are immutable (publish under a new name)` };
      }
      await putJson(bucket, key, record, {
        customMetadata: { publishedAt: record.publishedAt, tarBytes: String(record.tarBytes), files: String(record.files) },
      });
      if (channel !== null) await this.writeChannel(record.game, channel, record.build);
      return { ok: true };
    });
  }

  setChannel(game: string, channel: string, build: string): Promise<CommitResult> {
    return this.serialized(async () => {
      if ((await this.env.BUCKET.head(keys.build(game, build))) === null) {
        return { ok: false, status: 404, error: `no build ${game}/${build}` };
      }
      await this.writeChannel(game, channel, build);
      return { ok: true };
    });
  }

  private async writeChannel(game: string, channel: string, build: string): Promise<void> {
    await putJson(this.env.BUCKET, keys.channel(game, channel), { game, channel, build, updatedAt: new Date().toISOString() });
  }
}
