import { Counter, Gauge, Histogram, Registry } from 'prom-client';

/** How long one gauge's read may take at a scrape (Prometheus's default scrape timeout is 10 s). */
const GAUGE_READ_MS = 2000;

/** One value of a gauge read when `/metrics` is asked, with its labels. */
export interface GaugeSample {
  labels?: Record<string, string | number>;
  value: number;
}

/**
 * The process's metrics, as `GET /metrics` serves them (Prometheus text format, prom-client).
 * Made by the process entry (`agentdb start`) and passed down to what counts: nothing registers
 * on import, and every instance has its own registry (tests make several). Counters are this
 * process's since it started; gauges added with {@link Metrics.gauge} are read at each scrape.
 */
export class Metrics {
  /** This instance's own prom-client registry: what `GET /metrics` serves, or what a runtime merges into its own. */
  readonly registry = new Registry();

  /** Finished calls, by tool and outcome (`ok`, or the error code). */
  readonly calls = new Counter({
    name: 'agentdb_calls_total',
    help: 'Calls finished by this process, by tool and outcome (ok, or the error code).',
    labelNames: ['tool', 'outcome'] as const,
    registers: [this.registry],
  });

  /** A call's time in the worker, from its job's start to its answer (parked time included). */
  readonly callSeconds = new Histogram({
    name: 'agentdb_call_duration_seconds',
    help: "Seconds from a call's job start in the worker to its answer, by tool (a parked call's wait for a person included).",
    labelNames: ['tool'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 120],
    registers: [this.registry],
  });

  /** Executor children killed or lost: `timeout` (past STATEMENT_TIMEOUT_MS), `resource` (died in a statement), `killed` (SIGKILLed from outside in a statement), `exited` (died idle). */
  readonly executorKills = new Counter({
    name: 'agentdb_executor_kills_total',
    help: 'Executor children killed at a statement deadline (timeout), dead during a statement (resource), SIGKILLed from outside during one (killed), or dead while idle (exited).',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });

  /** Executor children started in place of a dead one. */
  readonly executorRestarts = new Counter({
    name: 'agentdb_executor_restarts_total',
    help: 'Executor children started in place of one that died or was killed.',
    registers: [this.registry],
  });

  /**
   * Statements run in the executor's overflow lane (a child beyond the pool, while every pooled
   * child runs a long statement), by whether they ran past EXECUTOR_LONG_MS of executor time
   * (`long`: the workspace loses the lane for a while) or not (`short`).
   */
  readonly executorOverflow = new Counter({
    name: 'agentdb_executor_overflow_runs_total',
    help: "Statements run on the executor's overflow child while every pooled child ran a long statement, by whether they ran long too (long) or not (short).",
    labelNames: ['ran'] as const,
    registers: [this.registry],
  });

  /**
   * Steps refused for a tenant bound, by `quota`: `disk` (databases or bytes on disk, by a
   * worker), and calls and lookups a client refused before any worker saw them: `rate`,
   * `redis` (the workspace's Redis budget), `headroom` (Redis near its maxmemory).
   */
  readonly refusals = new Counter({
    name: 'agentdb_quota_refusals_total',
    help: 'Steps refused for a quota or rate limit (QUOTA_EXCEEDED, RATE_LIMITED), by which bound.',
    labelNames: ['quota'] as const,
    registers: [this.registry],
  });

  /** Calls that answered a history fault: capture could not keep up (STORAGE_FULL) or its quota (HISTORY_QUOTA). */
  readonly captureFailures = new Counter({
    name: 'agentdb_capture_failures_total',
    help: 'Writes refused because history capture failed or was full (STORAGE_FULL, HISTORY_QUOTA), by code.',
    labelNames: ['code'] as const,
    registers: [this.registry],
  });

  /** Reads of the past (`as_of`) that ran: their moment found kept, or restored from history for them. */
  readonly asOfReads = new Counter({
    name: 'agentdb_as_of_reads_total',
    help: 'Reads of a past moment (as_of) that ran, by whether their moment was kept or restored for them.',
    labelNames: ['moment'] as const,
    registers: [this.registry],
  });

  /**
   * A gauge read at each scrape: `read` answers its samples (a Redis or disk look). A read that
   * fails or takes over 2 s leaves the gauge without samples for that scrape (NaN for one without
   * labels); the others still answer.
   */
  gauge(name: string, help: string, labelNames: readonly string[], read: () => Promise<GaugeSample[]> | GaugeSample[]): void {
    new Gauge({
      name,
      help,
      labelNames,
      registers: [this.registry],
      async collect() {
        this.reset();
        let samples: GaugeSample[];
        let timer: NodeJS.Timeout | undefined;
        try {
          // A Redis that does not answer must not hold the scrape past Prometheus's timeout.
          samples = await Promise.race([
            Promise.resolve().then(read),
            new Promise<never>((_, reject) => {
              timer = setTimeout(() => reject(new Error('timed out')), GAUGE_READ_MS);
            }),
          ]);
        } catch {
          // prom-client shows a gauge without labels as 0 when nothing was set: a Redis that did
          // not answer must not read as "no pending approvals". NaN says "unknown".
          if (labelNames.length === 0) this.set(Number.NaN);
          return;
        } finally {
          clearTimeout(timer);
        }
        for (const s of samples) this.set(s.labels ?? {}, s.value);
      },
    });
  }

  /** The Prometheus text of every metric. */
  text(): Promise<string> {
    return this.registry.metrics();
  }

  /** The content type of {@link text}. */
  get contentType(): string {
    return this.registry.contentType;
  }
}
