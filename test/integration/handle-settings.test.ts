import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { databasePath } from '../../src/contracts/database-id.ts';
import { HandleCache, type HandleTarget } from '../../src/sqlite/handle-cache.ts';

// A handle's settings are set in one exec on each open (issue 31): each must still hold on the
// handle a read or a write gets, and a file that is not SQLite must still be refused untouched.
describe('the settings of a handle the cache opens', () => {
  let dataDir: string;
  const target = (name: string): HandleTarget => ({ id: `w/${name}`, path: databasePath(dataDir, 'w', name, 0), shard: 0 });
  const settings = (db: ReturnType<HandleCache['open']>) =>
    Object.fromEntries(
      ['trusted_schema', 'temp_store', 'journal_mode', 'synchronous', 'wal_autocheckpoint', 'cache_size'].map((p) => [p, db.pragma(p, { simple: true })]),
    );

  beforeEach(() => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-settings-'));
  });
  afterEach(() => {
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('hardens, switches to WAL and sets synchronous, the checkpoint and the page cache on every open', () => {
    const cache = new HandleCache({ size: 1, pageCacheKiB: 2048, walAutocheckpoint: 0 });
    try {
      const expected = { trusted_schema: 0, temp_store: 2, journal_mode: 'wal', synchronous: 1, wal_autocheckpoint: 0, cache_size: -2048 };
      cache.open(target('a'), 'write').exec('CREATE TABLE t (x)');
      expect(settings(cache.open(target('a'), 'write'))).toEqual(expected);
      cache.open(target('b'), 'write').exec('CREATE TABLE t (x)');
      // 'a' was closed for 'b' (one handle): this is a new handle on an existing file.
      expect(settings(cache.open(target('a'), 'query'))).toEqual(expected);
    } finally {
      cache.closeAll();
    }
    const defaults = new HandleCache({ size: 1 });
    try {
      expect(settings(defaults.open(target('a'), 'query'))).toMatchObject({ synchronous: 1, wal_autocheckpoint: 1000, cache_size: -1024 });
    } finally {
      defaults.closeAll();
    }
  });

  it('refuses a file that is not SQLite as corrupt, and leaves it as it was', () => {
    const t = target('junk');
    fs.mkdirSync(path.dirname(t.path), { recursive: true });
    const junk = Buffer.alloc(8192, 7);
    fs.writeFileSync(t.path, junk);
    const cache = new HandleCache({ size: 2, walAutocheckpoint: 0 });
    try {
      expect(() => cache.open(t, 'query')).toThrow(expect.objectContaining({ code: 'DATABASE_CORRUPT' }));
    } finally {
      cache.closeAll();
    }
    expect(fs.readFileSync(t.path).equals(junk)).toBe(true);
    expect(fs.existsSync(`${t.path}-wal`)).toBe(false);
  });
});
