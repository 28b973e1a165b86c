import type { ExecutorPool } from '../executor/executor-pool.ts';
import type { Metrics } from '../metrics.ts';

/** Adds a worker's gauges to `metrics`: its executor children by state, statements waiting for one, shards owned, capture lag. */
export function registerWorkerGauges(metrics: Metrics, executor: ExecutorPool, ownedShards: () => number): void {
  metrics.gauge('agentdb_executor_children', "This worker's executor children, by state (idle, running, starting, down).", ['state'], () => {
    const byState = new Map<string, number>();
    for (const c of executor.status().children) byState.set(c.state, (byState.get(c.state) ?? 0) + 1);
    return [...byState].map(([state, value]) => ({ labels: { state }, value }));
  });
  metrics.gauge('agentdb_executor_waiting_statements', 'Statements waiting for an executor child of this worker (queueing).', [], () => [
    { value: executor.status().waiting },
  ]);
  metrics.gauge('agentdb_owned_shards', 'Shards this worker holds the lease of.', [], () => [{ value: ownedShards() }]);
  metrics.gauge(
    'agentdb_history_capture_lag_seconds',
    "Seconds the oldest commit that history lacks has waited in its WAL, over the databases this worker's executor children have open (copies failing, e.g. a full history volume); 0 when history holds every commit.",
    [],
    () => [{ value: executor.captureLagSeconds() }],
  );
}
