import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { databasePath } from '../../src/contracts/database-id.ts';
import { HandleCache } from '../../src/sqlite/handle-cache.ts';
import { PLAN_LIMITS } from '../../src/policy/plan-limits.ts';
import { describe as describeDb, write } from '../../src/sqlite/sqlite-ops.ts';

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-describe-'));
const handles = new HandleCache({ size: 2 });
afterAll(() => {
  handles.closeAll();
  fs.rmSync(dataDir, { recursive: true, force: true });
});

describe('DATA_DESCRIBE_SCHEMA indexes', () => {
  it("shows SQLite's automatic indexes as the UNIQUE or PRIMARY KEY constraint they serve, never by their sqlite_autoindex name", () => {
    const t = { id: 'ws/a', path: databasePath(dataDir, 'ws', 'a', 0), shard: 0, limits: PLAN_LIMITS.pro };
    const db = handles.open(t, 'write');
    let n = 0;
    const run = (sql: string) => write(db, sql, [], `c${++n}`, t.limits);
    run('CREATE TABLE leads (id INTEGER PRIMARY KEY, email TEXT UNIQUE, org TEXT, handle TEXT, UNIQUE (org, handle))');
    run('CREATE TABLE pairs (a TEXT, b TEXT, PRIMARY KEY (a, b))');
    run('CREATE TABLE tags (name TEXT PRIMARY KEY) WITHOUT ROWID');
    run('CREATE UNIQUE INDEX leads_handle ON leads (handle)');

    const { tables } = describeDb(db);
    expect(JSON.stringify(tables)).not.toContain('sqlite_autoindex');
    const indexes = Object.fromEntries(tables.map((x) => [x.name, 'indexes' in x ? x.indexes : undefined]));
    expect(indexes.leads).toEqual(
      expect.arrayContaining([
        { name: 'leads_handle', unique: true, columns: ['handle'] },
        { unique: true, columns: ['email'], constraint: 'unique' },
        { unique: true, columns: ['org', 'handle'], constraint: 'unique' },
      ]),
    );
    expect(indexes.leads).toHaveLength(3); // INTEGER PRIMARY KEY is the rowid: no index
    expect(indexes.pairs).toEqual([{ unique: true, columns: ['a', 'b'], constraint: 'primary key' }]);
    expect(indexes.tags).toEqual([{ unique: true, columns: ['name'], constraint: 'primary key' }]);
  });
});
