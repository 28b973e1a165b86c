import { beforeAll, describe, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import type { HistoryClient } from '../../src/shards/history-client.ts';
import { withHistorySandbox } from '../helpers/history-sandbox.ts';

// Session 38, F19 (F17's run 3, F18's item 4): a write's answer read late — sent again under its
// call id, or looked up, by a caller whose first answer was lost (Redis away, the caller gone) —
// after a restore in place took the write back answered a plain ok, naming a row id the restore
// removed and a later write reused. It now says which restore took it back and how to undo that.
// Through the real queue, workers, executor and history.

let client: AgentDbClient;
let history: HistoryClient;

const db = 'acme/late';
const who = { workspace: 'acme', agent: 'late' };
const by = { who: 'operator:test', via: 'operator' as const };
const write = (sql: string, callId?: string) =>
  client.call({ ...who, settings: { database: 'agent' }, tool: 'DATA_WRITE_SQL', arguments: { sql }, ...(callId ? { callId } : {}) });
const rows = async () =>
  (
    (await client.call({ ...who, settings: { database: 'agent' }, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT v FROM t ORDER BY v' } })) as never as {
      result: { rows: unknown[][] };
    }
  ).result.rows;

withHistorySandbox({}, (box) => ({ client, history } = box));

let moment: number;

beforeAll(async () => {
  expect(await write('CREATE TABLE t (v INTEGER)')).toMatchObject({ ok: true });
  expect(await write('INSERT INTO t VALUES (1)')).toMatchObject({ ok: true });
  // Every write from here began after this moment: a restore to it takes them back.
  moment = Date.now();
  expect(await write('INSERT INTO t VALUES (2)', 'late-two')).toMatchObject({ ok: true, result: { lastInsertRowid: 2 } });
}, 120_000);

describe("a write's answer read after a restore in place took the write back", () => {
  let undoId: string;

  it('its first answer was a plain ok; sent again or looked up after the restore, it says which restore took it back', async () => {
    const restored = await history.restore(db, { at: new Date(moment).toISOString(), by }, 'operator');
    undoId = restored.undoId!;
    expect(undoId).toMatch(/^u/);
    expect(await rows()).toEqual([[1]]);
    // A later write takes the row id the restore freed.
    expect(await write('INSERT INTO t VALUES (3)')).toMatchObject({ ok: true, result: { lastInsertRowid: 2 } });

    const again = await write('INSERT INTO t VALUES (2)', 'late-two');
    expect(again).toMatchObject({ ok: true, result: { lastInsertRowid: 2 }, takenBack: { undoId, restoredTo: restored.restoredTo } });
    const note = (again as { takenBack: { note: string } }).takenBack.note;
    expect(note).toContain(`restore ${undoId} of ${db}`);
    expect(note).toContain(`Undoing that restore (undo id ${undoId}) brings it back`);
    expect(await client.result('late-two', { ...who, wait: true })).toMatchObject({ ok: true, takenBack: { undoId } });
    // Nothing ran again: the one row of 2 is still gone.
    expect(await rows()).toEqual([[1], [3]]);
  });

  it('a write made after the restore answers no note when read late', async () => {
    expect(await write('INSERT INTO t VALUES (4)', 'after-restore')).toMatchObject({ ok: true });
    const again = await write('INSERT INTO t VALUES (4)', 'after-restore');
    expect(again).toMatchObject({ ok: true });
    expect(again).not.toHaveProperty('takenBack');
  });

  it('once the restore is undone, the write is back and its late answer is a plain ok again', async () => {
    await history.restore(db, { undo: undoId, by }, 'operator');
    expect(await rows()).toEqual([[1], [2]]);
    const again = await write('INSERT INTO t VALUES (2)', 'late-two');
    expect(again).toMatchObject({ ok: true, result: { lastInsertRowid: 2 } });
    expect(again).not.toHaveProperty('takenBack');
    // The write made between the restore and its undo is the one taken back now, by the undo.
    expect(await write('INSERT INTO t VALUES (4)', 'after-restore')).toMatchObject({ ok: true, takenBack: { undoId: expect.stringMatching(/^u/) } });
  });
});
