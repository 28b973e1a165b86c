import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { MAX_BULK_DECISIONS, type ApprovalService } from '../../approvals/approval-service.ts';
import { ERRORS, type ErrorCode } from '../../errors.ts';
import { refusalText } from './error-page.ts';
import { html } from './html.ts';
import { inboxFilter, inboxHref } from './inbox-filters.ts';
import { cutOnCard } from './inbox-view.ts';
import type { PageFrame } from './layout.ts';
import { formBody, rawText } from './web-form.ts';
import { memberOf } from './web-request.ts';

// Ticked cards: one id is a string, several a list (see the form parser in web-routes.ts).
const bulkBody = formBody({
  ids: z.union([z.string(), z.array(z.string())], { error: 'select at least one call' }).transform((v) => (Array.isArray(v) ? v : [v])),
  decision: z.enum(['approve', 'reject']),
  reason: z.string().trim().optional(),
  agent: z.string().optional(),
  database: z.string().optional(),
  tool: z.string().optional(),
});

/** Why a ticked card was not decided, as the bulk redirect names it: a registry code, or `whole`. */
const WHOLE = 'whole';

/** A bulk decision's notice: how many were decided, and why the rest were not (known words and registry codes only). */
export function bulkFlash(query: { bulk?: string; done?: string; skipped?: string; why?: string }): PageFrame['flash'] {
  if (query.bulk !== 'approved' && query.bulk !== 'rejected') return undefined;
  const count = (t: string | undefined) => (Number.isSafeInteger(Number(t)) && Number(t) >= 0 ? Number(t) : 0);
  const calls = (n: number) => `${n} call${n === 1 ? '' : 's'}`;
  const done = count(query.done);
  const skipped = count(query.skipped);
  const verb = query.bulk === 'approved' ? 'Approved' : 'Rejected';
  if (!skipped) return { kind: 'ok', text: `${verb} ${calls(done)}, each on its own.` };
  // Each code as every web refusal words it (refusalText): its sentence, the code a small reference.
  const why = (query.why ?? '')
    .split(',')
    .flatMap((w) =>
      w === WHOLE
        ? [html`too long to approve from its card: read it whole on its own page`]
        : Object.hasOwn(ERRORS, w)
          ? [refusalText(ERRORS[w as ErrorCode].message, w)]
          : [],
    );
  const reasons = why.map((r, i) => (i === 0 ? r : html`; ${r}`));
  return { kind: 'error', text: html`${verb} ${calls(done)}; ${calls(skipped)} not decided${why.length ? html` (${reasons})` : ''}.` };
}

/**
 * `POST /approvals/decide`, the inbox's "Approve selected" / "Reject selected": several ticked
 * cards, one reason, each decided through the same `ApprovalService.decide` (`decideMany`), so
 * each is bound to its own effect; the redirect's notice says how many were, and why the rest
 * were not. A card too long to show whole is not approved from here, as on its own form.
 */
export function bulkDecisionRoute(app: FastifyInstance, approvals: ApprovalService): void {
  app.withTypeProvider<ZodTypeProvider>().post('/approvals/decide', { schema: { body: bulkBody }, attachValidation: true }, async (request, reply) => {
    // Read as raw text: a form that failed its schema still goes back to the filtered inbox.
    const body: unknown = request.body;
    const back = inboxFilter({ agent: rawText(body, 'agent'), database: rawText(body, 'database'), tool: rawText(body, 'tool') });
    if (request.validationError) return reply.redirect(inboxHref(back, { error: 'INVALID_ARGUMENTS' }), 303);
    const { ids, decision } = request.body;
    // Past the cap nothing is decided, not even the ids left after the too-long ones are set aside.
    if (ids.length > MAX_BULK_DECISIONS) return reply.redirect(inboxHref(back, { error: 'INVALID_ARGUMENTS' }), 303);
    const reason = request.body.reason || undefined;
    const { workspace, name, role, createdAt } = memberOf(request);
    const unseen = new Set<string>();
    if (decision === 'approve') {
      const records = await Promise.all(ids.map((id) => (id.length <= 200 ? approvals.get(id) : undefined)));
      records.forEach((a, i) => {
        if (a && a.workspace === workspace && cutOnCard(a)) unseen.add(ids[i]!);
      });
    }
    const rest = ids.filter((id) => !unseen.has(id));
    const result = rest.length
      ? await approvals.decideMany(rest, { decision, ...(reason ? { reason } : {}), by: { workspace, name, role, createdAt }, via: 'key' })
      : { ok: true as const, results: [] };
    if (!result.ok) return reply.redirect(inboxHref(back, { error: result.code }), 303);
    const failed = result.results.flatMap((r) => (r.ok ? [] : [r.code]));
    const why = [...new Set([...failed, ...(unseen.size ? [WHOLE] : [])])];
    const outcome = {
      bulk: decision === 'approve' ? 'approved' : 'rejected',
      done: String(result.results.length - failed.length),
      skipped: String(failed.length + unseen.size),
      ...(why.length ? { why: why.join(',') } : {}),
    };
    return reply.redirect(inboxHref(back, outcome), 303);
  });
}
