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
