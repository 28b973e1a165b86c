import { fileURLToPath } from 'node:url';
import { Queue, QueueEvents, Worker } from 'bullmq';
import { startProcess, stopProcess } from './process.ts';

/**
 * The baseline: raw BullMQ on the same Redis — a no-op worker, and a caller that adds a job
 * and awaits its result through QueueEvents, as agentdb's client does through its stream.
 */
export async function rawBullmq(
  redisUrl: string,
  prefix: string,
  concurrency: number,
  separateProcess: boolean,
  /** A worker script to run instead of the no-op one, with its extra arguments. */
  script: { file: string; args: string[] } = { file: './raw-worker.ts', args: [] },
) {
  const connection = { url: redisUrl };
  const name = 'raw';
  const queue = new Queue(name, { connection, prefix });
  const events = new QueueEvents(name, { connection, prefix });
  // Every waitUntilFinished() listens on the queue while it waits: with 64 in flight Node would
  // print a listener-leak warning to stderr in the middle of the measurement, on the baseline's time.
  queue.setMaxListeners(0);
  const worker = separateProcess
    ? (
        await startProcess(
          process.execPath,
          ['--import', 'tsx', fileURLToPath(new URL(script.file, import.meta.url)), redisUrl, prefix, String(concurrency), ...script.args],
          {},
          /^ready$/m,
        )
      ).child
    : new Worker(name, async (job) => ({ ok: true, echo: job.data.i }), { connection, prefix, concurrency });
  await Promise.all([queue.waitUntilReady(), events.waitUntilReady(), 'waitUntilReady' in worker ? worker.waitUntilReady() : undefined]);
  let n = 0;
  return {
    /** The worker's process id when it runs apart (`separateProcess`), for its CPU. */
    pid: 'kill' in worker ? worker.pid : undefined,
    async call(i: number) {
      const job = await queue.add('q', { i }, { jobId: `raw-${n++}`, removeOnComplete: { age: 3600 } });
      return job.waitUntilFinished(events);
    },
    async close() {
      if ('kill' in worker) await stopProcess(worker);
      else await worker.close();
      await events.close();
      await queue.obliterate({ force: true });
      await queue.close();
    },
  };
}
