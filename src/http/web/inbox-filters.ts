import type { ApprovalFilter } from '../../approvals/approval-listing.ts';
import { html, type Html } from './html.ts';

/** The names a filter may choose from: those the workspace's approvals carry. */
export interface FilterChoices {
  agent: string[];
  database: string[];
  tool: string[];
}

const FIELDS = [
  ['agent', 'Agent'],
  ['database', 'Database'],
  ['tool', 'Tool'],
] as const;

/**
 * The inbox's filter from its query: each field a name up to 200 characters, or absent. A field
 * that is not one (a hand-edited link) filters nothing, as the inbox's other fields forgive.
 */
export function inboxFilter(query: Partial<Record<keyof ApprovalFilter, string | undefined>>): ApprovalFilter {
  const out: ApprovalFilter = {};
  for (const [field] of FIELDS) {
    const v = query[field];
    if (typeof v === 'string' && v.length > 0 && v.length <= 200) out[field] = v;
  }
  return out;
}

/** A filter as query parameters, for the links and redirects that keep it. */
export function filterParams(filter: ApprovalFilter): Record<string, string> {
  return Object.fromEntries(FIELDS.flatMap(([field]) => (filter[field] ? [[field, filter[field]]] : [])));
}

/** `/inbox` with a filter (and any other parameters). */
export function inboxHref(filter: ApprovalFilter, more: Record<string, string> = {}): string {
  const q = new URLSearchParams({ ...filterParams(filter), ...more }).toString();
  return q ? `/inbox?${q}` : '/inbox';
}

/**
 * The filter bar: one choice per field, of the names the workspace's approvals carry (the one
 * chosen kept even when none carries it now). A GET form: a filtered inbox is a link to share.
 */
export function filterForm(choices: FilterChoices, filter: ApprovalFilter): Html {
  const active = Object.keys(filterParams(filter)).length > 0;
  return html`<form method="get" action="/inbox" class="pager" id="inbox-filter" role="search" aria-label="Filter approvals">
${FIELDS.map(([field, label]) => {
  const names = [...new Set([...choices[field], ...(filter[field] ? [filter[field]] : [])])].sort();
  return html`<label>${label} <select name="${field}"><option value="">all</option>${names.map(
    (n) => html`<option value="${n}"${filter[field] === n ? html` selected` : ''}>${n}</option>`,
  )}</select></label>`;
})}
<button type="submit">Filter</button>${active ? html` <a href="/inbox" id="clear-filter">show all</a>` : ''}
</form>`;
}
