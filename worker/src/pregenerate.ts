// Pre-generation: when a channel moves, the pairs anonymous callers may now ask for (the new
// head from `_` and from each previous head) go on a Cloudflare Queue, and this Worker's queue
// consumer generates them, so a player does not wait for a generation. A failed generation is
// recorded by the pair's Durable Object (its backoff applies to requests too) and the message
// is retried after that backoff, up to the consumer's max_retries (wrangler.toml).
import type { ChannelMove } from "./registry";
import type { Env } from "./env";

export interface PairJob {
  game: string;
  from: string;
  to: string;
}

export function pairsOf(game: string, move: ChannelMove): PairJob[] {
  return ["_", ...move.previous].map((from) => ({ game, from, to: move.build }));
}

/** Queues the pairs a channel move released. A failure is logged: requests still generate on demand. */
export async function enqueueMove(env: Env, game: string, move: ChannelMove | null): Promise<void> {
  if (move === null) return;
  try {
    await env.PREGENERATE.sendBatch(pairsOf(game, move).map((body) => ({ body, contentType: "json" as const })));
  } catch (e) {
    console.error(`queueing the pairs of ${game}/${move.channel} -> ${move.build} failed:`, e);
  }
}

function isPairJob(v: unknown): v is PairJob {
  const j = v as PairJob;
  return typeof j === "object" && j !== null && typeof j.game === "string" && typeof j.from === "string" && typeof j.to === "string";
}

/** The queue consumer: one generation per message, each acknowledged or retried on its own. */
export async function consumePairs(batch: MessageBatch<unknown>, env: Env): Promise<void> {
  for (const message of batch.messages) {
    const job = message.body;
    if (!isPairJob(job)) {
      console.error("pre-generation: dropping a malformed message", job);
      message.ack();
      continue;
    }
    const stub = env.GENERATIONS.get(env.GENERATIONS.idFromName(`${job.game}/${job.from}/${job.to}`));
    const result = await stub.generate(job.game, job.from, job.to);
    // pending: fanned out, its steps and assembly are on their own queue (fanout.ts).
    if (result.ok || result.status === 404 || result.pending) message.ack();
    // Queues delay a retry by at most 12 hours.
    else message.retry({ delaySeconds: Math.min(result.retryAfter ?? 60, 12 * 3600) });
  }
}
