/**
 * A worker process that takes one job of a queue and holds it, its lock renewed, until it is
 * killed: what a shard worker SIGKILLed in the middle of an op leaves on Redis. Writes `taken`
 * on stdout once the job is active. Run as
 * `node op-taker-child.mjs '{"redisUrl", "queue", "prefix"}'`.
 */
import { Worker } from 'bullmq';
import { Redis } from 'ioredis';

const { redisUrl, queue, prefix } = JSON.parse(process.argv[2]);
const connection = new Redis(redisUrl, { maxRetriesPerRequest: null });
// No stalled check of its own: its mark on the queue would hold off the test's checker for 30 s.
const worker = new Worker(queue, () => new Promise(() => undefined), { connection, prefix, lockDuration: 1_000, skipStalledCheck: true });
worker.on('active', () => process.stdout.write('taken\n'));
