import type { CallRequest } from './call.ts';
import { NAME_PATTERN } from './name-pattern.ts';
import { DEFAULT_MAX_ROWS, MAX_PARAMS, MAX_RATIONALE_CHARS, MAX_ROWS, MAX_SQL_BYTES } from './tools.ts';

const CALL_ID = /^[A-Za-z0-9_-]{1,128}$/;
const PLAIN_INTEGER = /^\d+$/;
const KEYS = new Set(['callId', 'workspace', 'agent', 'introspect', 'settings', 'tool', 'arguments']);
const DATABASE = new Set(['off', 'agent', 'workspace']);
const APPROVAL = new Set(['never', 'write']);

/**
 * `callRequest`'s output for an agent's call of the plain shape (no member; every key set and
 * valid), built without zod; undefined for anything else, which zod then judges (its verdict,
 * its message). A call is checked twice, by its client and again by the worker, each on the
 * read's path, and the schema's parse was most of that (issue 31). The keys come out in the
 * schema's order, the settings with its defaults: the same object zod gives
 * (`test/unit/call-request-fast.test.ts` holds the two equal).
 */
export function plainCallRequest(input: unknown): CallRequest | undefined {
  if (typeof input !== 'object' || input === null || Object.getPrototypeOf(input) !== Object.prototype) return undefined;
  const r = input as Record<string, unknown>;
  // Own keys whatever their enumerability (zod reads its keys so): a hidden member is zod's to judge.
  for (const key of Object.getOwnPropertyNames(r)) if (!KEYS.has(key) || r[key] === undefined) return undefined;
  const { callId, workspace, agent, introspect, tool } = r;
  if (callId !== undefined && (typeof callId !== 'string' || !CALL_ID.test(callId) || PLAIN_INTEGER.test(callId))) return undefined;
  if (typeof workspace !== 'string' || !NAME_PATTERN.test(workspace)) return undefined;
  // An agent's name only: "@<member>" names a member's calls, which zod judges with their member.
  if (typeof agent !== 'string' || !NAME_PATTERN.test(agent)) return undefined;
  if (introspect !== undefined && introspect !== true) return undefined;
  if (typeof tool !== 'string' || tool.length < 1 || tool.length > 64) return undefined;
  const settings = plainSettings(r.settings);
  if (!settings) return undefined;
  return {
    ...(callId !== undefined ? { callId } : {}),
    workspace,
    agent,
    ...(introspect ? { introspect } : {}),
    settings,
    tool,
    ...('arguments' in r ? { arguments: r.arguments } : {}),
  };
}

/** `agentSettings` with its defaults, for settings of the plain shape; undefined for zod to judge. */
function plainSettings(input: unknown): CallRequest['settings'] | undefined {
  if (input === undefined) return { database: 'off', approval: 'never', sandbox: false, sharedData: false };
  if (typeof input !== 'object' || input === null || Object.getPrototypeOf(input) !== Object.prototype) return undefined;
  const s = input as Record<string, unknown>;
  let n = 0;
  const { database = 'off', approval = 'never', sandbox = false, sharedData = false } = s;
  for (const key in s) {
    if (!Object.hasOwn(s, key)) continue;
    if (key !== 'database' && key !== 'approval' && key !== 'sandbox' && key !== 'sharedData') return undefined;
    if (s[key] === undefined) return undefined;
    n++;
  }
  if (n > 4 || typeof database !== 'string' || !DATABASE.has(database) || typeof approval !== 'string' || !APPROVAL.has(approval)) return undefined;
  if (typeof sandbox !== 'boolean' || typeof sharedData !== 'boolean') return undefined;
  return { database, approval, sandbox, sharedData } as CallRequest['settings'];
}

const QUERY_KEYS = new Set(['sql', 'params', 'max_rows', 'scope', 'agent']);
const WRITE_KEYS = new Set(['sql', 'params', 'rationale', 'scope', 'agent']);

