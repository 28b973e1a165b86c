// One file on purpose, past 300 lines: the registry is one table (ERRORS, two thirds of it),
// and what follows it (ErrorCode, errorBody, AgentDbError, codeOf) is how every layer reads that
// table. Apart, the table and its readers would only import each other (issue 26).

/**
 * The one registry of agentdb error codes.
 *
 * Errors cross process and queue boundaries (executor child → worker → Redis → client), so they
 * are matched by `code`, never by `instanceof`. Every code here is documented in
 * `docs/errors.md`; a test keeps the two in step.
 */

/** One entry of the registry. */
export interface ErrorSpec {
  /** What went wrong, in one sentence an agent can read. */
  readonly message: string;
  /** What the caller can do about it. */
  readonly hint: string;
  /** True when the same call may succeed if simply tried again later. */
  readonly retryable: boolean;
  /** The HTTP status an adapter answers with. */
  readonly status: number;
  /**
   * The request failing, not the tool refusing: answered at once, and nothing is kept for it
   * (`refusesTheRequest`), as any refusal with `retryAfter`.
   */
  readonly ofTheRequest?: true;
}

/**
 * Every error code agentdb answers, with its message, hint, retryable flag and HTTP status: the
 * one registry (docs/errors.md lists the same codes, kept in step by errors-doc.test.ts).
 */
