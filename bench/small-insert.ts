// The small insert of issue 31 part 2 ("a small insert with history capture ≥ 0.8× raw
// BullMQ's throughput"): each call adds one new row (an INTEGER PRIMARY KEY the database
// assigns, a short text) to the bench agent's database, with history capture on, as by default.
// Kept beside the PK read (pk-read.ts) so that every bench inserts the very same thing.
import { type CallingClient, must } from './pk-read.ts';

const WHO = { workspace: 'bench', agent: 'reader', settings: { database: 'agent' as const } };

/** Makes the table `log` through `client` and answers the insert of call `i`: one new row. */
export async function smallInsert(client: CallingClient): Promise<(i: number) => Promise<void>> {
  await must(client.call({ ...WHO, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE log (id INTEGER PRIMARY KEY, v TEXT)' } }));
  return (i) => must(client.call({ ...WHO, tool: 'DATA_WRITE_SQL', arguments: { sql: 'INSERT INTO log (v) VALUES (?)', params: [`row ${i}`] } }));
}
