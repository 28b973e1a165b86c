import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listGenerations, localSource } from '../../src/history/history-files.ts';
import type { ExecutorPool } from '../../src/executor/executor-pool.ts';
import type { ExecRequest } from '../../src/executor/executor-protocol.ts';
import { dumpHash, integrity, pastMs, prng } from '../helpers/history.ts';
import { historyPool, historyTarget, mustRun } from '../helpers/history-pool.ts';

// Restores in place that write only the pages changed since the moment (one WAL commit), many
// times over one database: random writes of every kind (rows small and past a page, updates,
// deletes that free pages, tables made and dropped, indexes made) across WAL restarts and manual
// snapshots, the dump of each moment drawn for a restore kept; then those restores, each compared with that
// dump, some undone at once. HISTORY_DELTA_SEED picks the run.
const SEED = Number(process.env.HISTORY_DELTA_SEED ?? Date.now() % 100_000);
const STEPS = 240;
const RESTORES = 24;

let dataDir: string;
let pool: ExecutorPool;
beforeAll(async () => {
  dataDir = fs.mkdtempSync(path.join(fs.existsSync('/dev/shm') ? '/dev/shm' : os.tmpdir(), 'agentdb-delta-rand-'));
  pool = await historyPool(dataDir, { handleCacheSize: 4, checkpointBytes: 64 * 1024 });
});
afterAll(async () => {
  await pool.stop();
  fs.rmSync(dataDir, { recursive: true, force: true });
});

const by = { who: 'operator:test', via: 'operator' as const };
const ok = (req: ExecRequest): Promise<any> => mustRun(pool, req);

describe(`restore in place by a commit of the changed pages, randomized (seed ${SEED})`, () => {
  it('brings back exactly the state of every moment it goes to, and each undo exactly the state before', async () => {
    const rand = prng(SEED);
    const db = historyTarget(dataDir, 'dr/a');
    let seq = 0;
    const write = (sql: string, params: (string | number)[] = []) => ok({ op: 'write', db, sql, params, callKey: `d${++seq}` });
    await write('CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT, n REAL)');
    await write(
      "INSERT INTO t(v, n) SELECT printf('%.200c', 'a'), random() FROM (WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 8000) SELECT i FROM c)",
    );
    const extra: string[] = [];
    // The restores are drawn first, from a stream of their own: a dump takes longer than most
    // steps (271 of them were 45% of the file's time), so only the states compared are dumped.
    const pick = prng(SEED + 1);
    const restores = Array.from({ length: RESTORES }, () => {
      // Mostly recent moments (an agent's last minutes), sometimes any.
      const k = pick() < 0.7 ? STEPS - 1 - Math.floor(pick() * 40) : Math.floor(pick() * STEPS);
      return { k, undo: pick() < 0.4 };
    });
    const compared = new Set([STEPS - 1, ...restores.map((r) => r.k)]);
    const timeline: { at: number; hash?: string }[] = [];
    for (let step = 0; step < STEPS; step++) {
      const r = rand();
      if (r < 0.35) await write('INSERT INTO t(v, n) VALUES (?, random())', ['x'.repeat(1 + Math.floor(rand() * (rand() < 0.2 ? 9000 : 300)))]);
      else if (r < 0.55) {
        const from = Math.floor(rand() * 8000);
        await write('UPDATE t SET v = ?, n = random() WHERE id BETWEEN ? AND ?', ['u'.repeat(Math.floor(rand() * 400)), from, from + Math.floor(rand() * 60)]);
      } else if (r < 0.66) {
        const from = Math.floor(rand() * 8000);
        await write('DELETE FROM t WHERE id BETWEEN ? AND ?', [from, from + Math.floor(rand() * 200)]);
      } else if (r < 0.67) await write('DELETE FROM t WHERE id % ? = 0', [13 + Math.floor(rand() * 80)]);
      else if (r < 0.74) {
        const name = `x${step}`;
        await write(`CREATE TABLE ${name}(k TEXT PRIMARY KEY, w BLOB) WITHOUT ROWID`);
        await write(`INSERT INTO ${name} SELECT printf('k%d', value), randomblob(?) FROM json_each(?)`, [
          Math.floor(rand() * 2000),
          JSON.stringify(Array.from({ length: 20 }, (_, i) => i)),
        ]);
        extra.push(name);
      } else if (r < 0.8 && extra.length) await ok({ op: 'drop', db, table: extra.splice(Math.floor(rand() * extra.length), 1)[0]!, callKey: `d${++seq}` });
      else if (r < 0.86) await write(`CREATE INDEX IF NOT EXISTS t_n${step % 3} ON t(n)`);
      else if (r < 0.9) await write('UPDATE t SET n = n + 1 WHERE id > (SELECT max(id) FROM t) - 300');
      else if (r < 0.93) await ok({ op: 'snapshot', db, reason: 'manual' });
      else if (r < 0.96) await ok({ op: 'close', path: db.path });
      else await write('INSERT INTO t(v, n) SELECT v, n FROM t WHERE id % 97 = 1');
      const at = Date.now();
      pastMs(at);
      timeline.push({ at, hash: compared.has(step) ? dumpHash(db.path, { withoutAudit: true }) : undefined });
    }
    expect(timeline).toHaveLength(STEPS);
    expect(listGenerations(localSource(dataDir, db.id)).length).toBeGreaterThan(1);

    let state = timeline.at(-1)!.hash;
    for (const [n, { k, undo }] of restores.entries()) {
      const out = await ok({ op: 'restore', db, at: timeline[k]!.at, by, timeoutMs: 60_000 });
      expect(dumpHash(db.path, { withoutAudit: true }), `restore ${n} to step ${k}`).toBe(timeline[k]!.hash);
      expect(integrity(db.path)).toBe('ok');
      if (undo) {
        await ok({ op: 'restore', db, undo: out.undoId, by, timeoutMs: 60_000 });
        expect(dumpHash(db.path, { withoutAudit: true }), `undo of restore ${n}`).toBe(state);
        expect(integrity(db.path)).toBe('ok');
      } else state = timeline[k]!.hash;
    }
  }, 240_000);
});
