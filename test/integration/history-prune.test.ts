import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { capture, forgetCapture } from '../../src/history/capture.ts';
import { historyDir, listGenerations, localSource } from '../../src/history/history-files.ts';
import { pruneHistory } from '../../src/history/prune.ts';
import { withReader } from '../../src/history/reader-markers.ts';
import { planRestore } from '../../src/history/restore-plan.ts';
import { buildRestore } from '../../src/history/restore-rebuild.ts';
import { startGeneration } from '../../src/history/snapshot.ts';
import { Scheduler } from '../../src/schedule/scheduler.ts';
import { dumpHash } from '../helpers/history.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';

const DAY = 24 * 3600 * 1000;
// Forty days of history on a clock the test controls: capture and snapshots take their time
// from it, so "day 31" is a number, not a month of waiting.
const BASE = Date.UTC(2026, 0, 1);

describe('history prune', () => {
  let dataDir: string;
  let file: string;
  const moments: { at: number; hash: string }[] = [];
  const source = () => localSource(dataDir, 'pr/a');

  beforeAll(() => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-history-prune-'));
    file = path.join(dataDir, 'shards', '0', 'pr', 'a.sqlite');
    fs.mkdirSync(path.dirname(file), { recursive: true });
    const db = new Database(file);
    db.pragma('journal_mode = WAL');
    db.pragma('wal_autocheckpoint = 0');
    const opts = (now: number) => ({ source: source(), checkpointBytes: 16 * 1024, now: () => now });
    capture(db, file, opts(BASE));
    db.exec('CREATE TABLE t(id INTEGER PRIMARY KEY, day INT, v TEXT)');
    capture(db, file, opts(BASE + 1));
    for (let day = 0; day < 40; day++) {
      for (let i = 0; i < 5; i++) {
        const now = BASE + day * DAY + (i + 1) * 3600_000;
        db.prepare('INSERT INTO t(day, v) VALUES (?, ?)').run(day, 'x'.repeat(500));
        if (i === 3) db.prepare('DELETE FROM t WHERE id % 7 = 0').run();
        capture(db, file, opts(now));
        moments.push({ at: now, hash: dumpHash(file) });
      }
      // The nightly snapshot, at 22:00 of each day.
      startGeneration(db, file, source(), 'nightly', BASE + day * DAY + 22 * 3600_000);
      forgetCapture(file);
    }
    db.close();
  });
  afterAll(() => fs.rmSync(dataDir, { recursive: true, force: true }));

  const restoresTo = (at: number, expected: string) => {
    const out = path.join(dataDir, `check-${at}.sqlite`);
    buildRestore(planRestore(source(), { at }), out);
    try {
      expect(dumpHash(out), new Date(at).toISOString()).toBe(expected);
    } finally {
      fs.rmSync(out, { force: true });
    }
  };

  it('leaves everything while a restore reads the history', () => {
    const before = listGenerations(source()).length;
    const report = withReader(historyDir(dataDir, 'pr/a'), 'a test restore', {}, () => pruneHistory(dataDir, { now: BASE + 40 * DAY, retentionDays: 30 }));
    expect(report).toMatchObject({ skipped: 1, generations: 0 });
    expect(listGenerations(source())).toHaveLength(before);
  });

  it('at day 41 deletes what is older than 30 days, and every restore inside the window still works', () => {
    const now = BASE + 40 * DAY + 23 * 3600_000;
    const cutoff = now - 30 * DAY;
    const before = listGenerations(source());
    const report = pruneHistory(dataDir, { now, retentionDays: 30 });
    const after = listGenerations(source());
    expect(report.generations).toBeGreaterThan(5);
    expect(after.length).toBe(before.length - report.generations);
    // The snapshot the window's first moments need is kept: the oldest left began at or before the cutoff.
    expect(after[0]!.snapshot!.at).toBeLessThanOrEqual(cutoff);
    expect(after[1]!.snapshot!.at).toBeGreaterThan(cutoff);
    for (const m of moments.filter((x) => x.at >= cutoff)) restoresTo(m.at, m.hash);
    // Older than the window: gone, and said so.
    expect(() => planRestore(source(), { at: moments[0]!.at })).toThrow(/before the history's earliest moment/);
  });
});

describe('the scheduler', () => {
  let sb: Sandbox;
  beforeAll(() => {
    sb = sandbox({ HISTORY_PRUNE_CRON: '5 4 * * *', HISTORY_SNAPSHOT_CRON: '10 1 * * *' });
  });
  afterAll(() => sb.cleanup());

  it('registers the history prune and the nightly snapshot on their crons', async () => {
    const s = new Scheduler(sb.config, pino({ level: 'silent' }));
    await s.start();
    try {
      const fmt = (ms: number | undefined) => new Date(ms!).toISOString().slice(11, 16);
      expect(fmt(await s.nextHistoryRun('prune'))).toBe('04:05');
      expect(fmt(await s.nextHistoryRun('snapshot'))).toBe('01:10');
    } finally {
      await s.stop();
    }
  });
});
