import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { AgentDbError } from '../../errors.ts';
import { errorPage } from './error-page.ts';
import { dbHref } from './data-views.ts';
import { historyAvailable, historyHref, type HistoryAccess } from './history-routes.ts';
import type { PageFrame } from './layout.ts';
import { databaseField, formBody, requireTyped } from './web-form.ts';
import { memberOf, ownDatabase, sessionOf } from './web-request.ts';

// The history position comes from the entry (its `restoreBefore`, or its own id for a fork): a
// position, not a time, so commits of the same millisecond are told apart. What the person
// typed is checked here, before anything runs.
const restoreBody = formBody({ db: databaseField, through: z.string().min(1).max(100), confirm: z.string().max(300).optional() });
const forkBody = formBody({ db: databaseField, through: z.string().min(1).max(100), into: z.string().max(300).optional() });

/**
 * The activity list's two actions (see `activity-view.ts`), through the same history core as
 * every restore (its rules, its undo point): `/data/history/activity-restore` restores in place
 * to just before an entry once the database's name is typed, `/data/history/activity-fork`
 * creates the typed new database as of an entry.
 */
export function activityRoutes(app: FastifyInstance, access: HistoryAccess | undefined): void {
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
      const outcome = await history.restore(db, { through: request.body.through, by: by(request) }, { member });
      // POST, redirect, GET: reloading the answer cannot restore a second time.
      return reply.redirect(`${historyHref(db)}&restored=${encodeURIComponent(outcome.undoId ?? '')}`, 303);
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
      await history.restore(db, { through: request.body.through, into, by: by(request) }, { member });
      return reply.redirect(dbHref(into), 303);
    } catch (err) {
      return errorPage(reply, frameOf(request), err);
    }
  });
}
