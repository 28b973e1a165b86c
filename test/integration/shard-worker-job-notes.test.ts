import { Job, Queue } from 'bullmq';
import { afterEach, describe, expect, it } from 'vitest';
import { connectRedis } from '../../src/redis/connection.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { dataJsonOf, ShardWorker } from '../../src/shards/shard-worker.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';

let sb: Sandbox;
const closing: { close(): Promise<unknown> }[] = [];
afterEach(async () => {
  for (const c of closing.splice(0).reverse()) await c.close();
  await sb.cleanup();
});

describe("a shard worker's notes on the jobs it takes (issue 31)", () => {
  it('keeps the data as Redis held it and the marker it saw to on the job itself, and nothing on a job made elsewhere', async () => {
    sb = sandbox();
    const keys = keysFor(sb.config.prefix);
    const name = keys.queueName(0);
    const queue = new Queue(name, { connection: { url: sb.config.redisUrl }, prefix: keys.bullPrefix });
    const connection = connectRedis(sb.config.redisUrl, { blocking: true });
    const worker = new ShardWorker(name, null as never, { connection, prefix: keys.bullPrefix, autorun: false });
    closing.push(queue, { close: async () => connection.disconnect() }, worker);
    // Key order and spacing as a caller wrote them: the text is Redis's, not a serialisation of the parsed data.
    const data = { workspace: 'w', agent: 'a', arguments: { sql: 'SELECT 1', params: ['é'] } };
    const added = await queue.add('call', data);

    const job = await worker.getNextJob('token-1');
    expect(job?.id).toBe(added.id);
    const stored = await queue.client.then((c) => c.hget(`${keys.bullPrefix}:${name}:${added.id}`, 'data'));
    expect(dataJsonOf(job!)).toBe(stored);
    expect(worker.markerChecked(job!)).toBe(true);

    // A job read another way (BullMQ's own class) carries no notes.
    const read = await Job.fromId(queue, added.id!);
    expect(read?.data).toEqual(data);
    expect(dataJsonOf(read!)).toBeUndefined();
    expect(worker.markerChecked(read!)).toBe(false);
  });
});
