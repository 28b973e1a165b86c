import { z } from 'zod';
import { PREFIX_PATTERN, REDIS_URL_PATTERN } from '../config.ts';
import { describeIssues } from '../contracts/describe-issues.ts';
import { AgentDbError } from '../errors.ts';

const positiveInt = z.number().int().positive();

/**
 * The checks of an `AgentDbClient`'s options, the same the service's settings get (REDIS_URL,
 * AGENTDB_PREFIX, SHARD_COUNT …): a runtime's typo must fail where it is made, not later as a
 * call nobody answers (a prefix no worker listens under) or a connection retried forever.
 */
const clientOptions = z.looseObject({
  redisUrl: z
    .string()
    .refine((u) => REDIS_URL_PATTERN.test(u) && URL.canParse(u), 'must be a redis:// or rediss:// URL')
    .optional(),
  prefix: z.string().regex(PREFIX_PATTERN, 'letters, digits, _ and - only (1 to 64)').optional(),
  shardCount: z.number().int().min(1).max(4096).optional(),
  resultTtlS: positiveInt.optional(),
  approvalTtlMs: positiveInt.optional(),
  maxCallBytes: positiveInt.optional(),
  redisBytesPerWorkspace: z.number().int().min(0).optional(),
  redisMemoryHeadroomPercent: z.number().min(0).max(100).optional(),
  tracing: z.boolean().optional(),
});

/** @throws AgentDbError INVALID_ARGUMENTS naming each bad option, before anything connects. */
export function checkClientOptions(opts: unknown): void {
  const parsed = clientOptions.safeParse(opts ?? {});
  if (!parsed.success) throw new AgentDbError('INVALID_ARGUMENTS', `AgentDbClient: ${describeIssues(parsed.error.issues)}`);
}
