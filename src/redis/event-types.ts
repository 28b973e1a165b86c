// What the events stream carries, as a reader gets it: the events agentdb publishes, and a
// feed's word of a stretch trimmed under it. Written and read by events.ts and event-feed.ts.
import type { Envelope } from '../contracts/envelope.ts';
/** Events agentdb publishes on its stream, so a runtime can resume an agent without polling. */
export type AgentDbEvent =
  | {
      /** A call finished: ran, refused or failed. */
      type: 'call.completed';
      /** The caller's call id; with `workspace` and `agent`, it names the call (`callKey`). */
      callId: string;
      /** The workspace the call was made in. */
      workspace: string;
      /** The agent's slug, or `@<member>` for a person's call. */
      agent: string;
      /**
       * A member's call: their member record's creation; an agent key's: its registration's (the
       * field keeps its name, which readers of either already know). With `agent` (`@<name>` or the
       * agent's slug) what names the call (`callKey`).
       */
      memberSince?: number;
      /** Whether the call ran (as the envelope's `ok`). */
      ok: boolean;
      /** The envelope itself when small; otherwise fetch it with `client.result()`. */
      envelope?: Envelope;
      /** When it was published (ms since the epoch). */
      at: number;
    }
  | {
      /** A call was parked: a person is asked to decide it. */
      type: 'approval.requested';
      /** The parked call's id. */
      callId: string;
      /** The approval record: its id, workspace, agent, tier, expiry and the write's effect when known. */
      approval: Record<string, unknown>;
      /** As on `call.completed`: with the approval's agent, what names the call. */
      memberSince?: number;
      /** When it was published (ms since the epoch). */
      at: number;
    }
  | {
      /** A parked call was approved, rejected or expired. */
      type: 'approval.decided';
      /** The decided call's id. */
      callId: string;
      /** The approval record with its decision: who, when, why. */
      approval: Record<string, unknown>;
      /** When it was published (ms since the epoch). */
      at: number;
    };

/**
 * Said by a feed (`client.events`) that found the events after its position trimmed from the
 * stream before it read them: the stream is one for the service and keeps ~`STREAM_MAX_LEN` (events.ts)
 * events, so a busy workspace turns it over in under a minute, under a runtime that stopped for
 * longer (a deploy) or read slowly. Before it, a feed of one workspace hands back that workspace's
 * approval events of the stretch again from the approvals' own records, and the completions of the
 * approved calls that ran in it (each `replayed: true`, some perhaps seen already); what it cannot
 * give back are other completions: ask `client.result()` for calls still waited on. Never on the
 * stream itself.
 */
export interface EventsMissed {
  /** Which event: a stretch of the stream was trimmed before the feed read it. */
  type: 'events.missed';
  /** Of no call: there so a reader's `event.callId` reads every event a feed gives. */
  callId?: undefined;
  /** The feed's position before the stretch (the last event it had read, or the `from` it was given). */
  after: string;
  /** The oldest event the stream still holds, read next. */
  before: string;
  /** How many events of the feed's workspace were given back from the approvals' records, just before this one. */
  givenBack: number;
  /** When the feed found the stretch trimmed (ms since the epoch). */
  at: number;
}

/** An event with its stream position, so a reader can resume from it. */
export type StreamedEvent = AgentDbEvent & {
  /** Its stream position, to resume a feed from (`from`); of a `replayed` event, the position before its stretch. */
  id: string;
  /** Given back by a feed after a stretch trimmed under it ({@link EventsMissed}), from the approvals' records, not the stream. */
  replayed?: true;
};

/** What a feed (`client.events`) gives: the stream's events, and its word of a stretch trimmed under it. */
export type FeedEvent =
  | StreamedEvent
  | (EventsMissed & {
      /** The feed's position: the oldest event the stream still holds (`before`), to resume from. */
      id: string;
    });
