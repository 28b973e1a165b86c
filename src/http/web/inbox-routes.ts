import type { FastifyInstance } from 'fastify';
import type { ApprovalService } from '../../approvals/approval-service.ts';
import type { MemberRegistry } from '../../approvals/members.ts';
import { ERRORS, type ErrorCode } from '../../errors.ts';
import { html } from './html.ts';
import { decidedTable, pendingList } from './inbox-view.ts';
import { layout, type PageFrame } from './layout.ts';
import type { LiveEvents } from './live-events.ts';
import { memberOf, sessionOf } from './web-request.ts';

/** A notice from a redirect's query: only known words and registry codes are ever shown. */
function flashOf(query: { decided?: string; error?: string }): PageFrame['flash'] {
  if (query.decided === 'approved') return { kind: 'ok', text: 'Approved: the call runs now.' };
  if (query.decided === 'rejected') return { kind: 'ok', text: 'Rejected: the agent is told, with your reason.' };
  if (query.error && Object.hasOwn(ERRORS, query.error)) return { kind: 'error', text: `${query.error}: ${ERRORS[query.error as ErrorCode].message}` };
  return undefined;
}

/**
 * The approvals inbox: `/inbox` (pending newest first, then decided), the decision POST (through the same
 * `ApprovalService.decide` as `/v1/approvals`, as the signed-in member, via their key), and
 * `/inbox/events`, a server-sent event stream fed by the Redis event stream.
 */
export function inboxRoutes(app: FastifyInstance, deps: { approvals: ApprovalService; members: MemberRegistry; events: LiveEvents; heartbeatMs?: number }): void {
  app.get('/', async (_request, reply) => reply.redirect('/inbox', 303));

  app.get('/inbox', async (request, reply) => {
    const member = memberOf(request);
    const { csrf } = sessionOf(request);
    const [pending, all] = await Promise.all([
      deps.approvals.list({ workspace: member.workspace, state: 'pending', limit: 500 }),
      deps.approvals.list({ workspace: member.workspace, state: 'all', limit: 200 }),
    ]);
    const decided = all.filter((a) => a.state !== 'pending').slice(0, 100);
    const refusals = await deps.approvals.standings(pending);
    const flash = flashOf(request.query as Record<string, string>);
    const page = layout(
      { title: 'Approvals', member, csrf, nav: 'inbox', ...(flash ? { flash } : {}) },
      html`<h1>Approvals <span class="live muted" id="live" role="status">live updates connecting…</span></h1>
<h2>Waiting for a decision</h2>
${pendingList(pending, csrf, refusals)}
<h2>Decided</h2>
<div id="decided-section">${decidedTable(decided)}</div>`,
    );
    return reply.type('text/html; charset=utf-8').send(page.value);
  });

  app.post('/approvals/:id/decision', async (request, reply) => {
    const { id } = request.params as { id: string };
    const body = (request.body ?? {}) as Record<string, unknown>;
    const decision = body.decision === 'approve' || body.decision === 'reject' ? body.decision : undefined;
    if (!decision || id.length > 200) return reply.redirect('/inbox?error=INVALID_ARGUMENTS', 303);
    const reason = typeof body.reason === 'string' && body.reason.trim() ? body.reason.trim() : undefined;
    const { workspace, name, role } = memberOf(request);
    const result = await deps.approvals.decide(id, { decision, ...(reason ? { reason } : {}), by: { workspace, name, role }, via: 'key' });
    if (!result.ok) return reply.redirect(`/inbox?error=${result.code}`, 303);
    return reply.redirect(`/inbox?decided=${result.approval.state}`, 303);
  });

  app.get('/inbox/events', async (request, reply) => {
    const member = memberOf(request);
    const session = sessionOf(request);
    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-store', connection: 'keep-alive', 'x-accel-buffering': 'no' });
    res.write('retry: 2000\n\n');
    let closed = false;
    const close = () => {
      if (closed) return;
      closed = true;
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
