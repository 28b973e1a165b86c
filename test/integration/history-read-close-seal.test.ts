import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { databasePath } from '../../src/contracts/database-id.ts';
import { HistoryCapture } from '../../src/history/handle-capture.ts';
import { historyDir } from '../../src/history/history-files.ts';
import { HandleCache } from '../../src/sqlite/handle-cache.ts';

// A read-only open and close (a handle cache miss with many databases) leaves the seal as it
// was: writing it again was most of what a miss cost (issue 31). History must still go on.
describe('a read-only close of a sealed database', () => {
  let dataDir: string;
  beforeEach(() => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-read-seal-'));
  });
  afterEach(() => fs.rmSync(dataDir, { recursive: true, force: true }));

  it('writes no seal, and the next write continues the same generation', () => {
    const target = { id: 'w/a', path: databasePath(dataDir, 'w', 'a', 0), shard: 0 };
    const history = new HistoryCapture(dataDir, { checkpointBytes: 4 << 20, retentionDays: 30 });
    const cache = new HandleCache({ size: 4, ...history.hooks() });
    const generations = path.join(historyDir(dataDir, target.id), 'generations');
    const write = (sql: string) => {
      const db = cache.open(target, 'write');
      db.exec(sql);
      history.run(db, target);
    };
    write('CREATE TABLE t (x); INSERT INTO t VALUES (1)');
    cache.closeAll();
    const gens = fs.readdirSync(generations).sort();
    const sealFile = path.join(generations, gens.at(-1)!, 'sealed.json');
    const sealed = fs.statSync(sealFile, { bigint: true });

    for (let i = 0; i < 3; i++) {
      expect(cache.open(target, 'read').prepare('SELECT count(*) AS n FROM t').get()).toEqual({ n: 1 });
      cache.closeAll();
    }
    const after = fs.statSync(sealFile, { bigint: true });
    // The seal is written to a temporary file and renamed: a rewrite shows as a new inode.
    expect([after.ino, after.mtimeNs]).toEqual([sealed.ino, sealed.mtimeNs]);

    write('INSERT INTO t VALUES (2)');
    cache.closeAll();
    expect(fs.readdirSync(generations).sort()).toEqual(gens);
  });
});
