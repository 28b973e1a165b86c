// The raw BullMQ baseline's no-op worker, as a process of its own (like `agentdb worker`).
import { Worker } from 'bullmq';

const [redisUrl, prefix, concurrency] = process.argv.slice(2) as [string, string, string];
const worker = new Worker('raw', async (job) => ({ ok: true, echo: job.data.i }), {
  connection: { url: redisUrl },
  prefix,
  concurrency: Number(concurrency),
});
await worker.waitUntilReady();
process.stdout.write('ready\n');
process.on('SIGTERM', () => void worker.close().then(() => process.exit(0)));
