import type { BudgetEntry } from './call-budget-entry.ts';
import { jsonTextBytes } from './redis-bytes.ts';
import type { WorkspaceRedisBudget } from './workspace-redis-budget.ts';

/**
 * Bytes a task holds beside its record: its index entry and, once cancelled, its mark (160), and
 * its call's link to it (184 by `MEMORY USAGE` with a member's owner and a UUID call id).
 */
const TASK_EXTRA_BYTES = 160 + 192;

/** A task kept for a call (an MCP task): its id and its record's JSON as written to Redis. */
export interface KeptTask {
  taskId: string;
  json: string;
}

/** A task's entry in its workspace's Redis budget, from `now` for its whole life (`ttlMs`). */
export function taskEntry(task: KeptTask, ttlMs: number, now = Date.now()): BudgetEntry {
  return { callKey: `mcp-task:${task.taskId}`, kind: 'task', bytes: jsonTextBytes(task.json) + TASK_EXTRA_BYTES, until: now + ttlMs };
}

/**
 * The rule for tasks kept for calls in their workspace's Redis budget: each record as written
 * (and what it holds beside it) is counted for the task's whole life, and never refused. Only a
 * call the budget admitted gets a task (`KeyedCalls.refusesTheRequest` and `untaken` refuse the
 * others one), and one task however often it is sent, so tasks add to what the workspace's
 * admitted calls hold, never to a workspace that has used its budget up. The rule was MCP's own
 * (src/mcp/task-store.ts counted its records itself), a rule in an adapter (session 32, A3).
 */
export class TaskBudget {
  /**
   * @param budget the workspaces' Redis budgets.
   * @param ttlMs how long a task is kept: as long as its call can wait and then keep its result.
   */
  constructor(
    private readonly budget: WorkspaceRedisBudget,
    readonly ttlMs: number,
  ) {}

  /** Counts `task` as just written, for its whole life from now. */
  async written(workspace: string, task: KeptTask): Promise<void> {
    await this.budget.note(workspace, [taskEntry(task, this.ttlMs)]);
  }

  /**
   * Counts `kept`, just written where a replaced task was (its stub), and lets go of `gone`, the
   * records as they were written before (the replaced one's, former ones dropped for good), in
   * one note. Those let go go first: a stub of the same size as the record it replaces is the
   * same member of the ledger, which a let-go after it would take out again.
   */
  async replaced(workspace: string, kept: KeptTask, gone: readonly KeptTask[]): Promise<void> {
    const now = Date.now();
    await this.budget.note(workspace, [...gone.map((t) => ({ ...taskEntry(t, this.ttlMs, now), until: 0 })), taskEntry(kept, this.ttlMs, now)]);
  }
}
