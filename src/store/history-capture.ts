import type { Database } from 'better-sqlite3';
import { capture, type CaptureReport } from '../history/capture.ts';
import { localSource } from '../history/layout.ts';
import type { HistoryOptions } from './executor-protocol.ts';
import type { HandleCacheOptions, HandleTarget } from './handle-cache.ts';

/**
 * History capture as the executor child runs it: after each committed write, when a handle
 * opens, before one closes. A capture that fails is logged and not the write's failure (the
 * write is committed): the frames stay in the WAL, which is not checkpointed until they are
 * copied, and the next capture of the database copies them.
 */
export class HistoryCapture {
  constructor(
    private readonly dataDir: string,
    readonly opts: HistoryOptions,
  ) {}

  /** Copies the database's new WAL frames into its history; never throws. */
  run(db: Database, target: HandleTarget): CaptureReport | undefined {
    try {
      return capture(db, target.path, { source: localSource(this.dataDir, target.id), checkpointBytes: this.opts.checkpointBytes });
    } catch (err) {
      process.stderr.write(`${JSON.stringify({ level: 50, time: Date.now(), msg: 'history capture failed; the next commit tries again', db: target.id, err: String(err) })}\n`);
      return undefined;
    }
  }

  /** The handle cache's hooks: copy on open (a crash left frames), copy before close (closing checkpoints). */
  hooks(): Pick<HandleCacheOptions, 'onOpened' | 'beforeClose' | 'walAutocheckpoint'> {
    const copy = (db: Database, target: HandleTarget) => void this.run(db, target);
    return { onOpened: copy, beforeClose: copy, walAutocheckpoint: 0 };
  }
}
