import type { Job } from 'bullmq';
import type { Redis } from 'ioredis';
import type { CallJobData } from '../contracts/call.ts';
import type { Envelope, TakenBack } from '../contracts/envelope.ts';
import type { Keys } from '../redis/keys.ts';
import { planCall } from '../policy/call-plan.ts';
import { readsOnly } from './lost-run-replay.ts';

/**
 * A restore in place (or its undo) of one database, as its worker kept it in Redis once it was
 * done: what a write's late answer is checked against ({@link withTakenBack}).
 */
export interface RestoreRecord {
  undoId: string;
  /** The last commit the restore kept (epoch ms): a write committed after it and before {@link began} is taken back. */
  restoredTo: number;
  /** When the worker sent the restore to its database (epoch ms): writes of the database begun before it committed before it. */
  began: number;
  /** An undo: the undo id of the restore it undid (the state before that restore is back). */
  undoes?: string;
}

/** The most restores a database's record keeps (the newest): a late answer is checked against these. */
const KEPT_RESTORES = 100;

/**
 * Keeps a restore done in place in its database's record, for `ttlS` (as long as results are
 * kept: no answer older than that can be read late). Called by the worker that ran it, so the
 * record is made whether or not whoever asked for the restore is still there.
 */
export async function noteRestore(redis: Redis, keys: Keys, database: string, record: RestoreRecord, ttlS: number): Promise<void> {
  const key = keys.restoresOf(database);
  await redis.multi().rpush(key, JSON.stringify(record)).ltrim(key, -KEPT_RESTORES, -1).expire(key, ttlS).exec();
}

/**
 * A finished write's envelope read late (a resend of its call id, a result lookup), with
 * `takenBack` when a restore in place of its database done since took the write back: the ok is
 * true (it committed, before the restore ran), but the row it names is gone, and a later write
 * may have taken its row id. Only this path reads the database's record: a first answer, given
 * by the worker's announcement as the call finishes, cannot be older than a restore after it.
 */
export async function withTakenBack(redis: Redis, keys: Keys, job: Job<CallJobData, Envelope>, env: Envelope): Promise<Envelope> {
  if (!env.ok || readsOnly(env.tool) || !job.processedOn) return env;
  // Its database, as the worker planned it (`runCall` passes the same fields).
  const d = job.data;
  const request = {
    callId: d.callId,
    workspace: d.workspace,
    agent: d.agent,
    settings: d.settings,
    ...(d.member ? { member: d.member } : {}),
    ...(d.introspect ? { introspect: true as const } : {}),
    tool: d.tool,
    arguments: d.arguments,
  };
  const planned = planCall(request, 1, Number.MAX_SAFE_INTEGER);
  if (!planned.ok) return env;
  let raw: string[];
  try {
    raw = await redis.lrange(keys.restoresOf(planned.plan.databaseId), 0, -1);
  } catch {
    // The answer stands without its note rather than fail: it is no worse than before the note.
    return env;
  }
  const records = raw.flatMap((r) => {
    try {
      return [JSON.parse(r) as RestoreRecord];
    } catch {
      return [];
    }
  });
  const by = takenBackBy(records, job.processedOn);
  return by ? { ...env, takenBack: takenBackNote(planned.plan.databaseId, by) } : env;
}

/**
 * The restore that took back, and keeps taken back, a write whose job began at `began` (epoch
 * ms: its commit is after it), walking the restores of its database in the order they ran;
 * undefined when the write's effect is there after all of them.
 */
export function takenBackBy(records: RestoreRecord[], began: number): RestoreRecord | undefined {
  return goneBy(records, began, Number.POSITIVE_INFINITY);
}

/** Who took the write begun at `began` away, as the database stood at `at` (the restores run before it). */
function goneBy(records: RestoreRecord[], began: number, at: number): RestoreRecord | undefined {
  const ran = records.filter((r) => r.began > began && r.began < at).sort((a, b) => a.began - b.began);
  let gone: RestoreRecord | undefined;
  for (const r of ran) {
    if (r.undoes !== undefined) {
      // Back to the state before the restore undone; one that ran before the write (or is no
      // longer kept) went back to a state the write was never in.
      const undone = ran.find((u) => u.undoId === r.undoes);
      gone = undone ? goneBy(records, began, undone.began) : r;
    } else {
      // Back to the moment restored to: a state without the write when it committed after that
      // moment, else the state the database had then.
      gone = began >= r.restoredTo ? r : goneBy(records, began, r.restoredTo);
    }
  }
  return gone;
}

function takenBackNote(database: string, r: RestoreRecord): TakenBack {
  const restoredTo = new Date(r.restoredTo).toISOString();
  const what = r.undoes !== undefined ? `the undo ${r.undoId} of restore ${r.undoes}` : `restore ${r.undoId} of ${database} to ${restoredTo}`;
  return {
    undoId: r.undoId,
    restoredTo,
    note: `This write committed, but ${what} took it back since: what it wrote is no longer in the database, and its row id may name another row now. Undoing that restore (undo id ${r.undoId}) brings it back.`,
  };
}
