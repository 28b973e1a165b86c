import type { Approval } from '../../approvals/approval.ts';
import { targetTable } from '../../guard/target-table.ts';
import { html, type Html } from './html.ts';
import { ago, isoTime, relative } from './layout.ts';
import { CARD_TEXT_BYTES, cutText, shorten, type Cut } from './cut-text.ts';
import { highlightSql } from './sql-highlight.ts';
import { effectView } from './effect-view.ts';

/** A link to the table a parked call touches, when it can be told (see `targetTable`). */
export function tableLink(a: Approval): Html | '' {
  const table = a.tool === 'DATA_DROP_TABLE' ? a.table : a.sql ? targetTable(a.sql) : undefined;
  if (!table) return '';
  const href = `/data/table?db=${encodeURIComponent(a.database)}&table=${encodeURIComponent(table)}`;
  return html`<a href="${href}">table ${table} in ${a.database}</a>`;
}

/**
 * The form's first submit button, disabled and hidden. Enter in the reason field submits with a
 * form's first submit button: that was Approve, so typing "wrong table" and Enter approved the
 * call. A disabled default button makes Enter do nothing (HTML's implicit submission rule), so
 * a decision is always the button the person chose.
 */
const noImplicitSubmit = html`<button type="submit" disabled hidden aria-hidden="true" tabindex="-1"></button>`;

/** Where an approval is shown whole: its own page, reached from its card and its decided row. */
export function approvalHref(a: Pick<Approval, 'id'>): string {
  return `/inbox/${encodeURIComponent(a.id)}`;
}

/** An approval's SQL and params as a card shows them: cut to {@link CARD_TEXT_BYTES} each. */
export function cardText(a: Approval): { sql?: Cut; params?: Cut } {
  const params = a.params?.length ? JSON.stringify(a.params) : '';
  return {
    ...(a.sql ? { sql: cutText(a.sql, CARD_TEXT_BYTES) } : {}),
    ...(params ? { params: cutText(params, CARD_TEXT_BYTES) } : {}),
  };
}

/** True when a card cannot show all of an approval: it may then be approved only on its own page. */
export function cutOnCard(a: Approval): boolean {
  const { sql, params } = cardText(a);
  return Boolean(sql?.cut || params?.cut);
}

/** What a cut text says after its start: how big it is, and where it is shown whole. */
function cutNote(c: Cut, a: Approval): Html | '' {
  if (!c.cut) return '';
  return html`<p class="cut muted" role="note">cut: ${c.bytes.toLocaleString('en')} bytes in all. <a href="${approvalHref(a)}">See it whole</a></p>`;
}

/**
 * One pending approval with its decision form. Every field an agent wrote is escaped text.
 * `refusal`: why approving would not run it (its key or agent changed since it was parked).
 * On a card (`whole` false) the SQL and params are cut to a bounded size; a card cut so offers
 * no Approve button (a person must not approve what they cannot see), only a link to the
 * approval's own page (`whole` true), which shows everything and can approve it.
 */