/**
 * `toolInputs.DATA_QUERY_SQL`'s output (`max_rows` defaulted, the schema's key order) for
 * arguments of the plain shape, built without zod; undefined for anything else (`as_of`
 * included), which zod then judges.
 */
export function plainQueryArguments(input: unknown): Record<string, unknown> | undefined {
  const a = plainObject(input, QUERY_KEYS);
  if (!a) return undefined;
  const { sql, params, max_rows = DEFAULT_MAX_ROWS, scope, agent } = a;
  const kept = plainParams(params);
  if (!plainSql(sql) || kept === false || !plainTarget(scope, agent)) return undefined;
  if (typeof max_rows !== 'number' || !Number.isInteger(max_rows) || max_rows < 1 || max_rows > MAX_ROWS) return undefined;
  return {
    sql,
    ...(kept !== undefined ? { params: kept } : {}),
    max_rows,
    ...(scope !== undefined ? { scope } : {}),
    ...(agent !== undefined ? { agent } : {}),
  };
}

/**
 * `toolInputs.DATA_WRITE_SQL`'s output (the schema's key order) for arguments of the plain
 * shape, built without zod; undefined for anything else, which zod then judges. A write is
 * planned by its client and again by the worker, as a read is: zod's parse of its arguments
 * was the one step of a small insert's plan that a read no longer paid (issue 31).
 */
export function plainWriteArguments(input: unknown): Record<string, unknown> | undefined {
  const a = plainObject(input, WRITE_KEYS);
  if (!a) return undefined;
  const { sql, params, rationale, scope, agent } = a;
  const kept = plainParams(params);
  if (!plainSql(sql) || kept === false || !plainTarget(scope, agent)) return undefined;
  if (rationale !== undefined && (typeof rationale !== 'string' || rationale.length > MAX_RATIONALE_CHARS)) return undefined;
  return {
    sql,
    ...(kept !== undefined ? { params: kept } : {}),
    ...(rationale !== undefined ? { rationale } : {}),
    ...(scope !== undefined ? { scope } : {}),
    ...(agent !== undefined ? { agent } : {}),
  };
}

/** `input` as a plain object with only `keys`, none set to undefined; undefined otherwise. */
function plainObject(input: unknown, keys: ReadonlySet<string>): Record<string, unknown> | undefined {
  if (typeof input !== 'object' || input === null || Object.getPrototypeOf(input) !== Object.prototype) return undefined;
  const a = input as Record<string, unknown>;
  // Own keys whatever their enumerability (zod reads its keys so): a hidden `as_of` is zod's to judge.
  for (const key of Object.getOwnPropertyNames(a)) if (!keys.has(key) || a[key] === undefined) return undefined;
  return a;
}

function plainSql(sql: unknown): sql is string {
  if (typeof sql !== 'string' || sql.length < 1 || sql.length > MAX_SQL_BYTES) return false;
  // Each character is at most 3 bytes of UTF-8: only a long text is measured.
  return !(sql.length * 3 > MAX_SQL_BYTES && Buffer.byteLength(sql, 'utf8') > MAX_SQL_BYTES);
}

/** The params as kept (undefined when absent), or false for zod to judge. */
function plainParams(params: unknown): unknown[] | undefined | false {
  if (params === undefined) return undefined;
  if (!Array.isArray(params) || Object.getPrototypeOf(params) !== Array.prototype || params.length > MAX_PARAMS) return false;
  // The values checked are the values kept: each read once (an element may be a getter).
  const kept = new Array(params.length);
  for (let i = 0; i < kept.length; i++) {
    if (!(i in params)) return false;
    const p = params[i];
    if (p !== null && typeof p !== 'string' && typeof p !== 'boolean' && !(typeof p === 'number' && Number.isFinite(p))) return false;
    kept[i] = p;
  }
  return kept;
}

function plainTarget(scope: unknown, agent: unknown): boolean {
  if (scope !== undefined && scope !== 'agent' && scope !== 'workspace') return false;
  return agent === undefined || (typeof agent === 'string' && NAME_PATTERN.test(agent));
}
