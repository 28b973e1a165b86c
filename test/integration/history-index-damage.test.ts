// A segment's index (one line per commit: its time, where it ends, its checksums) is what every
// restore is planned from. A byte that rots in it must be found and named, never read as
// another time or frame count (a restore then returns a state the database never had), and
// capture must never cut what follows the damage as if it were a crash's torn tail.
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { backupDatabase } from '../../src/history/backup.ts';
import { readManifest } from '../../src/history/backup-manifest.ts';
import { capture, forgetCapture } from '../../src/history/capture.ts';
import { FolderBlobStore } from '../../src/blobs/folder-blob-store.ts';
import { listGenerations, listSegments, localSource } from '../../src/history/history-files.ts';
import { readCommits } from '../../src/history/segment-index.ts';
import { historyView } from '../../src/history/history-view.ts';
import type { ExecutorPool } from '../../src/executor/executor-pool.ts';
import type { DbTarget } from '../../src/executor/executor-protocol.ts';
import { dumpHash, integrity, pastMs } from '../helpers/history.ts';
import { historyCalls, historyTarget, withHistoryPool } from '../helpers/history-pool.ts';

let dataDir: string;
let pool: ExecutorPool;
withHistoryPool('agentdb-index-damage-', { handleCacheSize: 4, checkpointBytes: 1024 * 1024 }, (d, p) => {
  dataDir = d;
  pool = p;
});
const { by, write, restore, nextKey } = historyCalls(() => pool);

/** Ten one-row commits, with the moment and the dump after each; `blob` bytes a row (300,000: the WAL starts over every three or four). */
async function tenCommits(db: DbTarget, blob = 0): Promise<{ at: number; hash: string }[]> {
  await write(db, 'CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT, b BLOB)');
  const moments: { at: number; hash: string }[] = [];
  for (let i = 0; i < 10; i++) {
    await write(db, 'INSERT INTO t(v, b) VALUES (?, randomblob(?))', [`row ${i}`, blob]);
    const at = Date.now();
    pastMs(at);
    moments.push({ at, hash: dumpHash(db.path, { withoutAudit: true }) });
  }
  return moments;
}

const liveIndex = (db: DbTarget) => listSegments(listGenerations(localSource(dataDir, db.id)).at(-1)!).at(-1)!.indexPath;

/** Rewrites line `n` (1-based) of an index with `edit`. */
function editLine(file: string, n: number, edit: (line: string) => string): void {
  const lines = fs.readFileSync(file, 'utf8').split('\n');
  lines[n - 1] = edit(lines[n - 1]!);
  fs.writeFileSync(file, lines.join('\n'));
}

const fork = (db: DbTarget, at: number) => {
  const into = historyTarget(dataDir, `${db.id}-fork${nextKey()}`);
  return { into, out: pool.run({ op: 'restoreInto', db: into, source: db.id, from: db, at, by, timeoutMs: 60_000 }) };
};

