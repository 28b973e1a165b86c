/**
 * Names of queues and Redis keys. Each shard's queue and lease share one hash tag
 * (`{shard-N}`); the event stream and the usage meters share `{calls}`, because one script
 * updates them together when a call completes. So on Redis Cluster every multi-key script
 * touches one slot, while shards still spread over the cluster — but one: the client's admission
 * of a call with a generated id, which adds its job in the same script (`ADMITTED_ADDS_LUA`), spans
 * the workspace's `{budget-…}` and the shard's `{shard-N}` (one Redis is what agentdb runs on).
 */
export interface Keys {
  /** The BullMQ `prefix` option. */
  readonly bullPrefix: string;
  queueName(shard: number): string;
  /**
   * A job's hash in a shard's queue, in BullMQ's own layout (`<prefix>:<queue>:<id>`, as the
   * Lua scripts read it too): read directly where only its data is wanted, without BullMQ.
   */
  job(shard: number, jobId: string): string;
  lease(shard: number): string;
  /** A shard op's large result, between the owner's answer and its caller's read (op-result-spill.ts). */
  opResult(shard: number, jobId: string): string;
  /** The stream of call and approval events. */
  readonly events: string;
  usage(workspace: string, day: string): string;
  readonly usageIndex: string;
  /** One approval's record (a hash). */
  approval(id: string): string;
  /** A random value made when Redis first holds approvals, part of each approval id (`ApprovalStore.epoch`). */
  readonly approvalEpoch: string;
  /** Pending approvals, scored by expiry. */
  readonly approvalsPending: string;
  /** Every approval ever made, scored by creation time. */
  readonly approvalsAll: string;
  /** A workspace's pending approvals, scored by creation time (its inbox reads only its own). */
  approvalsPendingOf(workspace: string): string;
  /** A workspace's decided approvals, scored by decision time. */
  approvalsDecidedOf(workspace: string): string;
  /** A workspace's share of `approvalsAll`, scored by creation time (`GET /v1/approvals` reads only its own). */
  approvalsAllOf(workspace: string): string;
  /** A workspace's share of `approvalsPending`, scored by expiry (`GET /v1/approvals?state=pending`). */
  approvalsExpiringOf(workspace: string): string;
  /**
   * People's decisions not yet announced and their calls not yet woken, scored by decision time
   * (approval-transition.lua adds, `ApprovalService.announce` removes; see undelivered-decisions.ts).
   */
  readonly decisionsUndelivered: string;
  /**
   * Set once every approval made before the per-workspace indexes is in all four of them (see
   * `ApprovalStore.backfill`). Named anew (`:2`) when an index is added, so a service the earlier
   * backfill marked walks once more.
   */
  readonly approvalsIndexed: string;
  /**
   * Members revoked in the last day (`deciderId`, scored by when), in the approvals' slot so that a decision's transition
   * checks it in its own step (`MemberRegistry.revoke` writes it before the member record).
   */
  readonly revokedDeciders: string;
  /** A workspace's members: name → JSON record (role, key hash, revoked). */
  members(workspace: string): string;
  /** Every member key's sha256 → `<workspace>/<name>`. */
  readonly memberKeys: string;
  /** Registered workspaces: name → JSON record (plan). */
  readonly workspaces: string;
  /** A workspace's registered agents: slug → JSON profile (display name, settings, surface). */
  agents(workspace: string): string;
  /** A workspace's agent keys: key id → JSON record (agent, key hash, grants, revoked). */
  agentKeys(workspace: string): string;
  /** Every active agent key's sha256 → `<workspace>/<key id>`. */
  readonly agentKeyIndex: string;
  /**
   * The pub/sub channel every registry change (workspace, agent, key, member) is announced on,
   * so processes that cache who a key is drop what they hold at once.
   */
  readonly registryChanges: string;
  /** Worker ids that published their executor pool's status, scored by when (ms). */
  readonly executorsIndex: string;
  /** One worker's executor pool status (JSON, with a short TTL). */
  executorStatus(worker: string): string;
  /** A web page session, by the sha256 of its cookie (JSON, with a TTL). */
  webSession(idHash: string): string;
  /** A member's web sessions (the sha256 of each cookie), scored by when each began (ms). */
  webMemberSessions(workspace: string, member: string): string;
  /** A restore form's submission, by the sha256 of who sent it, its one-time token and its fields: running, or where its outcome is (JSON, with a TTL). */
  restoreOnce(hash: string): string;
  /**
   * The restores in place of one database lately done (a list of JSON records, newest last, kept
   * as long as results are): a write's late answer says when one took the write back (`taken-back.ts`).
   */
  restoresOf(database: string): string;
  /** A workspace's offloaded results held in the blob store: `<id>:<bytes>`, scored by expiry (ms). */
  offloaded(workspace: string): string;
  /** A workspace's statements killed from outside lately, by digest (outside-kill-note.lua; see `src/executor/outside-kills.ts`). */
  outsideKills(workspace: string): string;
  /**
   * What a caller's own call id was first used for (JSON: shard, database, fingerprint), by call
   * key. No hash tag: one small key per call, spread over a cluster like the calls themselves.
   */
  callIdClaim(callKey: string): string;
  /**
   * The call id an MCP write without a call id of its own took while it waits (a string), by
   * `<workspace>.<caller>.<digest of tool, arguments and settings>`: the same write sent again
   * joins it (`PendingCallJoins`).
   */
  mcpPendingCall(joinKey: string): string;
  /**
   * How many sends took the call id of the join entry `entry` (an `mcpPendingCall` key) and may
   * not have been taken yet (a count, beside the entry and with its TTL).
   */
  mcpPendingSends(entry: string): string;
  /** One MCP task (JSON: its owner, call id, task and result), by task id. */
  mcpTask(taskId: string): string;
  /** The mark of a task its client cancelled (`tasks/cancel`), beside the task: cancelled stays cancelled. */
  mcpTaskCancelled(taskId: string): string;
  /**
   * The task of one principal's (`<workspace>.<caller>`) call `callId`: its task id. The same
   * call sent again as a task answers that task, so a call has one task however often it is sent.
   */
  mcpTaskOfCall(owner: string, callId: string): string;
  /** One principal's tasks (`<workspace>.<caller>`), for `tasks/list`: a sorted set of `<created ms>:<task id>`. */
  mcpTasksOf(owner: string): string;
  /**
   * A call-rate counter: one per workspace (`of: 'workspace'`, no subject) and one per key
   * (`of: 'key'`, the key's or agent's subject), each its own Redis key, so no caller's count is
   * another's. Under the workspace's budget hash tag: one script counts a call's rates and its
   * Redis budget together (`budget-note.lua`). Named by its window (`windowS`): a restart with
   * another `RATE_LIMIT_WINDOW_S` counts afresh rather than refuse by the old window's counts and
   * time left ("1 call per 600 s … again in 2 s", session 35, N11); the old counters expire.
   */
  callRate(workspace: string, of: 'workspace' | 'key', windowS: number, subject?: string): string;
  /** Each shard's last backup run and last successful one (`last:<shard>`, `ok:<shard>` → JSON). */
  readonly backupRuns: string;
  /**
   * What a workspace holds in Redis (see `WorkspaceRedisBudget`): `ledger` scores each entry
   * (`<call key>|<kind>:<bytes>`) by when it goes, `held` is their sum. One hash tag per
   * workspace, so the script that keeps both touches one slot.
   */
  redisBudget(workspace: string): { ledger: string; held: string };
  /** Each workspace's Redis budget held, as last counted (a sorted set by bytes), for `/metrics`' top workspaces. */
  redisBudgetIndex: string;
  /**
   * OAuth sign-in (src/oauth/): a registered client, a code, a grant, an access or refresh token
   * (by its sha256), a member's grants (`grants`, id `<workspace>/<member>`), and the
   * registration rate's counters (`rate`, id `register`), and the registered clients nobody
   * has signed in through yet (`clients`, id `unconsented`), and the grants holding a registered
   * client (`holders`, id the client's), and the code and refresh tokens' records of a grant by
   * when each was issued (`tokens`, id the grant's). One hash tag.
   */
  oauth(kind: 'client' | 'code' | 'grant' | 'access' | 'refresh' | 'grants' | 'rate' | 'clients' | 'holders' | 'tokens', id: string): string;
  /**
   * The deployment's SHARD_COUNT, as its workers last published it at start (a decimal string):
   * a client given no `shardCount` reads it, one given another answers CONFIG_MISMATCH.
   */
  readonly shardCount: string;
}

