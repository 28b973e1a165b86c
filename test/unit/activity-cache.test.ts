import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ActivityCache } from '../../src/history/activity-cache.ts';

// The kept activity lists are bounded (review H29-4): least recently listed out first.
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-activity-cache-'));
afterAll(() => fs.rmSync(dataDir, { recursive: true, force: true }));

describe('ActivityCache', () => {
  it('keeps at most its databases, the least recently listed out first', async () => {
    const cache = new ActivityCache({ databases: 2, items: 1000, perWorkspace: 2 });
    const seen: object[] = [];
    const use = (id: string) => cache.with(dataDir, id, async (h) => seen.push(h));
    await use('a');
    await use('b');
    await use('a');
    await use('c');
    expect(cache.size).toBe(2);
    await use('a');
    await use('b');
    // a was kept (listed after b), b was not.
    expect(seen[4]).toBe(seen[0]);
    expect(seen[5]).not.toBe(seen[1]);
  });

  it("keeps a workspace to its share: one listing many databases evicts its own, never another's (review R29 M3)", async () => {
    const cache = new ActivityCache({ databases: 32, items: 100_000, perWorkspace: 3 });
    const seen = new Map<string, object[]>();
    const use = (id: string) => cache.with(dataDir, id, async (h) => seen.set(id, [...(seen.get(id) ?? []), h]));
    await use('acme/closer');
    for (let i = 0; i < 70; i++) await use(`evil/a${i}`);
    expect(cache.size).toBe(4);
    await use('acme/closer');
    // acme's history was kept through evil's seventy listings; evil kept only its last three.
    expect(seen.get('acme/closer')![1]).toBe(seen.get('acme/closer')![0]);
    await use('evil/a69');
    expect(seen.get('evil/a69')![1]).toBe(seen.get('evil/a69')![0]);
    await use('evil/a0');
    expect(cache.size).toBe(4);
  });

  it('past the bound of commits and rows, the workspace holding the most gives up its histories, not another (review R29b M1)', async () => {
    const cache = new ActivityCache({ databases: 32, items: 1000, perWorkspace: 8 });
    const seen = new Map<string, object[]>();
    // A listed history holding `items` commits, as a page that read them leaves it.
    const use = (id: string, items: number) =>
      cache.with(dataDir, id, async (h) => {
        seen.set(id, [...(seen.get(id) ?? []), h]);
        if (h.commits.length < items) h.commits.push(...Array.from({ length: items - h.commits.length }, () => h.commits[0]!));
      });
    await use('acme/small', 100);
    await use('evil/small', 100);
    await use('zed/b1', 600);
    await use('zed/b2', 600);
    // zed's first big history went; acme's and evil's stayed.
    await use('acme/small', 100);
    await use('evil/small', 100);
    expect(seen.get('acme/small')![1]).toBe(seen.get('acme/small')![0]);
    expect(seen.get('evil/small')![1]).toBe(seen.get('evil/small')![0]);
    expect(cache.size).toBe(3);
    // Listed again and bigger, zed's histories are the heaviest: its other goes, then (still past
    // the bound) the one just listed, rather than another workspace's.
    await use('zed/b1', 900);
    expect(cache.size).toBe(2);
    await use('acme/small', 100);
    expect(seen.get('acme/small')![2]).toBe(seen.get('acme/small')![0]);
  });

  it('runs the pages of one database one after the other', async () => {
    const cache = new ActivityCache();
    const order: string[] = [];
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const first = cache.with(dataDir, 'x', async () => {
      order.push('first in');
      await held;
      order.push('first out');
    });
    const second = cache.with(dataDir, 'x', async () => order.push('second'));
    await Promise.resolve();
    release();
    await Promise.all([first, second]);
    expect(order).toEqual(['first in', 'first out', 'second']);
  });
});
