import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { databaseId, databasePath, isInside, parseDatabaseId, shardOf } from '../../src/contracts/database-id.ts';

describe('databaseId', () => {
  it('names the shared database by its workspace and an agent database by both', () => {
    expect(databaseId('acme')).toBe('acme');
    expect(databaseId('acme', 'outreach')).toBe('acme/outreach');
    expect(parseDatabaseId('acme/outreach')).toEqual({ workspace: 'acme', agent: 'outreach' });
    expect(parseDatabaseId('acme')).toEqual({ workspace: 'acme' });
  });

  it('refuses names outside the alphabet', () => {
    for (const bad of ['', '..', 'a/b', 'A', '_x', 'a.b', 'x'.repeat(64)]) {
      expect(() => databaseId(bad), bad).toThrow(/not allowed/);
      expect(() => databaseId('acme', bad), bad).toThrow(/not allowed/);
    }
    expect(() => parseDatabaseId('a/b/c')).toThrow(/not <workspace>/);
  });
});

describe('shardOf', () => {
  // These values are the contract between versions: files sit under their shard's folder and
  // leases are per shard, so a changed hash would orphan every database. Never edit them.
  it('is FNV-1a 32 of the id, pinned', () => {
    const raw = (id: string) => shardOf(id, 2 ** 32 - 1);
    // Published FNV-1a test vectors.
    expect(raw('')).toBe(0x811c9dc5);
    expect(raw('a')).toBe(0xe40c292c);
    expect(raw('foobar')).toBe(0xbf9cf968);
    expect(shardOf('acme', 16)).toBe(15);
    expect(shardOf('acme/outreach', 16)).toBe(15);
    expect(shardOf('acme/research', 16)).toBe(5);
    expect(shardOf('globex', 16)).toBe(14);
    expect(shardOf('acme/research', 4096)).toBe(2293);
  });

  it('hashes the UTF-8 bytes of any id, ASCII or not', () => {
    const fnv = (id: string) => Buffer.from(id, 'utf8').reduce((h, b) => Math.imul(h ^ b, 0x01000193) >>> 0, 0x811c9dc5);
    for (const id of ['acme/research', 'é', 'acme/ré', 'ws\u007f/a', '日本/agent', 'a😀b']) expect(shardOf(id, 2 ** 32 - 1)).toBe(fnv(id) % (2 ** 32 - 1));
  });

  it('stays within the shard count', () => {
    for (let i = 0; i < 1000; i++) {
      const s = shardOf(`ws${i}/agent${i}`, 7);
      expect(s).toBeGreaterThanOrEqual(0);
      expect(s).toBeLessThan(7);
    }
    expect(shardOf('anything', 1)).toBe(0);
    expect(() => shardOf('acme', 0)).toThrow(RangeError);
  });
});

describe('databasePath', () => {
  const root = path.resolve('/srv/agentdb');

  it('puts the shared database and agent databases under their shard and workspace', () => {
    expect(databasePath(root, 'acme', undefined, 3)).toBe(path.join(root, 'shards', '3', 'acme', '_workspace.sqlite'));
    expect(databasePath(root, 'acme', 'outreach', 3)).toBe(path.join(root, 'shards', '3', 'acme', 'outreach.sqlite'));
  });

  it('never builds a path out of a traversal', () => {
    expect(() => databasePath(root, '..', undefined, 0)).toThrow();
    expect(() => databasePath(root, 'acme', '../../etc/passwd', 0)).toThrow();
    expect(() => databasePath(root, 'acme', 'x', -1)).toThrow(RangeError);
    expect(() => databasePath(root, 'acme', 'x', 1.5)).toThrow(RangeError);
  });

  it('knows what is inside the data folder', () => {
    expect(isInside(root, path.join(root, 'shards', '1', 'a.sqlite'))).toBe(true);
    expect(isInside(root, root)).toBe(true);
    expect(isInside(root, path.join(root, '..', 'agentdb2', 'x'))).toBe(false);
    expect(isInside(root, '/etc/passwd')).toBe(false);
  });
});
