/** How one doctor check came out: fine, worth changing, or a setting that loses data or stops agentdb. */
export type CheckStatus = 'ok' | 'warn' | 'fail';

/** One check of `agentdb doctor`: what it found, and what to change when it is not ok. */
export interface CheckResult {
  /** A stable id (`redis-persistence`, `disk-free`, …), for scripts reading `--json`. */
  check: string;
  status: CheckStatus;
  /** What was found, in a sentence. */
  detail: string;
  /** What to change, when the status is not ok. */
  fix?: string;
}

/** A check's result; `fix` is kept only when the status asks for a change. */
export function result(check: string, status: CheckStatus, detail: string, fix?: string): CheckResult {
  return { check, status, detail, ...(status !== 'ok' && fix ? { fix } : {}) };
}
