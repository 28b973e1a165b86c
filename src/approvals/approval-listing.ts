import type { Approval } from './approval.ts';

/** Most approvals one list page holds (`GET /v1/approvals?limit=`). */
export const MAX_LIST_PAGE = 200;
/** SQL, a rationale or a definition past this many characters is cut in a list. */
const TEXT_CHARS = 1024;
/** Params past this many characters of JSON are cut in a list (to the first values that fit). */
const PARAMS_CHARS = 1024;
/** A string param past this many characters is cut in a list. */
const PARAM_CHARS = 256;

/** An approval as a list shows it: big fields cut, and `cut: true` when any was. */
export type ListedApproval = Approval & { cut?: true };

/**
 * An approval for a list: SQL, params, rationale and a dropped object's definition cut to
 * about a kilobyte each, an effect's rows left out (its counts and digest kept), with `cut: true` saying so (the whole record is one
 * `GET /v1/approvals/:id` away). Issue 27: `GET /v1/approvals?limit=10000` of parked calls
 * with 1 MB params answered 40 MB and took the server from 229 to 451 MB.
 */
export function listedApproval(a: Approval): ListedApproval {
  let cut = false;
  const text = (s: string): string => {
    if (s.length <= TEXT_CHARS) return s;
    cut = true;
    return `${s.slice(0, TEXT_CHARS)}…[${s.length - TEXT_CHARS} chars cut]`;
  };
  const out: ListedApproval = { ...a };
  if (a.sql !== undefined) out.sql = text(a.sql);
  if (a.rationale !== undefined) out.rationale = text(a.rationale);
  if (a.object?.definition !== undefined) out.object = { ...a.object, definition: text(a.object.definition) };
  if (a.params !== undefined) {
    const params: unknown[] = [];
    let chars = 2;
    for (const p of a.params) {
      const v = typeof p === 'string' && p.length > PARAM_CHARS ? `${p.slice(0, PARAM_CHARS)}…[${p.length - PARAM_CHARS} chars cut]` : p;
      if (v !== p) cut = true;
      chars += JSON.stringify(v).length + 1;
      if (chars > PARAMS_CHARS) {
        cut = true;
        break;
      }
      params.push(v);
    }
    out.params = params;
  }
  if (a.effect) {
    // A list keeps an effect's counts and digest; its rows (up to MAX_PARKED_CALL_BYTES each) are
    // on the approval's own record.
    const dropped = a.effect.dropped && { ...a.effect.dropped, definition: text(a.effect.dropped.definition) };
    if (a.effect.rows.length) cut = true;
    out.effect = { ...a.effect, rows: [], cut: a.effect.cut || a.effect.rows.length > 0, ...(dropped ? { dropped } : {}) };
  }
  if (cut) out.cut = true;
  return out;
}

/**
 * What a list may be narrowed to (the inbox's filters, `GET /v1/approvals?agent=&database=&tool=`);
 * a field left out matches every approval.
 */
export interface ApprovalFilter {
  agent?: string;
  database?: string;
  tool?: string;
}

/** The small fields of an approval a list is chosen by, read without its request. */
export interface ApprovalFacets {
  workspace: string;
  state: string;
  createdAt: number;
  decidedAt?: number;
  agent: string;
  database: string;
  tool: string;
}

/** Whether an approval's facets pass a filter. */
export function passes(f: Pick<ApprovalFacets, 'agent' | 'database' | 'tool'>, filter: ApprovalFilter): boolean {
  return (
    (filter.agent === undefined || f.agent === filter.agent) &&
    (filter.database === undefined || f.database === filter.database) &&
    (filter.tool === undefined || f.tool === filter.tool)
  );
}

/** Where a list page ends: the index score and id of its last entry (read or looked at). */
export interface ListCursor {
  score: number;
  id: string;
}

/** The opaque `nextCursor` a list page answers with. */
export function encodeCursor(c: ListCursor): string {
  return Buffer.from(JSON.stringify([c.score, c.id])).toString('base64url');
}

/** A `cursor` a caller sent back, or undefined when it is not one this service made. */
export function decodeCursor(s: string): ListCursor | undefined {
  try {
    const v = JSON.parse(Buffer.from(s, 'base64url').toString('utf8')) as unknown;
    if (Array.isArray(v) && v.length === 2 && Number.isFinite(v[0]) && typeof v[1] === 'string' && v[1].length <= 200) return { score: v[0], id: v[1] };
  } catch {
    // not JSON: answered below
  }
  return undefined;
}
