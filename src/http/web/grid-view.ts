import type { GridCell, GridPage } from '../../contracts/browse.ts';
import { html, type Html } from './html.ts';
import { encodeCursor } from './cursor-param.ts';
import { dbHref, exportHref, tableHref } from './data-views.ts';

/** Page sizes offered. */
export const PAGE_SIZES = [25, 50, 100, 250, 500] as const;

/** What the grid was asked for, carried in its links. */
export interface GridQuery {
  db: string;
  table: string;
  size: number;
  sort?: string;
  dir: 'asc' | 'desc';
  /** The page number shown, when known (1-based). */
  p?: number;
  total?: number;
  /** Read as of this time (the `as_of` asked for), carried in every link. */
  asOf?: string;
}

function cellHtml(c: GridCell): Html {
  if (c === null) return html`<td class="null">NULL</td>`;
  if (typeof c === 'object' && 'blob' in c) return html`<td class="null">blob, ${c.blob} bytes</td>`;
  if (typeof c === 'object') return html`<td>${c.cut}<span class="muted">… (${c.length} bytes in all; the CSV has them)</span></td>`;
  return html`<td>${String(c)}</td>`;
}

/** The grid of one page: sortable headers, the pager, page size, jump, export, server time. */
export function gridView(q: GridQuery, page: GridPage, timing: { serverMs: number }, dropForm: Html): Html {
  const base = { size: q.size, sort: q.sort, dir: q.dir, total: q.total, as_of: q.asOf };
  const pages = q.total !== undefined ? Math.max(1, Math.ceil(q.total / q.size)) : undefined;
  const nav = (label: string, href: string | undefined, rel?: string) =>
    href ? html`<a class="button" href="${href}"${rel ? html` rel="${rel}"` : ''}>${label}</a>` : html`<button type="button" disabled>${label}</button>`;
  const p = q.p;
  // A page past the end (a jump typed into the URL, or a link kept while rows were deleted)
  // said "page 9 of 3" and offered Previous to page 8, as empty: it points to the last page.
  const lastHref = pages ? tableHref(q.db, q.table, { ...base, page: pages, p: pages }) : undefined;
  const past = page.rows.length === 0 && pages !== undefined && p !== undefined && p > pages;
  const prevHref = past
    ? lastHref
    : !page.hasPrev
      ? undefined
      : page.keyset && page.first
        ? tableHref(q.db, q.table, { ...base, before: encodeCursor(page.first), p: p && p > 1 ? p - 1 : undefined })
        : tableHref(q.db, q.table, { ...base, page: p && p > 1 ? p - 1 : 1, p: p && p > 1 ? p - 1 : 1 });
  const nextHref = !page.hasNext
    ? undefined
    : page.keyset && page.last
      ? tableHref(q.db, q.table, { ...base, after: encodeCursor(page.last), p: p ? p + 1 : undefined })
      : tableHref(q.db, q.table, { ...base, page: (p ?? 1) + 1, p: (p ?? 1) + 1 });
  const sortHref = (col: string) =>
    tableHref(q.db, q.table, { size: q.size, sort: col, dir: q.sort === col && q.dir === 'asc' ? 'desc' : 'asc', as_of: q.asOf });
  const asOfField = q.asOf ? html`<input type="hidden" name="as_of" value="${q.asOf}">` : '';
  return html`<p><a href="${dbHref(q.db)}">← ${q.db}</a></p>
<h1>${page.table} <span class="muted">${page.type}</span></h1>
${asOfView(q, page)}
<div class="pager" aria-label="Pages">
  ${nav('First', page.hasPrev ? tableHref(q.db, q.table, { ...base, p: 1 }) : undefined)}
  ${nav('Previous', prevHref, 'prev')}
  <span id="page-label">${p ? html`page ${p}` : 'page ?'}${pages ? html` of ${pages}` : ''}${q.total !== undefined ? html` · ${q.total} row${q.total === 1 ? '' : 's'}` : ''}</span>
  ${nav('Next', nextHref, 'next')}
  <form method="get" action="/data/table">
    <input type="hidden" name="db" value="${q.db}"><input type="hidden" name="table" value="${q.table}">
    ${q.sort ? html`<input type="hidden" name="sort" value="${q.sort}">` : ''}<input type="hidden" name="dir" value="${q.dir}">${asOfField}
    <label>Rows per page <select name="size">${PAGE_SIZES.map((s) => html`<option value="${s}"${s === q.size ? html` selected` : ''}>${s}</option>`)}</select></label>
    <button type="submit">Show</button>
  </form>
  <form method="get" action="/data/table">
    <input type="hidden" name="db" value="${q.db}"><input type="hidden" name="table" value="${q.table}">
    ${q.sort ? html`<input type="hidden" name="sort" value="${q.sort}">` : ''}<input type="hidden" name="dir" value="${q.dir}"><input type="hidden" name="size" value="${q.size}">${asOfField}
    <label>Page <input name="page" type="number" min="1"${pages ? html` max="${pages}"` : ''} inputmode="numeric" size="6" required></label>
    <button type="submit">Go</button>
  </form>
  <span class="muted" id="server-time">server ${timing.serverMs.toFixed(1)} ms (SQLite ${page.sqliteMs.toFixed(1)} ms)${page.keyset ? '' : ' · paged by offset'}</span>
</div>
${
  page.rows.length === 0
    ? html`<p class="empty">${past ? html`Page ${p} is past the last page. <a href="${lastHref}">Go to page ${pages}</a>.` : page.hasPrev ? 'No more rows.' : 'This table is empty.'}</p>`
    : html`<div class="scroll"><table class="grid" id="grid">
<thead><tr>${page.columns.map(
        (c) =>
          html`<th scope="col"${q.sort === c.name ? html` aria-sort="${q.dir === 'asc' ? 'ascending' : 'descending'}"` : ''}><a href="${sortHref(c.name)}">${c.name}${q.sort === c.name ? (q.dir === 'asc' ? ' ▲' : ' ▼') : ''}</a></th>`,
      )}</tr></thead>
<tbody>
${page.rows.map((r) => html`<tr>${r.map(cellHtml)}</tr>`)}
</tbody></table></div>`
}
<h2>Export</h2>
<p><a href="${exportHref(q.db, q.table)}" download id="export-link">Download CSV</a>
  <button type="button" id="export-progress" data-url="${exportHref(q.db, q.table)}" data-name="${q.table}.csv">Export with progress</button></p>
<p class="progress" id="export-status" role="status" hidden><progress max="1" value="0"></progress> <span></span></p>
<p class="muted">RFC 4180, UTF-8, a header row; text starting with = + - @ tab or CR gets a leading ' so spreadsheets never run it.</p>
${dropForm}`;
}

/**
 * The "as of" choice: a time (UTC) to read the table as it was, from history, read-only; when
 * one is shown, which moment it is (the last commit its state holds) and the way back to now.
 */
function asOfView(q: GridQuery, page: GridPage): Html {
  const now = tableHref(q.db, q.table, { size: q.size, sort: q.sort, dir: q.dir });
  const note = page.asOf
    ? html`<p class="flash ok" role="status" id="as-of-note">As of ${q.asOf}: the table as it was then (its last change before: <time datetime="${page.asOf.restoredTo}">${page.asOf.restoredTo}</time>), read from its history, read-only. <a href="${now}">Back to now</a>. The export below is of the table now.</p>`
    : '';
  return html`${note}<form method="get" action="/data/table" id="as-of-form" class="pager">
  <input type="hidden" name="db" value="${q.db}"><input type="hidden" name="table" value="${q.table}"><input type="hidden" name="size" value="${q.size}">
  <label>As of (UTC) <input type="datetime-local" name="as_of" step="1"${q.asOf ? html` value="${q.asOf}"` : ''} required></label>
  <button type="submit">Read the past</button>
</form>`;
}
