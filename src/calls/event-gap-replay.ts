import type { Redis } from 'ioredis';
import type { Approval } from '../approvals/approval.ts';
import { parseApproval } from '../approvals/approval-hash.ts';
import { eventSummary } from '../approvals/approval-summary.ts';
import type { FeedScope } from '../redis/event-feed.ts';
import type { AgentDbEvent, StreamedEvent } from '../redis/events.ts';
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
 * The scope of a feed of one workspace's events (`client.events({ workspace })`): it keeps that
 * workspace's events, and gives back, for a stretch trimmed under it, the workspace's approval
 * events from the approvals' own records, read from the workspace's indexes by creation and by
 * decision (the records live for days, the stream's events under a minute at a busy workspace's
 * rate): each `approval.requested` made in the stretch, each `approval.decided` decided in it, and
 * the `call.completed` (without its envelope: `client.result()` has it) of each approved call
 * that ran in it. Session 33, T11 found a quiet workspace's runtime resuming after a busy one
 * turned the stream over lost them without a word.
 */
export function workspaceFeedScope(redis: Redis, keys: Keys, workspace: string): FeedScope {
  return {
    keeps: (event) => workspaceOf(event) === workspace,
    replay: async (after, before) => {
      const from = msOf(after) - REPLAY_SLACK_MS;
      const to = msOf(before);
      const [made, decided] = await Promise.all(
        [keys.approvalsAllOf(workspace), keys.approvalsDecidedOf(workspace)].map((index) => redis.zrangebyscore(index, from, to, 'LIMIT', 0, REPLAY_MAX)),
      );
      const ids = [...new Set([...made!, ...decided!])];
      const pipeline = redis.pipeline();
      for (const id of ids) pipeline.hgetall(keys.approval(id));
      const records = new Map<string, Approval>();
      for (const [i, [, hash]] of ((await pipeline.exec()) ?? []).entries()) {
        const a = parseApproval(hash as Record<string, string>);
        if (a) records.set(ids[i]!, a);
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