export const ERRORS = {
  INVALID_ARGUMENTS: {
    message: 'The request or its arguments are not valid.',
    hint: 'Fix the field named in the message (for tool calls, `agentdb tools --json` prints every contract).',
    retryable: false,
    status: 400,
  },
  CALL_TOO_LARGE: {
    message: "The call's arguments are larger than allowed; nothing was stored or run.",
    hint: 'Send less per call (at most MAX_CALL_BYTES, 1 MB by default, of JSON arguments, params included): split the rows over several calls.',
    retryable: false,
    status: 413,
  },
  UNKNOWN_TOOL: {
    message: 'There is no tool by that name.',
    hint: 'Use one of DATA_DESCRIBE_SCHEMA, DATA_QUERY_SQL, DATA_WRITE_SQL, DATA_DROP_TABLE.',
    retryable: false,
    status: 400,
  },
  SQL_SYNTAX: {
    message: 'The SQL could not be parsed.',
    hint: 'Write one statement in the SQLite dialect; bind values with ? and pass them in params.',
    retryable: false,
    status: 400,
  },
  SQL_MULTIPLE_STATEMENTS: {
    message: 'The SQL holds more than one statement.',
    hint: 'Send one statement per call.',
    retryable: false,
    status: 400,
  },
  SQL_REFUSED: {
    message: 'The statement is not allowed here.',
    hint: 'Read the reason: queries take one SELECT, writes one INSERT/UPDATE/DELETE/CREATE/ALTER, drops use DATA_DROP_TABLE.',
    retryable: false,
    status: 403,
  },
  DROP_REFERENCED: {
    message: 'Rows of other tables refer to this table through their foreign keys.',
    hint: 'Delete those rows, or set their reference to NULL, with DATA_WRITE_SQL (or drop the referring tables) first, then drop this table again.',
    retryable: false,
    status: 409,
  },
  SQL_ERROR: {
    message: 'SQLite refused the statement.',
    hint: 'Read the reason (a missing table, a constraint, a type); DATA_DESCRIBE_SCHEMA shows what exists.',
    retryable: false,
    status: 400,
  },
  NOT_PERMITTED: {
    message: 'This caller may not do that.',
    hint: "An agent writes only its own tables, or the shared ones with the shared-data grant, and only reads another agent's; a person decides only in workspaces they are a member of, and a drop of shared tables takes an admin.",
    retryable: false,
    status: 403,
  },
  INSUFFICIENT_SCOPE: {
    message: 'The app was not granted that.',
    hint: "The person who connected this app over OAuth granted it less than their role: a read grant may not write, and only a grant with drop may drop. Connect the app again and grant more on agentdb's consent page.",
    retryable: false,
    status: 403,
  },
  DATABASE_OFF: {
    message: 'The agent has no database.',
    // The most common first mistake (a call without settings): show the exact flag to pass.
    hint: 'Give the agent a database in its settings: "agent" (its own tables) or "workspace" (its own and the shared ones); from the CLI, --settings \'{"database":"agent"}\'.',
    retryable: false,
    status: 403,
  },
  NOT_FOUND: {
    // Not a list of kinds: it named tables, views, calls, approvals, members and databases, and
    // a key, an agent, a result or an undo point not found read "No such table … exists" (N10).
    message: 'Nothing by that name or id exists.',
    hint: "Check the name or id: DATA_DESCRIBE_SCHEMA lists tables and views, `agentdb approvals list` approvals; a database exists once something was written to it (<workspace> for the shared one, <workspace>/<agent> for an agent's).",
    retryable: false,
    status: 404,
  },
  LIMIT_EXCEEDED: {
    message: "The call would pass one of the plan's limits.",
    hint: 'Drop tables or rows you no longer need, or move to a larger plan.',
    retryable: false,
    status: 409,
  },
  STATEMENT_TIMEOUT: {
    message: 'The statement ran past its time limit and was stopped.',
    hint: 'Narrow the query (an index, a WHERE clause, a LIMIT) and try again.',
    retryable: false,
    status: 408,
  },
  RESOURCE_LIMIT: {
    message: 'The statement used more memory or resources than allowed and was stopped.',
    hint: 'Ask for less at once: fewer or smaller rows, no huge blobs.',
    retryable: false,
    status: 413,
  },
  HISTORY_QUOTA: {
    message: "The database's point-in-time history has reached its quota; nothing was written.",
    hint: 'Reads still work. Writes come back as the history prune removes what is older than HISTORY_RETENTION_DAYS; an operator can raise HISTORY_MAX_BYTES_PER_DB and restart the workers.',
    retryable: false,
    status: 507,
  },
  QUOTA_EXCEEDED: {
    message:
      'The workspace holds what its plan allows of a resource the service shares (Redis bytes, databases, disk bytes); nothing was stored, created or run.',
    hint: 'The detail names the bound, the figures and what brings room back. With `error.retryAfter` (the Redis budget), send it again after that many seconds, when its oldest kept call expires. Without it (the disk quota), do not send it again as it is: room comes back only in days, as history older than HISTORY_RETENTION_DAYS is pruned (dropping tables or deleting rows frees no disk bytes, and no command removes a database), or at once with a larger plan or quota setting from an operator (`agentdb usage --workspace W` shows the figures). Other workspaces are not affected.',
    // Not as it is (review L2): the disk quota's refusal passes only in days, and a caller looping
    // on it wasted its calls; the Redis budget's says when it passes (`retryAfter`).
    retryable: false,
    // The disk quota's: a 4xx no HTTP client or proxy sends again (a 429 tells every one of them
    // to, a 5xx many, and pages operators for what the tenant did). The Redis budget's carries
    // `retryAfter` and is answered 429 with Retry-After instead (`httpStatusOf`; session 29, L3);
    // without it (nothing kept expires first) it is this 403 too (session 32, A3).
    status: 403,
  },
  STORAGE_FULL: {
    message: "The server's disk is full; nothing was written.",
    hint: "Reads still work, and writes work again by themselves once the disk has room: try again later (a write refused so ran nothing, and runs when sent again under the same call id). A read as of, or a restore to, a moment later than the last commit history holds waits for that room too (the detail names that commit: a moment up to it is whole now). This is not the plan's size limit: dropping data does not help. Operators: free space on the disk the message names (AGENTDB_DATA_DIR's, or its history folder's when that is a disk of its own).",
    retryable: true,
    status: 507,
  },
  SANDBOX_REFUSED: {
    message: 'This tool cannot run in a sandbox run.',
    hint: 'Nothing can wait for a person in a sandbox; drop the table from a real run.',
    retryable: false,
    status: 403,
  },
  DATABASE_CORRUPT: {
    message: 'The database file is not a readable SQLite database.',
    hint: 'An operator must restore it from history; nothing was changed.',
    retryable: false,
    status: 500,
  },
  HISTORY_OUT_OF_RANGE: {
    message: "The time asked for is outside the database's restorable history.",
    hint: 'Pick a moment between the earliest and latest times `agentdb history DB` shows (ISO time or unix seconds, not in the future); from the blob store (`--from-blob`), one the backups cover (the message names the earliest).',
    retryable: false,
    status: 400,
  },
  HISTORY_POSITION_FOREIGN: {
    message: "The history position given was given out by another database's history, not this database's; nothing was changed.",
    hint: "Take the position from this database's own activity list (`agentdb activity DB`: an entry's id or its restore-before) or `agentdb history DB`; positions of the same number name different states in different databases.",
    retryable: false,
    status: 400,
  },
  HISTORY_CORRUPT: {
    message:
      "A file of the database's history failed its check (a segment's checksum, a snapshot's sha256, or the rebuilt database's structure check, PRAGMA quick_check); nothing was changed.",
    hint: 'Restore to a moment in another generation (`agentdb history DB` lists them), or from the blob store; report the file named to an operator.',
    retryable: false,
    status: 500,
  },
  HISTORY_LOST: {
    message:
      "The moment asked for is in a stretch of the database's history that was lost (commits made then were never copied into its history); nothing was changed.",
    hint: '`agentdb history DB` lists the lost stretches (`lost`); restore to a moment before or after one.',
    retryable: false,
    status: 409,
  },
  AS_OF_CALL_UNKNOWN: {
    message: "The call id given as as_of made no write to this database that the database's records still hold.",
    hint: "Give the call id of a write to this same database from the last 7 days (its record is kept that long), or an ISO time: a write undone with a restore's undo keeps its activity entry but not its record, so read the moment before it by an ISO time a millisecond before that entry's `at`.",
    retryable: false,
    status: 404,
  },
  HISTORY_BEHIND: {
    message:
      "The moment asked for (a call id given as as_of, or a time later than the last commit history holds) has writes that are acknowledged and in the database but that the database's history has not captured yet, so that moment cannot be read or restored yet. Nothing ran.",
    hint: 'Try again shortly: history copies what it lacks on the next write or read of the database. When it stays behind, the disk that holds history is usually full (operators: `agentdb_history_capture_lag_seconds`, free space); an ISO time up to the last commit history holds (the detail names it) reads and restores whole meanwhile.',
    retryable: true,
    status: 503,
  },
  BACKUP_CONFLICT: {
    message: 'The blob store holds backups of this database that another deployment made; nothing of it was backed up.',
    hint: 'Back up each database from one deployment only: a database restored from the blob store elsewhere (`--from-blob`, a drill or a move) backs up to the same place. Stop the other, or move its backups (the message names the folder) aside and back up again; for a drill, restore `--into` a new name.',
    retryable: false,
    status: 409,
  },
  RESTORE_RUNNING: {
    message: 'Another restore of this database is running; this one did not start.',
    hint: 'Wait for it to finish, then look at `agentdb history DB` before restoring again.',
    retryable: true,
    status: 409,
  },
  UNDO_NOT_FOUND: {
    message: 'There is no such undo point for this database.',
    hint: 'Use an undo id a restore of this same database printed; `agentdb history DB` lists them.',
    retryable: false,
    status: 404,
  },
  DATABASE_EXISTS: {
    message: 'A database by that name already exists; nothing was changed.',
    hint: 'Restore into a new database name (`--into`), or restore the existing one in place.',
    retryable: false,
    status: 409,
  },
  ALREADY_EXISTS: {
    message: 'Something by that name already exists; nothing was changed.',
    hint: 'Use the one that exists, or pick another name; the message says how to replace it.',
    retryable: false,
    status: 409,
  },
  APPROVAL_REQUIRED: {
    message: 'This call needs a person to approve it.',
    hint: 'Wait for the decision; the call has not run.',
    retryable: false,
    status: 403,
  },
  APPROVAL_REJECTED: {
    message: 'A person rejected this call; it did not run.',
    hint: 'Read the reason, change the statement or the plan, and ask again only if it still makes sense.',
    retryable: false,
    status: 403,
  },
  APPROVAL_EXPIRED: {
    message: 'Nobody decided on this call in time; it expired and will never run.',
    hint: 'Call again if it is still needed; a person must approve it within APPROVAL_TTL_MS.',
    retryable: false,
    status: 410,
  },
  APPROVAL_CONFLICT: {
    message: 'This approval was already decided; the first decision stands.',
    hint: 'List the approval to see who decided it and how.',
    retryable: false,
    status: 409,
  },
  APPROVAL_STALE: {
    message: 'What was approved is no longer what would run; nothing ran.',
    hint: 'The object changed after the approval was asked for (renamed, replaced, rows added): look again and ask for a new approval.',
    retryable: false,
    status: 409,
  },
  RESULT_EXPIRED: {
    message: 'This offloaded result has expired and was deleted.',
    hint: 'Offloaded results are kept RESULT_TTL_HOURS (24 h by default) after their call: run the query again.',
    retryable: false,
    status: 410,
  },
  IDEMPOTENCY_CONFLICT: {
    message: 'This call id was already used for a different call; nothing ran.',
    hint: 'A call id is an idempotency key: send the same call again to get its outcome, or a new call under a new id.',
    retryable: false,
    status: 409,
    ofTheRequest: true,
  },
  UNAUTHENTICATED: {
    message: 'The request carries no valid key.',
    hint: 'Send `Authorization: Bearer adb_…` with a key from `agentdb members add` (or, for tool calls, `agentdb keys mint`); a revoked key never works again.',
    retryable: false,
    status: 401,
  },
  NO_WORKER: {
    message: 'No worker picked the call up in time; it was withdrawn and did not run.',
    hint: 'Check that `agentdb start` or `agentdb worker` runs for this prefix, then call again.',
    retryable: true,
    status: 503,
  },
  CONFIG_MISMATCH: {
    message: "This client's shard count is not the service's; nothing was sent.",
    hint: "Give the client the service's SHARD_COUNT, or leave its `shardCount` option out: it then reads the count the workers publish.",
    retryable: false,
    status: 500,
  },
  RETRY_LATER: {
    message: 'The agent\'s db_exec policy failed this call for now (policy "retryable-failure"); nothing ran.',
    hint: 'Try the call again later.',
    retryable: true,
    status: 503,
  },
  RATE_LIMITED: {
    message: 'Too many calls: a rate limit of the plan was reached; nothing ran.',
    hint: 'Send it again after `error.retryAfter` seconds (HTTP: the Retry-After header); spread calls out, or move to a larger plan.',
    retryable: true,
    status: 429,
    ofTheRequest: true,
  },
  REDIS_REFUSES_WRITES: {
    message: 'Redis answers, but refuses writes: it could not write to its own disk (MISCONF); nothing was changed.',
    hint: "Operators: free space on the disk of Redis's folder (its AOF and RDB files), or fix what Redis's log names; Redis takes writes again by itself once a write to its disk works. Then try again.",
    retryable: true,
    status: 503,
  },
  UNAVAILABLE: {
    message: 'A service agentdb needs did not answer.',
    hint: 'Try again shortly.',
    retryable: true,
    status: 503,
    ofTheRequest: true,
  },
  UNSUPPORTED_FRAMEWORK: {
    message:
      'A framework adapter (agentdb/ai-sdk, agentdb/openai-agents, agentdb/langchain) cannot load: its framework package is missing, or of a major version it does not support.',
    hint: 'Install the package at a version the message names (an optional peer dependency of agentdb), or import the adapter of the framework you use.',
    retryable: false,
    status: 500,
  },
  INTERNAL: {
    message: 'agentdb failed on its own account.',
    hint: 'Report the call id to an operator.',
    retryable: false,
    status: 500,
  },
} as const satisfies Record<string, ErrorSpec>;

