import type { Approval } from '../approvals/approval.ts';

/** Longest SQL shown in a table cell; the full statement is in `--json`. */
const SQL_WIDTH = 60;
/** The values bound to the SQL: a reviewer must see what an INSERT … VALUES (?, ?) writes. */
const PARAMS_WIDTH = 40;
/** The agent's reason for the change, shortened like the SQL; whole in `--json`. */
const RATIONALE_WIDTH = 40;
const REASON_WIDTH = 40;

const COLUMNS = ['id', 'state', 'workspace/agent', 'tool', 'sql or table', 'params', 'rationale', 'requester', 'created', 'expires', 'decided', 'ran'];

/** `2026-11-30 07:18:10Z`: to the second, UTC, so rows from any host compare. */
function time(ms: number | undefined): string {
  return ms === undefined ? '' : `${new Date(ms).toISOString().slice(0, 19).replace('T', ' ')}Z`;
}

/**
 * Characters a terminal acts on instead of showing: controls (ESC starts cursor moves that can
 * write over another cell) and format characters (bidi overrides reorder what follows). The
 * agent writes the SQL, params and rationale a person approves by; each such character is
 * shown as its escape.
 */
const UNSHOWN = /[\p{Cc}\p{Cf}]/gu;

/** One line, cut to `width` with an ellipsis: a cell must not break the table. */
export function cell(text: string, width: number): string {
  const flat = text
    .replace(/\s+/g, ' ')
    .replace(UNSHOWN, (c) => `\\u${c.codePointAt(0)!.toString(16).padStart(4, '0')}`)
    .trim();
  return flat.length > width ? `${flat.slice(0, width - 1)}…` : flat;
}

function what(a: Approval): string {
  if (a.sql !== undefined) return cell(a.sql, SQL_WIDTH);
  return a.table !== undefined ? `table ${a.table}` : '';
}

/** Who decided, when and why; what a person reviewing the audit asks first. */
function decided(a: Approval): string {
  if (!a.decidedBy) return '';
  const reason = a.reason ? ` "${cell(a.reason, REASON_WIDTH)}"` : '';
  return `${a.decidedBy} ${time(a.decidedAt)}${reason}`;
}

function ran(a: Approval, refusal: string | undefined): string {
  // Still pending, but approving it would not run it: say so before anyone decides.
  if (refusal) return `will be refused: "${cell(refusal, REASON_WIDTH)}"`;
  if (!a.ran) return '';
  const outcome = a.ran.ok ? ['ok'] : ['failed', ...(a.ran.code ? [a.ran.code] : [])];
  // A refusal at release says why (key revoked, agent narrowed or removed since it was parked).
  const text = a.ran.detail ?? a.ran.message;
  const why = text ? [`"${cell(text, REASON_WIDTH)}"`] : [];
  return [...outcome, time(a.ran.at), ...why].join(' ');
}

/**
 * Renders approvals as an aligned text table for a person at a terminal, one row each, with the
 * columns an operator needs to decide or to audit: what would run (the SQL with its params),
 * why the agent asks, who asked, when it lapses, and who decided it and what ran. Long cells
 * are shortened; scripts, and a reviewer who needs the whole, use `--json`.
 */
export function approvalsTable(approvals: Approval[], refusals: ReadonlyMap<string, string> = new Map()): string {
  const rows = [COLUMNS];
  for (const a of approvals) {
    const shared = a.shared ? ' (shared)' : '';
    rows.push([
      a.id,
      a.state,
      `${a.workspace}/${a.agent}${shared}`,
      a.tool,
      what(a),
      a.params?.length ? cell(JSON.stringify(a.params), PARAMS_WIDTH) : '',
      a.rationale ? cell(a.rationale, RATIONALE_WIDTH) : '',
      a.requester,
      time(a.createdAt),
      time(a.expiresAt),
      decided(a),
      ran(a, refusals.get(a.id)),
    ]);
  }
  const widths = COLUMNS.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows
    .map(
      (r) =>
        `${r
          .map((c, i) => c.padEnd(widths[i]!))
          .join('  ')
          .trimEnd()}\n`,
    )
    .join('');
}

/** Rows of an effect a person reads in a terminal; the rest is in `--json`. */
const EFFECT_ROWS_SHOWN = 20;

/**
 * The effect of an approval's call as text: counts per table, then each kept row as its key and
 * its changed values (`column: before → after`), escaped like the table's cells.
 */
export function effectText(a: Approval): string {
  if (a.effect === undefined) return '';
  const lines = ['', 'effect:'];
  if (a.effect === null) lines.push(`  not computed: ${cell(a.effectNote ?? '', 400)}`);
  else {
    if (a.effectNote) lines.push(`  ${cell(a.effectNote, 400)}`);
    if (a.effect.dropped) lines.push(`  drops ${a.effect.dropped.type} ${cell(a.effect.dropped.name, 60)}: ${cell(a.effect.dropped.definition, 200)}`);
    if (!a.effect.tables.length) lines.push('  no rows change');
    for (const t of a.effect.tables) lines.push(`  ${cell(t.table, 60)}: ${t.inserted} inserted, ${t.updated} updated, ${t.deleted} deleted`);
    for (const row of a.effect.rows.slice(0, EFFECT_ROWS_SHOWN)) {
      const values = Object.keys({ ...row.before, ...row.after }).flatMap((column) => {
        const before = row.before ? JSON.stringify(row.before[column] ?? null) : undefined;
        const after = row.after ? JSON.stringify(row.after[column] ?? null) : undefined;
        if (before !== undefined && after !== undefined) return before === after ? [] : [`${column}: ${before} → ${after}`];
        return [`${column}: ${before ?? after}`];
      });
      // Before the values, which may be cut: the preview's rowid or time is not what the run must write.
      const made = row.madeAtRun?.length ? ` (made when it runs, may differ: ${cell(row.madeAtRun.join(', '), 120)})` : '';
      lines.push(`  ${row.op} ${cell(row.table, 60)} ${cell(JSON.stringify(row.key), 60)}${made} ${cell(values.join(', '), 300)}`);
    }
    const more = a.effect.rows.length - EFFECT_ROWS_SHOWN;
    if (more > 0 || a.effect.cut) lines.push(`  (${more > 0 ? `${more} more rows kept; ` : ''}${a.effect.cut ? 'cut to fit: ' : ''}--json has every row kept)`);
    lines.push(`  digest ${a.effect.digest}`);
  }
  return `${lines.join('\n')}\n`;
}
