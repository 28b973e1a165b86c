import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ExecOutcome } from '../../src/executor/executor-protocol.ts';
import { historyTarget } from '../helpers/history-pool.ts';
import { pastMs } from '../helpers/history.ts';
import { historyOnTmpfs } from '../helpers/history-on-tmpfs.ts';
import { growTmpfs } from '../helpers/tmpfs.ts';

// Session 36, F15: history on a file system of its own (an operator's mount under the data
// folder), full while writes go on and checkpoints would move frames into its segments; the
// database's own disk has room. Every acknowledged write stays in the database, and its frames
// in the WAL until history has room. A fork to a moment past what history holds answered ok
// with that older state (409 rows of 460 acknowledged), not a word of the writes left out: now
// refused STORAGE_FULL, and whole once history has copied them.

const h = historyOnTmpfs('history-dir-full.test.ts', 'hf/a');
const { dataDir, db, hdir, refused, write } = h;
const by = { who: 'operator:histdir-test', via: 'operator' as const };

describe.runIf(!refused)('history on its own file system, full while writes go on', () => {
  beforeAll(h.start);
  afterAll(h.stop);

  it('keeps every acknowledged write; a fork to a moment history has not copied yet is refused, and restores whole once it has', async () => {
    expect((await write('CREATE TABLE t (k INTEGER PRIMARY KEY, pad TEXT)')).ok).toBe(true);
    const acked: number[] = [];
    const moments: { at: number; acked: number; phase: string }[] = [];
    let k = 0;
    const burst = async (n: number, phase: string) => {
      for (let i = 0; i < n; i++) {
        const key = ++k;
        const out: ExecOutcome = await write('INSERT INTO t (k, pad) VALUES (?, ?)', [key, 'x'.repeat(3000)]);
        if (out.ok) acked.push(key);
        if (i % 20 === 19) {
          const at = Date.now();
          pastMs(at);
          moments.push({ at, acked: acked.length, phase });
        }
      }
    };
    await burst(100, 'before');
    // History's disk full while 300 writes go on: their frames wait in the WAL. Freed, the copy
    // of that backlog fills it again (8 MiB): the writes after it wait in the WAL too.
    await h.whileFull(() => burst(300, 'full'));
    await burst(60, 'after');
    // In the database: every acknowledged write, once.
    const keysIn = (file: string) => {
      const conn = new Database(file, { readonly: true });
      try {
        return conn.prepare('SELECT k FROM t ORDER BY k').pluck().all() as number[];
      } finally {
        conn.close();
      }
    };
    expect(keysIn(db.path).join(',')).toBe(acked.join(','));
    expect(acked).toHaveLength(460);
    let n = 0;
    const restored = async (m: { at: number; acked: number; phase: string }) => {
      const into = historyTarget(dataDir, `hf/into${++n}`);
      const out = await h.pool().run({ op: 'restoreInto', db: into, source: db.id, from: db, at: m.at, by, timeoutMs: 60_000 });
      if (!out.ok) return out.error.code;
      // Main: ok with 409 rows for every moment of the last phase (up to 460 acknowledged).
      expect(keysIn(into.path).join(','), `${m.phase} moment, ${m.acked} acknowledged`).toBe(acked.slice(0, m.acked).join(','));
      return 'ok';
    };
    const before = moments.filter((m) => m.phase !== 'after');
    const after = moments.filter((m) => m.phase === 'after');
    // Moments history holds restore whole; those past what it holds are refused, retryable.
    for (const m of before.filter((_, i) => i % 4 === 0)) expect(await restored(m)).toBe('ok');
    expect(await restored(after.at(-1)!)).toBe('STORAGE_FULL');
    // Room for history: the next write copies what waited, and every moment restores whole.
    growTmpfs(hdir, '64m');
    expect((await write('INSERT INTO t (k, pad) VALUES (?, ?)', [1_000_000, 'last'])).ok).toBe(true);
    for (const m of after) expect(await restored(m)).toBe('ok');
  }, 600_000);
});
