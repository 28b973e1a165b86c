import { describe, expect, it } from 'vitest';
import type { ChildRequest, DbTarget, ExecRequest } from '../../src/executor/executor-protocol.ts';
import { KeptTargets, SentTargets, TARGET_SLOTS } from '../../src/executor/target-refs.ts';
import { PLAN_LIMITS, type PlanLimits } from '../../src/policy/plan-limits.ts';

const target = (n: number, limits: PlanLimits = PLAN_LIMITS.pro): DbTarget => ({ id: `ws/a${n}`, path: `/data/ws/a${n}/shard-1.db`, shard: 1, limits });
const read = (db: DbTarget): ExecRequest => ({ op: 'query', db, sql: 'SELECT v FROM kv WHERE id = ?', params: [1], maxRows: 100, callId: 'c1' });

/** What the child reads: the message as the IPC channel hands it over (JSON, a copy). */
const across = (m: ChildRequest): ChildRequest => JSON.parse(JSON.stringify(m)) as ChildRequest;

describe("a database's target between the worker and one child", () => {
  it('crosses whole the first time, then as its number, and the child reads the same request', () => {
    const sent = new SentTargets();
    const kept = new KeptTargets();
    const first = sent.message(1, read(target(0)), false);
    const second = sent.message(2, read(target(0)), false);
    expect(first).toMatchObject({ id: 1, ref: 0, req: { db: target(0) } });
    expect(second).toMatchObject({ id: 2, req: { db: 0 } });
    expect(second.ref).toBeUndefined();
    expect(JSON.stringify(second).length).toBeLessThan(JSON.stringify(first).length - 80);
    expect(kept.resolve(across(first))).toEqual(read(target(0)));
    expect(kept.resolve(across(second))).toEqual(read(target(0)));
  });

  it("is sent whole again under the same number when the plan's limits change, and the child takes the new ones", () => {
    const sent = new SentTargets();
    const kept = new KeptTargets();
    kept.resolve(across(sent.message(1, read(target(0, PLAN_LIMITS.pro)), false)));
    const upgraded = sent.message(2, read(target(0, PLAN_LIMITS.enterprise)), false);
    expect(upgraded).toMatchObject({ ref: 0, req: { db: { limits: PLAN_LIMITS.enterprise } } });
    kept.resolve(across(upgraded));
    const next = across(sent.message(3, read(target(0, PLAN_LIMITS.enterprise)), false));
    expect(next.req).toMatchObject({ db: 0 });
    expect(kept.resolve(next)).toEqual(read(target(0, PLAN_LIMITS.enterprise)));
  });

  it('is sent whole again after clear (a new child), and keeps reopen', () => {
    const sent = new SentTargets();
    sent.message(1, read(target(0)), false);
    sent.clear();
    expect(sent.message(2, read(target(0)), true)).toMatchObject({ id: 2, ref: 0, reopen: true, req: { db: target(0) } });
  });

  it('leaves requests without a database alone', () => {
    const sent = new SentTargets();
    const evict = sent.message(1, { op: 'evict', shards: [1] }, false);
    expect(evict).toEqual({ id: 1, req: { op: 'evict', shards: [1] } });
    expect(new KeptTargets().resolve(across(evict))).toEqual({ op: 'evict', shards: [1] });
  });

  it('stays within its slots over more databases than it keeps, every request read as sent', () => {
    const sent = new SentTargets();
    const kept = new KeptTargets();
    let whole = 0;
    // Two calls in three to ten busy databases, the third to one of 2.5 slots' worth of others.
    for (let i = 0; i < 6 * TARGET_SLOTS; i++) {
      const n = i % 3 < 2 ? i % 10 : (i * 7919) % Math.floor(2.5 * TARGET_SLOTS);
      const m = sent.message(i, read(target(n)), false);
      if (m.ref !== undefined) {
        whole++;
        expect(m.ref).toBeLessThan(TARGET_SLOTS);
      }
      expect(kept.resolve(across(m))).toEqual(read(target(n)));
    }
    expect(whole).toBeLessThan(3 * TARGET_SLOTS);
  });

  it('answers nothing for a number the child was never sent', () => {
    expect(new KeptTargets().resolve({ id: 1, req: { ...read(target(0)), db: 3 } as ChildRequest['req'] })).toBeUndefined();
  });
});
