import type { KeyedCalls } from '../../calls/bearer-key-calls.ts';
import { chargedActivityRead, chargedRestore, restoreRateLimited } from '../../calls/activity-charge.ts';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Member } from '../../registry/members.ts';
import { isHistoryAdmin } from '../../policy/history-admin.ts';
import { AgentDbError } from '../../errors.ts';
import type { ActivityPage, HistoryClient, HistoryView, RestoreResult } from '../../shards/history-client.ts';
import { activityView, type FormTokens } from './activity-view.ts';
import { troubleView } from './history-trouble-view.ts';
import { historyState, newOnceToken, type RestoreOnce } from '../../shards/restore-once.ts';
import { whoMade } from '../../history/activity-view.ts';
import { errorPage } from './error-page.ts';
import { dbHref } from './data-views.ts';
import { html, type Html } from './html.ts';
import { isoTime, layout, type PageFrame } from './layout.ts';
import { databaseField, formBody, requireTyped } from './web-form.ts';
import { memberOf, ownDatabase, sessionOf } from './web-request.ts';

// `restored` is the undo point a restore's redirect names; the page shows it only if history has it.
const historyQuery = z.object({ db: databaseField, restored: z.string().optional(), before: z.string().max(200).optional() });

// A time (`at`, from the dry run's datetime-local) or an undo point (`undo`); empty is absent,
// as a form sends an empty field. Which of the two is required is the handler's rule.
// `confirm`: the database's name typed, which a restore to a time asks for (checked by the handler).
// `once`: the page's one-time token: the same form sent twice restores once (`restore-once.ts`).
const restoreBody = formBody({
  db: databaseField,
  at: z.string().optional(),
  undo: z.string().optional(),
  confirm: z.string().optional(),
  once: z.string().max(64).optional(),
});

/**
 * The history core the page calls: the same `HistoryClient` the `/v1/databases/:db/history` and
 * `/restore` routes call. Absent (a server without history), the page says so.
 */
export type HistoryAccess = Pick<HistoryClient, 'history' | 'restore' | 'activity'>;

/** `access`, or UNAVAILABLE where this server has no history (the page's error, for every history route alike). */
export function historyAvailable(access: HistoryAccess | undefined): HistoryAccess {
  if (!access) throw new AgentDbError('UNAVAILABLE', 'history is not available on this server');
  return access;
}
type DatabaseHistory = HistoryView;
type RestoreOutcome = RestoreResult;

/** The line about history on a database's page. */
export interface HistoryPanel {
  summary(db: string, member: Member): Promise<Html>;
}

const when = (t: string | null | undefined) => (t === null || t === undefined ? '—' : isoTime(Date.parse(t)));
/** The history page of `db`. */
export const historyHref = (db: string) => `/data/history?db=${encodeURIComponent(db)}`;

/** The history line of the database page, from `access` (or "not available"). */
export function historyPanel(access: HistoryAccess | undefined): HistoryPanel {
  return {
    async summary(db, member) {
      if (!access) return html`<p class="muted" id="history-line">History is not available on this server.</p>`;
      // The history client's rule (policy/history-admin.ts), said plainly rather than as a refusal.
      if (!isHistoryAdmin(member)) return html`<p class="muted" id="history-line">History and restore are for workspace admins.</p>`;
      try {
        const h = await access.history(db, { member }, { commits: 'none' });
        const lost = h.lost?.length ?? 0;
        const damaged = h.generations.filter((g) => g.damaged).length;
        const trouble = [lost ? `${lost} lost stretch${lost === 1 ? '' : 'es'}` : '', damaged ? `${damaged} damaged generation${damaged === 1 ? '' : 's'}` : '']
          .filter(Boolean)
          .join(', ');
        return html`<p id="history-line">Restorable from <strong>${when(h.earliest)}</strong> to <strong>${when(h.latest)}</strong>${trouble ? html` · <strong class="bad">${trouble}</strong>` : ''} · <a href="${historyHref(db)}">History and restore</a></p>`;
      } catch (err) {
        return html`<p class="muted" id="history-line">History could not be read: ${err instanceof AgentDbError ? err.code : 'error'}.</p>`;
      }
    },
  };
}

/**
 * What a restore did, read back from its undo point after the redirect that follows it: the
 * history's own record, so a hand-made `?restored=` shows nothing that did not happen.
 */
