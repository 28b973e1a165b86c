import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runAsOf } from '../../src/calls/as-of-run.ts';
import type { ExecutorPool } from '../../src/executor/executor-pool.ts';
import { AS_OF_ROOT, momentsBytes } from '../../src/history/as-of-cache.ts';
import { WorkspaceQuota } from '../../src/history/workspace-quota.ts';
import { pastMs } from '../helpers/history.ts';
import { historyCalls, historyTarget, withHistoryPool } from '../helpers/history-pool.ts';

// Review 19 (H29): a kept moment's file dropped for room (the quota's `dropMoments`, run in the
// worker) stayed open in the executor child that had read it, until that child's next read of the
// past a minute later or more: its disk stayed in use, counted against no workspace, while the
// quota, seeing the room free, let the workspace restore more moments. The child closes a
// connection to a dropped moment soon, with no further read needed.
let dataDir = '';
let pool: ExecutorPool;
withHistoryPool('agentdb-as-of-dropped-', { handleCacheSize: 2, checkpointBytes: 16 * 1024 }, (d, p) => {
  dataDir = d;
  pool = p;
});
const calls = historyCalls(() => pool);

/** Files under the as-of folder that the pool's children hold open although they were deleted. */
function heldDropped(): string[] {
  const root = path.join(dataDir, AS_OF_ROOT);
  return pool.pids.flatMap((pid) => {
    const dir = `/proc/${pid}/fd`;
    return fs.readdirSync(dir).flatMap((fd) => {
      let target: string;
      try {
        target = fs.readlinkSync(path.join(dir, fd));
      } catch {
        return [];
      }
      return target.startsWith(root) && target.endsWith('(deleted)') ? [target] : [];
    });
  });
}

describe('as_of: a moment dropped for room gives its disk back', () => {
  it.runIf(process.platform === 'linux')(
    'closes the connection to a dropped moment without waiting for another read of the past',
    async () => {
      const db = historyTarget(dataDir, 'hog/a');
      await calls.write(db, 'CREATE TABLE t (id INTEGER PRIMARY KEY, a TEXT, b INTEGER)');
      await calls.write(
        db,
        'WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 300) INSERT INTO t (a, b) SELECT hex(randomblob(300)), i FROM n',
      );
      const at = Date.now();
      // The DELETE's commit later than the moment read: in the same millisecond it is in it (a
      // quiet proof run read 0 rows).
      pastMs(at);
      await calls.write(db, 'DELETE FROM t');
      const request = { op: 'query' as const, db, sql: 'SELECT count(*) FROM t', params: [], maxRows: 1, asOf: { target: { at } } };
      const roomy = new WorkspaceQuota({ dataDir, overrides: { maxBytes: 1e12 }, planOf: async () => 'pro' });
      expect(await runAsOf(request, pool, roomy, 'hog')).toMatchObject({ ok: true, asOf: { materialised: true }, result: { rows: [[300]] } });
      const held = momentsBytes(dataDir, 'hog');
      expect(held).toBeGreaterThan(300 * 600);

      // Another step of the workspace needs the room: the quota drops the kept moments.
      const usage = await roomy.usage('hog');
      const tight = new WorkspaceQuota({ dataDir, overrides: { maxBytes: usage.bytes - held + 1000 }, planOf: async () => 'pro' });
      await tight.check('hog', { databases: 0, bytes: 500 }, 'a test step');
      expect(momentsBytes(dataDir, 'hog')).toBe(0);

      // No read of the past follows; the dropped file's disk comes back all the same.
      const deadline = Date.now() + 15_000;
      while (heldDropped().length > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
      expect(heldDropped()).toEqual([]);
      // And the moment still reads, restored again.
      expect(await runAsOf(request, pool, roomy, 'hog')).toMatchObject({ ok: true, asOf: { materialised: true }, result: { rows: [[300]] } });
    },
    60_000,
  );
});