export function pendingCard(a: Approval, csrf: string, now = Date.now(), refusal?: string, whole = false): Html {
  const full = a.params?.length ? JSON.stringify(a.params) : '';
  const shown = whole
    ? { ...(a.sql ? { sql: { text: a.sql, cut: false, bytes: 0 } } : {}), ...(full ? { params: { text: full, cut: false, bytes: 0 } } : {}) }
    : cardText(a);
  const cut = Boolean(shown.sql?.cut || shown.params?.cut);
  return html`<article class="card" id="ap-${a.id}" data-approval="${a.id}" aria-labelledby="h-${a.id}"${cut ? html` data-cut="true"` : ''}>
  <header>
    <strong id="h-${a.id}">${a.agent}</strong>
    <span>${a.tool}</span>
    <span class="tier ${a.tier}">${a.tier}</span>
    <span class="muted" title="${isoTime(a.createdAt)}">asked ${ago(a.createdAt, now)}</span>
    <span class="muted" title="${isoTime(a.expiresAt)}">expires ${relative(a.expiresAt, now)}</span>
    ${whole ? '' : html`<a class="own" href="${approvalHref(a)}">its own page</a>`}
    ${whole ? '' : html`<label class="pick"><input type="checkbox" name="ids" value="${a.id}" form="bulk" aria-label="select the call of ${a.agent} (${a.callId})"> select</label>`}
  </header>
  ${refusal ? html`<p class="flash error stale" role="note">Approving will not run it: since it was parked, ${refusal} Reject it, or let it expire.</p>` : ''}
  ${shown.sql ? html`<pre class="sql" aria-label="SQL"><code>${highlightSql(shown.sql.text)}</code></pre>${cutNote(shown.sql, a)}` : ''}
  ${effectView(a)}
  <dl class="facts">
    <dt>database</dt><dd>${a.database}</dd>
    ${a.table ? html`<dt>drops</dt><dd>${a.object?.type ?? 'table'} ${a.table}${a.object?.rows !== undefined ? html` (${a.object.rows} row${a.object.rows === 1 ? '' : 's'})` : ''}</dd>` : ''}
    ${shown.params ? html`<dt>params</dt><dd><code>${shown.params.text}</code>${cutNote(shown.params, a)}</dd>` : ''}
    ${a.rationale ? html`<dt>rationale</dt><dd>${a.rationale}</dd>` : ''}
    ${tableLink(a) ? html`<dt>touches</dt><dd>${tableLink(a)}</dd>` : ''}
    <dt>call</dt><dd><code>${a.callId}</code></dd>
  </dl>
  <form class="decide" method="post" action="/approvals/${encodeURIComponent(a.id)}/decision">
    <input type="hidden" name="_csrf" value="${csrf}">
    ${whole ? html`<input type="hidden" name="whole" value="1">` : ''}
    ${noImplicitSubmit}
    <label>Reason <input name="reason" maxlength="2000" placeholder="optional" autocomplete="off"></label>
    ${cut ? '' : html`<button type="submit" name="decision" value="approve" class="primary">Approve</button>`}
    <button type="submit" name="decision" value="reject">Reject</button>
    ${cut ? html`<span class="muted">Too long to show here: <a href="${approvalHref(a)}">read it whole to approve it</a>.</span>` : ''}
  </form>
</article>`;
}

/**
 * The decision for the cards ticked (their checkboxes belong to this form by its id, as a card
 * holds a form of its own): one reason for all, each decided on its own. `keep`: the filter, for
 * the redirect back. A card too long to show whole is not approved from here (see the route).
 */
export function bulkForm(csrf: string, keep: Record<string, string>): Html {
  return html`<form method="post" action="/approvals/decide" id="bulk" class="decide bulk" aria-label="Decide the selected calls">
  <input type="hidden" name="_csrf" value="${csrf}">
  ${Object.entries(keep).map(([k, v]) => html`<input type="hidden" name="${k}" value="${v}">`)}
  ${noImplicitSubmit}
  <label><input type="checkbox" id="select-all" hidden> <span id="selected-count" class="muted">select calls below to decide them together</span></label>
  <label>Reason for all <input name="reason" maxlength="2000" placeholder="optional" autocomplete="off"></label>
  <button type="submit" name="decision" value="approve" class="primary">Approve selected</button>
  <button type="submit" name="decision" value="reject">Reject selected</button>
</form>`;
}

/** The pending list: the part live updates replace card by card. `page`: which page of it (1 is the newest). */
export function pendingList(pending: Approval[], csrf: string, refusals: ReadonlyMap<string, string> = new Map(), page = 1): Html {
  return html`<div id="pending" aria-live="polite" data-page="${page}">
${pending.length ? pending.map((a) => pendingCard(a, csrf, Date.now(), refusals.get(a.id))) : html`<p class="empty" id="no-pending">Nothing is waiting for a decision.</p>`}
</div>`;
}

