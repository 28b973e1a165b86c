import type { ExecutorProcess, Queued } from './executor-process.ts';
import type { DbTarget } from './executor-protocol.ts';

/** One database's statements: they run one at a time, in the order they came. */
export interface Line {
  path: string;
  id: string;
  workspace: string;
  shard: number;
  queue: Queued[];
  /** The child running its statements now; it has no other database meanwhile. */
  slot?: ExecutorProcess;
  /** The child that ran it last (its `childId`): any other may hold a stale handle. */
  lastChild?: number;
  /** Times an idle child passed it over for a database of its own. */
  skips: number;
  /** When it last began to wait for a child. */
  since: number;
  /** It took its child ahead of cheap ones for its long wait (see `tier`). */
  promoted?: boolean;
  /** When it took its child, and that child's place's `spentMs` then (while it has one). */
  boundAt: number;
  spentAtBind: number;
  /** That place's `statements` then. */
  statementsAtBind: number;
  /** A microtask will send what arrived in this tick. */
  feeding: boolean;
  /** Every child is being asked to close this database, for the restore at the head of the queue. */
  closing?: boolean;
  /** The restore that every child closed this database for (it may be sent now). */
  closedFor?: Queued;
}

/**
 * A pool's lines by database file. Idle ones are kept (they remember which child ran them
 * last) up to `keep`, least recently used dropped first: a line made again has no `lastChild`,
 * so its first statement reopens the handle — slower, never stale.
 */
export class DatabaseLines {
  private readonly byPath = new Map<string, Line>();

  constructor(private readonly keep: number) {}

  /** The line of `db`, made if new. */
  get(db: DbTarget): Line {
    let line = this.byPath.get(db.path);
    if (line) {
      // Kept in the Map's order, least recently used first, so the oldest idle one is dropped.
      this.byPath.delete(db.path);
      this.byPath.set(db.path, line);
      return line;
    }
    const slash = db.id.indexOf('/');
    line = {
      path: db.path,
      id: db.id,
      workspace: slash < 0 ? db.id : db.id.slice(0, slash),
      shard: db.shard,
      queue: [],
      skips: 0,
      since: 0,
      boundAt: 0,
      spentAtBind: 0,
      statementsAtBind: 0,
      feeding: false,
    };
    this.byPath.set(db.path, line);
    if (this.byPath.size > this.keep) {
      for (const [key, old] of this.byPath) {
        if (old.slot || old.queue.length) continue;
        this.byPath.delete(key);
        break;
      }
    }
    return line;
  }

  /** Whether a statement of these shards waits or runs. */
  busyIn(shards: readonly number[]): boolean {
    for (const line of this.byPath.values()) if ((line.slot || line.queue.length) && shards.includes(line.shard)) return true;
    return false;
  }

  /** Statements not yet sent to a child. */
  waiting(): number {
    let n = 0;
    for (const line of this.byPath.values()) n += line.queue.length;
    return n;
  }

  /** Removes and returns every statement not yet sent. */
  takeWaiting(): Queued[] {
    const all: Queued[] = [];
    for (const line of this.byPath.values()) all.push(...line.queue.splice(0));
    return all;
  }
}
