import { afterAll, beforeAll, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';

let sb: Sandbox;
let clients: AgentDbClient[];
beforeAll(async () => {
  sb = sandbox({ SHARD_COUNT: '2' });
  await sb.pool();
  clients = [sb.client(), sb.client()];
});
afterAll(async () => {
  await sb.cleanup();
});

// Each client's event reader skips, by the head of their JSON, the completions nobody in it waits
// on (issue 31): with two clients on one prefix and the same call ids under other workspaces and
// agents, each caller must still get its own call's answer, and every call one.
it('two clients on one prefix, the same call ids in other workspaces and agents: each caller gets its own answer', async () => {
  const wrong: string[] = [];
  let n = 0;
  await Promise.all(
    clients.flatMap((_, k) =>
      [0, 1].map(async (g) => {
        for (let i = 0; i < 100; i++) {
          const who = { workspace: k === 0 ? 'ws-a' : 'ws_b', agent: g === 0 ? 'a-1' : 'a_1', settings: { database: 'agent' as const } };
          const mark = `${k}/${g}/${i}`;
          const a = await clients[k]!.call(
            { ...who, callId: `Same_id-${i}`, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT ?', params: [mark] } },
            { timeoutMs: 600_000 },
          );
          n++;
          const got = (a as unknown as { result?: { rows: string[][] } }).result?.rows[0]?.[0];
          if (got !== mark) wrong.push(`${mark} got ${got} ${JSON.stringify(a).slice(0, 200)}`);
        }
      }),
    ),
  );
  expect(wrong).toEqual([]);
  expect(n).toBe(400);
}, 300_000);
