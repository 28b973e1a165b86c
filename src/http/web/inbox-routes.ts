import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { ApprovalService } from '../../approvals/approval-service.ts';
import { chargedApprovalPage, chargedApprovalRead } from '../../calls/activity-charge.ts';
import type { KeyedCalls } from '../../calls/bearer-key-calls.ts';
import type { ApprovalFilter } from '../../approvals/approval-listing.ts';
import type { MemberRegistry } from '../../registry/members.ts';
import { AgentDbError, ERRORS, type ErrorCode } from '../../errors.ts';
import { approvalPage } from './approval-page.ts';
import { inboxStreamSlots } from '../../approvals/inbox-stream-slots.ts';
import { refusalHead } from '../error-reply.ts';
import { errorPage, refusalFlash } from './error-page.ts';
import { html } from './html.ts';
import { approvalHref, bulkForm, cutOnCard, decidedTable, pager, pendingList } from './inbox-view.ts';
import { filterForm, filterParams, inboxFilter, type FilterChoices } from './inbox-filters.ts';
import { bulkDecisionRoute, bulkFlash } from './inbox-bulk-route.ts';
import { layout, type PageFrame } from './layout.ts';
import type { LiveEvents } from './live-events.ts';
import { formBody } from './web-form.ts';
import { memberOf, sessionOf } from './web-request.ts';

// Ids are minted by the core; the bound only keeps absurd ones from reaching Redis (as `/v1`'s).
const idParams = z.object({ id: z.string().min(1).max(200) });

// Every field of an inbox link is optional and forgiving, as the page always was: a page number or
// notice that is not one (a hand-edited link) shows the first page, no notice, never an error.
const lenient = z.string().optional().catch(undefined);
const inboxQuery = z.object({
  p: lenient,
  dp: lenient,
  decided: lenient,
  error: lenient,
  whole: lenient,
  // A bulk decision's outcome (see bulkFlash) and the filter (see inboxFilter).
  bulk: lenient,
  done: lenient,
  skipped: lenient,
  why: lenient,
  agent: lenient,
  database: lenient,
  tool: lenient,
});
// Any id: one too long or unknown is the same "no such approval" page.
const anyId = z.object({ id: z.string() });

// `whole` is `1` when the form was the approval's whole page, not a card that may have cut it.
const decisionBody = formBody({
  decision: z.enum(['approve', 'reject']),
  reason: z.string().trim().optional(),
  whole: z.string().optional(),
});

/** A notice from a redirect's query: only known words and registry codes are ever shown. */
function flashOf(query: {
  decided?: string;
  error?: string;
  whole?: string;
  bulk?: string;
  done?: string;
  skipped?: string;
  why?: string;
}): PageFrame['flash'] {
  const bulk = bulkFlash(query);
  if (bulk) return bulk;
  // Not "the call runs now": a call whose data changed since it was asked runs nothing and is
  // asked again, as a new card (review N6, session 30: the CLI said so of such calls too).
  if (query.decided === 'approved')
    return { kind: 'ok', text: 'Approved: the call runs, unless its data changed since it was asked; then it is asked again as a new card.' };
  if (query.decided === 'rejected') return { kind: 'ok', text: 'Rejected: the agent is told, with your reason.' };
  if (query.whole === 'needed') return { kind: 'error', text: 'Too long to show on its card: read it whole here before approving it.' };
  if (query.error && Object.hasOwn(ERRORS, query.error)) return refusalFlash(query.error as ErrorCode);
  return undefined;
}

/** Cards (and decided rows) per page: a page stays a bounded size however many calls wait. */
export const PAGE_SIZE = 25;

/** A page number from a query parameter: 1 unless it is a whole number from 1 up. */
function pageNumber(text: string | undefined): number {
  const n = Number(text);
  return Number.isSafeInteger(n) && n >= 1 ? n : 1;
}

/**
 * One page of pending or decided approvals; a page past the last (calls decided since the link
 * was made) shows the last page instead of an empty list.
 */
async function pageOf(
  approvals: ApprovalService,
  workspace: string,
  state: 'pending' | 'decided',
  wanted: number,
  filter: ApprovalFilter,
  onRead: (entries: number) => void,
) {
  let page = wanted;
  let found = await approvals.page({ workspace, state, offset: (page - 1) * PAGE_SIZE, limit: PAGE_SIZE, filter, onRead });
  const last = Math.max(1, Math.ceil(found.total / PAGE_SIZE));
  if (page > last) {
    page = last;
    found = await approvals.page({ workspace, state, offset: (page - 1) * PAGE_SIZE, limit: PAGE_SIZE, filter, onRead });
  }
  return { ...found, page };
}

