import type { CreateTaskOptions, TaskStore } from '@modelcontextprotocol/sdk/experimental/tasks/interfaces.js';
import { ErrorCode, McpError, RELATED_TASK_META_KEY, type Request, type RequestId, type Result, type Task } from '@modelcontextprotocol/sdk/types.js';
import type { Redis } from 'ioredis';
import type { KeyedCalls } from '../calls/bearer-key-calls.ts';
import type { PendingCallJoins } from '../calls/pending-call-joins.ts';
import { isTransient } from '../calls/call-answers.ts';
import type { TaskBudget } from '../calls/task-budget.ts';
import type { Keys } from '../redis/keys.ts';
import { withScripts } from '../redis/lua-scripts.ts';
import { callerOf, type Principal } from '../registry/principal.ts';
import {
  cancelledError,
  cancelledMessage,
  follows,
  INDEX_ENTRY,
  indexEntry,
  newRecord,
  rateLimitedError,
  unboundMine,
  type TaskRecord,
  type TaskStart,
} from './task-record.ts';
import { answering, formerIds, retire } from './replaced-tasks.ts';
import { toolResult, type McpToolResult } from './tool-result.ts';

export { TASK_POLL_MS } from './task-record.ts';

/** Tasks per `tasks/list` page. */
export const TASK_LIST_PAGE = 20;

/** What every principal's task store shares: Redis, the calls, and how long a task lives. */
export interface McpTaskDeps {
  redis: Redis;
  keys: Keys;
  calls: KeyedCalls;
  joins?: PendingCallJoins;
  /** Where each task's bytes are counted: the core's rule, for `ttlMs`. */
  budget: TaskBudget;
  /** How long a task is kept (ms): as long as its call can wait and then keep its result. */
  ttlMs: number;
}

/**
 * MCP Tasks (protocol 2025-11-25) for calls that wait for a person, kept in Redis so that any
 * instance answers `tasks/get` and `tasks/result` (every `/mcp` request gets a new server, often on
 * another process). A task only points at its call: its status is read from the call itself when
 * asked (its job's state), so nothing has to stay running to finish a task — the call is decided
 * and run by whoever decides and whichever worker owns its shard, and the first `tasks/get` after
 * that stores the call's answer as the task's result (`completed` when the call ran, `failed`
 * when it was refused, rejected or expired).
 *
 * One store speaks for one principal (a server is made per principal): another principal's task
 * is not found, whatever its id, and `tasks/list` shows the principal's own tasks only. Tasks
 * have no session: the SDK's `sessionId` is ignored.
 *
 * `tasks/cancel` ends the task, not the call: the task turns `cancelled` and stays so, but the
 * approval its call waits on is left for a person. Only agents' calls wait for a person, and an
 * agent never decides an approval (access.ts, approval-rule.ts); a person withdraws the call by
 * rejecting it. The call's resend window stays open, so the same call sent again joins it.
 */
export class RedisTaskStore implements TaskStore {
  private readonly owner: string;

  constructor(
    private readonly deps: McpTaskDeps,
    private readonly principal: Principal,
  ) {
    // A member's tasks are the member record's: one revoked and added again under the same name
    // (someone else, as for OAuth grants) read the first one's tasks and results (hostile review T1).
    const since = principal.since !== undefined ? `@${principal.since}` : '';
    this.owner = `${principal.workspace}.${callerOf(principal)}${since}`;
  }

  /**
   * The task of one call (see {@link TaskStart}): the one its principal already has for the call
   * when it still follows it and agrees with `start`, else a new one that takes its place (the one
   * before, cancelled or of an outcome since run again, goes). A call has one task however often
   * it is sent as one: a task for each send, each kept 48 h and counted but never refused by the
   * budget, let one write sent again past its budget grow Redis by its result a send (session 30, T7).
   */
  async start(start: TaskStart): Promise<Task> {
    const link = this.deps.keys.mcpTaskOfCall(this.owner, start.callId);
    let linked = (await this.deps.redis.get(link)) ?? '';
    for (let tries = 0; tries < 3; tries++) {
      const before = linked ? await this.read(linked) : undefined;
      if (before && follows(before, start)) return { ...(before.task.status === 'working' ? await this.settle(before) : before).task };
      const record = newRecord(this.owner, start, this.deps.ttlMs);
      const former = linked ? formerIds(linked, before) : undefined;
      if (former) record.formerly = former.kept;
      const json = JSON.stringify(record);
      await this.deps.redis.set(this.deps.keys.mcpTask(record.task.taskId), json, 'PX', this.deps.ttlMs);
      const took = await withScripts(this.deps.redis).agentdbMcpTaskLink(link, linked, record.task.taskId, String(this.deps.ttlMs));
      if (took === 1) {
        await this.deps.budget.written(this.principal.workspace, { taskId: record.task.taskId, json });
        await this.index(record.task);
        if (linked && before) await retire(this.deps, this.principal.workspace, before, record.task.taskId, former?.dropped ?? []);
        return { ...record.task };
      }
      // Another send of the call linked its task first: that one answers (looked at again).
      await this.deps.redis.del(this.deps.keys.mcpTask(record.task.taskId));
      linked = took;
    }
    throw new McpError(ErrorCode.InternalError, `Sends of call ${start.callId} kept replacing its task; ask again.`);
  }

