import { AgentDbClient } from '../calls/client.ts';
import type { Config } from '../config.ts';
import type { Metrics } from '../metrics.ts';

/**
 * The client library as a command runs it, from the service's settings: one place, so every
 * command builds it the same way (four copies had drifted: two left MAX_CALL_BYTES out, which
 * the HTTP and MCP routes check again by themselves). `metrics`: where it counts its refusals.
 */
export function clientOf(config: Config, metrics?: Metrics): AgentDbClient {
  return new AgentDbClient({
    redisUrl: config.redisUrl,
    prefix: config.prefix,
    shardCount: config.shardCount,
    resultTtlS: config.resultTtlS,
    approvalTtlMs: config.approvalTtlMs,
    maxCallBytes: config.maxCallBytes,
    rateLimits: config.rateLimits,
    redisBytesPerWorkspace: config.redisBytesPerWorkspace,
    redisMemoryHeadroomPercent: config.redisMemoryHeadroomPercent,
    tracing: config.tracing,
    ...(metrics ? { metrics } : {}),
  });
}
