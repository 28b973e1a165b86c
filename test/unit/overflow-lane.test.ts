import { describe, expect, it } from 'vitest';
import type { ExecRequest } from '../../src/executor/executor-protocol.ts';
import { LANE_BAN_MS, laneOpens, OverflowLane, statementKey } from '../../src/executor/overflow-lane.ts';
import { PLAN_LIMITS } from '../../src/policy/plan-limits.ts';

const LONG = 250;
const db = { id: 'w', path: '/data/w.db', shard: 0, limits: PLAN_LIMITS.enterprise };
const query = (sql: string, params: (string | number)[] = []): ExecRequest => ({ op: 'query', db, sql, params, maxRows: 100 });
const READ = query('SELECT v FROM kv WHERE id = ?', [1]);
const RUNAWAY = query('WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT count(*) FROM c');

describe('statementKey', () => {
  it('names a statement by workspace, op and SQL text, parameters apart', () => {
    expect(statementKey('w', READ)).toBe(statementKey('w', query('SELECT v FROM kv WHERE id = ?', [999])));
    expect(statementKey('w', READ)).not.toBe(statementKey('other', READ));
    expect(statementKey('w', READ)).not.toBe(statementKey('w', RUNAWAY));
    expect(statementKey('w', READ)).not.toBe(statementKey('w', { op: 'write', db, sql: READ.op === 'query' ? READ.sql : '', params: [], callKey: 'k' }));
    expect(statementKey('w', { op: 'describe', db })).toBeDefined();
  });

  it('keeps a bounded record whatever the SQL text', () => {
    expect(statementKey('w', query(`SELECT '${'x'.repeat(100_000)}'`))!.length).toBeLessThan(40);
    // Short texts key as they are, long ones by digest: neither stands for another statement.
    const long = (end: string) => query(`SELECT '${'x'.repeat(200)}${end}'`);
    expect(statementKey('w', long('a'))).not.toBe(statementKey('w', long('b')));
    const digest = statementKey('w', long('a'))!.split('\0')[2]!;
    expect(statementKey('w', query(digest.slice(1)))).not.toBe(statementKey('w', long('a')));
    expect(statementKey('w', query('x'.repeat(100)))).not.toBe(statementKey('w', query('x'.repeat(101))));
  });

  it('leaves out work whose cost the text does not tell', () => {
    expect(statementKey('w', { op: 'browse', db, args: { dir: 'asc', limit: 10, table: 't' } })).toBeUndefined();
    expect(statementKey('w', { op: 'recorded', db, callKey: 'k', effect: ['drop', 't'] })).toBeUndefined();
    expect(statementKey('w', { op: 'evict', shards: [0] })).toBeUndefined();
  });

  it("leaves out a read of the past that restores its moment: a restore's work, whatever the text (review 19)", () => {
    const target = { at: 1 };
    const build = { target, build: true as const };
    // Warmed as a cheap read, the same text restoring a moment (10 minutes' limit) must not be admitted.
    expect(statementKey('w', { ...READ, asOf: build } as ExecRequest)).toBeUndefined();
    expect(statementKey('w', { op: 'describe', db, asOf: build })).toBeUndefined();
    // A read of a moment already kept is a read.
    expect(statementKey('w', { ...READ, asOf: { target } } as ExecRequest)).toBe(statementKey('w', READ));
  });
});

describe('laneOpens', () => {
  it('opens once every pooled child runs a statement past the threshold', () => {
    expect(laneOpens([LONG, LONG + 500], LONG)).toEqual({ open: true });
    expect(laneOpens([LONG, 'down'], LONG)).toEqual({ open: true });
  });

  it('says when it would open while a pooled statement is still young', () => {
    expect(laneOpens([LONG + 500, 100], LONG)).toEqual({ open: false, inMs: LONG - 100 });
  });

  it('stays shut while a pooled child is idle: the pool serves from it', () => {
    expect(laneOpens([LONG * 10, undefined], LONG)).toEqual({ open: false });
  });
});

describe('OverflowLane', () => {
  it('admits only a statement its workspace saw finish under the threshold', () => {
    const lane = new OverflowLane(LONG);
    // Never seen: a fresh workspace's first statement, or a warmed one's new statement.
    expect(lane.admits('quiet', READ, 0)).toBe(false);
    lane.ran('quiet', READ, 2);
    expect(lane.admits('quiet', READ, 0)).toBe(true);
    expect(lane.admits('quiet', query('SELECT v FROM kv WHERE id = ?', [7]), 0)).toBe(true);
    // The record is the workspace's own: the same text elsewhere proves nothing.
    expect(lane.admits('other', READ, 0)).toBe(false);
    expect(lane.admits('quiet', RUNAWAY, 0)).toBe(false);
  });

  it('takes the lane from a statement whose last run was long', () => {
    const lane = new OverflowLane(LONG);
    lane.ran('w', READ, 2);
    lane.ran('w', READ, LONG);
    expect(lane.admits('w', READ, 0)).toBe(false);
    lane.ran('w', READ, 3);
    expect(lane.admits('w', READ, 0)).toBe(true);
  });

  it('keeps a workspace that ran long in the lane out of it for a while, whatever its record', () => {
    const lane = new OverflowLane(LONG);
    lane.ran('warm', READ, 1);
    lane.ran('quiet', READ, 1);
    expect(lane.laneRan('quiet', LONG - 1, 1000)).toBe('short');
    expect(lane.admits('quiet', READ, 1000)).toBe(true);
    // A warmed-up statement made slow by its parameters held the lane to its deadline.
    expect(lane.laneRan('warm', 10_000, 1000)).toBe('long');
    lane.ran('warm', READ, 1);
    expect(lane.admits('warm', READ, 1000 + LANE_BAN_MS - 1)).toBe(false);
    expect(lane.admits('warm', READ, 1000 + LANE_BAN_MS)).toBe(true);
    expect(lane.size.bans).toBe(0);
  });

  it('remembers a bounded number of statements, the least recently run forgotten first', () => {
    const lane = new OverflowLane(LONG);
    lane.ran('quiet', READ, 1);
    for (let i = 0; i < 25_000; i++) lane.ran(`w${i}`, READ, 1);
    expect(lane.size.statements).toBeLessThanOrEqual(20_000);
    expect(lane.admits('quiet', READ, 0)).toBe(false);
    expect(lane.admits('w24999', READ, 0)).toBe(true);
  });

  it('keeps a bounded number of bans', () => {
    const lane = new OverflowLane(LONG);
    for (let i = 0; i < 25_000; i++) lane.laneRan(`w${i}`, LONG, 0);
    expect(lane.size.bans).toBeLessThanOrEqual(20_000);
  });
});