function restoredNote(h: DatabaseHistory, undoId: string | undefined, undoForm: (id: string) => Html): Html {
  const u = undoId ? h.undoPoints.find((p) => p.id === undoId) : undefined;
  if (!u) return html``;
  // The undo is offered right here: the list below does not show undo ids, and a person who
  // just restored the wrong moment should not have to match timestamps to find its row.
  return html`<section class="card" id="restore-outcome" role="status"><h2>Restored</h2>
<dl class="facts"><dt>to</dt><dd>${when(u.restoredTo)}</dd><dt>made</dt><dd>${when(u.createdAt)}</dd><dt>undo point</dt><dd>${u.id}</dd></dl>
<p class="muted">Not what you wanted? Undoing puts back exactly what was there before it.</p>
${undoForm(u.id)}
</section>`;
}

/**
 * Restoring in place replaces the live database for every agent of it: the person types its name
 * first (the page's script keeps the button disabled until it matches; the route checks it too).
 */
function restoreForm(db: string, forms: FormTokens, at: string): Html {
  return html`<form method="post" action="/data/history/restore" id="restore-form" data-confirm="${db}">
<input type="hidden" name="_csrf" value="${forms.csrf}"><input type="hidden" name="once" value="${forms.once}"><input type="hidden" name="db" value="${db}"><input type="hidden" name="at" value="${at}">
<p>This replaces <strong>${db}</strong> as it is now with the moment above, for every agent that uses it (an undo point is kept).</p>
<label>Type <strong>${db}</strong> to confirm <input name="confirm" autocomplete="off" required></label>
<button type="submit" class="danger">Restore in place now</button></form>`;
}

function historyView(
  db: string,
  h: DatabaseHistory,
  activity: ActivityPage,
  admin: boolean,
  forms: FormTokens,
  outcome?: RestoreOutcome,
  at?: string,
  restored?: string,
): Html {
  const form = (action: string, fields: Html, label: string, cls = '') =>
    html`<form method="post" action="${action}"><input type="hidden" name="_csrf" value="${forms.csrf}"><input type="hidden" name="once" value="${forms.once}"><input type="hidden" name="db" value="${db}">${fields}<button type="submit" class="${cls}">${label}</button></form>`;
  return html`<p><a href="${dbHref(db)}">← ${db}</a></p>
<h1>History of ${db}</h1>
<p>Restorable from <strong>${when(h.earliest)}</strong> to <strong>${when(h.latest)}</strong>.</p>
${troubleView(h)}
${restoredNote(h, restored, (id) => (admin ? form('/data/history/restore', html`<input type="hidden" name="undo" value="${id}">`, 'Undo this restore') : html``))}
${
  outcome
    ? html`<section class="card" id="restore-outcome" role="status"><h2>${outcome.dryRun ? 'Dry run' : 'Restored'}</h2>
<dl class="facts"><dt>to</dt><dd>${when(outcome.restoredTo)}</dd><dt>snapshot</dt><dd>${outcome.snapshot.id} at ${when(outcome.snapshot.at)}</dd>
<dt>commits</dt><dd>${outcome.commits}</dd>${outcome.undoId ? html`<dt>undo point</dt><dd>${outcome.undoId}</dd>` : ''}</dl>
${outcome.note ? html`<p>${outcome.note}</p>` : ''}
${outcome.refused ? html`<p><strong>The restore itself would be refused:</strong> ${outcome.refused}</p>` : ''}
${outcome.after ? takenAwayView(outcome.after) : ''}
${outcome.dryRun && admin ? restoreForm(db, forms, at ?? '') : ''}
</section>`
    : ''
}
<h2>What was done</h2>
<p class="muted">Each commit as the call that made it, newest first.${admin ? ' Restoring to just before one undoes it and everything after, and keeps an undo point.' : ''}</p>
${activityView(db, activity, admin, forms, (before) => `${historyHref(db)}&before=${encodeURIComponent(before)}`)}
${
  admin
    ? html`<h2>Restore to a time</h2>
<form method="post" action="/data/history/dry-run" class="pager"><input type="hidden" name="_csrf" value="${forms.csrf}"><input type="hidden" name="db" value="${db}">
<label>Time (UTC) <input name="at" type="datetime-local" step="1" required value="${at ?? ''}"></label><button type="submit">Dry run</button></form>`
    : html`<p class="muted">Only a workspace admin can restore.</p>`
}
<h2>Undo points</h2>
${
  h.undoPoints.length
    ? html`<div class="scroll"><table class="list"><thead><tr><th>made</th><th>restored to</th><th></th></tr></thead><tbody>
${h.undoPoints.map((u) => html`<tr><td>${when(u.createdAt)}</td><td>${when(u.restoredTo)}</td><td>${admin ? form('/data/history/restore', html`<input type="hidden" name="undo" value="${u.id}">`, 'Undo this restore') : ''}</td></tr>`)}
</tbody></table></div>`
    : html`<p class="empty">No restore to undo.</p>`
}
<details id="history-details"><summary>Generations and snapshots</summary>
<h2>Generations</h2>
${
  h.generations.length
    ? html`<div class="scroll"><table class="list" id="generations"><thead><tr><th>id</th><th>snapshot</th><th>from</th><th>to</th><th>commits</th><th>why</th></tr></thead><tbody>
${h.generations.map(
  (g) =>
    html`<tr${g.damaged ? html` class="damaged"` : ''}><td>${g.id}</td><td>${when(g.snapshotAt)}</td><td>${when(g.startedAt)}</td><td>${g.endedAt === null ? 'now' : when(g.endedAt)}</td><td>${g.commits}</td><td>${g.reason}${g.damaged ? html`; <strong class="bad">DAMAGED</strong>: ${g.damaged}` : ''}</td></tr>`,
)}
</tbody></table></div>`
    : html`<p class="empty">No history yet.</p>`
}
</details>`;
}

