import { pino, type Logger } from 'pino';

/**
 * JSON logs on stderr, so that commands whose stdout is data (`agentdb call`) stay parseable.
 * Params and keys are never logged: callers log ids, codes and timings only.
 */
export function createLogger(level: string, name = 'agentdb'): Logger {
  return pino({ name, level, base: { pid: process.pid } }, pino.destination({ dest: 2, sync: false }));
}

export type { Logger };