/**
 * The approvals inbox: `/inbox` (pending newest first, then decided, each paged), `/inbox/<id>`
 * (one approval whole), the decision POST (through the same
 * `ApprovalService.decide` as `/v1/approvals`, as the signed-in member, via their key), and
 * `/inbox/events`, a server-sent event stream fed by the Redis event stream.
 */
export function inboxRoutes(
  app: FastifyInstance,
  deps: {
    approvals: ApprovalService;
    members: MemberRegistry;
    events: LiveEvents;
    heartbeatMs?: number;
    inboxStreamBounds?: { perCaller: number; perWorkspace: number; total: number };
    /** Counts each page against the member's rates (`chargedApprovalPage`); absent, not counted. */
    calls?: Pick<KeyedCalls, 'chargeMemberLookup'>;
  },
): void {
  const charge = deps.calls ? (workspace: string, member: string, points?: number) => deps.calls!.chargeMemberLookup(workspace, member, points) : undefined;
  app.get('/', async (_request, reply) => reply.redirect('/inbox', 303));
  const streams = inboxStreamSlots(deps.inboxStreamBounds);

  const zod = app.withTypeProvider<ZodTypeProvider>();
  zod.get('/inbox', { schema: { querystring: inboxQuery } }, async (request, reply) => {
    const member = memberOf(request);
    const { csrf } = sessionOf(request);
    const query = request.query;
    const filter = inboxFilter(query);
    // Each list reads every entry of its workspace index: charged by what it read (a reload loop
    // of a big inbox took Redis's one thread from every workspace).
    const read = await chargedApprovalPage(charge, member, (onRead) =>
      Promise.all([
        pageOf(deps.approvals, member.workspace, 'pending', pageNumber(query.p), filter, onRead),
        pageOf(deps.approvals, member.workspace, 'decided', pageNumber(query.dp), filter, onRead),
      ]),
    );
    if ('limited' in read) {
      const wait = read.limited.retryAfterS;
      const why = `the workspace's rate limit is spent for now (an inbox page counts a tenth of a call, and a call more per 1,000 approvals it read); reload in ${wait} s`;
      return errorPage(reply, { title: 'Approvals', member, csrf, nav: 'inbox' }, new AgentDbError('RATE_LIMITED', why, { retryAfter: wait }));
    }
    const [pending, decided] = read.page;
    const refusals = await deps.approvals.standings(pending.approvals);
    const flash = flashOf(query);
    const keep = { ...filterParams(filter), p: pending.page, dp: decided.page };
    const choices = Object.fromEntries(
      (['agent', 'database', 'tool'] as const).map((f) => [f, [...new Set([...pending.choices[f], ...decided.choices[f]])]]),
    ) as unknown as FilterChoices;
    const page = layout(
      { title: 'Approvals', member, csrf, nav: 'inbox', ...(flash ? { flash } : {}) },
      html`<h1>Approvals <span class="live muted" id="live" role="status">live updates connecting…</span></h1>
${filterForm(choices, filter)}
<h2>Waiting for a decision</h2>
${bulkForm(csrf, filterParams(filter))}
${pager({ id: 'pending-pager', label: 'Pages of pending calls', param: 'p', page: pending.page, total: pending.total, size: PAGE_SIZE, keep })}
${pendingList(pending.approvals, csrf, refusals, pending.page)}
<h2>Decided <span class="muted">(newest decision first)</span></h2>
<div id="decided-section">${pager({ id: 'decided-pager', label: 'Pages of decided calls', param: 'dp', page: decided.page, total: decided.total, size: PAGE_SIZE, keep })}
${decidedTable(decided.approvals)}</div>`,
    );
    return reply.type('text/html; charset=utf-8').send(page.value);
  });

  // One approval whole: where a call too long for its card is read, and approved. Another
  // workspace's approval is the same 404 as a missing one, so ids reveal nothing.
  zod.get('/inbox/:id', { schema: { params: anyId, querystring: inboxQuery } }, async (request, reply) => {
    const member = memberOf(request);
    const { csrf } = sessionOf(request);
    const { id } = request.params;
    const frame = { title: 'Approval', member, csrf, nav: 'inbox' as const };
    const read = await chargedApprovalRead(charge, member, async () => (id.length <= 200 ? await deps.approvals.get(id) : undefined));
    if ('limited' in read) {
      const why = `the workspace's rate limit is spent for now (reading an approval counts a tenth of a call); reload in ${read.limited.retryAfterS} s`;
      return errorPage(reply, frame, new AgentDbError('RATE_LIMITED', why, { retryAfter: read.limited.retryAfterS }));
    }
    const approval = read.page;
    if (!approval || approval.workspace !== member.workspace) {
      return errorPage(reply, frame, new AgentDbError('NOT_FOUND', `There is no approval ${JSON.stringify(id)} in ${member.workspace}.`));
    }
    const refusals = approval.state === 'pending' ? await deps.approvals.standings([approval]) : new Map<string, string>();
    const flash = flashOf(request.query);
    const page = layout({ ...frame, title: `Approval ${approval.id}`, ...(flash ? { flash } : {}) }, approvalPage(approval, csrf, refusals.get(approval.id)));
    return reply.type('text/html; charset=utf-8').send(page.value);
  });

  // `attachValidation`: a bad form is the inbox again with the registry's notice (a redirect's
  // notice is only ever a known word or code, see flashOf), not the API's JSON.
  zod.post('/approvals/:id/decision', { schema: { params: idParams, body: decisionBody }, attachValidation: true }, async (request, reply) => {
    if (request.validationError) return reply.redirect('/inbox?error=INVALID_ARGUMENTS', 303);
    const { id } = request.params;
    const body = request.body;
    const decision = body.decision;
    const reason = body.reason || undefined;
    const { workspace, name, role, createdAt } = memberOf(request);
    if (decision === 'approve' && body.whole !== '1') {
      // Approving from a card whose SQL or params were cut would approve unseen text (a page
      // open from before, a hand-made form): the person is sent to read it whole first.
      const approval = await deps.approvals.get(id);
      if (approval && approval.workspace === workspace && cutOnCard(approval)) return reply.redirect(`${approvalHref(approval)}?whole=needed`, 303);
    }
    const result = await deps.approvals.decide(id, { decision, ...(reason ? { reason } : {}), by: { workspace, name, role, createdAt }, via: 'key' });
    if (!result.ok) return reply.redirect(`/inbox?error=${result.code}`, 303);
    return reply.redirect(`/inbox?decided=${result.approval.state}`, 303);
  });

  bulkDecisionRoute(app, deps.approvals);

  app.get('/inbox/events', async (request, reply) => {
    const member = memberOf(request);
    const session = sessionOf(request);
    let release: () => void;
    try {
      release = streams.take(member.workspace, member.name);
    } catch (err) {
      if (!(err instanceof AgentDbError)) throw err;
      // Not a stream: the page's EventSource stops at an answer other than 200, and the inbox
      // still shows new approvals on a reload.
      return refusalHead(reply, err.toBody())
        .type('text/plain; charset=utf-8')
        .send(`${err.code}: ${err.detail ?? ERRORS[err.code].message}`);
    }
    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    res.write('retry: 2000\n\n');
    let closed = false;
    const close = () => {
      if (closed) return;
      closed = true;
      release();
      clearInterval(ping);
      unsubscribe?.();
      res.end();
    };
    // The heartbeat checks the member again too: a member revoked while no event comes would
    // otherwise keep a stream (and the page's live view) open until the next event.
    const ping = setInterval(() => {
      void stillMember().then((still) => {
        if (closed) return;
        if (still === false) return signOut();
        res.write(': ping\n\n');
      });
    }, deps.heartbeatMs ?? 15_000).unref();
    const stillMember = () =>
      deps.members.authenticateHash(session.keyHash).then(
        (m) => m !== undefined && m.workspace === member.workspace && m.name === member.name,
        () => undefined /* Redis hiccup: the next heartbeat or event asks again */,
      );
    const signOut = () => {
      res.write('event: signed-out\ndata: {}\n\n');
      close();
    };
    let unsubscribe: (() => void) | undefined;
    request.raw.on('close', close);
    try {
      unsubscribe = await deps.events.subscribe({
        workspace: member.workspace,
        end: close,
        send: (e) => {
          // A long-lived stream is a request too: a member revoked meanwhile hears nothing more.
          void stillMember().then((still) => {
            if (closed || still === undefined) return;
            if (!still) return signOut();
            res.write(`event: approval\ndata: ${JSON.stringify(e)}\n\n`);
          });
        },
      });
    } catch (err) {
      // The response is already the stream: it ends, and the browser reconnects.
      request.log.warn({ err: String(err) }, 'inbox event stream could not start');
      return close();
    }
    if (closed) unsubscribe();
    else res.write('event: ready\ndata: {}\n\n');
  });
}