/** A dry run's list of what the restore would take away: the activity entries after its moment, newest first. */
function takenAwayView(after: NonNullable<RestoreOutcome['after']>): Html {
  if (after.note) return html`<p class="muted">${after.note}</p>`;
  if (!after.entries.length) return html`<p id="taken-away">It takes nothing away: no entry of the list below is after that moment.</p>`;
  const count = after.count ?? after.entries.length;
  return html`<p>It would take away ${after.count === undefined && after.more ? 'at least ' : ''}${count} entr${count === 1 ? 'y' : 'ies'}, ${after.more ? `the newest ${after.entries.length} first` : 'newest first'}:</p>
<ul id="taken-away">${after.entries.map((e) => html`<li><time datetime="${e.at}">${when(e.at)}</time> ${whoMade(e.by) ?? (e.kind === 'outside' || e.kind === 'gap' ? 'outside agentdb' : '')} ${e.kind === 'call' ? html`<code>${e.statement ?? ''}</code>` : e.kind}</li>`)}</ul>
${after.more ? html`<p class="muted">And ${after.count === undefined ? 'more' : `${after.count - after.entries.length} more`}: the list below has them all.</p>` : ''}`;
}

/** A `datetime-local` value (UTC by the label) as ISO text. */
function atOf(value: string | undefined): string | undefined {
  if (!value) return undefined;
  const iso = /Z$|[+-]\d\d:\d\d$/.test(value) ? value : `${value}Z`;
  if (Number.isNaN(Date.parse(iso))) throw new AgentDbError('INVALID_ARGUMENTS', `${JSON.stringify(value)} is not a time`);
  return new Date(iso).toISOString();
}

