import type { Tracer } from '@opentelemetry/api';
import { QueueKeys, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import type { AgentShare, HeldTurn } from '../calls/agent-share.ts';
import type { Config } from '../config.ts';
import type { CallJobData } from '../contracts/call.ts';
import { SHARD_OP_PREFIX, opWorkspace, type ShardOpJobData } from '../contracts/shard-op.ts';
import type { ExecutorPool } from '../executor/executor-pool.ts';
import type { WorkspaceQuota } from '../history/workspace-quota.ts';
import type { Logger } from '../logger.ts';
import { handleErrorEvents } from '../redis/error-events.ts';
import type { Keys } from '../redis/keys.ts';
import { queueTelemetry } from '../tracing.ts';
import type { CallJobProcessor } from './call-job-processor.ts';
import { spillLarge } from './op-result-spill.ts';
import { runShardOp, type ShardOpHandler } from './ops/shard-ops.ts';
import { ShardWorker } from './shard-worker.ts';
import { replaysStalled, STALLS_ALLOWED } from '../calls/lost-run-replay.ts';
import { noteRestore } from '../calls/taken-back.ts';
import type { StaleMarkers } from './stale-markers.ts';
import type { UnheldJobs } from './unheld-jobs.ts';

/** What a shard's BullMQ worker runs its jobs with: the pool's, shared by every shard it owns. */
export interface ShardWorkerDeps {
  config: Config;
  logger: Logger;
  redis: Redis;
  keys: Keys;
  executor: ExecutorPool;
  quota: WorkspaceQuota;
  calls: CallJobProcessor;
  agentShare: AgentShare;
  /** The workspace's share of a shard, taken before its agent's (WORKSPACE_SHARD_CONCURRENCY). */
  workspaceShare: AgentShare;
  markers: StaleMarkers;
  unheld: UnheldJobs;
  ops: Record<string, ShardOpHandler>;
  tracer?: Tracer;
}

/**
 * The worker of a shard just owned ({@link ShardWorkerPool}'s `own`): a call job runs in its
 * agent's share of the shard, a shard op by its handler, each held (UnheldJobs) and with the
 * queue's marker checked (StaleMarkers); its ends are told to the call processor.
 */
export function startShardWorker(shard: number, d: ShardWorkerDeps): ShardWorker {
  const { config, logger } = d;
  const keys = new QueueKeys(d.keys.bullPrefix).getKeys(d.keys.queueName(shard));
  const markerKeys = { marker: keys.marker!, wait: keys.wait!, prioritized: keys.prioritized!, delayed: keys.delayed! };
  // Set below, before BullMQ hands it its first job.
  let worker: ShardWorker | undefined;
  // One synchronous step and one promise a job (issue 31): the marker's count, the hold, the two
  // shares' turns when both are free, then the job's work, and one settlement that gives them
  // back in the order they were nested (were ~5 async layers, a promise and a microtask each).
  const processor = (job: Job, token?: string): Promise<unknown> => {
    const id = job.id!;
    const n = d.markers.enter(shard);
    d.unheld.take(token!, id);
    let done: Promise<unknown>;
    let turns: CallTurns | undefined;
    try {
      if (job.name.startsWith(SHARD_OP_PREFIX)) done = runOp(d, job as Job<ShardOpJobData>, token!, shard);
      else {
        turns = callTurns(d, job as Job<CallJobData>, shard);
        const work = () => d.calls.process(job as Job<CallJobData>, token!, shard);
        if (!turns) done = shared(d, job as Job<CallJobData>, token!, shard, (job as Job<CallJobData>).data.workspace, work);
        else done = turns.agent ? work() : d.agentShare.run(job as Job<CallJobData>, token!, shard, work);
      }
    } catch (err) {
      done = Promise.reject(err);
    }
    // After the work's synchronous part: the statement is on its way to the child first.
    d.markers.started(markerKeys, n, worker?.markerChecked(job) ?? false);
    return done.then(
      (value) => {
        if (turns) leaveTurns(d, turns);
        d.markers.leave(shard);
        return value;
      },
      (err: unknown) => {
        if (turns) leaveTurns(d, turns);
        d.unheld.thrown(token!, id, err);
        d.markers.leave(shard);
        throw err;
      },
    );
  };
  worker = new ShardWorker(d.keys.queueName(shard), processor, {
    connection: d.redis,
    prefix: d.keys.bullPrefix,
    concurrency: config.workerConcurrency,
    lockDuration: config.lockDurationMs,
    stalledInterval: config.stalledIntervalMs,
    // BullMQ's own default, named where `replaysStalled` reads it.
    maxStalledCount: STALLS_ALLOWED,
    autorun: true,
    // A lone call's announce goes in the script that completes its job (`CallCompletion.takeRider`).
    riderFor: (id) => d.calls.riderFor(id),
    // A write or drop stalled twice is answered from its record, a read run once more, not failed unrun (lost-run-replay.ts).
    replaysStalled: (job) => !job.name.startsWith(SHARD_OP_PREFIX) && replaysStalled(job as Job<CallJobData>),
    // With tracing on, BullMQ's `process` span continues the trace its job carries from the caller.
    ...(d.tracer ? { telemetry: queueTelemetry() } : {}),
  });
  d.calls.carryRiders();
  handleErrorEvents(worker, logger, 'shard worker error', { shard });
  worker.on('completed', (job) => {
    d.unheld.ended(job.token, job.id);
    d.calls.completed(job.id!);
  });
  worker.on('failed', (job, err) => {
    d.unheld.ended(job?.token, job?.id);
    d.calls.failed(job, err, shard);
  });
  return worker;
}

/**
 * A shard op, its large result spilled (op-result-spill.ts). An op on a workspace's database
 * (the web page's grid and CSV export, history, restores) takes that workspace's share of the
 * shard as one agent's calls do: in the hostile review one member's 30 CSV exports held all 32
 * slots of a shard, waiting behind their one database, and another workspace's one-row reads
 * there went from 24 ms to 6.6 s.
 */
function runOp(d: ShardWorkerDeps, job: Job<ShardOpJobData>, token: string, shard: number): Promise<unknown> {
  const run = () =>
    runShardOp(d.ops, job, {
      shard,
      executor: d.executor,
      config: d.config,
      logger: d.logger,
      quota: d.quota,
      noteRestore: (database, record) => noteRestore(d.redis, d.keys, database, record, d.config.resultTtlS),
    }).then((outcome) => spillLarge(d.redis, d.keys.opResult(shard, job.id!), outcome));
  const workspace = opWorkspace(job.data);
  return workspace === undefined ? run() : shared(d, job as unknown as Job<CallJobData>, token, shard, workspace, run, `${workspace}\u0000ops`);
}

/** Runs `work` within the workspace's share of the shard, then its agent's (`who`: its shard ops'), or puts the job back. */
function shared<T>(
  d: ShardWorkerDeps,
  job: Job<CallJobData>,
  token: string,
  shard: number,
  workspace: string,
  work: () => Promise<T>,
  who?: string,
): Promise<T> {
  return d.workspaceShare.run(job, token, shard, () => d.agentShare.run(job, token, shard, work, who), workspace);
}

/** A call's turns taken in the processor's step: its workspace's, and its agent's when that one was free too. */
interface CallTurns {
  workspace: HeldTurn;
  agent: HeldTurn | undefined;
}

/**
 * The turns a call's job takes at once in its workspace's share and its agent's (nearly always
 * both, but for one agent's burst), given back by {@link leaveTurns} as the call settles; with
 * only the workspace's, the agent's is waited for (`AgentShare.run`); undefined when the
 * workspace's share is full: the job then goes as {@link shared} (waiting in the worker, or put back).
 */
function callTurns(d: ShardWorkerDeps, job: Job<CallJobData>, shard: number): CallTurns | undefined {
  const workspace = d.workspaceShare.tryEnter(job, shard, job.data.workspace);
  return workspace && { workspace, agent: d.agentShare.tryEnter(job, shard) };
}

/** Gives back {@link callTurns}' turns, the agent's first, as the nested shares did. */
function leaveTurns(d: ShardWorkerDeps, turns: CallTurns): void {
  if (turns.agent) d.agentShare.leave(turns.agent);
  d.workspaceShare.leave(turns.workspace);
}
