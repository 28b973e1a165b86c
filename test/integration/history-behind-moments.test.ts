import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ExecOutcome } from '../../src/executor/executor-protocol.ts';
import { pastMs } from '../helpers/history.ts';
import { historyOnTmpfs } from '../helpers/history-on-tmpfs.ts';
import { growTmpfs } from '../helpers/tmpfs.ts';

// Session 36, F16 (F15's leftover): history on a file system of its own, full while writes go
// on (F15's `history-dir-full` set-up), so the last writes' commits wait in the WAL. A read
// `as_of` a moment past what history holds answered ok with the rows of the older state, as if
// that moment's; a restore in place to such a moment answered ok and took back, unsaid, writes
// acknowledged before it. Both now refused STORAGE_FULL, nothing changed; whole once history
// has room and has copied them.

const h = historyOnTmpfs('history-behind-moments.test.ts', 'hb/a');
const { db, hdir, refused, write } = h;
const by = { who: 'operator:behind-test', via: 'operator' as const };

describe.runIf(!refused)('a moment past what history holds, while its disk is full', () => {
  beforeAll(h.start);
  afterAll(h.stop);

  it('refuses a read as_of it and a restore in place to it, losing nothing; both whole once history has room', async () => {
    expect((await write('CREATE TABLE t (k INTEGER PRIMARY KEY, pad TEXT)')).ok).toBe(true);
    const acked: number[] = [];
    let k = 0;
    const burst = async (n: number) => {
      for (let i = 0; i < n; i++) {
        const key = ++k;
        const out: ExecOutcome = await write('INSERT INTO t (k, pad) VALUES (?, ?)', [key, 'x'.repeat(3000)]);
        if (out.ok) acked.push(key);
      }
    };
    await burst(100);
    await h.whileFull(() => burst(300));
    // The copy of the backlog fills history's disk again: these wait in the WAL.
    await burst(60);
    expect(acked).toHaveLength(460);
    const at = Date.now();
    pastMs(at);
    const keysIn = (file: string) => {
      const conn = new Database(file, { readonly: true });
      try {
        return conn.prepare('SELECT k FROM t ORDER BY k').pluck().all() as number[];
      } finally {
        conn.close();
      }
    };
    const readAsOf = async () => {
      const out = await h.pool().run({ op: 'query', db, sql: 'SELECT k FROM t ORDER BY k', params: [], maxRows: 1000, asOf: { target: { at }, build: true } });
      return out.ok ? (out.result as { rows: number[][] }).rows.map((r) => r[0]).join(',') : out.error;
    };
    const restore = async () => {
      const out = await h.pool().run({ op: 'restore', db, at, by, timeoutMs: 60_000 });
      return out.ok ? 'ok' : out.error;
    };
    const whole = acked.join(',');

    // Main: ok with 409 of the 460 rows acknowledged before the moment, as that moment's.
    const read = await readAsOf();
    expect(read).toMatchObject({ code: 'STORAGE_FULL' });
    expect((read as { detail: string }).detail).toMatch(/holds its commits up to .* only .*nothing was read.*make room .* then try again/);
    // Main: ok, and the 51 writes history lacked were gone from the database.
    const inPlace = await restore();
    expect(inPlace).toMatchObject({ code: 'STORAGE_FULL' });
    expect((inPlace as { detail: string }).detail).toMatch(/nothing was restored or undone/);
    expect(keysIn(db.path).join(',')).toBe(whole);

    // Room for history: the next write copies what waited; the same moment reads and restores whole.
    growTmpfs(hdir, '64m');
    expect((await write('INSERT INTO t (k, pad) VALUES (?, ?)', [1_000_000, 'last'])).ok).toBe(true);
    expect(await readAsOf()).toBe(whole);
    expect(await restore()).toBe('ok');
    expect(keysIn(db.path).join(',')).toBe(whole);
  }, 600_000);
});
