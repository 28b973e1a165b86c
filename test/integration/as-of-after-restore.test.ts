import { describe, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import type { HistoryClient } from '../../src/shards/history-client.ts';
import { withHistorySandbox } from '../helpers/history-sandbox.ts';

// Review R29b L2: a child kept a call id's planned moment for 60 s, and a restore (or its undo)
// did not drop it, so right after a restore an id asked a moment before still read the moment of
// the line the restore left, while the same question on another id answered it no longer exists.
// One executor child, so that every read meets the plan the first one kept.
const who = { workspace: 'acme', agent: 'scout', settings: { database: 'agent' as const } };
const by = { who: 'operator:test', via: 'operator' as const };
let client: AgentDbClient;
let history: HistoryClient;

withHistorySandbox({ env: { HISTORY_CAPTURE: 'on', EXECUTOR_POOL_SIZE: '1', EXECUTOR_OVERFLOW: '0' } }, (box) => ({ client, history } = box));

describe('as_of by call id after a restore', () => {
  it('answers from the line the database is on now, not a plan kept from before the restore', async () => {
    const write = async (sql: string, callId: string) =>
      expect((await client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql }, callId })).ok).toBe(true);
    await write('CREATE TABLE t (v)', 'mk');
    const beforeRows = new Date().toISOString();
    for (let i = 0; i < 4; i++) await write(`INSERT INTO t VALUES (${i})`, `w${i}`);
    const asOf = (id: string) => client.call({ ...who, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT count(*) FROM t', as_of: id } });
    expect(await asOf('w3')).toMatchObject({ ok: true, result: { rows: [[3]] } });
    expect(await asOf('w3')).toMatchObject({ ok: true, result: { rows: [[3]] } });

    // Back to before the rows: w0..w3's writes, and their records, are gone from the live line.
    const restored = await history.restore('acme/scout', { at: beforeRows, by }, 'operator');
    for (const id of ['w3', 'w2']) expect(await asOf(id)).toMatchObject({ ok: false, error: { code: 'AS_OF_CALL_UNKNOWN' } });

    // Undone: the records are back, and so are their moments.
    await history.restore('acme/scout', { undo: restored.undoId!, by }, 'operator');
    expect(await asOf('w3')).toMatchObject({ ok: true, result: { rows: [[3]] } });
    expect(await asOf('w2')).toMatchObject({ ok: true, result: { rows: [[2]] } });
  });
});