/** Builds the key names for one deployment prefix. */
export function keysFor(prefix: string): Keys {
  return {
    bullPrefix: prefix,
    queueName: (shard) => `{shard-${shard}}`,
    job: (shard, jobId) => `${prefix}:{shard-${shard}}:${jobId}`,
    lease: (shard) => `${prefix}:{shard-${shard}}:lease`,
    opResult: (shard, jobId) => `${prefix}:{shard-${shard}}:op-result:${jobId}`,
    events: `${prefix}:{calls}:events`,
    usage: (workspace, day) => `${prefix}:{calls}:usage:${workspace}:${day}`,
    usageIndex: `${prefix}:{calls}:usage-index`,
    approval: (id) => `${prefix}:{approvals}:ap:${id}`,
    approvalEpoch: `${prefix}:{approvals}:epoch`,
    approvalsPending: `${prefix}:{approvals}:pending`,
    approvalsAll: `${prefix}:{approvals}:all`,
    approvalsPendingOf: (workspace) => `${prefix}:{approvals}:ws-pending:${workspace}`,
    approvalsDecidedOf: (workspace) => `${prefix}:{approvals}:ws-decided:${workspace}`,
    approvalsAllOf: (workspace) => `${prefix}:{approvals}:ws-all:${workspace}`,
    approvalsExpiringOf: (workspace) => `${prefix}:{approvals}:ws-expiring:${workspace}`,
    decisionsUndelivered: `${prefix}:{approvals}:undelivered`,
    approvalsIndexed: `${prefix}:{approvals}:ws-indexed:2`,
    revokedDeciders: `${prefix}:{approvals}:revoked-deciders`,
    members: (workspace) => `${prefix}:{members}:ws:${workspace}`,
    memberKeys: `${prefix}:{members}:keys`,
    // The registry shares the members' hash tag: one slot for every record and key index.
    workspaces: `${prefix}:{members}:workspaces`,
    agents: (workspace) => `${prefix}:{members}:agents:${workspace}`,
    agentKeys: (workspace) => `${prefix}:{members}:akeys:${workspace}`,
    agentKeyIndex: `${prefix}:{members}:akey-index`,
    registryChanges: `${prefix}:{members}:registry-changed`,
    executorsIndex: `${prefix}:{executors}:index`,
    executorStatus: (worker) => `${prefix}:{executors}:w:${worker}`,
    webSession: (idHash) => `${prefix}:{web}:session:${idHash}`,
    webMemberSessions: (workspace, member) => `${prefix}:{web}:member-sessions:${workspace}:${member}`,
    restoreOnce: (hash) => `${prefix}:{web}:restore-once:${hash}`,
    restoresOf: (database) => `${prefix}:restores:${database}`,
    offloaded: (workspace) => `${prefix}:{results}:ws:${workspace}`,
    outsideKills: (workspace) => `${prefix}:{outside-kills}:${workspace}`,
    callIdClaim: (callKey) => `${prefix}:call-id:${callKey}`,
    mcpPendingCall: (joinKey) => `${prefix}:mcp-join:${joinKey}`,
    mcpPendingSends: (entry) => `${entry}:sends`,
    mcpTask: (taskId) => `${prefix}:mcp-task:${taskId}`,
    mcpTaskCancelled: (taskId) => `${prefix}:mcp-task-cancelled:${taskId}`,
    mcpTasksOf: (owner) => `${prefix}:mcp-tasks:${owner}`,
    mcpTaskOfCall: (owner, callId) => `${prefix}:mcp-task-of:${owner}:${callId}`,
    callRate: (workspace, of, windowS, subject) => `${prefix}:{budget-${workspace}}:call-rate:${windowS}s:${of}${subject === undefined ? '' : `:${subject}`}`,
    backupRuns: `${prefix}:{backups}:runs`,
    redisBudget: (workspace) => ({ ledger: `${prefix}:{budget-${workspace}}:ledger`, held: `${prefix}:{budget-${workspace}}:held` }),
    redisBudgetIndex: `${prefix}:redis-budget-index`,
    oauth: (kind, id) => `${prefix}:{oauth}:${kind}:${id}`,
    shardCount: `${prefix}:shard-count`,
  };
}
