import { randomUUID } from 'node:crypto';
import { ErrorCode, McpError, type Task } from '@modelcontextprotocol/sdk/types.js';
import { rateRefusalDetail, type RateRefusal } from '../calls/call-rate-limits.ts';
import { unboundCallIsMine } from '../contracts/call-identity.ts';
import type { Principal } from '../registry/principal.ts';
import type { McpToolResult } from './tool-result.ts';

// An MCP task's record as Redis keeps it, and what the task store reads off one (task-store.ts).

/**
 * How often a client is told to ask again (ms). Each `tasks/get` of a waiting task costs two
 * Redis reads (the task, then the call's job); a person decides in seconds at best.
 */
export const TASK_POLL_MS = 1000;

/** A `tasks/list` cursor, and the index's member it stands for: `<created ms, 15 digits>:<task id>`. */
export const INDEX_ENTRY = /^\d{15}:[0-9a-f-]{36}$/;

/** The index entry of a task made at `createdAt`: sorts as it was made. */
export function indexEntry(createdAt: number, taskId: string): string {
  return `${String(createdAt).padStart(15, '0')}:${taskId}`;
}

/** One task as Redis keeps it under `keys.mcpTask`. */
export interface TaskRecord {
  /** `<workspace>.<caller>` (`@<since>` after a member's or agent key's): only that principal sees the task. */
  owner: string;
  /** The call the task stands for; its outcome is the task's result. */
  callId: string;
  /** Where a resend of the call joins it (`PendingCallJoins`), let go once the outcome is out. */
  joinKey?: string;
  task: Task;
  result?: McpToolResult;
  /** The task ids this one answers for too, their tasks replaced by it (replaced-tasks.ts). */
  formerly?: string[];
  /** Set on a replaced task's stub: the task that took its place. Such an id follows its call's task of now. */
  followedBy?: string;
}

/** What a task is made for: a call that answered before its outcome, or a finished call's result. */
export type TaskStart = { callId: string; joinKey?: string; statusMessage: string } | { callId: string; result: McpToolResult; ok: boolean };

/**
 * Whether `record`, a live task of `start`'s call, still follows it as `start` has it: not
 * cancelled, and working (looked at now) or ended with the same outcome (ok, or the same error
 * code). A call's outcomes differ only when it ran again (a fault's end or a "try again", sent again).
 */
export function follows(record: TaskRecord, start: TaskStart): boolean {
  if (record.task.status === 'cancelled') return false;
  if (record.task.status === 'working') return true;
  return 'result' in start && record.result !== undefined && outcomeOf(record.result) === outcomeOf(start.result);
}

/** A task result's outcome: `ok`, or its error's code. */
function outcomeOf(result: McpToolResult): string {
  const error = result.structuredContent?.error as { code?: unknown } | undefined;
  return result.isError ? String(error?.code) : 'ok';
}

/** A cancelled task's status message: what it stopped following, and how to follow the call again. */
export function cancelledMessage(callId: string, waited: string): string {
  return `Cancelled by the client: this task no longer follows call ${callId}. The call itself is not withdrawn: ${waited ? `when cancelled: ${waited} ` : ''}A person may still approve or reject it; send the same call again to follow it to its outcome (it joins the call, no second approval).`;
}

/** What `tasks/result` answers for a cancelled task: it has no result of its own. */
export function cancelledError(record: TaskRecord): McpError {
  return new McpError(ErrorCode.InvalidParams, `Task ${record.task.taskId} was cancelled. ${record.task.statusMessage ?? ''}`.trim());
}

/** A new task's record, `owner`'s, for `start`, living `ttlMs` (`RedisTaskStore.start`). */
export function newRecord(owner: string, start: TaskStart, ttlMs: number): TaskRecord {
  const now = new Date().toISOString();
  const finished = 'result' in start;
  const task: Task = {
    taskId: randomUUID(),
    status: finished ? (start.ok ? 'completed' : 'failed') : 'working',
    ttl: ttlMs,
    createdAt: now,
    lastUpdatedAt: now,
    pollInterval: TASK_POLL_MS,
    ...(finished ? {} : { statusMessage: start.statusMessage }),
  };
  return { owner, callId: start.callId, task, ...(finished ? { result: start.result } : start.joinKey ? { joinKey: start.joinKey } : {}) };
}

/**
 * The protocol error past a rate bound for a task request, or an MCP request that runs no call (`what`): -32600 with RATE_LIMITED and
 * the seconds to wait in its message and data, as the SDK answers a store's error.
 */
export function rateLimitedError(limited: RateRefusal, workspace: string, what: string): McpError {
  const message =
    limited.of === 'task-polls'
      ? `RATE_LIMITED: this key may follow its tasks ${limited.calls} times per ${limited.windowS} s (tasks/get, tasks/result and tasks/cancel; a client polling at each task's pollInterval stays well inside it); ask again in ${limited.retryAfterS} s.`
      : limited.of === 'mcp-requests'
        ? `RATE_LIMITED: this key may send ${limited.calls} MCP requests that run no call per ${limited.windowS} s (initialize, ping, tools/list, notifications; a client connecting sends a few); ask again in ${limited.retryAfterS} s.`
        : `RATE_LIMITED: ${rateRefusalDetail(limited, limited.of === 'workspace' ? `Workspace ${workspace}` : 'This key', `${what} counts a tenth of one`)}`;
  return new McpError(ErrorCode.InvalidRequest, message, { code: 'RATE_LIMITED', retryAfter: limited.retryAfterS });
}

/**
 * Whether `record`, an agent key's task filed before its tasks were bound to the registration
 * (session 28) under the bare `<workspace>.<agent>`, is `p`'s: only if made since the registration
 * began (`unboundCallIsMine`), so a task that waits across the upgrade is still found by its id.
 */
export function unboundMine(record: TaskRecord, p: Principal): boolean {
  if (p.kind !== 'agent' || p.since === undefined || record.owner !== `${p.workspace}.${p.agent}`) return false;
  return unboundCallIsMine(Date.parse(record.task.createdAt), p.since);
}
