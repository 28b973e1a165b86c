import type { Approval } from '../../approvals/approval.ts';
import { targetTable } from '../../guard/target-table.ts';
import { html, type Html } from './html.ts';
import { isoTime, relative } from './layout.ts';
import { highlightSql } from './sql-highlight.ts';

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

/**
 * One pending approval with its decision form. Every field an agent wrote is escaped text.
 * `refusal`: why approving would not run it (its key or agent changed since it was parked).
 */
export function pendingCard(a: Approval, csrf: string, now = Date.now(), refusal?: string): Html {
  const params = a.params && a.params.length ? JSON.stringify(a.params) : '';
  return html`<article class="card" id="ap-${a.id}" data-approval="${a.id}" aria-labelledby="h-${a.id}">
  <header>
    <strong id="h-${a.id}">${a.agent}</strong>
    <span>${a.tool}</span>
    <span class="tier ${a.tier}">${a.tier}</span>
    <span class="muted" title="${isoTime(a.createdAt)}">asked ${relative(a.createdAt, now)}</span>
    <span class="muted" title="${isoTime(a.expiresAt)}">expires ${relative(a.expiresAt, now)}</span>
  </header>
  ${refusal ? html`<p class="flash error stale" role="note">Approving will not run it: since it was parked, ${refusal} Reject it, or let it expire.</p>` : ''}
  ${a.sql ? html`<pre class="sql" aria-label="SQL"><code>${highlightSql(a.sql)}</code></pre>` : ''}
  <dl class="facts">
    <dt>database</dt><dd>${a.database}</dd>
    ${a.table ? html`<dt>drops</dt><dd>${a.object?.type ?? 'table'} ${a.table}${a.object?.rows !== undefined ? html` (${a.object.rows} rows)` : ''}</dd>` : ''}
    ${params ? html`<dt>params</dt><dd><code>${params}</code></dd>` : ''}
    ${a.rationale ? html`<dt>rationale</dt><dd>${a.rationale}</dd>` : ''}
    ${tableLink(a) ? html`<dt>touches</dt><dd>${tableLink(a)}</dd>` : ''}
    <dt>call</dt><dd><code>${a.callId}</code></dd>
  </dl>
  <form class="decide" method="post" action="/approvals/${encodeURIComponent(a.id)}/decision">
    <input type="hidden" name="_csrf" value="${csrf}">
    ${noImplicitSubmit}
    <label>Reason <input name="reason" maxlength="2000" placeholder="optional" autocomplete="off"></label>
    <button type="submit" name="decision" value="approve" class="primary">Approve</button>
    <button type="submit" name="decision" value="reject">Reject</button>
  </form>
</article>`;
}

/** The pending list: the part live updates replace card by card. */
export function pendingList(pending: Approval[], csrf: string, refusals: ReadonlyMap<string, string> = new Map()): Html {
  return html`<div id="pending" aria-live="polite">
${pending.length ? pending.map((a) => pendingCard(a, csrf, Date.now(), refusals.get(a.id))) : html`<p class="empty" id="no-pending">Nothing is waiting for a decision.</p>`}
</div>`;
}

/**
 * Which call a decided row is: its statement (or the dropped table), shortened, and its call id.
 * Without it, rows of one agent and tool could not be told apart.
 */
function decidedWhat(a: Approval): Html {
  const what = a.sql ? (a.sql.length > 80 ? `${a.sql.slice(0, 79)}…` : a.sql) : a.table ? `drop ${a.table}` : '';
  return html`<code title="${a.sql ?? ''}">${what}</code><br><span class="muted">${a.database} · ${a.callId}</span>`;
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
  <td>${a.decidedBy ?? (a.state === 'expired' ? 'nobody (expired)' : '')}</td>
  <td>${a.decidedAt ? html`<time datetime="${new Date(a.decidedAt).toISOString()}">${isoTime(a.decidedAt)}</time>` : ''}</td>
  <td>${a.reason ?? ''}</td>
  <td class="opt">${a.ran ? (a.ran.ok ? 'ok' : html`${a.ran.code ?? 'failed'}${a.ran.detail ?? a.ran.message ? html`<br><span class="muted">${a.ran.detail ?? a.ran.message}</span>` : ''}`) : ''}</td>
</tr>`,
)}
</tbody></table></div>`;
}
