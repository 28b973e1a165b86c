import type { Surface } from '../contracts/agent-profile.ts';
import { dbToolInputs, isDbToolName, type DbToolName } from '../contracts/db-tools.ts';
import { describeIssues } from '../contracts/describe-issues.ts';
import type { ToolName } from '../contracts/tools.ts';
import type { ErrorCode } from '../errors.ts';
import { parseStatement } from '../guard/guard.ts';

type DbSurface = Extract<Surface, { kind: 'db' }>;

/** A db_* call as the engine runs it: one DATA_* call, and how to treat it. */
export type DbTranslation =
  | { ok: false; code: ErrorCode; detail: string }
  | {
      ok: true;
      dbTool: DbToolName;
      tool: ToolName;
      arguments: Record<string, unknown>;
      /** db_query: its statement is judged by db_query's rules (introspection PRAGMAs too). */
      introspect?: true;
      /** policy "require-approval": the call is parked for a person and answered at once. */
      requireApproval?: true;
    };

/** Statements db-capability.md counts as DDL (schemaMode) and as data mutation (mode). */
const DDL = new Set(['create_table', 'create_index', 'create_view', 'create_trigger', 'create_virtual_table', 'alter_table', 'drop', 'reindex', 'vacuum']);
const DATA = new Set(['insert', 'update', 'delete', 'replace']);
const READ_ONLY = new Set(['select', 'pragma', 'explain']);

const refuse = (code: ErrorCode, detail: string): DbTranslation => ({ ok: false, code, detail });

/**
 * Maps a db_* call (db-capability.md) onto the engine's DATA_* tools, after the surface's own
 * checks: db_exec needs a non-empty rationale and one statement, rejects read-only SQL, takes
 * DDL only with `schemaMode: "write"` and data mutation only with `mode: "write"`, and then
 * obeys `policy`. What it maps to still passes agentdb's guard floor and approval rules, so
 * the surface can only ever narrow what the DATA_* tools allow: VACUUM or REINDEX pass the
 * schemaMode check and are then refused by the guard, and a DROP is run as DATA_DROP_TABLE,
 * which always waits for a person.
 */
export function translateDbCall(surface: DbSurface, tool: string, args: unknown): DbTranslation {
  if (!isDbToolName(tool))
    return refuse('UNKNOWN_TOOL', `"${tool}" is not a tool of this agent's db surface (db_query, db_schema${execAllowed(surface) ? ', db_exec' : ''}).`);
  const parsed = dbToolInputs[tool].safeParse(args ?? {});
  if (!parsed.success) return refuse('INVALID_ARGUMENTS', describeIssues(parsed.error.issues));
  if (tool === 'db_schema') return { ok: true, dbTool: tool, tool: 'DATA_DESCRIBE_SCHEMA', arguments: {} };
  const input = parsed.data as { statement: string; rationale?: string; as_of?: string };
  if (tool === 'db_query') {
    const asOf = input.as_of === undefined ? {} : { as_of: input.as_of };
    return { ok: true, dbTool: tool, tool: 'DATA_QUERY_SQL', arguments: { sql: input.statement, max_rows: 1000, ...asOf }, introspect: true };
  }

  if (!execAllowed(surface)) return refuse('UNKNOWN_TOOL', 'db_exec is not enabled: this agent\'s db surface has mode and schemaMode "read".');
  if (!input.rationale?.trim()) return refuse('INVALID_ARGUMENTS', 'rationale: db_exec requires a non-empty rationale.');
  const statement = parseStatement(input.statement);
  if ('ok' in statement) return refuse(statement.code, statement.reason);
  const kind = statement.classification.kind;
  if (READ_ONLY.has(kind)) return refuse('SQL_REFUSED', 'db_exec rejects read-only SQL: use db_query.');
  if (DDL.has(kind) && surface.schemaMode !== 'write')
    return refuse('NOT_PERMITTED', 'Rule "DDL requires schemaMode: write": this agent\'s db surface has schemaMode "read".');
  if (DATA.has(kind) && surface.mode !== 'write')
    return refuse('NOT_PERMITTED', 'Rule "data mutation requires mode: write": this agent\'s db surface has mode "read".');
  if (!DDL.has(kind) && !DATA.has(kind)) return refuse('SQL_REFUSED', 'db_exec runs one INSERT, UPDATE, DELETE, REPLACE, CREATE, ALTER or DROP statement.');

  const mapped: DbTranslation =
    kind === 'drop'
      ? dropCall(statement.tokens, input.rationale)
      : { ok: true, dbTool: tool, tool: 'DATA_WRITE_SQL', arguments: { sql: input.statement, rationale: input.rationale } };
  return applyDbPolicy(mapped, surface.policy);
}

/** What db_exec's `policy` may decide for one call (db-capability.md). */
export type DbPolicyDecision = DbSurface['policy'];

/** The decisions {@link applyDbPolicy} takes, for checking a runtime's own policy function. */
export const DB_POLICY_DECISIONS: readonly DbPolicyDecision[] = ['allow', 'require-approval', 'deny', 'retryable-failure'];

/**
 * Applies db_exec's `policy` to a call the surface's checks passed: `deny` and
 * `retryable-failure` refuse it, `require-approval` marks it to be parked for a person, and
 * `allow` lets it through. Read tools and refusals pass unchanged: the policy gates db_exec only.
 * Separate from {@link translateDbCall} so a runtime's policy function (`db()`), decided per
 * call after the checks, goes through the same rule.
 */
export function applyDbPolicy(t: DbTranslation, policy: DbPolicyDecision): DbTranslation {
  if (!t.ok || t.dbTool !== 'db_exec') return t;
  switch (policy) {
    case 'deny':
      return refuse('NOT_PERMITTED', 'Rule "policy deny": this agent\'s db_exec policy refuses every call.');
    case 'retryable-failure':
      return refuse('RETRY_LATER', 'The db_exec policy fails this call for now; try again later.');
    case 'require-approval':
      return { ...t, requireApproval: true };
    default:
      return t;
  }
}

/** A DROP through db_exec, run as DATA_DROP_TABLE (which always waits for a person). */
function dropCall(tokens: readonly { kind: string; value: string; text: string }[], rationale: string): DbTranslation {
  const table = dropTarget(tokens);
  if (!table) return refuse('SQL_REFUSED', 'db_exec drops one table or view: DROP TABLE name or DROP VIEW name.');
  return { ok: true, dbTool: 'db_exec', tool: 'DATA_DROP_TABLE', arguments: { table, rationale } };
}

function execAllowed(surface: DbSurface): boolean {
  return surface.mode === 'write' || surface.schemaMode === 'write';
}

/** The name in `DROP TABLE|VIEW [IF EXISTS] [main.]name`, or undefined for any other shape. */
function dropTarget(tokens: readonly { kind: string; value: string; text: string }[]): string | undefined {
  const words = tokens.map((t) => (t.kind === 'word' ? t.value : t.text));
  let i = 1;
  if (words[i] !== 'table' && words[i] !== 'view') return undefined;
  i++;
  if (words[i] === 'if' && words[i + 1] === 'exists') i += 2;
  if (tokens[i + 1]?.text === '.' && tokens[i]?.value === 'main') i += 2;
  const name = tokens[i];
  if (!name || (name.kind !== 'word' && name.kind !== 'quoted') || i + 1 !== tokens.length) return undefined;
  return name.value;
}