/** Every stable error code. */
export type ErrorCode = keyof typeof ERRORS;

/** The error part of a failed result envelope. */
export interface ErrorBody {
  /** A stable code from the registry (docs/errors.md): what a program branches on. */
  code: ErrorCode;
  /** What happened, in words for a person or a model. */
  message: string;
  /** What to do about it. */
  hint: string;
  /** On RATE_LIMITED, and QUOTA_EXCEEDED by the Redis budget: seconds until the call may be sent again. */
  retryAfter?: number;
}

/**
 * The HTTP status of a refusal: 429 for one that says when it may be sent again (`retryAfter`:
 * RATE_LIMITED, and QUOTA_EXCEEDED by the Redis budget, which passes in minutes), else the
 * registry's (QUOTA_EXCEEDED by the disk quota, which passes in days: 403). The one place the
 * two meanings of QUOTA_EXCEEDED part over HTTP; every route answers through it.
 */
export function httpStatusOf(error: Pick<ErrorBody, 'code' | 'retryAfter'>): number {
  return error.retryAfter !== undefined ? 429 : ERRORS[error.code].status;
}

/**
 * Whether `error` refuses the request rather than answering its call: the call id names another
 * call (409), Redis is away (503), or it says when to send again (`retryAfter`: a rate, the Redis
 * budget; 429). The one rule of every surface: such a refusal is answered at once and keeps
 * nothing — `/v1/calls` with `httpStatusOf`, `/mcp` asked for a task with a JSON-RPC error, never
 * a task (a task kept 48 h outside the budget that refused its call: hostile review 18h, 3; and
 * one for a call id naming another call took the place of that call's own task: session 31, H6).
 * A tool's refusals (a call taken and answered `ok: false`, the disk quota's QUOTA_EXCEEDED among
 * them) are its outcome: a 200 envelope, and a task like any other outcome.
 */
