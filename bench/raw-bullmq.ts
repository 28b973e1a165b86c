import { Queue, QueueEvents, Worker } from 'bullmq';

/**
 * The baseline: raw BullMQ on the same Redis — a no-op worker, and a caller that adds a job
 * and awaits its result through QueueEvents, as agentdb's client does through its stream.
 */
export async function rawBullmq(redisUrl: string, prefix: string, concurrency: number) {
  const connection = { url: redisUrl };
  const name = 'raw';
  const queue = new Queue(name, { connection, prefix });
  const events = new QueueEvents(name, { connection, prefix });
  const worker = new Worker(name, async (job) => ({ ok: true, echo: job.data.i }), { connection, prefix, concurrency });
  await Promise.all([queue.waitUntilReady(), events.waitUntilReady(), worker.waitUntilReady()]);
  let n = 0;
  return {
    async call(i: number) {
      const job = await queue.add('q', { i }, { jobId: `raw-${n++}`, removeOnComplete: { age: 3600 } });
      return job.waitUntilFinished(events);
    },
    async close() {
      await worker.close();
      await events.close();
      await queue.obliterate({ force: true });
      await queue.close();
    },
  };
}
