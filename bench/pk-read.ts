// The PK read every speed bench of issue 31 measures: one agent database with a table of 1,000
// rows, read one row by primary key per call. Kept in one place so that each bench (and each
// side of an A/B) reads the very same thing.

/** What the bench needs of a client: its `call`, whatever build of the library it comes from. */
export interface CallingClient {
  call(request: {
    workspace: string;
    agent: string;
    settings: { database: 'agent' };
    tool: string;
    arguments: { sql: string; params?: unknown[] };
    callId?: string;
  }): Promise<{ ok: boolean }>;
}

const WHO = { workspace: 'bench', agent: 'reader', settings: { database: 'agent' as const } };

/** Throws on a call that did not answer ok: a bench must not time refusals. */
export async function must(p: Promise<{ ok: boolean }>): Promise<void> {
  const env = await p;
  if (!env.ok) throw new Error(`bench call failed: ${JSON.stringify(env)}`);
}

/**
 * Makes the table `kv` (ids 0–999) in the bench agent's database through `client`, and answers
 * the read of call `i`: the row `i % 1000`, by primary key.
 */
export async function pkReadTable(client: CallingClient): Promise<(i: number) => Promise<void>> {
  await must(client.call({ ...WHO, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE kv (id INTEGER PRIMARY KEY, v TEXT)' } }));
  await must(
    client.call({
      ...WHO,
      tool: 'DATA_WRITE_SQL',
      arguments: {
        sql: "INSERT INTO kv SELECT value, 'value-' || value FROM json_each(?)",
        params: [JSON.stringify(Array.from({ length: 1000 }, (_, i) => i))],
      },
    }),
  );
  return pkRead(client);
}

/** The read of call `i` through `client`, of the table {@link pkReadTable} made (by any client). */
export function pkRead(client: CallingClient): (i: number) => Promise<void> {
  return (i) => must(client.call({ ...WHO, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT v FROM kv WHERE id = ?', params: [i % 1000] } }));
}
