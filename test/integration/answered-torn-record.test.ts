// The answered file's records (`answered-commits.ts`) are written over in place, 160 bytes a
// slot: slot 25 lies across the page at 4,096. A crash, or a full copy-on-write disk taking
// part of the write, leaves such a slot the new record's first bytes and the old one's last. A
// reader must take that slot for absent, never for a record: read as one, it named a commit's
// frame with another's checksums, or a time made of digits of two (session 34, F11).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ANSWERED_FILE, closeAnswered, noteAnswered, readAllAnswered, type Answered } from '../../src/history/answered-commits.ts';
import { localSource } from '../../src/history/history-files.ts';

const RECORD_BYTES = 160;
const RING = 256;

let dir: string;
let db: Database.Database;

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-answered-torn-'));
  db = new Database(path.join(dir, 'a.sqlite'));
  db.pragma('journal_mode = WAL');
  db.pragma('wal_autocheckpoint = 0');
  db.exec('CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)');
});

afterEach(() => {
  closeAnswered(db);
  db.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('a record of the answered file torn across its slot', () => {
  it('is read as absent, never as a record that was not written', () => {
    const source = localSource(dir, 'w/a');
    fs.mkdirSync(source.generationsDir, { recursive: true });
    const file = path.join(path.dirname(source.generationsDir), ANSWERED_FILE);
    const dbPath = path.join(dir, 'a.sqlite');
    const written: Answered[] = [];
    const note = (at: number) => {
      db.prepare('INSERT INTO t(v) VALUES (?)').run('x'.repeat(50));
      const r = noteAnswered(db, dbPath, source, at);
      expect(r).toBeDefined();
      written.push(r!.noted);
    };
    // Every slot once (the old records), then the first 120 again (the new ones), each time of
    // thirteen digits, the new ones apart from the old in their leading digits.
    for (let i = 0; i < RING; i++) note(1_700_000_000_000 + i);
    const old = fs.readFileSync(file);
    for (let i = 0; i < 120; i++) note(1_800_000_000_000 + i);
    const now = fs.readFileSync(file);
    // A tear inside the time's digits, in a slot whose old and new records lay their fields out
    // alike (the checksums' digits vary): the new head, the old tail.
    let torn = -1;
    for (let slot = 0; slot < 120 && torn < 0; slot++) {
      const o = old.subarray(slot * RECORD_BYTES, (slot + 1) * RECORD_BYTES);
      const n = now.subarray(slot * RECORD_BYTES, (slot + 1) * RECORD_BYTES);
      const at = n.indexOf('"at":');
      if (at > 0 && o.indexOf('"at":') === at) {
        const cut = at + 5 + 6;
        const fd = fs.openSync(file, 'r+');
        try {
          fs.writeSync(fd, Buffer.concat([n.subarray(0, cut), o.subarray(cut)]), 0, RECORD_BYTES, slot * RECORD_BYTES);
        } finally {
          fs.closeSync(fd);
        }
        torn = slot;
      }
    }
    expect(torn).toBeGreaterThanOrEqual(0);
    const read = readAllAnswered(source);
    const key = (a: Answered) => JSON.stringify([a.salt1, a.salt2, a.frame, a.c1, a.c2, a.at, a.n]);
    const wrote = new Set(written.map(key));
    // Every record read is one written, and the torn slot's is not read at all.
    expect(read.filter((a) => !wrote.has(key(a)))).toEqual([]);
    expect(read.find((a) => a.n === torn || a.n === RING + torn)).toBeUndefined();
    // The other slots all read: 255 records, the newest the last written.
    expect(read).toHaveLength(RING - 1);
    expect(read.at(-1)).toEqual(written.at(-1));
  });
});
