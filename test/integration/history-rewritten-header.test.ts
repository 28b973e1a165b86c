import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { capture, forgetCapture } from '../../src/history/capture.ts';
import { captureBeforeClose, sealAfterClose } from '../../src/history/capture-on-close.ts';
import { listGenerations, localSource } from '../../src/history/history-files.ts';
import { planRestore } from '../../src/history/restore-plan.ts';
import { buildRestore } from '../../src/history/restore-rebuild.ts';
import { dumpHash } from '../helpers/history.ts';

// Two handles of one database (executor children each keep theirs). One runs a transaction big
// enough to spill pages into the WAL, which starts the WAL over (a new header), then fails and
// rolls back. The other's next commit writes frame 1 and the header again: the same salts, its
// own checkpoint count, so another header checksum, from which its frames chain. History began a
// segment from the first header; kept to it, no frame followed on again and every capture after
// copied nothing, silently (found by a hostile review's randomized test).
describe('history when the WAL header is written again with the same salts', () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-history-rewritten-header-'));
  const file = path.join(dataDir, 'db.sqlite');
  const moments: { at: number; hash: string }[] = [];
  afterAll(() => {
    forgetCapture(file);
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  beforeAll(() => {
    const a = new Database(file);
    a.pragma('journal_mode = WAL');
    a.pragma('wal_autocheckpoint = 0');
    a.pragma('cache_size = 10');
    let clock = 1_000;
    // Small: every capture checkpoints, so the WAL starts over on each commit of `a`, whose
    // checkpoint count runs ahead of `b`'s.
    const opts = { source: localSource(dataDir, 'rh/a'), checkpointBytes: 8192, now: () => clock };
    const captured = (db: Database.Database) => {
      clock += 1_000;
      capture(db, file, opts);
      moments.push({ at: clock, hash: dumpHash(file) });
    };
    captured(a);
    a.exec('CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB)');
    captured(a);
    const b = new Database(file);
    b.pragma('wal_autocheckpoint = 0');
    const put = (db: Database.Database, k: number, bytes: number) => db.prepare('INSERT OR REPLACE INTO t VALUES (?, randomblob(?))').run(k, bytes);
    put(b, 1, 3000);
    captured(b);
    for (let i = 0; i < 4; i++) {
      put(a, 10 + i, 3000);
      captured(a);
    }
    expect(() =>
      a.transaction(() => {
        for (let j = 0; j < 300; j++) a.prepare('INSERT INTO t (v) VALUES (randomblob(3000))').run();
        throw new Error('the agent statement failed');
      })(),
    ).toThrow(/failed/);
    captured(a);
    for (let i = 0; i < 3; i++) {
      put(b, 100 + i, 100);
      captured(b);
    }
    put(a, 200, 100);
    captured(a);
    b.close();
    a.close();
  });

  it('restores every moment after it exactly', () => {
    expect(moments.length).toBe(12);
    for (const { at, hash } of moments) {
      const out = path.join(dataDir, `restored-${at}.sqlite`);
      buildRestore(planRestore(localSource(dataDir, 'rh/a'), { at }), out);
      expect(dumpHash(out), `the moment ${at}`).toBe(hash);
    }
  });
});

// A connection that never started a WAL over itself writes fresh random salts whenever it writes
// frame 1 of an empty WAL: a big transaction that spilled into the WAL and rolled back left
// history a segment begun from a header no commit followed, and the next commit's header was
// neither salt-1 + 1 nor what the seal said. Each time a generation began (a full snapshot of
// the database) where history simply goes on.
describe('history after a transaction that spilled into the WAL and rolled back', () => {
  for (const handles of [1, 2]) {
    it(`goes on in the same generation, every moment exact (${handles === 1 ? 'one handle, closed and reopened' : 'two handles'})`, () => {
      const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-history-spill-'));
      const file = path.join(dataDir, 'db.sqlite');
      const source = localSource(dataDir, 'sp/a');
      let clock = 1_000;
      const opts = { source, checkpointBytes: handles === 1 ? 64 * 1024 * 1024 : 8192, now: () => clock };
      const moments: { at: number; hash: string }[] = [];
      const open = () => {
        const db = new Database(file);
        db.pragma('journal_mode = WAL');
        db.pragma('wal_autocheckpoint = 0');
        db.pragma('cache_size = 10');
        return db;
      };
      const captured = (db: Database.Database) => {
        clock += 1_000;
        capture(db, file, opts);
        moments.push({ at: clock, hash: dumpHash(file) });
      };
      const spill = (db: Database.Database) =>
        expect(() =>
          db.transaction(() => {
            for (let j = 0; j < 300; j++) db.prepare('INSERT INTO t (v) VALUES (randomblob(3000))').run();
            throw new Error('the agent statement failed');
          })(),
        ).toThrow(/failed/);
      try {
        let a = open();
        captured(a);
        a.exec('CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB)');
        captured(a);
        let b: Database.Database;
        if (handles === 1) {
          // Closed as agentdb closes a handle (capture, close, seal), then opened again.
          a.prepare('INSERT INTO t (v) VALUES (?)').run('before the close');
          captured(a);
          const pending = captureBeforeClose(a, file, opts);
          a.close();
          sealAfterClose(file, pending);
          a = open();
          b = a;
        } else {
          b = open();
          captured(b);
        }
        spill(a);
        captured(a);
        b.prepare('INSERT INTO t (v) VALUES (randomblob(?))').run(20_000);
        captured(b);
        a.prepare('INSERT INTO t (v) VALUES (?)').run('after');
        captured(a);
        if (b !== a) b.close();
        a.close();
        forgetCapture(file);
        expect(listGenerations(source).length).toBe(1);
        for (const { at, hash } of moments) {
          const out = path.join(dataDir, `restored-${at}.sqlite`);
          buildRestore(planRestore(source, { at }), out);
          expect(dumpHash(out), `the moment ${at}`).toBe(hash);
        }
      } finally {
        forgetCapture(file);
        fs.rmSync(dataDir, { recursive: true, force: true });
      }
    });
  }
});
