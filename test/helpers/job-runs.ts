import type { Queue } from 'bullmq';
import { expect } from 'vitest';

/**
 * Waits for a job's next run (active, with a `processedOn` other than `taken`) and answers its
 * `processedOn`: the run a test's next kill is meant for.
 */
export async function nextRun(queue: Queue, jobId: string, taken: number | undefined): Promise<number> {
  let seen: number | undefined;
  await expect
    .poll(
      async () => {
        const job = await queue.getJob(jobId);
        const state = job ? await job.getState() : undefined;
        seen = state === 'active' && job?.processedOn !== undefined && job.processedOn !== taken ? job.processedOn : undefined;
        return seen;
      },
      { interval: 5, timeout: 20_000 },
    )
    .toBeDefined();
  return seen!;
}
