// A segment's index (one line per commit: its time, where it ends, its checksums) is what every
// restore is planned from. A byte that rots in it must be found and named, never read as
// another time or frame count (a restore then returns a state the database never had), and
// capture must never cut what follows the damage as if it were a crash's torn tail.
import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { listGenerations, listSegments, localSource, readCommits } from '../../src/history/layout.ts';
import { historyView } from '../../src/history/history-view.ts';
import type { ExecutorPool } from '../../src/store/executor-pool.ts';
import type { DbTarget } from '../../src/store/executor-protocol.ts';
import { dumpHash, integrity, pastMs } from '../helpers/history.ts';
import { historyCalls, historyTarget, withHistoryPool } from '../helpers/history-pool.ts';

let dataDir: string;
let pool: ExecutorPool;
withHistoryPool('agentdb-index-damage-', { handleCacheSize: 4, checkpointBytes: 1024 * 1024 }, (d, p) => {
  dataDir = d;
  pool = p;
});
const { by, ok, write, restore, nextKey } = historyCalls(() => pool);

/** Ten one-row commits, with the moment and the dump after each. */
async function tenCommits(db: DbTarget): Promise<{ at: number; hash: string }[]> {
  await write(db, 'CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)');
  const moments: { at: number; hash: string }[] = [];
  for (let i = 0; i < 10; i++) {
    await write(db, 'INSERT INTO t(v) VALUES (?)', [`row ${i}`]);
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
});
