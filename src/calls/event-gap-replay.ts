import type { Redis } from 'ioredis';
import type { Approval } from '../approvals/approval.ts';
import { parseApproval } from '../approvals/approval-hash.ts';
import { eventSummary } from '../approvals/approval-summary.ts';
import type { FeedScope } from '../redis/event-feed.ts';
import type { AgentDbEvent, StreamedEvent } from '../redis/event-types.ts';
import type { Keys } from '../redis/keys.ts';

/**
 * How long before a trimmed stretch an approval's record may say it was made or decided while its
 * event lies in the stretch: the record's time is taken before the event is published (a
 * worker's clock, then Redis's), so the look goes this far back; events found twice are some of
 * what a feed gives back with `replayed: true`.
 */
export const REPLAY_SLACK_MS = 60_000;

/** Approvals of each index a feed gives back for one trimmed stretch, at most (the newest kept past it). */
export const REPLAY_MAX = 5_000;

/**
 * What a replay reads of the approvals' records, at most, in bytes (their fields' lengths): past
 * it, what is left of the stretch is only said missed (`events.missed`'s `givenBack` counts what
 * was given). A record holds its SQL and params (up to ~1 MB) and its effect, so the 10,000
 * records of {@link REPLAY_MAX} were up to gigabytes in one pipeline: one reply built whole in the
 * shared Redis's output buffer (its memory, which other tenants' writes are refused by when near
 * full) and held whole in the feed's process, for a tenant's many approvals in a stretch.
 */
export const REPLAY_MAX_BYTES = 32 * 1024 * 1024;

/** Records read per round trip of a replay: a reply of the shared Redis stays a few of them. */
export const REPLAY_BATCH = 32;

/**
 * The scope of a feed of one workspace's events (`client.events({ workspace })`): it keeps that
 * workspace's events, and gives back, for a stretch trimmed under it, the workspace's approval
 * events from the approvals' own records, read from the workspace's indexes by creation and by
 * decision (the records live for days, the stream's events under a minute at a busy workspace's
 * rate): each `approval.requested` made in the stretch, each `approval.decided` decided in it, and
 * the `call.completed` (without its envelope: `client.result()` has it) of each approved call
 * that ran in it. Session 33, T11 found a quiet workspace's runtime resuming after a busy one
 * turned the stream over lost them without a word.
 */
export function workspaceFeedScope(redis: Redis, keys: Keys, workspace: string, maxBytes = REPLAY_MAX_BYTES): FeedScope {
  return {
    keeps: (event) => workspaceOf(event) === workspace,
    replay: async (after, before) => {
      const from = msOf(after) - REPLAY_SLACK_MS;
      const to = msOf(before);
      const [made, decided] = await Promise.all(
        [keys.approvalsAllOf(workspace), keys.approvalsDecidedOf(workspace)].map((index) => redis.zrangebyscore(index, from, to, 'LIMIT', 0, REPLAY_MAX)),
      );
      const ids = [...new Set([...made!, ...decided!])];
      const records = new Map<string, Approval>();
      let bytes = 0;
      // In batches, oldest first, until the bound: never the stretch's records in one reply.
      for (let i = 0; i < ids.length && bytes < maxBytes; i += REPLAY_BATCH) {
        const batch = ids.slice(i, i + REPLAY_BATCH);
        const pipeline = redis.pipeline();
        for (const id of batch) pipeline.hgetall(keys.approval(id));
        for (const [j, [, hash]] of ((await pipeline.exec()) ?? []).entries()) {
          if (bytes >= maxBytes) break;
          const fields = hash as Record<string, string>;
          for (const [k, v] of Object.entries(fields)) bytes += k.length + v.length;
          const a = parseApproval(fields);
          if (a) records.set(batch[j]!, a);
        }
      }
      const within = (at: number | undefined) => at !== undefined && at >= from && at <= to;
      const events: AgentDbEvent[] = [];
      for (const id of made!) {
        const a = records.get(id);
        if (a) events.push({ type: 'approval.requested', callId: a.callId, approval: eventSummary(a), at: a.createdAt });
      }
      for (const id of decided!) {
        const a = records.get(id);
        if (!a || a.decidedAt === undefined) continue;
        events.push({ type: 'approval.decided', callId: a.callId, approval: eventSummary(a), at: a.decidedAt });
        if (a.ran && within(a.ran.at))
          events.push({ type: 'call.completed', callId: a.callId, workspace: a.workspace, agent: a.agent, ok: a.ran.ok, at: a.ran.at });
      }
      return events.sort((x, y) => x.at - y.at).map((e) => ({ ...e, id: after }) as StreamedEvent);
    },
  };
}

/** The workspace an event is of: a completion's own, an approval's record's. */
function workspaceOf(event: StreamedEvent): string | undefined {
  if (event.type === 'call.completed') return event.workspace;
  if (event.type === 'approval.requested' || event.type === 'approval.decided') return event.approval.workspace as string | undefined;
  return undefined;
}

/** The time part of a stream id (`<ms>-<seq>`), in ms. */
function msOf(id: string): number {
  return Number(id.split('-')[0]);
}