/** `/data/history` and its dry run, restore and undo, all through the history core; `calls` counts each view against the member's lookup rate. */
export function historyRoutes(
  app: FastifyInstance,
  access: HistoryAccess | undefined,
  restoreOnce: RestoreOnce,
  calls?: Pick<KeyedCalls, 'chargeMemberLookup'>,
): void {
  const frameOf = (request: FastifyRequest): PageFrame => ({ title: 'History', member: memberOf(request), csrf: sessionOf(request).csrf, nav: 'data' });
  const charge = calls ? (workspace: string, member: string, points?: number) => calls.chargeMemberLookup(workspace, member, points) : undefined;
  const render = async (
    request: FastifyRequest,
    reply: FastifyReply,
    db: string,
    outcome?: RestoreOutcome,
    at?: string,
    restored?: string,
    before?: string,
  ) => {
    const history = historyAvailable(access);
    const caller = { member: memberOf(request) };
    // The page lists a page of activity: charged as the API's page is (a lookup, and what it read afresh).
    const out = await chargedActivityRead(charge, caller.member, (onRead) =>
      Promise.all([history.history(db, caller, { commits: 'none' }), history.activity(db, before ? { before } : {}, caller, onRead)]),
    );
    // With its seconds, as the data pages' refusals: a 429 with Retry-After (errorPage).
    if ('limited' in out)
      throw new AgentDbError(
        'RATE_LIMITED',
        `the workspace's rate limit is spent for now (a history page counts a tenth of a call, and a call more per 10,000 commits and rows it read afresh); reload in ${out.limited.retryAfterS} s`,
        { retryAfter: out.limited.retryAfterS },
      );
    const [h, activity] = out.page;
    // A new one-time token each time the page is shown: its forms sent again restore once, the
    // same restore asked again from a page shown again is a new request.
    const forms = { csrf: sessionOf(request).csrf, once: newOnceToken() };
    const body = historyView(db, h, activity, isHistoryAdmin(memberOf(request)), forms, outcome, at?.replace(/\.\d{3}Z$|Z$/, ''), restored);
    return reply.type('text/html; charset=utf-8').send(layout(frameOf(request), body).value);
  };

  // `attachValidation` here and below: a bad query or form is an error page like any other refusal, not the API's JSON.
  const zod = app.withTypeProvider<ZodTypeProvider>();
  zod.get('/data/history', { schema: { querystring: historyQuery }, attachValidation: true }, async (request, reply) => {
    try {
      if (request.validationError) throw request.validationError;
      const { db, restored, before } = request.query;
      return await render(request, reply, ownDatabase(memberOf(request), db), undefined, undefined, restored, before || undefined);
    } catch (err) {
      return errorPage(reply, frameOf(request), err);
    }
  });

  for (const [path, dryRun] of [
    ['/data/history/dry-run', true],
    ['/data/history/restore', false],
  ] as const) {
    zod.post(path, { schema: { body: restoreBody }, attachValidation: true }, async (request, reply) => {
      try {
        const member = memberOf(request);
        if (request.validationError) throw request.validationError;
        const body = request.body;
        const db = ownDatabase(member, body.db);
        const history = historyAvailable(access);
        const at = atOf(body.at);
        const undo = body.undo || undefined;
        if (!at && !undo) throw new AgentDbError('INVALID_ARGUMENTS', 'pick a time to restore to');
        // Undoing a restore is the way back and is not asked again; a restore to a time is.
        if (!dryRun && at) requireTyped(body.confirm, db, `type the database name (${db}) exactly to confirm the restore in place; nothing was restored`);
        // As the /v1 restore route names its caller: the member, with their key (via the session).
        const req = { ...(undo ? { undo } : { at }), dryRun, by: { who: `${member.workspace}/@${member.name}`, via: 'key' as const } };
        // A dry run lists what it would take away from a page of activity: charged before it runs,
        // as the API's dry run is, not only by the page shown after it (which a spent budget refused
        // once the dry run had read the list anyway).
        const run = async () => {
          const planned = await chargedRestore(charge, member, dryRun, (onRead, paidBytes) => history.restore(db, { ...req, paidBytes }, { member }, onRead));
          if ('limited' in planned) throw restoreRateLimited(planned.limited, dryRun);
          return planned.page;
        };
        if (dryRun) return await render(request, reply, db, await run(), at);
        // A restore changed the database: answer with a redirect to a plain page (POST, redirect,
        // GET), so reloading the answer or going back to it cannot send the restore again — it
        // did, and restored (or undid) a second time. The same form sent again (a double click,
        // back and submit) answers the first one's redirect (`restore-once.ts`).
        const to = await restoreOnce.run(
          member.workspace,
          body.once,
          JSON.stringify([member.workspace, member.name, 'restore', db, undo ? null : (at ?? null), undo ?? null]),
          async () => `${historyHref(db)}&restored=${encodeURIComponent((await run()).undoId ?? '')}`,
          () => historyHref(db),
          historyState(history, db, { member }),
        );
        return reply.redirect(to, 303);
      } catch (err) {
        return errorPage(reply, frameOf(request), err);
      }
    });
  }
}