export function refusesTheRequest(error: Pick<ErrorBody, 'code' | 'retryAfter'>): boolean {
  return error.retryAfter !== undefined || (ERRORS[error.code] as ErrorSpec).ofTheRequest === true;
}

/** True when the registry says a call answered `code` may be sent again as it is (a fault that passes). */
export function isRetryable(code: unknown): boolean {
  return isErrorCode(code) && ERRORS[code].retryable;
}

/** True when `code` is one of the registry's codes. */
export function isErrorCode(code: unknown): code is ErrorCode {
  return typeof code === 'string' && Object.hasOwn(ERRORS, code);
}

/**
 * The longest `detail` an error carries, in bytes of its JSON (UTF-8, escapes included). Details
 * quote SQLite, which quotes the statement (`near "…": syntax error` holds a whole token, up to
 * 100 KB), and every error is kept in Redis with its call; past this the detail is cut, ending
 * `… [N bytes cut]`.
 */
export const MAX_DETAIL_BYTES = 1024;

/**
 * The error body for `code`; `detail` (what exactly went wrong) follows the registry's message
 * as a sentence of its own ({@link asSentence}), so the agent sees both the category and the
 * specifics. A detail past {@link MAX_DETAIL_BYTES} is cut.
 */
export function errorBody(code: ErrorCode, detail?: string, hints: Partial<Record<ErrorCode, string>> = {}): ErrorBody {
  const spec = ERRORS[code];
  return { code, message: detail ? `${spec.message} ${asSentence(cappedDetail(detail))}` : spec.message, hint: hints[code] ?? spec.hint };
}

