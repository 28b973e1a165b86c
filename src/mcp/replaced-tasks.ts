import type { KeptTask } from '../calls/task-budget.ts';
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
export async function retire(
  deps: Pick<McpTaskDeps, 'redis' | 'keys' | 'budget' | 'ttlMs'>,
  workspace: string,
  record: TaskRecord,
  nextId: string,
  dropped: readonly string[],
): Promise<void> {
  const stub: TaskRecord = { owner: record.owner, callId: record.callId, task: { ...record.task }, followedBy: nextId };
  const json = JSON.stringify(stub);
  const key = deps.keys.mcpTask(record.task.taskId);
  // One transaction, one round trip (it took 3 and 2 a dropped id, one after another): each record
  // read as it was written, for the budget to let go of (`record` was read with its cancel mark
  // on), in the same step as it is replaced or removed, so no write comes between.
  const tx = deps.redis
    .multi()
    .get(key)
    .set(key, json, 'PX', deps.ttlMs)
    .zrem(deps.keys.mcpTasksOf(record.owner), indexEntry(Date.parse(record.task.createdAt), record.task.taskId));
  for (const id of dropped) tx.get(deps.keys.mcpTask(id)).del(deps.keys.mcpTask(id), deps.keys.mcpTaskCancelled(id));
  const replies = (await tx.exec()) ?? [];
  const failed = replies.find(([err]) => err);
  if (failed) throw failed[0];
  const textAt = (i: number) => (replies[i]?.[1] as string | null | undefined) ?? undefined;
  const gone: KeptTask[] = [];
  const written = textAt(0);
  if (written) gone.push({ taskId: record.task.taskId, json: written });
  dropped.forEach((id, i) => {
    const text = textAt(3 + 2 * i);
    if (text && (JSON.parse(text) as TaskRecord).owner === record.owner) gone.push({ taskId: id, json: text });
  });
  await deps.budget.replaced(workspace, { taskId: record.task.taskId, json }, gone);
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
