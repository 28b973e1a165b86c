import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { errorBody } from '../../src/errors.ts';
import type { ExecOutcome, ExecRequest } from '../../src/executor/executor-protocol.ts';
import type { ExecutorPool } from '../../src/executor/executor-pool.ts';
import { historyDir } from '../../src/history/history-files.ts';
import { pastMs } from '../helpers/history.ts';
import { historyTarget } from '../helpers/history-pool.ts';
import { oneChildPool } from '../helpers/one-child-pool.ts';
import { fillDisk, mountTmpfs, unmountTmpfs } from '../helpers/tmpfs.ts';

// Session 37, F18 (F17's leftover): with history's folder on a disk of its own and that disk
// full, every refusal for it said "The server's disk is full; nothing was written", with Node's
// "ENOSPC: no space left on device" at most: an operator freed room beside the databases and the
// refusals went on. Each now names history's disk, and that it is not the databases'.

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-full-disk-which-'));
const db = historyTarget(dataDir, 'fw/a');
const fork = historyTarget(dataDir, 'fw/fork');
const hdir = historyDir(dataDir, db.id);
fs.mkdirSync(hdir, { recursive: true });
const refused = mountTmpfs(hdir, '8m');
if (refused) console.warn(`full-disk-which.test.ts: skipped, this machine refused to mount a tmpfs (${refused})`);
const by = { who: 'operator:full-disk-which', via: 'operator' as const };
const HISTORY_FULL = /history's disk \(.*\) is full, not the databases' \(.*\): free space on history's disk, then try again/;
// What an agent is told: which disk, not the server's folders (an operator's to know and to free).
const HISTORY_FULL_NO_PATHS = /history's disk is full, not the databases': free space on history's disk, then try again/;

describe.runIf(!refused)("a refusal for history's full disk", () => {
  let pool: ExecutorPool;
  let seq = 0;
  beforeAll(async () => {
    // A small bound on what waits in the WAL: writes are refused for history soon.
    pool = await oneChildPool(dataDir, { maxBehindBytes: 256 * 1024 });
  });
  afterAll(async () => {
    await pool?.stop();
    unmountTmpfs(hdir);
    fs.rmSync(dataDir, { recursive: true, force: true });
  });
  const run = (req: ExecRequest) => pool.run(req);
  const write = (sql: string, params: unknown[] = []) => run({ op: 'write', db, sql, params: params as never, callKey: `fw.k${++seq}` });
  const refusal = (out: ExecOutcome) => {
    expect(out.ok, JSON.stringify(out)).toBe(false);
    const error = (out as { error: { code: string; detail: string } }).error;
    expect(error.code).toBe('STORAGE_FULL');
    return error.detail;
  };

  it("names history's disk on a write refused for it, a read as_of, a restore in place and one into a new database", async () => {
    expect((await write('CREATE TABLE t (k INTEGER PRIMARY KEY, pad TEXT)')).ok).toBe(true);
    for (let k = 1; k <= 50; k++) expect((await write('INSERT INTO t VALUES (?, ?)', [k, 'x'.repeat(3000)])).ok).toBe(true);
    const mid = Date.now();
    pastMs(mid);
    for (let k = 51; k <= 60; k++) expect((await write('INSERT INTO t VALUES (?, ?)', [k, 'x'.repeat(3000)])).ok).toBe(true);
    const filler = path.join(hdir, 'filler');
    const fill = fillDisk(filler);
    try {
      // Writes go on into the WAL until it holds the bound, then are refused.
      let out: ExecOutcome | undefined;
      for (let k = 61; k <= 400; k++) {
        out = await write('INSERT INTO t VALUES (?, ?)', [k, 'y'.repeat(3000)]);
        if (!out.ok) break;
      }
      const wrote = refusal(out!);
      expect(wrote).toMatch(/HISTORY_MAX_BEHIND_BYTES/);
      // Main: the detail ended at the bound; nothing said which disk.
      expect(wrote).toMatch(HISTORY_FULL_NO_PATHS);
      expect(wrote).not.toContain(dataDir);
      const now = Date.now();
      pastMs(now);
      const asOf = refusal(await run({ op: 'query', db, sql: 'SELECT count(*) FROM t', params: [], maxRows: 10, asOf: { target: { at: now }, build: true } }));
      expect(asOf).toMatch(HISTORY_FULL_NO_PATHS);
      expect(asOf).not.toContain(dataDir);
      const inPlace = refusal(await run({ op: 'restore', db, at: mid, by, timeoutMs: 60_000 }));
      expect(inPlace).toMatch(HISTORY_FULL);
      const into = await run({ op: 'restoreInto', db: fork, source: db.id, from: db, at: now, by, opId: 'fw-into', timeoutMs: 60_000 });
      expect(refusal(into)).toMatch(HISTORY_FULL);
      // What a caller reads: the registry's message, then the detail.
      expect(errorBody('STORAGE_FULL', inPlace).message).toMatch(/^The server's disk is full; nothing was written\. .*history's disk \(.*\) is full/);
    } finally {
      fs.closeSync(fill.fd);
      fs.rmSync(filler, { force: true });
    }
    // Room again: the write and the restore go through.
    expect((await write('INSERT INTO t VALUES (?, ?)', [1000, 'after'])).ok).toBe(true);
    expect((await run({ op: 'restore', db, at: mid, by, timeoutMs: 60_000 })).ok).toBe(true);
  }, 300_000);
});
