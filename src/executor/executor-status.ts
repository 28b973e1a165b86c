import type { ExecRequest } from './executor-protocol.ts';

/** What one child of a pool is doing, for `agentdb executors`. */
export interface ChildStatus {
  child: number;
  pid: number | undefined;
  state: 'starting' | 'idle' | 'running' | 'down' | 'stopped';
  op?: string;
  database?: string;
  callId?: string;
  /** How long the statement at the head has run. */
  runningMs?: number;
  /** Requests sent behind it. */
  behind?: number;
  /** One of the overflow lane's children (see `OverflowLane`), not a pooled one. */
  overflow?: true;
}

/** What a worker's executor pool is doing. */
export interface PoolStatus {
  size: number;
  workspaceShare: number;
  /** Statements that wait for a child (not yet sent to one). */
  waiting: number;
  children: ChildStatus[];
  /** Children of the overflow lane (EXECUTOR_OVERFLOW), listed after the pooled ones in `children`; absent: none. */
  overflow?: number;
  /** The pid of the child started ahead of need, while one waits ready. */
  spare?: number;
}

/** The op, database and call of a request, for logs and status. */
export function about(req: ExecRequest): { op: string; database?: string; callId?: string } {
  const callId = req.callId ?? (req.op === 'audit' ? req.entry.callId : undefined);
  return { op: req.op, ...(req.op === 'evict' || req.op === 'stats' || req.op === 'close' ? {} : { database: req.db.id }), ...(callId ? { callId } : {}) };
}
