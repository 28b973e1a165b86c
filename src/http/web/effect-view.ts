import type { Approval } from '../../approvals/approval.ts';
import type { Effect, EffectRow, EffectValue } from '../../contracts/effect.ts';
import { html, type Html } from './html.ts';

/**
 * What a parked call would change, as a person reads it on its card: per table the rows
 * inserted, updated and deleted, then a diff of the rows kept — a deleted row's cells marked
 * removed, an inserted row's added, an updated row's changed cells as before → after. Every
 * value came from the database an agent writes: all of it is escaped text (`html`).
 */
export function effectView(a: Approval): Html | '' {
  if (a.effect === undefined) return '';
  const note = a.effectNote ? html`<p class="flash ${a.supersedes ? 'error' : ''} effect-note" role="note">${a.effectNote}</p>` : '';
  // Not computed (no database yet, a table an earlier parked call makes, the time limit): the
  // worker commits such a call only if it changes no rows, and parks it again with its effect if
  // it would (docs/approvals.md). The card once said approving "runs it on the data as it is
  // then", and a person who approved saw it come back instead.
  if (a.effect === null)
    return html`<section class="effect" aria-label="effect">${note}<p class="muted">Its effect is not known yet. Approved, it commits only if it changes no rows (a CREATE TABLE, say); if it would change rows, nothing commits and it comes back here with its effect, to be approved again.</p></section>`;
  const e = a.effect;
  const counts = e.tables.length
    ? html`<ul class="effect-counts">${e.tables.map(
        (t) =>
          html`<li data-table="${t.table}"><strong>${t.table}</strong>: <span class="added">${t.inserted} inserted</span> · <span class="changed">${t.updated} updated</span> · <span class="removed">${t.deleted} deleted</span></li>`,
      )}</ul>`
    : html`<p class="muted">It changes no rows.</p>`;
  const dropped = e.dropped
    ? html`<p class="removed">Drops ${e.dropped.type} <strong>${e.dropped.name}</strong>${e.dropped.rows !== undefined ? ` with its ${e.dropped.rows} row${e.dropped.rows === 1 ? '' : 's'}` : ''}:</p><pre class="sql removed"><code>${e.dropped.definition}</code></pre>`
    : '';
  const total = e.tables.reduce((n, t) => n + t.inserted + t.updated + t.deleted, 0);
  const fewer = e.rows.length < total && !e.dropped;
  const cut = e.cut
    ? html`<p class="effect-cut muted" role="note">cut to fit: ${fewer ? `${e.rows.length} of ${total} changed rows shown` : 'long values shortened'}; the counts and the digest cover every row.</p>`
    : '';
  return html`<section class="effect" aria-label="effect">${note}${dropped}${counts}${diffTables(e)}${cut}</section>`;
}

/** One diff table per table the kept rows belong to, its columns those the rows carry. */
function diffTables(e: Effect): Html[] {
  const byTable = new Map<string, EffectRow[]>();
  for (const row of e.rows) byTable.set(row.table, [...(byTable.get(row.table) ?? []), row]);
  return [...byTable].map(([table, rows]) => {
    // A key no column holds (a rowid table's rowid) shows where the run assigns it, marked, so the
    // card says what the CLI says: the row gets a rowid, not necessarily the one previewed.
    const assigned = (r: EffectRow) => (r.madeAtRun ?? []).filter((c) => c in r.key);
    const columns = [...new Set(rows.flatMap((r) => [...assigned(r), ...Object.keys(r.after ?? r.before ?? {})]))];
    return html`<div class="scroll"><table class="grid diff" data-table="${table}" aria-label="rows of ${table}">
<thead><tr><th></th>${columns.map((c) => html`<th>${c}</th>`)}</tr></thead>
<tbody>${rows.map((r) => diffRow(r, columns))}</tbody></table></div>`;
  });
}

const SIGN = { insert: '+', update: '~', delete: '−' } as const;

function diffRow(r: EffectRow, columns: string[]): Html {
  // A column only some rows carry is a key no column holds (a rowid table's rowid, shown where an
  // update moved it): another row of the table has it in its key, unchanged, where NULL was shown.
  const cell = (side: Record<string, EffectValue> | null, c: string) => (side && c in side ? side[c] : r.key[c]);
  // A value made as the row is written (the rowid SQLite assigns, a time, randomness) is the
  // preview's: marked, so nobody takes the id shown for the one the row will have.
  const made = (c: string) =>
    r.madeAtRun?.includes(c) ? html` <small class="made muted" title="made when it runs: the run may write another">(when it runs)</small>` : '';
  const cells = columns.map((c) => {
    if (r.op === 'insert') return html`<td class="added">${value(cell(r.after, c))}${made(c)}</td>`;
    if (r.op === 'delete') return html`<td class="removed">${value(cell(r.before, c))}</td>`;
    const before = cell(r.before, c) ?? null;
    const after = cell(r.after, c) ?? null;
    if (JSON.stringify(before) === JSON.stringify(after)) return html`<td>${value(after)}</td>`;
    return html`<td class="changed"><del>${value(before)}</del> → <ins>${value(after)}</ins>${made(c)}</td>`;
  });
  return html`<tr class="${r.op}" data-op="${r.op}" data-key="${JSON.stringify(r.key)}"><th title="${r.op}">${SIGN[r.op]}</th>${cells}</tr>`;
}

function value(v: EffectValue | undefined): Html | string {
  if (v === null || v === undefined) return html`<span class="null">NULL</span>`;
  if (typeof v === 'object' && '$cut' in v) return html`${v.$cut}<span class="muted">… (${v.bytes} bytes)</span>`;
  if (typeof v === 'object') return html`<span class="muted">blob (${Buffer.from(v.$blob, 'base64').length} bytes)</span>`;
  return String(v);
}
