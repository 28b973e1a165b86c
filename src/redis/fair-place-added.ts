import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { type ScriptedRedis, withScripts } from './lua-scripts.ts';

/** Each queue's connection with the scripts defined on it, made once (defining walks every script). */
const scripted = new WeakMap<Queue, Promise<ScriptedRedis>>();

/**
 * Places a job that BullMQ's own `queue.add` just added (a caller's own call id, claimed between
 * the admission and the add; a traced add, carrying its span) as the admitted add's script places
 * its jobs (`fair-place.lua`): once the shard's queue is long, in the prioritized set, in its
 * workspace's turn. Those calls stayed on the wait list, first come first taken, so a burst of them
 * still held another workspace's first call behind all of it (session 32, T10's leftover). Sent on
 * the queue's own connection, after the add. Only ordering rides on it: a failure leaves the job
 * where the add put it, on the wait list, and is not the call's (never rejects).
 * @param workspaceTag the name the workspace's turns are kept under: its ledger key, as the admitted add names it.
 * @returns whether the job moved.
 */
export async function placeAdded(queue: Queue, jobId: string, workspaceTag: string): Promise<boolean> {
  try {
    let client = scripted.get(queue);
    if (!client) scripted.set(queue, (client = queue.client.then((c) => withScripts(c as unknown as Redis))));
    return (await (await client).agentdbFairPlaceAdded(queue.keys.wait!, jobId, workspaceTag)) === 1;
  } catch {
    return false;
  }
}
