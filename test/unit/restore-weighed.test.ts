import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RestorePlan } from '../../src/history/restore-plan.ts';
import { weighedPlan, weighing } from '../../src/history/restore-weighed.ts';

// The plan a restore's quota weighed is the one it runs, or it is refused (session 29, L3).
let dir: string;
const planOf = (pages: number, snapshotPath = path.join(dir, 'snapshot')): RestorePlan => ({
  generation: 'g0000000001',
  snapshot: { id: 'g0000000001', at: 0, pages: 1, pageSize: 4096 } as RestorePlan['snapshot'],
  snapshotPath,
  segments: [{ dataPath: path.join(dir, 'segment'), name: 's1', frames: 3 }],
  frames: 3,
  commits: 1,
  restoredTo: 1,
  dbPages: pages,
  state: 'g0000000001.s1.0',
});

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-weighed-unit-'));
  for (const f of ['snapshot', 'segment']) fs.writeFileSync(path.join(dir, f), '');
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const never = (): RestorePlan => {
  throw new Error('planned again');
};

describe('weighing', () => {
  it('weighs what a restore adds: twice the moment into a new database; in place, less the file it replaces', () => {
    expect(weighing(planOf(100), undefined, false)).toMatchObject({ adds: 200 * 4096, bytesBefore: 0 });
    expect(weighing(planOf(100), 150 * 4096, true)).toMatchObject({ adds: 50 * 4096, bytesBefore: 150 * 4096, partial: true });
  });
});

describe('weighedPlan', () => {
  it('answers the plan weighed without planning again, for a file as large as weighed or larger', () => {
    const plan = planOf(100);
    expect(weighedPlan(weighing(plan, 50 * 4096, false), 80 * 4096, 'restore of a/b in place', never)).toBe(plan);
    expect(weighedPlan(weighing(plan, undefined, false), undefined, 'restore of a/b into a/c', never)).toBe(plan);
  });

  it('refuses a restore in place whose file shrank since it was weighed, unless it still frees bytes', () => {
    expect(() => weighedPlan(weighing(planOf(100), 150 * 4096, false), 10 * 4096, 'restore of a/b in place', never)).toThrow(
      expect.objectContaining({ code: 'QUOTA_EXCEEDED', detail: expect.stringContaining('the database shrank from 614400 to 40960 bytes') }),
    );
    // Back to 10 pages from 150, then 30: it frees bytes either way, which no quota refuses.
    expect(weighedPlan(weighing(planOf(10), 150 * 4096, false), 30 * 4096, 'restore of a/b in place', never).dbPages).toBe(10);
  });

  it('plans a partial plan (a full disk) again, and refuses it once it would add more than weighed', () => {
    const grown = planOf(200);
    expect(() => weighedPlan(weighing(planOf(100), undefined, true), undefined, 'restore of a/b into a/c', () => grown)).toThrow(
      expect.objectContaining({ code: 'QUOTA_EXCEEDED', detail: expect.stringContaining('planned on a full disk') }),
    );
    const same = planOf(100);
    expect(weighedPlan(weighing(planOf(100), undefined, true), undefined, 'restore of a/b into a/c', () => same)).toBe(same);
  });

  it('refuses a plan whose history was pruned since it was weighed', () => {
    expect(() => weighedPlan(weighing(planOf(1, path.join(dir, 'gone')), 0, false), 0, 'restore of a/b in place', never)).toThrow(
      expect.objectContaining({ code: 'HISTORY_OUT_OF_RANGE' }),
    );
  });
});