  /** Lists `task` from now until it lapses; older entries (their tasks gone) go first. */
  private async index(task: Task): Promise<void> {
    const at = Date.parse(task.createdAt);
    const index = this.deps.keys.mcpTasksOf(this.owner);
    await this.deps.redis
      .multi()
      .zremrangebylex(index, '-', `(${indexEntry(at - this.deps.ttlMs, '')}`)
      .zadd(index, 0, indexEntry(at, task.taskId))
      .pexpire(index, this.deps.ttlMs)
      .exec();
  }

  /** The SDK's way in; agentdb's tools/call handler uses {@link start}, with the call id in `context`. */
  async createTask(params: CreateTaskOptions, _requestId: RequestId, _request: Request): Promise<Task> {
    const callId = params.context?.callId;
    if (typeof callId !== 'string') throw new Error('an agentdb task stands for a call: give context.callId');
    return this.start({ callId, statusMessage: String(params.context?.statusMessage ?? 'The call has not finished yet.') });
  }

  /**
   * Counts one follow-up of the principal's tasks (`tasks/get`, `tasks/result`, `tasks/cancel`)
   * in its bucket of its own (`TASK_POLLS_PER_MINUTE`); past it throws RATE_LIMITED with the
   * seconds to wait. Before this, follow-ups were counted nowhere: one client asking in a loop
   * cost Redis as much as calls do (session 30, T7).
   */
  async polled(): Promise<void> {
    const limited = await this.deps.calls.chargeTaskPoll(this.principal);
    if (limited) throw rateLimitedError(limited, this.principal.workspace, 'a task request');
  }

  async getTask(taskId: string): Promise<Task | null> {
    const record = await this.current(taskId);
    if (!record) return null;
    // A replaced id answers its call's task of now, under the id asked for.
    return { ...(record.task.status === 'working' ? await this.settle(record) : record).task, taskId };
  }

  /** The record that answers for `taskId`: its own, or for a replaced one its call's task of now (replaced-tasks.ts). */
  private async current(taskId: string): Promise<TaskRecord | undefined> {
    const record = await this.read(taskId);
    return record && answering(this.deps, record, (id) => this.read(id));
  }

  async getTaskResult(taskId: string): Promise<Result> {
    const record = await this.current(taskId);
    if (record?.task.status === 'cancelled') throw cancelledError(record);
    if (!record?.result) throw new Error(`Task ${taskId} has no result yet`);
    return record.result;
  }

  /**
   * `tasks/result`: the task's result, once its call has ended. Waits for that the way a
   * `tools/call` waits (woken by the call's completion, not by polling), `waitMs` at a time,
   * until it ends, the request is cancelled, or the server stops (then it answers an error, and
   * the client asks again, of another instance).
   */
  async awaitResult(taskId: string, waitMs: number, signal: AbortSignal): Promise<Result> {
    await this.polled();
    for (;;) {
      let record = await this.current(taskId);
      if (!record) throw new McpError(ErrorCode.InvalidParams, `Task not found: ${taskId}`);
      if (record.task.status === 'cancelled') throw cancelledError(record);
      if (record.task.status === 'working') record = await this.settle(record);
      if (record.result) return { ...record.result, _meta: { [RELATED_TASK_META_KEY]: { taskId } } };
      if (this.deps.calls.stopped) throw new McpError(ErrorCode.InternalError, 'agentdb is restarting; ask for the task result again.');
      const answer = await this.deps.calls.result(this.principal, record.callId, { wait: true, maxWaitMs: waitMs, signal, followUp: true });
      // Redis away: answered, not waited for again at once (the client asks again).
      if (isTransient(answer)) throw new McpError(ErrorCode.InternalError, 'UNAVAILABLE: agentdb could not look at the call; ask for the task result again.');
    }
  }

  async storeTaskResult(taskId: string, status: 'completed' | 'failed', result: Result): Promise<void> {
    const record = await this.read(taskId);
    if (!record) throw new Error(`Task ${taskId} not found`);
    if (record.task.status !== 'working') throw new Error(`Task ${taskId} already ended (${record.task.status})`);
    await this.write({ ...record, task: { ...record.task, status, lastUpdatedAt: new Date().toISOString() }, result: result as McpToolResult });
  }

