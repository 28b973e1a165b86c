import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { capture, forgetCapture } from '../../src/history/capture.ts';
import { captureBeforeClose, sealAfterClose } from '../../src/history/capture-on-close.ts';
import { listGenerations, localSource } from '../../src/history/history-files.ts';
import { planRestore } from '../../src/history/restore-plan.ts';
import { buildRestore } from '../../src/history/restore-rebuild.ts';
import { dumpHash } from '../helpers/history.ts';

// A program outside agentdb (an operator's sqlite3 shell) commits to a database while agentdb's
// handle stays open, then checkpoints it: agentdb's next commit starts the WAL over, behind the
// outside commit's frames, which were never copied. A capture reads a commit's frames without
// the WAL's header when only its own connection wrote since the last one (a system call of
// nine): here another did, and both the outside commit and agentdb's must be in the history,
// at the capture's time. Where the outside commit's frames may be gone (overwritten by the new
// WAL's, or cut off by TRUNCATE), history begins a new generation from the file (a gap).
describe('history when a program outside agentdb commits and checkpoints', () => {
  let dataDir: string;
  let file: string;
  beforeEach(() => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-history-outside-ckpt-'));
    file = path.join(dataDir, 'db.sqlite');
  });
  afterEach(() => {
    forgetCapture(file);
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  /**
   * agentdb's side: handles opened as the executor opens them, and commits captured on a clock the
   * test moves a second at a time, each moment kept with the file's dump right after it.
   */
  const agentdb = (checkpointBytes = 64 * 1024 * 1024) => {
    let clock = 1_000;
    const opts = { source: localSource(dataDir, 'o/a'), checkpointBytes, now: () => clock };
    const moments = new Map<string, { at: number; hash: string }>();
    return {
      opts,
      open(): Database.Database {
        const db = new Database(file);
        db.pragma('journal_mode = WAL');
        db.pragma('wal_autocheckpoint = 0');
        return db;
      },
      captured(db: Database.Database, moment?: string) {
        clock += 1_000;
        const report = capture(db, file, opts);
        if (moment) moments.set(moment, { at: clock, hash: dumpHash(file) });
        return report;
      },
      /** Restores every moment kept and says which differ from the file then. */
      wrong(): string[] {
        return [...moments].flatMap(([name, { at, hash }]) => {
          const out = path.join(dataDir, `restored-${at}.sqlite`);
          buildRestore(planRestore(opts.source, { at }), out);
          return dumpHash(out) === hash ? [] : [name];
        });
      },
    };
  };

  /** Tables `ours` (agentdb's) and `theirs` (the outside program's: a page no later commit writes), and three commits. */
  const started = (a: ReturnType<typeof agentdb>, db: Database.Database) => {
    a.captured(db);
    db.exec('CREATE TABLE ours (v TEXT); CREATE TABLE theirs (v TEXT)');
    a.captured(db);
    for (let i = 0; i < 3; i++) {
      db.prepare('INSERT INTO ours VALUES (?)').run(`mine ${i}`);
      a.captured(db, `mine ${i}`);
    }
  };

  // The checkpoint (TRUNCATE empties the WAL), whether agentdb's own checkpoint is due, and
  // agentdb's next commit: small, or big enough that the new WAL's frames overwrite the outside
  // commit's in the file.
  const cases = [
    { mode: 'PASSIVE', checkpointBytes: 64 * 1024 * 1024, big: false },
    { mode: 'PASSIVE', checkpointBytes: 4096, big: false },
    { mode: 'PASSIVE', checkpointBytes: 64 * 1024 * 1024, big: true },
    { mode: 'TRUNCATE', checkpointBytes: 64 * 1024 * 1024, big: false },
    { mode: 'TRUNCATE', checkpointBytes: 4096, big: true },
  ];
  for (const { mode, checkpointBytes, big } of cases) {
    it(`keeps the outside commit and the next own commit (${mode}${checkpointBytes === 4096 ? ', own checkpoint due' : ''}${big ? ', a big next commit' : ''})`, () => {
      const a = agentdb(checkpointBytes);
      const db = a.open();
      started(a, db);
      const outside = new Database(file);
      outside.prepare('INSERT INTO theirs VALUES (?)').run('an operator was here');
      outside.pragma(`wal_checkpoint(${mode})`);
      outside.close();
      // agentdb's next commit starts the WAL over (salt-1 + 1); one more reads on in the new WAL.
      db.prepare('INSERT INTO ours VALUES (?)').run(big ? 'x'.repeat(40_000) : 'mine after');
      a.captured(db, 'after');
      db.prepare('INSERT INTO ours VALUES (?)').run('mine last');
      a.captured(db, 'last');
      db.close();
      expect(a.wrong()).toEqual([]);
    });
  }

  it('keeps a commit whose capture failed and the next one, which started the WAL over after an outside checkpoint', () => {
    const a = agentdb();
    const db = a.open();
    db.pragma('busy_timeout = 10');
    started(a, db);
    // A commit (on a page of its own) whose capture fails: an outside program holds the lock.
    db.prepare('INSERT INTO theirs VALUES (?)').run('capture failed');
    const outside = new Database(file);
    outside.exec('BEGIN IMMEDIATE');
    expect(() => a.captured(db)).toThrow(/busy|locked/i);
    // It lets go and checkpoints, committing nothing (so `data_version` stays put).
    outside.exec('ROLLBACK');
    outside.pragma('wal_checkpoint(PASSIVE)');
    outside.close();
    // The next commit starts the WAL over, behind the uncaptured one.
    db.prepare('INSERT INTO ours VALUES (?)').run('after');
    a.captured(db, 'after');
    db.prepare('INSERT INTO ours VALUES (?)').run('last');
    a.captured(db, 'last');
    db.close();
    expect(a.wrong()).toEqual([]);
  });

  it('sees, as the file opens again, an outside commit made while no agentdb handle had it open (its close removed the WAL)', () => {
    const a = agentdb();
    let db = a.open();
    started(a, db);
    // Closed as agentdb closes a handle: captured, closed, sealed.
    const pending = captureBeforeClose(db, file, a.opts);
    db.close();
    sealAfterClose(file, pending);
    // The outside program's last close folds its commit into the file and removes the WAL.
    const outside = new Database(file);
    outside.prepare('INSERT INTO theirs VALUES (?)').run('an operator was here');
    outside.close();
    expect(fs.existsSync(`${file}-wal`)).toBe(false);

    db = a.open();
    expect(a.captured(db, 'opened').generation).toBe('gap');
    db.prepare('INSERT INTO ours VALUES (?)').run('mine after');
    a.captured(db, 'last');
    db.close();
    expect(listGenerations(a.opts.source).map((g) => g.snapshot?.reason)).toEqual(['first', 'gap']);
    expect(a.wrong()).toEqual([]);
  });
});