/**
 * Links to newer and older pages of a list. `param` is the page's query parameter; `keep`, the
 * other parameters the links carry (the other list's page), so paging one list keeps the other.
 */
export function pager(opts: {
  id: string;
  label: string;
  param: string;
  page: number;
  total: number;
  size: number;
  keep: Record<string, number | string>;
}): Html {
  const pages = Math.max(1, Math.ceil(opts.total / opts.size));
  if (pages === 1) return html`<nav class="pager" id="${opts.id}" aria-label="${opts.label}"></nav>`;
  const href = (p: number) => {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries({ ...opts.keep, [opts.param]: p })) if (typeof v === 'string' ? v : v > 1) q.set(k, String(v));
    const s = q.toString();
    return s ? `/inbox?${s}` : '/inbox';
  };
  const first = (opts.page - 1) * opts.size + 1;
  const last = Math.min(opts.total, opts.page * opts.size);
  return html`<nav class="pager" id="${opts.id}" aria-label="${opts.label}">
  ${opts.page > 1 ? html`<a href="${href(opts.page - 1)}" rel="prev">← newer</a>` : html`<span class="muted">← newer</span>`}
  <span class="muted">${first}–${last} of ${opts.total} · page ${opts.page} of ${pages}</span>
  ${opts.page < pages ? html`<a href="${href(opts.page + 1)}" rel="next">older →</a>` : html`<span class="muted">older →</span>`}
</nav>`;
}

/**
 * Which call a decided row is: its statement (or the dropped table), shortened, and its call id.
 * Without it, rows of one agent and tool could not be told apart.
 */
function decidedWhat(a: Approval): Html {
  const what = a.sql ? shorten(a.sql, 80) : a.table ? `drop ${a.table}` : '';
  // The tooltip is bounded too: the whole statement is on the approval's own page.
  return html`<a href="${approvalHref(a)}"><code title="${shorten(a.sql ?? '', 400)}">${what}</code></a><br><span class="muted">${a.database} · ${a.callId}</span>`;
}

/** How much of a reason or of a run's message a decided row shows (a reason sent to `/v1` has no limit). */
const DECIDED_TEXT_CHARS = 500;

/** How an approved call ended: ok, or its code and why, shortened. */
function ranText(a: Approval): Html | string {
  if (!a.ran) return '';
  if (a.ran.ok) return 'ok';
  const why = a.ran.detail ?? a.ran.message;
  return html`${a.ran.code ?? 'failed'}${why ? html`<br><span class="muted">${shorten(why, DECIDED_TEXT_CHARS)}</span>` : ''}`;
}

/** Decided approvals: which call, who decided, when, why, and how the call ended. */
export function decidedTable(decided: Approval[]): Html {
  if (!decided.length) return html`<p class="empty">No decisions yet.</p>`;
  return html`<div class="scroll"><table class="list" id="decided">
<thead><tr><th>state</th><th>agent</th><th>tool</th><th>what</th><th>decided by</th><th>when</th><th>reason</th><th class="opt">ran</th></tr></thead>
<tbody>
${decided.map(
  (a) => html`<tr data-approval="${a.id}">
  <td>${a.state}</td><td>${a.agent}</td><td>${a.tool}</td>
  <td>${decidedWhat(a)}</td>
  <td>${a.decidedBy ?? (a.state === 'expired' ? 'nobody (expired)' : '')}${a.state === 'superseded' ? html`<br><span class="muted">the data changed: <a href="${approvalHref({ id: a.supersededBy ?? '' })}">asked again</a></span>` : ''}</td>
  <td>${a.decidedAt ? html`<time datetime="${new Date(a.decidedAt).toISOString()}">${isoTime(a.decidedAt)}</time>` : ''}</td>
  <td>${shorten(a.reason ?? '', DECIDED_TEXT_CHARS)}</td>
  <td class="opt">${ranText(a)}</td>
</tr>`,
)}
</tbody></table></div>`;
}
