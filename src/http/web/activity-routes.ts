import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { chargedRestore, restoreRateLimited } from '../../calls/activity-charge.ts';
import type { KeyedCalls } from '../../calls/bearer-key-calls.ts';
import { AgentDbError } from '../../errors.ts';
import { historyState, type RestoreOnce } from '../../shards/restore-once.ts';
import { errorPage } from './error-page.ts';
import { dbHref } from './data-views.ts';
import { historyAvailable, historyHref, type HistoryAccess } from './history-routes.ts';
import type { PageFrame } from './layout.ts';
import { databaseField, formBody, requireTyped } from './web-form.ts';
import { memberOf, ownDatabase, sessionOf } from './web-request.ts';

// The history position is the entry's own id: the restore goes `before` it, the fork `through`
// it, as the CLI's flags of those names (a page shown before this sends the restore's `through`:
// the state before the entry, which it still means). A position, not a time, so commits of the
// same millisecond are told apart. What the person typed is checked here, before anything runs.
// `once`: the page's one-time token (`restore-once.ts`).
const once = z.string().max(64).optional();
const restoreBody = formBody({
  db: databaseField,
  before: z.string().min(1).max(200).optional(),
  through: z.string().min(1).max(100).optional(),
  confirm: z.string().max(300).optional(),
  once,
});
const forkBody = formBody({ db: databaseField, through: z.string().min(1).max(100), into: z.string().max(300).optional(), once });

/**
 * The activity list's two actions (see `activity-view.ts`), through the same history core as
 * every restore (its rules, its undo point): `/data/history/activity-restore` restores in place
 * to just before an entry once the database's name is typed, `/data/history/activity-fork`
 * creates the typed new database as of an entry.
 */
export function activityRoutes(
  app: FastifyInstance,
  access: HistoryAccess | undefined,
  restoreOnce: RestoreOnce,
  calls?: Pick<KeyedCalls, 'chargeMemberLookup'>,
): void {
  const charge = calls ? (workspace: string, member: string, points?: number) => calls.chargeMemberLookup(workspace, member, points) : undefined;
  // Charged as every restore is (`chargedRestore`): uncharged here, this form was a restore loop's way round the others' rate.
  const charged = async <T extends { restoredBytes?: number; unpaid?: number }>(
    member: { workspace: string; name: string },
    restore: (paidBytes?: number) => Promise<T>,
  ): Promise<T> => {
    const out = await chargedRestore(charge, member, false, (_onRead, paidBytes) => restore(paidBytes));
    if ('limited' in out) throw restoreRateLimited(out.limited, false);
    return out.page;
  };
  const frameOf = (request: FastifyRequest): PageFrame => ({ title: 'History', member: memberOf(request), csrf: sessionOf(request).csrf, nav: 'data' });
  const by = (request: FastifyRequest) => {
    const member = memberOf(request);
    return { who: `${member.workspace}/@${member.name}`, via: 'key' as const };
  };
  const zod = app.withTypeProvider<ZodTypeProvider>();

  zod.post('/data/history/activity-restore', { schema: { body: restoreBody }, attachValidation: true }, async (request, reply) => {
    try {
      if (request.validationError) throw request.validationError;
      const member = memberOf(request);
      const db = ownDatabase(member, request.body.db);
      const history = historyAvailable(access);
      requireTyped((request.body.confirm ?? '').trim(), db, `type the database's name, ${db}, to confirm the restore; nothing was restored`);
      const { before, through } = request.body;
      const where = before !== undefined ? { before } : through !== undefined ? { through } : undefined;
      if (!where) throw new AgentDbError('INVALID_ARGUMENTS', 'the form names no entry to restore to just before; nothing was restored');
      // POST, redirect, GET: reloading the answer cannot restore a second time; the same form
      // sent again (a double click, back and submit) answers the first restore's redirect.
      const to = await restoreOnce.run(
        member.workspace,
        request.body.once,
        JSON.stringify([member.workspace, member.name, 'activity-restore', db, where]),
        async () => {
          const outcome = await charged(member, (paidBytes) => history.restore(db, { ...where, paidBytes, by: by(request) }, { member }));
          return `${historyHref(db)}&restored=${encodeURIComponent(outcome.undoId ?? '')}`;
        },
        () => historyHref(db),
        historyState(history, db, { member }),
      );
      return reply.redirect(to, 303);
    } catch (err) {
      return errorPage(reply, frameOf(request), err);
    }
  });

  zod.post('/data/history/activity-fork', { schema: { body: forkBody }, attachValidation: true }, async (request, reply) => {
    try {
      if (request.validationError) throw request.validationError;
      const member = memberOf(request);
      const db = ownDatabase(member, request.body.db);
      const history = historyAvailable(access);
      const typed = (request.body.into ?? '').trim();
      if (!typed) throw new AgentDbError('INVALID_ARGUMENTS', 'type the name of the new database to fork into; nothing was created');
      // A bare name is a database of the same workspace, the only place a fork may go.
      const into = typed.includes('/') ? typed : `${member.workspace}/${typed}`;
      const to = await restoreOnce.run(
        member.workspace,
        request.body.once,
        JSON.stringify([member.workspace, member.name, 'activity-fork', db, request.body.through, into]),
        async () => {
          await charged(member, (paidBytes) => history.restore(db, { through: request.body.through, into, paidBytes, by: by(request) }, { member }));
          return dbHref(into);
        },
        () => dbHref(into),
        historyState(history, db, { member }),
      );
      return reply.redirect(to, 303);
    } catch (err) {
      return errorPage(reply, frameOf(request), err);
    }
  });
}
