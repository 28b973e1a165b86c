import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listGenerations, localSource } from '../../src/history/layout.ts';
import type { ExecutorPool } from '../../src/store/executor-pool.ts';
import type { ExecRequest } from '../../src/store/executor-protocol.ts';
import { dumpHash, pastMs } from '../helpers/history.ts';
import { historyPool, historyTarget, mustRun } from '../helpers/history-pool.ts';

// The README: "a history file failing its check (HISTORY_CORRUPT)" leaves the database exactly
// as it was. A byte rotting in a snapshot moves neither its size nor its mtime (nor does a tool
// that rewrites a file and keeps its times, rsync or cp -p), which is all a restore looked at
// before hashing 100 MB; the chunk checksums written with each snapshot find it.

let dataDir: string;
let pool: ExecutorPool;
beforeAll(async () => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-bitrot-'));
  pool = await historyPool(dataDir, { handleCacheSize: 4, checkpointBytes: 64 * 1024 });
});
afterAll(async () => {
  await pool.stop();
  fs.rmSync(dataDir, { recursive: true, force: true });
});

let seq = 0;
const ok = (req: ExecRequest): Promise<any> => mustRun(pool, req);
const by = { who: 'operator:test', via: 'operator' as const };

describe('a snapshot rotted in place, its size and mtime unchanged', () => {
  it('is refused as HISTORY_CORRUPT by a restore in place that reads the page, and by a fork that copies the file', async () => {
    const db = historyTarget(dataDir, 'rot/main');
    await ok({ op: 'write', db, sql: 'CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)', params: [], callKey: `k${++seq}` });
    await ok({ op: 'write', db, sql: "INSERT INTO t(v) SELECT printf('%.500c', 'x') FROM (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 400) SELECT i FROM n)", params: [], callKey: `k${++seq}` });
    await ok({ op: 'snapshot', db, reason: 'manual' });
    const at = Date.now();
    pastMs(at);
    await ok({ op: 'write', db, sql: "UPDATE t SET v = 'changed' WHERE id % 10 = 0", params: [], callKey: `k${++seq}` });
    const before = dumpHash(db.path, { withoutAudit: true });
    const gen = listGenerations(localSource(dataDir, db.id)).at(-1)!;
    const file = gen.snapshotPath;
    const st = fs.statSync(file);
    const ns = fs.statSync(file, { bigint: true }).mtimeNs;
    // One byte of a row that the UPDATE changed (row 10's text), as a disk flips it.
    const bytes = fs.readFileSync(file);
    const row10 = bytes.indexOf(Buffer.from('x'.repeat(500)), 4096 * 2);
    expect(row10).toBeGreaterThan(0);
    const fd = fs.openSync(file, 'r+');
    fs.writeSync(fd, Buffer.from('y'), 0, 1, row10 + 250);
    fs.closeSync(fd);
    execFileSync('touch', ['-m', '-d', `@${ns / 1_000_000_000n}.${String(ns % 1_000_000_000n).padStart(9, '0')}`, file]);
    expect(fs.statSync(file).mtimeMs).toBe(st.mtimeMs);
    const out = await pool.run({ op: 'restore', db, at, by, timeoutMs: 60_000 });
    expect(out.ok ? 'ok' : out.error.code, 'a rotted snapshot restored from').toBe('HISTORY_CORRUPT');
    expect((out as { error: { detail: string } }).error.detail).toContain(`snapshot ${gen.name} is damaged`);
    expect(dumpHash(db.path, { withoutAudit: true })).toBe(before);
    // A fork copies the whole snapshot: the copy is held to every chunk's checksum.
    const fork = historyTarget(dataDir, 'rot/fork');
    const forked = await pool.run({ op: 'restoreInto', db: fork, source: db.id, at, by, timeoutMs: 60_000 });
    expect(forked.ok ? 'ok' : forked.error.code).toBe('HISTORY_CORRUPT');
    expect(fs.existsSync(fork.path)).toBe(false);
  }, 60_000);
});