/**
 * `detail` as a sentence to follow the registry's message: its first word capitalised and a
 * full stop at its end. Details are written as phrases ("writes refused: …", SQLite's "no such
 * table: t"), and joined as they were they read "… not allowed here. no such table: t" (session
 * 31, H6). A detail that opens with a name keeps it as written: a quote, a figure, or a word
 * that goes on with `.`, `_`, `:` or the like (a field path, `max_rows: …`, `as_of …`). A
 * detail cut at its bound ends with the cut's mark (`[… bytes cut]`), not a stop after it.
 */
export function asSentence(detail: string): string {
  const text = detail.trim();
  if (text === '') return text;
  const opened = /^[a-z][a-z]*(?=[\s,;]|$)/.test(text) ? `${text[0]!.toUpperCase()}${text.slice(1)}` : text;
  return /[.!?\]]$/.test(opened) ? opened : `${opened}.`;
}

function cappedDetail(detail: string): string {
  // A UTF-16 unit takes at most 6 bytes of JSON (`\u0001`): short details skip the measure.
  if (detail.length * 6 <= MAX_DETAIL_BYTES) return detail;
  const jsonSize = (text: string) => Buffer.byteLength(JSON.stringify(text), 'utf8') - 2;
  if (jsonSize(detail) <= MAX_DETAIL_BYTES) return detail;
  // Cut by code point, leaving room for the marker (at most 30 bytes).
  let end = 0;
  let size = 0;
  for (const ch of detail) {
    size += jsonSize(ch);
    if (size > MAX_DETAIL_BYTES - 30) break;
    end += ch.length;
  }
  return `${detail.slice(0, end)}… [${Buffer.byteLength(detail.slice(end), 'utf8')} bytes cut]`;
}

/**
 * An agent-caused or expected failure, thrown inside the core and turned into an
 * `ok: false` result at the boundary. Carries a registry code so it survives serialisation.
 */
export class AgentDbError extends Error {
  readonly code: ErrorCode;
  readonly detail?: string;
  /** Seconds until it may be asked again (RATE_LIMITED): `error.retryAfter`, and over HTTP a 429 with Retry-After. */
  readonly retryAfter?: number;

  constructor(code: ErrorCode, detail?: string, opts: { retryAfter?: number } = {}) {
    super(detail ? `${code}: ${detail}` : code);
    this.name = 'AgentDbError';
    this.code = code;
    this.detail = detail;
    if (opts.retryAfter !== undefined) this.retryAfter = opts.retryAfter;
  }

  /** The body a result envelope carries. */
  toBody(): ErrorBody {
    const body = errorBody(this.code, this.detail);
    return this.retryAfter !== undefined ? { ...body, retryAfter: this.retryAfter } : body;
  }
}

/** Reads a registry code off anything thrown, including plain objects that crossed a process. */
export function codeOf(err: unknown): ErrorCode | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return isErrorCode(code) ? code : undefined;
}
