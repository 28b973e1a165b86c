// Requests that reach every running child of a pool (an evict, a close, stats), each answered
// once all have answered: moved out of executor-pool.ts, which decides when they may go.

import type { ExecutorProcess, Queued } from './executor-process.ts';
import type { ExecOutcome } from './executor-protocol.ts';

/** Closes the handles of these shards in every running child, once the pool lets it (see `ExecutorPool.run`). */
export async function evictEverywhere(slots: ExecutorProcess[], shards: number[]): Promise<ExecOutcome> {
  for (const slot of slots) slot.recent.forgetShards(shards);
  const outcomes = await Promise.all(
    slots.filter((s) => s.ready).map((s) => new Promise<ExecOutcome>((resolve) => s.send([{ req: { op: 'evict', shards }, resolve }]))),
  );
  let closed = 0;
  for (const o of outcomes) if (o.ok) closed += (o.result as { closed: number }).closed;
  return { ok: true, result: { closed } };
}

/** Closes one database's handle in every running child. */
export async function closeEverywhere(slots: ExecutorProcess[], dbPath: string): Promise<ExecOutcome> {
  const outcomes = await Promise.all(
    slots.filter((s) => s.ready).map((s) => new Promise<ExecOutcome>((resolve) => s.send([{ req: { op: 'close', path: dbPath }, resolve }]))),
  );
  let closed = 0;
  for (const o of outcomes) if (o.ok) closed += (o.result as { closed: number }).closed;
  return { ok: true, result: { closed } };
}

/** What every running child holds, added up (handles, cached statements, RSS). */
export async function statsEverywhere(slots: ExecutorProcess[]): Promise<ExecOutcome> {
  const outcomes = await Promise.all(
    slots.filter((s) => s.ready).map((s) => new Promise<ExecOutcome>((resolve) => s.send([{ req: { op: 'stats' }, resolve }]))),
  );
  type Stats = { handles: number; statements: { count: number; bytes: number; budget: number }; rss: number };
  const total: Stats = { handles: 0, statements: { count: 0, bytes: 0, budget: 0 }, rss: 0 };
  for (const o of outcomes) {
    if (!o.ok) return o;
    const r = o.result as Stats;
    total.handles += r.handles;
    total.statements.count += r.statements.count;
    total.statements.bytes += r.statements.bytes;
    total.statements.budget += r.statements.budget;
    total.rss += r.rss;
  }
  return { ok: true, result: total };
}

/**
 * Answers the requests for every child among `items`, handed back by a child killed or dead
 * before it answered them, as that child's share; returns the rest (a line's statements).
 */
export function answerForDead(items: Queued[]): Queued[] {
  const statements: Queued[] = [];
  for (const item of items) {
    // Its handles died with it: nothing left there to evict.
    if (item.req.op === 'evict' || item.req.op === 'close') item.resolve({ ok: true, result: { closed: 0 } });
    else if (item.req.op === 'stats') item.resolve({ ok: true, result: { handles: 0, statements: { count: 0, bytes: 0, budget: 0 }, rss: 0 } });
    else statements.push(item);
  }
  return statements;
}
