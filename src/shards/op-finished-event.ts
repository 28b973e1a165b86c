import type { QueueEvents } from 'bullmq';
import type { ShardOpOutcome } from '../contracts/shard-op.ts';
import { AgentDbError } from '../errors.ts';

/**
 * The outcome of op `jobId` as its queue's event reader hears it (completed or failed), or a
 * rejection past `timeoutMs` (UNAVAILABLE: it may still run) or once `closed` aborts (the client
 * closing); a failed op rejects with what `failure` makes of BullMQ's reason. `stop` takes its
 * listeners and timer away.
 * Not BullMQ's `Job.waitUntilFinished`: its promise executor is async and looks at the job on the
 * queue's connection after it is set up, so a connection closed meanwhile (an export's chunk asked
 * for as the web server stopped) rejected that look inside BullMQ, heard by nobody: an unhandled
 * 'Connection is closed.' that ends a Node process (twice in web-export-bounds in CI, on 0c7e6ee).
 * The look is not needed here: the reader starts from the stream's last event before the add
 * (see `ShardOpClient.forShard`), and the poll in `ShardOpClient.add` is the net under it.
 * Settled by `stop` too, its timer cannot hold a CLI process open for the op's whole timeout
 * once the op was answered otherwise.
 */
export function finishedEvent(
  events: QueueEvents,
  jobId: string,
  timeoutMs: number,
  closed: AbortSignal,
  failure: (reason: string | undefined) => Error,
): { finished: Promise<ShardOpOutcome>; stop: () => void } {
  let stop = (): void => {};
  const finished = new Promise<ShardOpOutcome>((resolve, reject) => {
    const completed = (args: { returnvalue: unknown }) => {
      stop();
      resolve(args.returnvalue as ShardOpOutcome);
    };
    const end = (err: Error) => {
      stop();
      reject(err);
    };
    const failed = (args: { failedReason?: string }) => end(failure(args.failedReason));
    const closing = () => end(new Error(`the client closed before ${jobId} was answered`));
    const timer = setTimeout(
      () => end(new AgentDbError('UNAVAILABLE', `no outcome for ${jobId} within ${timeoutMs} ms: it may still run, or have run; look before sending it again`)),
      timeoutMs,
    );
    events.on(`completed:${jobId}` as 'completed', completed);
    events.on(`failed:${jobId}` as 'failed', failed);
    closed.addEventListener('abort', closing);
    stop = () => {
      clearTimeout(timer);
      events.off(`completed:${jobId}` as 'completed', completed);
      events.off(`failed:${jobId}` as 'failed', failed);
      closed.removeEventListener('abort', closing);
    };
    if (closed.aborted) closing();
  });
  finished.catch(() => undefined);
  return { finished, stop };
}
