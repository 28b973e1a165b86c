import type { Approval } from '../../approvals/approval.ts';
import { html, type Html } from './html.ts';
import { pendingCard, tableLink } from './inbox-view.ts';
import { isoTime } from './layout.ts';
import { highlightSql } from './sql-highlight.ts';
import { effectView } from './effect-view.ts';

/**
 * One approval on its own page (`/inbox/<approval id>`), its SQL and params whole. Inbox cards
 * cut them to a bounded size; this is where a person reads all of a long call, and the only
 * place it can be approved. A decided approval shows its decision and how it ran.
 */
export function approvalPage(a: Approval, csrf: string, refusal?: string): Html {
  const back = html`<p><a href="/inbox">← all approvals</a></p>`;
  if (a.state === 'pending') {
    return html`<h1>Approval ${a.id}</h1>${back}<div id="approval" data-approval="${a.id}">${pendingCard(a, csrf, Date.now(), refusal, true)}</div>`;
  }
  const params = a.params?.length ? JSON.stringify(a.params) : '';
  return html`<h1>Approval ${a.id}</h1>${back}
<article class="card" id="approval" data-approval="${a.id}">
  <header><strong>${a.agent}</strong><span>${a.tool}</span><span class="tier ${a.tier}">${a.tier}</span><span>${a.state}</span></header>
  ${a.sql ? html`<pre class="sql" aria-label="SQL"><code>${highlightSql(a.sql)}</code></pre>` : ''}
  ${effectView(a)}
  <dl class="facts">
    <dt>database</dt><dd>${a.database}</dd>
    ${a.table ? html`<dt>drops</dt><dd>${a.object?.type ?? 'table'} ${a.table}</dd>` : ''}
    ${params ? html`<dt>params</dt><dd><code>${params}</code></dd>` : ''}
    ${a.rationale ? html`<dt>rationale</dt><dd>${a.rationale}</dd>` : ''}
    ${tableLink(a) ? html`<dt>touches</dt><dd>${tableLink(a)}</dd>` : ''}
    <dt>call</dt><dd><code>${a.callId}</code></dd>
    <dt>asked</dt><dd>${isoTime(a.createdAt)}</dd>
    <dt>decided by</dt><dd>${a.decidedBy ?? (a.state === 'expired' ? 'nobody (expired)' : '')}</dd>
    ${a.decidedAt ? html`<dt>when</dt><dd>${isoTime(a.decidedAt)}</dd>` : ''}
    ${a.reason ? html`<dt>reason</dt><dd>${a.reason}</dd>` : ''}
    ${a.supersededBy ? html`<dt>superseded by</dt><dd><a href="/inbox/${encodeURIComponent(a.supersededBy)}">${a.supersededBy}</a> (the data changed before it ran; nothing ran)</dd>` : ''}
    ${a.ran ? html`<dt>ran</dt><dd>${a.ran.ok ? 'ok' : (a.ran.code ?? 'failed')}${(a.ran.detail ?? a.ran.message) ? html` — ${a.ran.detail ?? a.ran.message}` : ''}</dd>` : ''}
  </dl>
</article>`;
}
