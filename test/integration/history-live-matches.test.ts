import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { capture, capturedPosition, forgetCapture } from '../../src/history/capture.ts';
import { liveMatches, planDelta, type Delta } from '../../src/history/delta-restore.ts';
import { listGenerations, localSource } from '../../src/history/history-files.ts';
import { planRestore } from '../../src/history/restore-plan.ts';

// Going back in place writes only the pages changed since the moment, and only once the live
// file is found to be exactly what history last saw on every one of them it keeps (`liveMatches`). It
// compares a run of consecutive pages at a time; a page that differs anywhere in a run, first,
// last or alone, must still be found.
describe('a delta restore checks the live file page by page, in runs', () => {
  let dataDir: string;
  let file: string;
  let delta: Delta;
  let pristine: Buffer;

  beforeAll(() => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-live-matches-'));
    file = path.join(dataDir, 'db.sqlite');
    const source = localSource(dataDir, 'lm/a');
    const db = new Database(file);
    db.pragma('journal_mode = WAL');
    db.pragma('wal_autocheckpoint = 0');
    let clock = 1_000;
    const opts = { source, checkpointBytes: 64 * 1024 * 1024, now: () => clock };
    capture(db, file, opts);
    db.exec('CREATE TABLE blobs (id INTEGER PRIMARY KEY, b BLOB); CREATE TABLE small (id INTEGER PRIMARY KEY, v TEXT)');
    const blob = db.prepare('INSERT INTO blobs (b) VALUES (randomblob(?))');
    for (let i = 0; i < 4; i++) {
      blob.run(64 * 1024);
      clock += 1_000;
      capture(db, file, opts);
    }
    const moment = clock;
    // After the moment: a blob rewritten (a run of consecutive pages the restore writes back),
    // runs of new pages past the size then (the restore cuts them off), and pages rewritten here
    // and there.
    db.prepare('UPDATE blobs SET b = randomblob(64 * 1024) WHERE id = 2').run();
    clock += 1_000;
    capture(db, file, opts);
    for (let i = 0; i < 6; i++) {
      blob.run(48 * 1024);
      db.prepare('INSERT INTO small (v) VALUES (?)').run(`row ${i}`);
      clock += 1_000;
      capture(db, file, opts);
    }
    db.close();
    forgetCapture(file);
    const plan = planRestore(source, { at: moment });
    const gens = listGenerations(source);
    const chain = gens.slice(gens.findIndex((g) => g.name === plan.generation));
    delta = planDelta(plan, chain, capturedPosition(file, source)!, Number.MAX_SAFE_INTEGER)!;
    pristine = fs.readFileSync(file);
  });
  afterAll(() => fs.rmSync(dataDir, { recursive: true, force: true }));

  const withByteFlipped = (page: number, offset: number, check: () => void) => {
    const bytes = Buffer.from(pristine);
    bytes[(page - 1) * delta.pageSize + offset]! ^= 0xff;
    fs.writeFileSync(file, bytes);
    try {
      check();
    } finally {
      fs.writeFileSync(file, pristine);
    }
  };

  /** The pages written since the moment that the database still has at its size then: what the restore writes over. */
  const kept = () => [...delta.now.keys()].filter((p) => p <= delta.pagesAt).sort((a, b) => a - b);

  it('takes the file as it is', () => {
    expect(kept().length).toBeGreaterThan(16);
    expect(liveMatches(file, delta)).toBe(true);
  });

  it('finds a changed byte in the first, a middle and the last page it writes over, and in the last byte of a page', () => {
    const pages = kept();
    for (const page of [pages[0]!, pages[Math.floor(pages.length / 2)]!, pages.at(-1)!]) {
      withByteFlipped(page, 100, () => expect(liveMatches(file, delta), `page ${page}`).toBe(false));
    }
    withByteFlipped(pages[1]!, delta.pageSize - 1, () => expect(liveMatches(file, delta)).toBe(false));
  });

  it('leaves out the pages past the size it goes back to: the restore cuts them off', () => {
    const past = [...delta.now.keys()].filter((p) => p > delta.pagesAt);
    expect(past.length).toBeGreaterThan(40);
    withByteFlipped(past[Math.floor(past.length / 2)]!, 100, () => expect(liveMatches(file, delta)).toBe(true));
  });

  it('leaves pages it does not write out of it, and refuses a file of another size', () => {
    const untouched = Array.from({ length: delta.pagesNow }, (_, i) => i + 1).find((p) => !delta.now.has(p));
    expect(untouched).toBeDefined();
    withByteFlipped(untouched!, 100, () => expect(liveMatches(file, delta)).toBe(true));
    fs.appendFileSync(file, Buffer.alloc(delta.pageSize));
    try {
      expect(liveMatches(file, delta)).toBe(false);
    } finally {
      fs.writeFileSync(file, pristine);
    }
  });
});
