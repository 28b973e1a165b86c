import type { Member } from '../../registry/members.ts';
import type { BrowsableDatabase } from '../../shards/data-browser.ts';
import type { DescribeResult, TableInfo } from '../../sqlite/sqlite-describe.ts';
import { ROW_COUNT_CAP, type DatabaseFigures } from '../../sqlite/sqlite-figures.ts';
import { html, type Html } from './html.ts';
import { isoTime } from './layout.ts';

/** `/data/db?db=…` for a database id. */
export const dbHref = (db: string) => `/data/db?db=${encodeURIComponent(db)}`;
/** `/data/table?…` for a table, with grid options. */
export function tableHref(db: string, table: string, opts: Record<string, string | number | undefined> = {}): string {
  const q = new URLSearchParams({ db, table });
  for (const [k, v] of Object.entries(opts)) if (v !== undefined && v !== '') q.set(k, String(v));
  return `/data/table?${q.toString()}`;
}
/** The CSV export of a table. */
export const exportHref = (db: string, table: string) => `/data/export.csv?${new URLSearchParams({ db, table }).toString()}`;

/** Bytes as a person reads them: 1.2 MB. */
function sizeText(bytes: number): string {
  const units = ['bytes', 'KB', 'MB', 'GB', 'TB'];
  let n = bytes;
  let u = 0;
  while (n >= 1024 && u < units.length - 1) {
    n /= 1024;
    u++;
  }
  return u === 0 ? `${n} bytes` : `${n.toFixed(n < 10 ? 1 : 0)} ${units[u]}`;
}

/** A database's row figure: exact, or "at least" when a table was counted only up to its cap. */
function rowsText(f: DatabaseFigures): Html {
  const n = f.rows.toLocaleString('en');
  return f.rowsAtLeast ? html`<span title="each table is counted up to ${ROW_COUNT_CAP.toLocaleString('en')} rows">at least ${n}</span>` : html`${n}`;
}

/**
 * The workspace's databases, the shared one first, with size, tables, rows, last write and
 * approvals waiting. `figures`: from each database's owner (absent: it did not answer, shown
 * as dashes); `pending`: approvals waiting, by database, each a link to the inbox filtered to it.
 */
export function databasesView(
  member: Member,
  dbs: BrowsableDatabase[],
  figures: ReadonlyMap<string, DatabaseFigures> = new Map(),
  pending: ReadonlyMap<string, number> = new Map(),
): Html {
  const dash = html`<span class="muted">—</span>`;
  return html`<h1>Data of ${member.workspace}</h1>
<p class="muted">Read only: nobody edits rows here, since a person's edit would be invisible to the agent that owns the table.</p>
<div class="scroll"><table class="list" id="databases">
<thead><tr><th>database</th><th>whose</th><th>size</th><th>tables</th><th>rows</th><th>last write</th><th>waiting for approval</th></tr></thead>
<tbody>
${dbs.map((d) => {
  const f = figures.get(d.id);
  const waiting = pending.get(d.id) ?? 0;
  return html`<tr data-db="${d.id}"><td><a href="${dbHref(d.id)}">${d.id}</a></td><td>${d.agent ? html`agent ${d.agent}${d.registered ? '' : html` <span class="muted">(not registered)</span>`}` : 'shared by the workspace'}</td>
<td class="size">${f ? sizeText(f.bytes) : dash}</td><td class="tables">${f ? f.tables : dash}</td><td class="rows">${f ? rowsText(f) : dash}</td>
<td class="last-write">${f?.lastWriteAt ? html`<time datetime="${new Date(f.lastWriteAt).toISOString()}">${isoTime(f.lastWriteAt)}</time>` : f ? 'never' : dash}</td>
<td class="pending">${waiting ? html`<a href="/inbox?database=${encodeURIComponent(d.id)}">${waiting}</a>` : '0'}</td></tr>`;
})}
</tbody></table></div>
<p class="muted">Size is the database file and its write-ahead log on disk; rows are counted up to ${ROW_COUNT_CAP.toLocaleString('en')} a table (past that, "at least"); the last write is when the file was last written.</p>`;
}

/**
 * Why a database shows no tables. The shared database has no single agent, and a database whose
 * tables were dropped is not one nobody wrote: "the agent has not created any" was wrong for both.
 */
export function emptyNote(db: string): string {
  return db.includes('/')
    ? 'No tables: the agent has not created any, or has dropped them.'
    : 'No tables in the shared database: no agent has created one, or they were dropped.';
}

/**
 * The notice after a drop. A person who just dropped a table by mistake needs to know it is not
 * gone for good, and where to get it back.
 */
export function droppedNote(db: string, table: string): Html {
  return html`Dropped ${table}. The drop is in the database's history: to get the table back, restore a moment before it in <a href="/data/history?db=${encodeURIComponent(db)}">History and restore</a>.`;
}

/** Tables and views of one database with row counts and columns. */
export function tablesView(db: string, described: DescribeResult, historyNote: Html): Html {
  const full = described.tables.filter((t): t is TableInfo => !('truncated' in t));
  const stubs = described.tables.filter((t) => 'truncated' in t);
  return html`<p><a href="/data">← all databases</a></p>
<h1>${db}</h1>
${historyNote}
<h2>Tables and views</h2>
${
  described.tables.length === 0
    ? html`<p class="empty">${emptyNote(db)}</p>`
    : html`<div class="scroll"><table class="list" id="tables">
<thead><tr><th>name</th><th>type</th><th>rows</th><th class="opt">columns</th><th>export</th></tr></thead>
<tbody>
${full.map(
  (t) => html`<tr>
  <td><a href="${tableHref(db, t.name)}">${t.name}</a></td>
  <td>${t.type}</td>
  <td>${t.rowCount ?? (t.error ? 'unreadable' : '—')}</td>
  <td class="opt">${t.error ? html`<span class="muted">${t.error}</span>` : t.columns.map((c, i) => html`${i ? ', ' : ''}${c.name}${c.type ? html` <span class="muted">${c.type}</span>` : ''}`)}</td>
  <td><a href="${exportHref(db, t.name)}" download>CSV</a></td>
</tr>`,
)}
${stubs.map((t) => html`<tr><td><a href="${tableHref(db, t.name)}">${t.name}</a></td><td>${t.type}</td><td colspan="3" class="muted">not described (schema too large)</td></tr>`)}
</tbody></table></div>`
}
${described.note ? html`<p class="muted">${described.note}</p>` : ''}`;
}
