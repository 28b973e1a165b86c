import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { callKey } from '../../src/contracts/call-identity.ts';
import type { ExecutorPool } from '../../src/executor/executor-pool.ts';
import type { AsOfTarget, DbTarget, ExecOutcome } from '../../src/executor/executor-protocol.ts';
import { listGenerations, localSource } from '../../src/history/history-files.ts';
import { historyCalls, historyTarget, withHistoryPool } from '../helpers/history-pool.ts';

// Review 29 H1: `as_of: "<call id>"` means just before that write committed. A write that reached
// history only inside a generation's snapshot (here: the first agent write after a program outside
// agentdb wrote, which begins a `gap` generation) has no such moment in history: the read must be
// refused with a code, never answered ok with the state after the write.
let dataDir = '';
let pool: ExecutorPool;
withHistoryPool('agentdb-as-of-folded-', { handleCacheSize: 2, checkpointBytes: 1024 * 1024 }, (d, p) => {
  dataDir = d;
  pool = p;
});
const calls = historyCalls(() => pool);
const SELECT = 'SELECT a FROM t ORDER BY id';

const read = (db: DbTarget, target: AsOfTarget): Promise<ExecOutcome> =>
  pool.run({ op: 'query', db, sql: SELECT, params: [], maxRows: 1000, asOf: { target, build: true } });
const byCall = (id: string): AsOfTarget => ({ callId: id, callKeys: [callKey('fold', 'a', id)] });
const insert = (db: DbTarget, id: string) =>
  calls.ok({ op: 'write', db, sql: 'INSERT INTO t (a) VALUES (?)', params: [id], callKey: callKey('fold', 'a', id) });

describe('as_of by the id of a call whose write is inside a snapshot', () => {
  it('refuses it (HISTORY_LOST, naming the moments it can show) instead of answering the state after the write', async () => {
    const db = historyTarget(dataDir, 'fold/a');
    await calls.write(db, 'CREATE TABLE t (id INTEGER PRIMARY KEY, a TEXT)');
    await insert(db, 'w1');
    await insert(db, 'w2');
    // A program outside agentdb writes while agentdb holds the database open (the sqlite3 shell), and
    // checkpoints it: history cannot follow the WAL that starts over.
    const outside = new Database(db.path, { timeout: 5000 });
    outside.prepare('INSERT INTO t (a) VALUES (?)').run('outside');
    expect((outside.pragma('wal_checkpoint(TRUNCATE)') as { busy: number }[])[0]!.busy).toBe(0);
    outside.close();
    await insert(db, 'g1');
    await insert(db, 'g2');
    const gens = listGenerations(localSource(dataDir, db.id));
    const gap = gens.at(-1)!.snapshot!;
    expect(gap.reason).toBe('gap');

    const out = await read(db, byCall('g1'));
    expect(out.ok, JSON.stringify(out)).toBe(false);
    if (out.ok) return;
    expect(out.error.code).toBe('HISTORY_LOST');
    expect(out.error.detail).toContain('cannot show the moment just before it');
    expect(out.error.detail).toContain(new Date(gap.at).toISOString());

    // Calls around it still read exactly their moment.
    const ok = async (t: AsOfTarget) => {
      const r = await read(db, t);
      if (!r.ok) throw new Error(`${r.error.code}: ${r.error.detail}`);
      return (r.result as { rows: unknown[][] }).rows.map((row) => row[0]);
    };
    expect(await ok(byCall('w2'))).toEqual(['w1']);
    expect(await ok(byCall('g2'))).toEqual(['w1', 'w2', 'outside', 'g1']);
  });
});
