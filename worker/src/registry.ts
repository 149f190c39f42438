// GameRegistry: one Durable Object per game. It serializes the commits of the game's builds
// (two racing publishes of one build name cannot both win: R2 alone has no put-if-absent that
// the local simulator gets right) and owns the game's channels: each channel's head, its
// sequence number (+1 per move, signed into channel documents) and its previous heads, which
// decide what anonymous callers may fetch (worker/README.md "Who may call what").
import { DurableObject } from "cloudflare:workers";
import { getJson, keys, putJson, type BuildRecord } from "./store";
import { settings } from "./settings";
import type { Env } from "./env";

export interface ChannelState {
  build: string;
  /** Increases by 1 every time the channel moves; never reused. */
  sequence: number;
  /** The heads before `build`, newest first, at most CHANNEL_HISTORY of them, without `build`. */
  previous: string[];
  updatedAt: string;
}

/** A channel that moved: its new head and the heads before it (the pairs to generate ahead). */
export interface ChannelMove {
  channel: string;
  build: string;
  previous: string[];
}

/**
 * `existing`: the build was already published with the same content (the same signature): the
 * publish succeeds without storing anything new (idempotent).
 */
export type CommitResult = { ok: true; moved: ChannelMove | null; existing?: BuildRecord } | { ok: false; status: number; error: string };

export type DeleteResult = { ok: true; record: BuildRecord } | { ok: false; status: number; error: string };

const CHANNEL_KEY = "channel:";
/** A deleted build's name: never published again, so a name always means one content. */
const DELETED_KEY = "deleted:";

export class GameRegistry extends DurableObject<Env> {
  private queue: Promise<unknown> = Promise.resolve();
  /** Every channel of the game, loaded from storage once (a Map: channel names are data). */
  private channels: Map<string, ChannelState> | null = null;

  /** Runs `f` after everything queued before it (R2 awaits would otherwise interleave). */
  private serialized<T>(f: () => Promise<T>): Promise<T> {
    const run = this.queue.then(f, f);
    this.queue = run.catch(() => {});
    return run;
  }

  private async loadChannels(): Promise<Map<string, ChannelState>> {
    if (this.channels === null) {
      const stored = await this.ctx.storage.list<ChannelState>({ prefix: CHANNEL_KEY });
      const channels = new Map<string, ChannelState>();
      for (const [k, v] of stored) channels.set(k.slice(CHANNEL_KEY.length), v);
      this.channels ??= channels;
    }
    return this.channels;
  }

  /** Whether `build` was deleted (its name is not published again). */
  async wasDeleted(build: string): Promise<boolean> {
    return (await this.ctx.storage.get(DELETED_KEY + build)) !== undefined;
  }

  /**
   * Commits a build record unless that build name exists or was deleted; then moves `channel`
   * to it. The same content published again (equal signature BLAKE3) succeeds as `existing`.
   */
  commitBuild(record: BuildRecord, channel: string | null): Promise<CommitResult> {
    return this.serialized(async () => {
      const bucket = this.env.BUCKET;
      const key = keys.build(record.game, record.build);
      const existing = await getJson<BuildRecord>(bucket, key);
      if (existing !== null) {
        if (existing.signatureBlake3 !== record.signatureBlake3) {
          return { ok: false, status: 409, error: `build ${record.game}/${record.build} exists with other content; builds are immutable (publish under a new name)` };
        }
        return { ok: true, existing, moved: channel === null ? null : await this.move(channel, record.build) };
      }
      if (await this.wasDeleted(record.build)) {
        return { ok: false, status: 409, error: `build ${record.game}/${record.build} was deleted; a name always means one content (publish under a new name)` };
      }
      await putJson(bucket, key, record, {
        customMetadata: { publishedAt: record.publishedAt, tarBytes: String(record.tarBytes), files: String(record.files) },
      });
      return { ok: true, moved: channel === null ? null : await this.move(channel, record.build) };
    });
  }

  setChannel(game: string, channel: string, build: string): Promise<CommitResult> {
    return this.serialized(async () => {
      if ((await this.env.BUCKET.head(keys.build(game, build))) === null) {
        return { ok: false, status: 404, error: `no build ${game}/${build}` };
      }
      return { ok: true, moved: await this.move(channel, build) };
    });
  }

  /**
   * Deletes build `build` (its record: the commit point) unless a channel points at it, and
   * remembers its name as deleted; channel histories forget it. The caller removes its
   * stored objects afterwards (operations.ts).
   */
  deleteBuild(game: string, build: string): Promise<DeleteResult> {
    return this.serialized(async () => {
      const channels = await this.loadChannels();
      for (const [name, c] of channels) {
        if (c.build === build) return { ok: false, status: 409, error: `channel ${game}/${name} points at ${build}; move the channel before deleting the build` };
      }
      const key = keys.build(game, build);
      const record = await getJson<BuildRecord>(this.env.BUCKET, key);
      if (record === null) return { ok: false, status: 404, error: `no build ${game}/${build}` };
      await this.ctx.storage.put(DELETED_KEY + build, { deletedAt: new Date().toISOString() });
      await this.env.BUCKET.delete(key);
      for (const [name, c] of channels) {
        if (!c.previous.includes(build)) continue;
        const next = { ...c, previous: c.previous.filter((b) => b !== build) };
        await this.ctx.storage.put(CHANNEL_KEY + name, next);
        channels.set(name, next);
      }
      return { ok: true, record };
    });
  }

  /** Every build a channel names: its head and the heads before it. */
  async channelBuilds(): Promise<Set<string>> {
    const out = new Set<string>();
    for (const c of (await this.loadChannels()).values()) for (const b of [c.build, ...c.previous]) out.add(b);
    return out;
  }

  /** The channel's state, or null when it was never set. */
  async channel(channel: string): Promise<ChannelState | null> {
    return (await this.loadChannels()).get(channel) ?? null;
  }

  /**
   * Whether anonymous callers may fetch the update `from` -> `to`: some channel's head is
   * `to`, and `from` is `_` or one of that channel's last CHANNEL_HISTORY heads before it.
   */
  async allows(from: string, to: string): Promise<boolean> {
    const history = settings(this.env).channelHistory;
    for (const c of (await this.loadChannels()).values()) {
      if (c.build === to && (from === "_" || c.previous.slice(0, history).includes(from))) return true;
    }
    return false;
  }

  /** Moves `channel` to `build` (a move to its current head changes nothing). */
  private async move(channel: string, build: string): Promise<ChannelMove> {
    const channels = await this.loadChannels();
    const history = settings(this.env).channelHistory;
    const current = channels.get(channel);
    if (current?.build === build) return { channel, build, previous: current.previous.slice(0, history) };
    const previous = current ? [current.build, ...current.previous].filter((b, i, all) => b !== build && all.indexOf(b) === i).slice(0, history) : [];
    const next: ChannelState = { build, sequence: (current?.sequence ?? 0) + 1, previous, updatedAt: new Date().toISOString() };
    await this.ctx.storage.put(CHANNEL_KEY + channel, next);
    channels.set(channel, next);
    return { channel, build, previous };
  }
}
