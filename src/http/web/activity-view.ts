import { whoMade } from '../../history/activity-view.ts';
import type { ActivityEntry, ActivityPage } from '../../shards/history-client.ts';
import { html, type Html } from './html.ts';
import { isoTime } from './layout.ts';
import { highlightSql } from './sql-highlight.ts';

const when = (t: string) => isoTime(Date.parse(t));

/** What every restoring form of a page carries: the session's CSRF token and the page's one-time token. */
export interface FormTokens {
  csrf: string;
  once: string;
}

/** Who made the commit, in words. */
function who(e: ActivityEntry): Html {
  if (e.kind === 'outside' || e.kind === 'gap') return html`<strong>Outside agentdb</strong>`;
  if (e.kind === 'unknown') return html`<strong>Not known</strong>`;
  const [kind, name] = (whoMade(e.by) ?? '').split(/:(.*)/s);
  if (kind === 'agent') return html`agent <strong>${name}</strong>`;
  if (kind === 'member') return html`member <strong>${name}</strong>`;
  return html`<strong>${e.by ?? 'unknown'}</strong>`;
}

/** What the commit did: the call's SQL (cut, saying by how much), a restore's target, or an outside write. */
function what(e: ActivityEntry): Html {
  if (e.kind === 'outside')
    return html`<p class="muted">A commit no agentdb call made: a program outside agentdb wrote to the database file, and history captured it.</p>`;
  if (e.kind === 'gap')
    return html`<p class="muted">A program outside agentdb wrote to the database file and history could not copy its commit: it took a new snapshot of the file, which also holds the ${e.held ?? 0} call${e.held === 1 ? '' : 's'} listed just above. They can only be undone together.</p>`;
  if (e.kind === 'unknown') return html`<p class="muted">A commit older than the 35 days agentdb keeps who made each one.</p>`;
  if (e.kind === 'restore') return html`<p>${e.statement ?? 'restore'}</p>`;
  const sql =
    e.tool === 'DATA_DROP_TABLE'
      ? html`<p>drop table <strong>${e.statement ?? ''}</strong></p>`
      : html`<pre class="sql">${highlightSql(e.statement ?? '')}</pre>`;
  return html`${sql}${e.statementCut ? html`<p class="cut muted">${e.statementCut} more bytes of SQL were not kept.</p>` : ''}`;
}

/**
 * One entry's actions, for an admin: restore the database to just before it, or fork a new
 * database as of it, each behind a confirmation typed in place (the database's name; for a
 * fork, the new database's), sent to `/data/history/activity-restore` and `/activity-fork`.
 * Both name the entry by its own position, as `agentdb activity` and `agentdb history` list it:
 * the restore `before` it, the fork `through` it (the CLI's flags). `once`: the page's one-time
 * token, so the same form sent twice restores once (`shards/restore-once.ts`).
 */
function actions(db: string, e: ActivityEntry, forms: FormTokens): Html {
  const hidden = html`<input type="hidden" name="_csrf" value="${forms.csrf}"><input type="hidden" name="once" value="${forms.once}"><input type="hidden" name="db" value="${db}">`;
  return html`<details class="entry-actions"><summary>Restore to just before this…</summary>
<form method="post" action="/data/history/activity-restore" class="decide">${hidden}<input type="hidden" name="before" value="${e.id}">
<p>Puts <strong>${db}</strong> back as it was just before this commit of ${when(e.at)}: this and every later commit are undone (an undo point keeps them); every commit before it stays, also those of the same millisecond.</p>
<label>Type <code>${db}</code> to confirm <input name="confirm" autocomplete="off" required></label><button type="submit" class="danger">Restore</button></form>
</details>
${
  // A call held in a gap's snapshot has no state of its own just after it to fork.
  e.heldIn
    ? ''
    : html`<details class="entry-actions"><summary>Fork as of this…</summary>
<form method="post" action="/data/history/activity-fork" class="decide">${hidden}<input type="hidden" name="through" value="${e.id}">
<p>Creates a new database of the workspace as <strong>${db}</strong> was just after this commit; ${db} stays as it is.</p>
<label>Type the new database's name <input name="into" placeholder="${db.split('/')[1] ?? 'shared'}-before" autocomplete="off" required></label><button type="submit">Fork</button></form>
</details>`
}`;
}

/** The activity list of the history page: each commit as the call that made it, newest first. */
export function activityView(db: string, page: ActivityPage, admin: boolean, forms: FormTokens, olderHref: (before: string) => string): Html {
  const behind = page.behind ? html`<p class="bad" id="behind">${page.behind.note}</p>` : '';
  if (!page.entries.length) return html`${behind}<p class="empty" id="activity">No commits in history yet.</p>`;
  return html`${behind}<ol class="activity" id="activity">
${page.entries.map(
  (
    e,
  ) => html`<li class="card entry ${e.kind}" data-entry="${e.id}"><header><time datetime="${e.at}">${when(e.at)}</time><span>${who(e)}</span>${e.tool ? html`<span class="tier">${e.tool}</span>` : ''}${
    e.rowsChanged !== undefined ? html`<span>${e.rowsChanged} row${e.rowsChanged === 1 ? '' : 's'} changed</span>` : ''
  }${e.approvedBy ? html`<span>approved by <strong>${e.approvedBy}</strong></span>` : ''}</header>
${what(e)}${e.heldIn ? html`<p class="muted">Held in the snapshot of gap ${e.heldIn}, with an outside write: restoring to just before it undoes the whole gap.</p>` : ''}${e.rationale ? html`<p class="rationale"><span class="muted">Why:</span> ${e.rationale}</p>` : ''}
${admin ? actions(db, e, forms) : ''}</li>`,
)}
</ol>
${page.next ? html`<p class="pager"><a href="${olderHref(page.next)}" id="older">Older</a></p>` : ''}`;
}
