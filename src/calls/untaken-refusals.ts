import type { Metrics } from '../metrics.ts';
import type { RefusedQuota } from './call-enqueue.ts';

/**
 * A client's refusals of calls before they were taken (a rate, the Redis budget, Redis near
 * full; the call's plan), the quotas' counted by quota, all remembered by answer: nothing ran under their ids, whatever their
 * code (see `AgentDbClient.refusedUntaken`).
 */
export class UntakenRefusals {
  private readonly untaken = new WeakSet<object>();

  constructor(private readonly metrics: Metrics) {}

  /** Counts a refusal for `quota` and answers `answer`, noted as refused before it was taken. */
  refused<T>(quota: RefusedQuota, answer: T): T {
    this.metrics.refusals.inc({ quota });
    if (typeof answer === 'object' && answer !== null) this.untaken.add(answer);
    return answer;
  }

  /**
   * Notes `answer`, a refusal of a call by its plan (its arguments, its access) or its surface's
   * rules, as refused before it was taken: no rate, budget or queue was asked, so nothing may be
   * kept for it (an MCP task kept 48 h, as fast as a tenant sends such calls: session 30, T7).
   * Not a quota's refusal: not counted as one.
   */
  unplanned<T>(answer: T): T {
    if (typeof answer === 'object' && answer !== null) this.untaken.add(answer);
    return answer;
  }

  /**
   * Notes `derived`, an answer made of `answer` (the db_* surface's, `dbAnswer`), as a refusal
   * where `answer` was one: the same refusal, not counted again.
   */
  carry(answer: object, derived: object): void {
    if (this.untaken.has(answer)) this.untaken.add(derived);
  }

  /** Whether `answer` is one of these refusals. */
  has(answer: object): boolean {
    return this.untaken.has(answer);
  }
}
