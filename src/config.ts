// The one schema over the environment, composed of parts by concern (src/config/*.ts): each part
// keeps its variables' entries, their Config fields and the mapping from one to the other
// together, since every new variable touches all three. This file joins them, validates once and
// freezes the result; config is read through it alone (issue 26).

import { z } from 'zod';
import { type DeploymentConfig, deploymentConfig, deploymentEnv } from './config/deployment.ts';
import { type HistoryBackupsConfig, historyBackupsConfig, historyBackupsEnv } from './config/history-backups.ts';
import { type HttpConfig, httpConfig, httpEnv } from './config/http.ts';
import { type LimitsConfig, limitsConfig, limitsEnv } from './config/limits.ts';
import { type WorkersConfig, workersConfig, workersEnv } from './config/workers.ts';

export { PREFIX_PATTERN, REDIS_URL_PATTERN } from './config/deployment.ts';
export type { RateLimitSettings } from './config/limits.ts';

/**
 * The environment agentdb reads, and nothing else. Entry points call {@link loadConfig} once
 * and pass the result down; no module reads `process.env` on its own.
 */
const envSchema = z.object({ ...deploymentEnv, ...workersEnv, ...limitsEnv, ...historyBackupsEnv, ...httpEnv });

/** Every variable agentdb reads (docs/operations.md's table lists each; a test keeps them in step). */
export const ENV_NAMES: readonly string[] = Object.freeze(Object.keys(envSchema.shape));

/** The validated, frozen configuration. */
export interface Config extends DeploymentConfig, WorkersConfig, LimitsConfig, HistoryBackupsConfig, HttpConfig {}

/** Thrown when the environment is invalid; the message names every bad variable. */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

/**
 * Reads and validates the configuration from `env` (empty strings count as unset).
 * @throws ConfigError naming each variable that is wrong.
 */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const present = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  // Refused rather than ignored: an operator who set 7 days in seconds would otherwise get 24 h.
  if (present.RESULT_TTL_S !== undefined) {
    throw new ConfigError('invalid configuration:\n  RESULT_TTL_S: replaced by RESULT_TTL_HOURS (hours, default 24); set that instead');
  }
  const parsed = envSchema.safeParse(present);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
    throw new ConfigError(`invalid configuration:\n  ${lines.join('\n  ')}`);
  }
  const e = parsed.data;
  if (e.BLOB_STORE === 's3' && !e.S3_BUCKET) throw new ConfigError('invalid configuration:\n  S3_BUCKET: required when BLOB_STORE=s3');
  return Object.freeze({ ...deploymentConfig(e), ...workersConfig(e), ...limitsConfig(e), ...historyBackupsConfig(e), ...httpConfig(e) });
}
