import type { Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { quietLateInitErrors } from './late-init-errors.ts';

/**
 * Closes a BullMQ worker (`force` as `Worker.close`), in a way that also finishes when its
 * blocking connection lost Redis and is waiting to reconnect.
 *
 * `Worker.close` disconnects the worker's blocking connection and waits for it to end. A
 * connection between reconnect attempts has no socket, so ioredis's `disconnect()` only cancels
 * the next attempt and the connection never ends: the close waited for good, even after Redis
 * came back (taskforcesh/bullmq#4656, #2430). A tester's `agentdb start`, sent SIGTERM during an
 * outage, exited 1 after its drain grace with Redis back 80 ms after the signal, its leases left
 * to lapse. Here such a connection is ended the way ioredis ends one that never connected: its
 * command waiting for a job fails ("Connection is closed"), which a closing worker ignores, and
 * the close goes on to wait, on the worker's other connection, for the jobs in hand to be
 * completed in Redis once it answers again. A worker that was never ready is left as it is.
 */
export async function closeWorker(worker: Worker, force = false): Promise<void> {
  quietLateInitErrors(worker);
  // First: the worker is closing (it takes no new job) before its connection's command fails.
  const closing = worker.close(force);
  const blocking = (worker as unknown as { blockingConnection?: { client: Promise<Redis> } }).blockingConnection?.client;
  if (blocking) {
    void blocking.then(endIfSocketless, () => undefined);
  }
  await closing;
}

function endIfSocketless(client: Redis): void {
  if (client.status !== 'reconnecting') return;
  // ioredis's `disconnect()` ends a connection in status 'wait' at once (status 'end', its
  // waiting commands failed, 'end' emitted); between reconnect attempts it is in the same case.
  (client as unknown as { status: string }).status = 'wait';
  client.disconnect();
}