describe('a damaged history index', () => {
  it('a rotted digit of a commit time: restores that need the segment answer HISTORY_CORRUPT naming it, the database unchanged; nothing is cut, and history goes on in a new generation', async () => {
    const db = historyTarget(dataDir, 'rot/time');
    const moments = await tenCommits(db);
    const index = liveIndex(db);
    const lines = readCommits(index).length;
    // An hour later: valid JSON, a plausible time, read as-is it drops the commit from moments before.
    editLine(index, lines - 4, (l) => l.replace(/"at":(\d+)/, (_, at: string) => `"at":${Number(at) + 3_600_000}`));
    const text = fs.readFileSync(index, 'utf8');
    const before = dumpHash(db.path, { withoutAudit: true });
    const gens = listGenerations(localSource(dataDir, db.id)).length;

    for (const m of [moments[3]!, moments[6]!, moments[9]!]) {
      const { into, out } = fork(db, m.at);
      expect(await out).toMatchObject({ ok: false, error: { code: 'HISTORY_CORRUPT', detail: expect.stringContaining(index) } });
      expect(fs.existsSync(into.path)).toBe(false);
    }
    expect(await restore(db, { at: moments[5]!.at })).toMatchObject({ ok: false, error: { code: 'HISTORY_CORRUPT' } });
    expect(dumpHash(db.path, { withoutAudit: true })).toBe(before);
    expect(historyView(dataDir, db.id, 30).generations[gens - 1]).toMatchObject({ damaged: expect.stringContaining(`line ${lines - 4}`) });

    // The first capture to load the index in full (a fork settles the database it is taken
    // from) finds the damage: the index is left whole, and one new generation begins.
    await write(db, "INSERT INTO t(v) VALUES ('after')");
    expect(fs.readFileSync(index, 'utf8').startsWith(text)).toBe(true);
    expect(listGenerations(localSource(dataDir, db.id))).toHaveLength(gens + 1);
    const at = Date.now();
    pastMs(at);
    const { into, out } = fork(db, at);
    expect(await out).toMatchObject({ ok: true });
    expect(dumpHash(into.path, { withoutAudit: true })).toBe(dumpHash(db.path, { withoutAudit: true }));
    expect(integrity(into.path)).toBe('ok');
  });

  it('a line that is no longer JSON in the middle of the index is damage, not a torn tail: the lines after it stay', async () => {
    const db = historyTarget(dataDir, 'rot/json');
    const moments = await tenCommits(db);
    const index = liveIndex(db);
    const lines = readCommits(index).length;
    editLine(index, lines - 3, (l) => `[${l.slice(1)}`);
    const text = fs.readFileSync(index, 'utf8');
    const { out } = fork(db, moments[8]!.at);
    expect(await out).toMatchObject({ ok: false, error: { code: 'HISTORY_CORRUPT', detail: expect.stringContaining('not JSON') } });
    // Its settle loaded the index in full under the write lock, where a torn tail is cut. Had
    // it cut there, the commits after the damage were gone for good.
    expect(fs.readFileSync(index, 'utf8')).toBe(text);
    await write(db, "INSERT INTO t(v) VALUES ('after')");
    const at = Date.now();
    pastMs(at);
    const { into, out: after } = fork(db, at);
    expect(await after).toMatchObject({ ok: true });
    expect(dumpHash(into.path, { withoutAudit: true })).toBe(dumpHash(db.path, { withoutAudit: true }));
  });

  it('an index written before lines carried a CRC (no "s") still restores every moment', async () => {
    const db = historyTarget(dataDir, 'rot/old');
    const moments = await tenCommits(db);
    const index = liveIndex(db);
    fs.writeFileSync(index, fs.readFileSync(index, 'utf8').replace(/,"s":\d+/g, ''));
    for (const m of [moments[0]!, moments[4]!, moments[9]!]) {
      const { into, out } = fork(db, m.at);
      expect(await out).toMatchObject({ ok: true });
      expect(dumpHash(into.path, { withoutAudit: true })).toBe(m.hash);
    }
  });

  it("a closed segment whose last line lost its newline, or the whole line: restores past it answer HISTORY_CORRUPT; the backup leaves out only that generation's rest", async () => {
    for (const edit of ['newline', 'line'] as const) {
      const db = historyTarget(dataDir, `rot/closed-${edit}`);
      const moments = await tenCommits(db, 300_000);
      const gen = listGenerations(localSource(dataDir, db.id)).at(-1)!;
      const closed = listSegments(gen).filter((g) => g.closed);
      expect(closed.length).toBeGreaterThan(1);
      const seg = closed[1]!;
      const text = fs.readFileSync(seg.indexPath);
      // A torn tail is what a crash leaves in the segment capture appends to; this one is closed.
      if (edit === 'newline') fs.writeFileSync(seg.indexPath, Buffer.concat([text.subarray(0, -1), Buffer.from([0x0b])]));
      else fs.writeFileSync(seg.indexPath, text.subarray(0, text.lastIndexOf(10, text.length - 2) + 1));
      const { out } = fork(db, moments[9]!.at);
      expect(await out, edit).toMatchObject({
        ok: false,
        error: { code: 'HISTORY_CORRUPT', detail: expect.stringContaining(edit === 'newline' ? seg.indexPath : 'lost its last line') },
      });
      // A moment before that segment's last commit needs none of what follows it.
      const first = fork(db, moments[0]!.at);
      expect(await first.out).toMatchObject({ ok: true });
      expect(dumpHash(first.into.path, { withoutAudit: true })).toBe(moments[0]!.hash);
    }
    // Later generations are still backed up: the damaged segment and the rest of its generation are left out and named.
    const db = historyTarget(dataDir, 'rot/closed-newline');
    expect(await pool.run({ op: 'snapshot', db, reason: 'manual', timeoutMs: 60_000 })).toMatchObject({ ok: true });
    await write(db, "INSERT INTO t(v) VALUES ('later')");
    const store = new FolderBlobStore(path.join(dataDir, 'blobs'));
    const report = await backupDatabase(store, dataDir, db.id);
    expect(report).toMatchObject({ damaged: [expect.stringContaining('the last: not JSON')] });
    expect(report.error).toBeUndefined();
    const manifest = await readManifest(store, db.id);
    expect(manifest!.generations.map((g) => g.name)).toEqual(listGenerations(localSource(dataDir, db.id)).map((g) => g.name));
  });

  it("the live segment's last newline rotted: not cut as a torn tail; the next capture begins a new generation", async () => {
    const db = historyTarget(dataDir, 'rot/live-newline');
    await tenCommits(db);
    // A moment of the damaged generation, taken before the rot: whichever capture first finds it
    // (the fork's below, or one already under way) begins the new generation after this moment.
    const at = Date.now();
    pastMs(at);
    const index = liveIndex(db);
    const text = fs.readFileSync(index);
    fs.writeFileSync(index, Buffer.concat([text.subarray(0, -1), Buffer.from([0x0b])]));
    const gens = listGenerations(localSource(dataDir, db.id)).length;
    // A fork settles the database first: its capture loads the index under the write lock.
    const { out } = fork(db, at);
    expect(await out).toMatchObject({ ok: false, error: { code: 'HISTORY_CORRUPT' } });
    expect(
      fs
        .readFileSync(index)
        .subarray(0, text.length)
        .equals(Buffer.concat([text.subarray(0, -1), Buffer.from([0x0b])])),
    ).toBe(true);
    expect(listGenerations(localSource(dataDir, db.id))).toHaveLength(gens + 1);
  });

  it('a last line that lost only its newline (the last byte a crash kept out) is a commit, and the next line goes after it', async () => {
    const db = historyTarget(dataDir, 'rot/no-newline');
    const moments = await tenCommits(db);
    const index = liveIndex(db);
    const text = fs.readFileSync(index);
    fs.writeFileSync(index, text.subarray(0, -1));
    await write(db, "INSERT INTO t(v) VALUES ('after')");
    const { into, out } = fork(db, moments[9]!.at);
    expect(await out).toMatchObject({ ok: true });
    expect(dumpHash(into.path, { withoutAudit: true })).toBe(moments[9]!.hash);
    expect(readCommits(index)).toHaveLength(readCommits(index).length);
    expect(
      fs
        .readFileSync(index, 'utf8')
        .split('\n')
        .filter(Boolean)
        .every((l) => l.startsWith('{') && l.endsWith('}')),
    ).toBe(true);
  });

  it('damage that keeps the index its size, while a child has the database open: found when the segment closes, which begins a new generation', () => {
    // A commit's capture looks at the index's size alone while its state is cached.
    const file = path.join(dataDir, 'cached.sqlite');
    const opts = { source: localSource(dataDir, 'rot/cached'), checkpointBytes: 64 * 1024 };
    const db = new Database(file);
    try {
      db.pragma('journal_mode = WAL');
      db.pragma('wal_autocheckpoint = 0');
      db.exec('CREATE TABLE t(b BLOB)');
      capture(db, file, opts);
      const insert = db.prepare('INSERT INTO t VALUES (randomblob(2000))');
      for (let i = 0; i < 3; i++) {
        insert.run();
        capture(db, file, opts);
      }
      const index = listSegments(listGenerations(opts.source).at(-1)!).at(-1)!.indexPath;
      editLine(index, 2, (l) => l.replace(/"dbPages":(\d)/, (_, d: string) => `"dbPages":${(Number(d) + 1) % 10 || 1}`));
      const big = db.prepare('INSERT INTO t VALUES (randomblob(20000))');
      for (let i = 0; i < 8 && listGenerations(opts.source).length === 1; i++) {
        big.run();
        capture(db, file, opts);
      }
      expect(listGenerations(opts.source).map((g) => g.snapshot?.reason)).toEqual(['first', 'gap']);
    } finally {
      db.close();
      forgetCapture(file);
    }
  });
});
