import { errorEnvelope } from '../contracts/envelope.ts';
import type { CallAnswer } from './call-answers.ts';
import type { RefusedQuota } from './call-enqueue.ts';
import type { CallLookup } from './call-lookup.ts';
import { rateLimited, type RateRefusal } from './call-rate-limits.ts';
import { callResult, type ResultQuery } from './call-result.ts';
import type { CallWaiters } from './call-waiters.ts';
import type { ClientShardCount } from './client-shard-count.ts';
import { type OutageAnswers, resultUnanswered, unavailable } from './outage-answers.ts';

/** What a client's `result` asks with: its parts, and the steps of its own it takes them through. */
export interface ClientResultParts {
  redisUrl: string;
  outage: OutageAnswers;
  shards: ClientShardCount;
  waiters: CallWaiters;
  lookup: CallLookup;
  /** Starts the client's event reader (once), so a wait can hear the call's completion. */
  ensureReader: () => Promise<unknown>;
  /** `AgentDbClient.chargeLookup`. */
  chargeLookup: (who: { workspace: string; agent: string; keyId?: string }) => Promise<RateRefusal | undefined>;
  /** Counts a refusal before the call was taken, and answers it (`UntakenRefusals.refused`). */
  refused: <T>(quota: RefusedQuota, answer: T) => T;
  /** The registered agent's registration (`RegisteredAgent.createdAt`), undefined when it is not registered. */
  registeredSince: (workspace: string, agent: string) => Promise<number | undefined>;
  /** The active member's record's creation (`Member.createdAt`), undefined when none of the name is active. */
  activeMemberSince: (workspace: string, name: string) => Promise<number | undefined>;
}

/**
 * `AgentDbClient.result` within Redis's outages: down, it answers UNAVAILABLE at once; connected
 * but answering nothing, once the stall passes; else the shard count is checked, the lookup
 * charged against the caller's rates (not a follow-up's) and the call looked up, or waited for.
 */
export async function clientResult(c: ClientResultParts, callId: string, opts: ResultQuery): Promise<CallAnswer> {
  // A Redis that is connected but answers nothing: bounded up to the wait, which its own
  // timeoutMs (and the bounded look after it) ends.
  const stall = c.outage.unanswered(() => resultUnanswered(c.redisUrl, callId));
  try {
    return await c.outage.answerOrUnavailable(
      async () => {
        const down = await c.outage.redisDown();
        if (down) return unavailable(callId, '', down, true);
        stall.arm();
        const looked = async (): Promise<CallAnswer> => {
          const shards = await c.shards.resolve();
          if (!shards.ok) return errorEnvelope(callId, '', 'CONFIG_MISMATCH', shards.detail);
          if (!opts.followUp) {
            const limited = await c.chargeLookup(opts);
            if (limited) return c.refused('rate', rateLimited(callId, '', opts.workspace, limited));
          }
          const sources = {
            waiters: c.waiters,
            lookup: c.lookup,
            ensureReader: c.ensureReader,
            waiting: () => stall.disarm(),
            gaveUp: stall.passed,
            registeredSince: c.registeredSince,
            activeMemberSince: c.activeMemberSince,
          };
          return callResult(sources, callId, opts);
        };
        return Promise.race([looked(), stall.passed.then((why) => unavailable(callId, '', why, true))]);
      },
      (why) => unavailable(callId, '', why, true),
      opts.signal,
    );
  } finally {
    stall.disarm();
  }
}
