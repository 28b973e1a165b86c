import type { EventEmitter } from 'node:events';

/**
 * Keeps a BullMQ queue, worker or event reader that is being closed from ending the process
 * through a late failure of its own start. Each of its connections asks Redis its version as it
 * opens; a close while that question is out takes every listener away without waiting for it, and
 * when the question fails afterwards ("Connection is closed." once the connection drops) BullMQ 5
 * emits 'error' to nobody inside a promise's handler: an unhandled rejection, which ends a Node
 * process. Seen for a worker let go moments after it was made (health-ready.test.ts, one run in
 * ten), and for a client closed after a call answered UNAVAILABLE while Redis answered nothing,
 * its new shard queue still asking (client-close-stalled.test.ts). BullMQ 6 emits only to a
 * listener; this does the same for 5, whose API we keep. Call it before the close.
 */
export function quietLateInitErrors(closing: object): void {
  const inner = closing as { connection?: EventEmitter; blockingConnection?: EventEmitter };
  for (const conn of [inner.connection, inner.blockingConnection]) {
    if (!conn) continue;
    const emit = conn.emit.bind(conn);
    conn.emit = (event: string | symbol, ...args: unknown[]) => (event === 'error' && conn.listenerCount('error') === 0 ? false : emit(event, ...args));
  }
}
