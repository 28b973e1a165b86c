import { codeOf, type AgentDbError } from '../errors.ts';
import { callKey } from '../contracts/call-identity.ts';
import { parseAsOf } from '../contracts/as-of.ts';
import type { AsOfRead, AsOfTarget, ExecOutcome, ExecRequest } from '../executor/executor-protocol.ts';
import type { WorkspaceQuota } from '../history/workspace-quota.ts';

/**
 * The most restoring a moment for a read's `as_of` may take: a restore's work (a snapshot copied,
 * then its commits), not a statement's, so not STATEMENT_TIMEOUT_MS.
 */
const MOMENT_BUILD_MS = 10 * 60_000;

/**
 * The executor's target of a read's `as_of`: a time as is; a call id as the exactly-once keys
 * its write may be recorded under in the database read, the caller's own and, reading another
 * agent's database, that agent's (`callKey`). Keys of another workspace never match: a
 * database holds only its own workspace's. @throws AgentDbError INVALID_ARGUMENTS.
 */
export function asOfTarget(asOf: string, workspace: string, caller: string, owner: string | undefined, memberSince?: number): AsOfTarget {
  const parsed = parseAsOf(asOf);
  if ('at' in parsed) return parsed;
  // A member's own calls by their member record (`callKey`): an earlier member's of the name are not theirs.
  const keys = [callKey(workspace, caller, parsed.callId, memberSince)];
  if (owner !== undefined && owner !== caller) keys.push(callKey(workspace, owner, parsed.callId));
  return { callId: parsed.callId, callKeys: keys };
}

/**
 * Runs a read of the past: as is when its moment is kept; otherwise the workspace's disk quota
 * is asked for the room restoring it takes, held while it builds (`WorkspaceQuota.hold`; it
 * drops the workspace's kept moments first when that makes the room), then it runs again,
 * allowed to restore it.
 */
export async function runAsOf(
  request: Extract<ExecRequest, { op: 'query' | 'describe' | 'browse' }> & { asOf: AsOfRead },
  executor: { run(req: ExecRequest): Promise<ExecOutcome> },
  quota: Pick<WorkspaceQuota, 'hold'> | undefined,
  workspace: string,
): Promise<ExecOutcome> {
  const first = await executor.run(request);
  const room = first.ok ? first.asOf?.needsRoom : undefined;
  if (room === undefined) return first;
  let release: (() => void) | undefined;
  if (quota) {
    try {
      // Held while it builds: moments of the workspace built at once count each other's room.
      release = await quota.hold(workspace, { databases: 0, bytes: room }, `reading ${request.db.id} as of a past moment`);
    } catch (err) {
      if (codeOf(err) !== 'QUOTA_EXCEEDED') throw err;
      return { ok: false, error: { code: 'QUOTA_EXCEEDED', detail: (err as AgentDbError).detail ?? 'the workspace is past its disk quota' } };
    }
  }
  // The restore alone gets MOMENT_BUILD_MS; the read then runs as any read, under the statement
  // limit. Run together, the agent's statement had the restore's 10 minutes: a runaway read of
  // each fresh moment held an executor child 10 minutes, not STATEMENT_TIMEOUT_MS (review 19, H27).
  try {
    let materialised = false;
    for (let attempt = 0; attempt < BUILD_ATTEMPTS; attempt++) {
      const built = await executor.run({ ...request, asOf: { ...request.asOf, build: true, buildOnly: true }, timeoutMs: MOMENT_BUILD_MS });
      if (!built.ok) return built;
      materialised ||= built.asOf?.materialised === true;
      const read = await executor.run(request);
      // Dropped between the two (swept, or the workspace's quota made room): restored again.
      if (read.ok && read.asOf?.needsRoom !== undefined) continue;
      return read.ok ? { ...read, asOf: { materialised } } : read;
    }
    return {
      ok: false,
      error: { code: 'UNAVAILABLE', detail: `the moment of ${request.db.id} restored for this read was dropped before it could be read; try again` },
    };
  } finally {
    release?.();
  }
}

/** Restores of a moment a read tries before giving up, when the moment is dropped before its read each time. */
const BUILD_ATTEMPTS = 3;
