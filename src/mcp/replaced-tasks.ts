import type { BudgetEntry } from '../calls/call-budget-entry.ts';
import { jsonBytes } from '../calls/redis-bytes.ts';
import type { McpTaskDeps } from './task-store.ts';
import { indexEntry, type TaskRecord } from './task-record.ts';

// What becomes of a call's MCP task when another takes its place (`RedisTaskStore.start`: the
// one before was cancelled, or ended with an outcome the call has since run again for).

/**
 * Task ids a call's task keeps answering for after their tasks were replaced, newest first: a
 * client still following one of them (the SDK polls tasks/get, then asks tasks/result) is
 * answered by the call's task of now. Beyond them the oldest goes, so a call cancelled and sent
 * again in a loop holds a bounded few.
 */
export const FORMER_TASKS = 3;

/**
 * Bytes a task holds beside its record: its index entry and, once cancelled, its mark (160), and
 * its call's link to it (184 by `MEMORY USAGE` with a member's owner and a UUID call id).
 */
const TASK_EXTRA_BYTES = 160 + 192;

/** A task record's entry in its workspace's Redis budget, for its whole life from now (`ttlMs`). */
export function taskEntry(record: TaskRecord, ttlMs: number, now = Date.now()): BudgetEntry {
  return { callKey: `mcp-task:${record.task.taskId}`, kind: 'task', bytes: jsonBytes(record) + TASK_EXTRA_BYTES, until: now + ttlMs };
}

/**
 * The ids `next`, the task taking `before`'s place, answers for: `before`'s and those it answered
 * for, {@link FORMER_TASKS} at most; and the ones beyond, which go.
 */
export function formerIds(beforeId: string, before: TaskRecord | undefined): { kept: string[]; dropped: string[] } {
  const all = [beforeId, ...(before?.formerly ?? [])];
  return { kept: all.slice(0, FORMER_TASKS), dropped: all.slice(FORMER_TASKS) };
}

/**
 * Retires `record`, the task `nextId` took the place of: its record becomes a stub that follows
 * the call (no result, out of the list; a cancelled one stays cancelled, its mark kept), its
 * bytes in the budget those of the stub; the former ids beyond {@link FORMER_TASKS} (`dropped`)
 * go for good. Before this, a replaced id answered "no such task" to a client still following it.
 */
export async function retire(deps: McpTaskDeps, workspace: string, record: TaskRecord, nextId: string, dropped: readonly string[]): Promise<void> {
  const stub: TaskRecord = { owner: record.owner, callId: record.callId, task: { ...record.task }, followedBy: nextId };
  // The budget let go of the record as it was written (`record` was read with its cancel mark on).
  const written = await deps.redis.get(deps.keys.mcpTask(record.task.taskId));
  await deps.redis.set(deps.keys.mcpTask(record.task.taskId), JSON.stringify(stub), 'PX', deps.ttlMs);
  await deps.redis.zrem(deps.keys.mcpTasksOf(record.owner), indexEntry(Date.parse(record.task.createdAt), record.task.taskId));
  const entries: BudgetEntry[] = [taskEntry(stub, deps.ttlMs)];
  if (written) entries.push({ ...taskEntry(JSON.parse(written) as TaskRecord, deps.ttlMs), until: 0 });
  for (const id of dropped) {
    const text = await deps.redis.get(deps.keys.mcpTask(id));
    await deps.redis.del(deps.keys.mcpTask(id), deps.keys.mcpTaskCancelled(id));
    const gone = text ? (JSON.parse(text) as TaskRecord) : undefined;
    if (gone?.owner === record.owner) entries.push({ ...taskEntry(gone, deps.ttlMs), until: 0 });
  }
  await deps.budget.note(workspace, entries);
}

/**
 * The record that answers for `record` as it was read: a replaced task's stub answers with its
 * call's task of now (the call's link names it: never a chain of stubs), unless it was cancelled,
 * which stays so (the spec's tasks/cancel); `current` reads a task by id. A stub whose call has no
 * task any more answers as it was left.
 */
export async function answering(deps: McpTaskDeps, record: TaskRecord, current: (taskId: string) => Promise<TaskRecord | undefined>): Promise<TaskRecord> {
  if (record.followedBy === undefined || record.task.status === 'cancelled') return record;
  const id = await deps.redis.get(deps.keys.mcpTaskOfCall(record.owner, record.callId));
  const now = id && id !== record.task.taskId ? await current(id) : undefined;
  return now && now.followedBy === undefined && now.callId === record.callId ? now : record;
}
