// An outside program (the sqlite3 shell) with powersafe_overwrite off pads each commit to a
// sector boundary by writing its commit frame again. Capture tells a killed child's answered
// commits from an outside program's by counting the commits in a WAL that started over against
// SQLite's own count (`allInNewWal`): a padded commit must count once, or an outside commit lost
// with the old WAL goes unseen, and a restore comes back without it.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { capture, forgetCapture } from '../../src/history/capture.ts';
import { listGenerations, localSource } from '../../src/history/history-files.ts';
import { planRestore } from '../../src/history/restore-plan.ts';
import { buildRestore } from '../../src/history/restore-rebuild.ts';
import { dumpHash } from '../helpers/history.ts';

let dataDir: string;
let file: string;
beforeEach(() => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-padding-'));
  file = path.join(dataDir, 'db.sqlite');
});
afterEach(() => {
  forgetCapture(file);
  fs.rmSync(dataDir, { recursive: true, force: true });
});

for (const psow of [1, 0]) {
  it(`an outside commit, its checkpoint, and a commit of its that starts the WAL over (psow=${psow}): a new generation, every moment restores`, () => {
    let clock = Date.now() - 60_000;
    const opts = { source: localSource(dataDir, 'o/a'), checkpointBytes: 64 * 1024 * 1024, now: () => clock };
    const moments: { at: number; hash: string }[] = [];
    const db = new Database(file);
    const cap = () => {
      clock += 1000;
      capture(db, file, opts);
      moments.push({ at: clock, hash: dumpHash(file) });
    };
    try {
      db.pragma('journal_mode = WAL');
      db.pragma('wal_autocheckpoint = 0');
      db.exec('CREATE TABLE ours (v TEXT); CREATE TABLE theirs (v TEXT); CREATE TABLE big (v BLOB)');
      cap();
      db.prepare('INSERT INTO ours VALUES (?)').run('mine');
      cap();
      execFileSync('sqlite3', [`file:${file}?psow=${psow}`], {
        input: [
          '.dbconfig no_ckpt_on_close on',
          'PRAGMA synchronous = FULL;',
          'PRAGMA wal_autocheckpoint = 0;',
          "INSERT INTO theirs VALUES ('an operator was here');",
          'PRAGMA wal_checkpoint(PASSIVE);',
          // Starts the WAL over, and is big enough to write over the commit before.
          'INSERT INTO big VALUES (zeroblob(40000));',
          '',
        ].join('\n'),
      });
      db.prepare('INSERT INTO ours VALUES (?)').run('mine after');
      cap();
    } finally {
      db.close();
    }
    expect(listGenerations(opts.source).map((g) => g.snapshot?.reason)).toEqual(['first', 'gap']);
    for (const m of moments) {
      const out = path.join(dataDir, `at-${m.at}.sqlite`);
      buildRestore(planRestore(opts.source, { at: m.at }), out);
      expect(dumpHash(out)).toBe(m.hash);
    }
  });
}