  /**
   * `tasks/cancel` (the SDK's handler has checked the task is the caller's and not ended): the
   * task turns `cancelled` for good, its call left waiting for a person (see the class). The mark
   * is a key of its own, so a `tasks/get` settling the task at the same moment cannot undo it.
   */
  async updateTaskStatus(taskId: string, status: Task['status']): Promise<void> {
    // agentdb's own code ends tasks with settle or storeTaskResult; a client only cancels.
    if (status !== 'cancelled') throw new Error(`Task ${taskId} stands for a call; only tasks/cancel changes its status.`);
    await this.polled();
    const record = await this.current(taskId);
    if (!record) throw new McpError(ErrorCode.InvalidParams, `Task not found: ${taskId}`);
    if (record.task.status !== 'working') throw new McpError(ErrorCode.InvalidParams, `Cannot cancel task in terminal status: ${record.task.status}`);
    const mark = { at: new Date().toISOString(), waited: record.task.statusMessage ?? '' };
    const left = Math.max(1, this.deps.ttlMs - (Date.now() - Date.parse(record.task.createdAt)));
    await this.deps.redis.set(this.deps.keys.mcpTaskCancelled(taskId), JSON.stringify(mark), 'PX', left);
  }

  /**
   * `tasks/list`: the caller's own tasks, newest first, {@link TASK_LIST_PAGE} at a time; the
   * cursor is the last one given (opaque to the client). A working task is looked at as by
   * `tasks/get`, so each shows its status now. Each page counts a lookup against the rate
   * limits; past them it throws RATE_LIMITED, naming the seconds to wait (the SDK answers -32602 with the message).
   * @throws for a cursor that is not one this store gave (the SDK answers -32602).
   */
  async listTasks(cursor?: string): Promise<{ tasks: Task[]; nextCursor?: string }> {
    if (cursor !== undefined && !INDEX_ENTRY.test(cursor)) throw new Error(`Invalid cursor: ${JSON.stringify(cursor.slice(0, 80))}`);
    // A page looks at each working task's call: counted as one lookup (a tenth of a call) of the
    // principal's, unlike tasks/get and tasks/result, which read one task's own call.
    const limited = await this.deps.calls.chargeLookup(this.principal);
    if (limited) throw rateLimitedError(limited, this.principal.workspace, 'a tasks/list page');
    const index = this.deps.keys.mcpTasksOf(this.owner);
    const entries = await this.deps.redis.zrevrangebylex(index, cursor ? `(${cursor}` : '+', '-', 'LIMIT', 0, TASK_LIST_PAGE);
    const tasks: Task[] = [];
    const gone: string[] = [];
    for (const entry of entries) {
      const taskId = entry.slice(entry.indexOf(':') + 1);
      const task = await this.getTask(taskId);
      if (task) tasks.push(task);
      else gone.push(entry);
    }
    if (gone.length > 0) await this.deps.redis.zrem(index, ...gone);
    return { tasks, ...(entries.length === TASK_LIST_PAGE ? { nextCursor: entries.at(-1)! } : {}) };
  }

  /**
   * A working task with its call looked at: the call's answer stored as its result once the call
   * has one, and the resend window of the call closed (its outcome is out now).
   */
  private async settle(record: TaskRecord): Promise<TaskRecord> {
    // The server's own read of the task's call, not a lookup of the caller's: never counted
    // against (nor refused by) the lookup rate limits. A refusal for the moment would otherwise
    // have ended the task as failed, and let a resend make a second approval (review 18h, 2).
    const answer = await this.deps.calls.result(this.principal, record.callId, { wait: false, maxWaitMs: 0, followUp: true });
    if ('status' in answer || isTransient(answer)) return record;
    const settled: TaskRecord = {
      owner: record.owner,
      callId: record.callId,
      task: { ...record.task, status: answer.ok ? 'completed' : 'failed', lastUpdatedAt: new Date().toISOString() },
      result: toolResult(answer),
    };
    delete settled.task.statusMessage;
    await this.write(settled);
    if (record.joinKey) await this.deps.joins?.forget(record.joinKey, record.callId);
    return settled;
  }

  private async read(taskId: string): Promise<TaskRecord | undefined> {
    const res = await this.deps.redis.pipeline().get(this.deps.keys.mcpTask(taskId)).get(this.deps.keys.mcpTaskCancelled(taskId)).exec();
    const text = res?.[0]?.[1] as string | null | undefined;
    if (!text) return undefined;
    const record = JSON.parse(text) as TaskRecord;
    // Another principal's task answers as no task at all, so ids cannot be probed.
    if (record.owner !== this.owner && !unboundMine(record, this.principal)) return undefined;
    const cancelled = res?.[1]?.[1] as string | null | undefined;
    if (!cancelled) return record;
    // Cancelled stays cancelled, whatever its call did since (the spec's tasks/cancel).
    const mark = JSON.parse(cancelled) as { at: string; waited: string };
    const task: Task = { ...record.task, status: 'cancelled', lastUpdatedAt: mark.at, statusMessage: cancelledMessage(record.callId, mark.waited) };
    const { result: _dropped, ...rest } = record;
    return { ...rest, task };
  }

  /** Writes a task for its whole life from now, counted in its workspace's Redis budget (`TaskBudget`, the core's rule). */
  private async write(record: TaskRecord): Promise<void> {
    const json = JSON.stringify(record);
    await this.deps.redis.set(this.deps.keys.mcpTask(record.task.taskId), json, 'PX', this.deps.ttlMs);
    await this.deps.budget.written(this.principal.workspace, { taskId: record.task.taskId, json });
  }
}
