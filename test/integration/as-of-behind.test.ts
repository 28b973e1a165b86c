import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callKey } from '../../src/contracts/call-identity.ts';
import type { ExecutorPool } from '../../src/executor/executor-pool.ts';
import type { AsOfTarget } from '../../src/executor/executor-protocol.ts';
import { historyDir } from '../../src/history/history-files.ts';
import { historyTarget } from '../helpers/history-pool.ts';
import { growTmpfs, mountTmpfs, unmountTmpfs } from '../helpers/tmpfs.ts';
import { oneChildPool } from '../helpers/one-child-pool.ts';

// Review 29 M2: on a full disk history stops capturing (the frames wait in the WAL) while writes
// are still acknowledged. `as_of` by the id of such a write answered AS_OF_CALL_UNKNOWN ("not in
// this database's history"), as if the call never wrote: it must answer HISTORY_BEHIND
// (retryable, naming the full disk), and read the moment once history has caught up.
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-as-of-behind-'));
const db = historyTarget(dataDir, 'behind/a');
const mnt = historyDir(dataDir, db.id);
fs.mkdirSync(mnt, { recursive: true });
const refused = mountTmpfs(mnt, '1m');
if (refused) {
  fs.rmSync(dataDir, { recursive: true, force: true });
  console.warn(`as-of-behind.test.ts: skipped, this machine refused to mount a tmpfs (${refused}); it needs root and mount(2)`);
}

describe.runIf(!refused)('as_of by the id of a write history has not captured yet', () => {
  let pool: ExecutorPool;
  const key = (id: string) => callKey('behind', 'a', id);
  const byCall = (id: string): AsOfTarget => ({ callId: id, callKeys: [key(id)] });
  const write = (id: string) => pool.run({ op: 'write', db, sql: 'INSERT INTO t (v) VALUES (?)', params: [`${id}:`.padEnd(3000, 'x')], callKey: key(id) });
  const read = (id: string) => pool.run({ op: 'query', db, sql: 'SELECT count(*) FROM t', params: [], maxRows: 10, asOf: { target: byCall(id), build: true } });

  beforeAll(async () => {
    // One child: the read runs where the failed copies were seen, and its message says why.
    pool = await oneChildPool(dataDir);
    const made = await pool.run({ op: 'write', db, sql: 'CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)', params: [], callKey: key('create') });
    expect(made.ok, JSON.stringify(made)).toBe(true);
  });

  afterAll(async () => {
    await pool?.stop();
    if (!refused) unmountTmpfs(mnt);
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('answers HISTORY_BEHIND naming the full disk, then the moment once history caught up', async () => {
    // Write until history's volume is full and its copies fail.
    let n = 0;
    for (; n < 2000 && pool.captureLagSeconds() === 0; n++) expect((await write(`w${n}`)).ok).toBe(true);
    expect(pool.captureLagSeconds(), 'history never fell behind').toBeGreaterThan(0);
    const acked = await write('late');
    expect(acked.ok, JSON.stringify(acked)).toBe(true);

    const behind = await read('late');
    expect(behind.ok, JSON.stringify(behind)).toBe(false);
    if (behind.ok) return;
    expect(behind.error.code).toBe('HISTORY_BEHIND');
    expect(behind.error.detail).toContain('has not captured');
    expect(behind.error.detail).toContain('disk');

    // Room again: an activity page catches history up with no write (review R29b L1: an idle
    // database stayed behind until its next write), and the moment reads (every write before it).
    growTmpfs(mnt, '64m');
    expect(pool.captureLagSeconds()).toBeGreaterThan(0);
    expect(await pool.run({ op: 'activity', db, catchUp: true })).toMatchObject({ ok: true });
    expect(pool.captureLagSeconds()).toBe(0);
    expect((await write('after')).ok).toBe(true);
    const back = await read('late');
    expect(back.ok, JSON.stringify(back)).toBe(true);
    if (back.ok) expect((back.result as { rows: unknown[][] }).rows).toEqual([[n]]);
  });
});
