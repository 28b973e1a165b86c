import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Member } from '../../registry/members.ts';
import type { Envelope } from '../../contracts/envelope.ts';
import type { PageArgs } from '../../contracts/browse.ts';
import { AgentDbError, type ErrorCode } from '../../errors.ts';
import type { DataBrowser } from '../../shards/data-browser.ts';
import type { KeyedCalls } from '../../calls/bearer-key-calls.ts';
import { parseDatabaseId } from '../../contracts/database-id.ts';
import { databasesView, dbHref, droppedNote, tablesView } from './data-views.ts';
import { gridView, PAGE_SIZES, type GridQuery } from './grid-view.ts';
import { html, type Html } from './html.ts';
import { layout, type PageFrame } from './layout.ts';
import type { HistoryPanel } from './history-routes.ts';
import { decodeCursor } from './cursor-param.ts';
import { errorPage } from './error-page.ts';
import { droppedTable, dropNoticeQuery } from './drop-notice.ts';
import { memberOf, ownDatabase, sessionOf } from './web-request.ts';

/** What the data pages call. */
export interface DataRoutesDeps {
  browser: DataBrowser;
  calls: KeyedCalls;
  history: HistoryPanel;
}

const gridQuery = z.object({
  db: z.string(),
  table: z.string().min(1),
  size: z.coerce
    .number()
    .int()
    .refine((n) => (PAGE_SIZES as readonly number[]).includes(n), 'not an offered page size')
    .default(100),
  sort: z.string().min(1).optional(),
  dir: z.enum(['asc', 'desc']).default('asc'),
  after: z.string().max(300_000).optional(),
  before: z.string().max(300_000).optional(),
  page: z.coerce.number().int().min(1).optional(),
  p: z.coerce.number().int().min(1).optional(),
  total: z.coerce.number().int().min(0).optional(),
});

const frameOf = (request: FastifyRequest, title: string): PageFrame => ({ title, member: memberOf(request), csrf: sessionOf(request).csrf, nav: 'data' });

/** Who may drop here, said plainly; the form only for an admin on the shared database. */
function dropForm(member: Member, db: string, table: string, csrf: string): Html {
  const shared = parseDatabaseId(db).agent === undefined;
  if (!shared) return html`<section class="danger-zone"><h2>Drop</h2><p class="muted">An agent's tables are dropped only by that agent.</p></section>`;
  if (member.role !== 'admin')
    return html`<section class="danger-zone"><h2>Drop</h2><p class="muted" id="drop-denied">Only a workspace admin can drop a shared table.</p></section>`;
  return html`<section class="danger-zone"><h2>Drop this table</h2>
<p>Dropping removes the table and its rows for every agent of the workspace. It is recorded like any other drop, as yours.</p>
<form method="post" action="/data/drop" id="drop-form">
  <input type="hidden" name="_csrf" value="${csrf}"><input type="hidden" name="db" value="${db}"><input type="hidden" name="table" value="${table}">
  <label>Type <strong>${table}</strong> to confirm <input name="confirm" autocomplete="off" required></label>
  <button type="submit" class="danger">Drop table</button>
</form></section>`;
}

/** `/data` (databases), `/data/db` (tables), `/data/table` (grid), `/data/export.csv`, and the admin drop. */
export function dataRoutes(app: FastifyInstance, deps: DataRoutesDeps): void {
  app.get('/data', async (request, reply) => {
    const member = memberOf(request);
    const dbs = await deps.browser.databases(member.workspace);
    return reply.type('text/html; charset=utf-8').send(layout(frameOf(request, 'Data'), databasesView(member, dbs)).value);
  });

  app.get('/data/db', async (request, reply) => {
    const frame = frameOf(request, 'Database');
    try {
      const db = ownDatabase(memberOf(request), (request.query as { db?: unknown }).db);
      const flash = droppedTable(request.query as Record<string, unknown>, sessionOf(request).csrf, db);
      const [described, history] = await Promise.all([deps.browser.tables(db), deps.history.summary(db, memberOf(request))]);
      const page = layout(
        { ...frame, title: db, ...(flash ? { flash: { kind: 'ok' as const, text: droppedNote(db, flash) } } : {}) },
        tablesView(db, described, history),
      );
      return reply.type('text/html; charset=utf-8').send(page.value);
    } catch (err) {
      return errorPage(reply, frame, err);
    }
  });

  // `attachValidation`: a bad query is an error page like any other refusal here, not the API's JSON.
  app.withTypeProvider<ZodTypeProvider>().get('/data/table', { schema: { querystring: gridQuery }, attachValidation: true }, async (request, reply) => {
    const frame = frameOf(request, 'Table');
    try {
      const member = memberOf(request);
      if (request.validationError) throw request.validationError;
      const q = request.query;
      const db = ownDatabase(member, q.db);
      const after = decodeCursor(q.after);
      const before = decodeCursor(q.before);
      const fresh = !after && !before;
      const args: PageArgs = {
        table: q.table,
        dir: q.dir,
        limit: q.size,
        ...(q.sort ? { sort: q.sort } : {}),
        ...(after ? { after } : {}),
        ...(before ? { before } : {}),
        ...(fresh && q.page ? { offset: (q.page - 1) * q.size } : {}),
        ...(fresh && q.total === undefined ? { count: true } : {}),
      };
      const started = performance.now();
      const page = await deps.browser.page(db, args);
      const serverMs = performance.now() - started;
      const grid: GridQuery = {
        db,
        table: page.table,
        size: q.size,
        dir: q.dir,
        ...(q.sort ? { sort: q.sort } : {}),
        ...(fresh ? { p: q.page ?? 1 } : q.p ? { p: q.p } : {}),
        ...(page.total !== undefined ? { total: page.total } : q.total !== undefined ? { total: q.total } : {}),
      };
      reply.header('server-timing', `shard;dur=${serverMs.toFixed(2)}, sqlite;dur=${page.sqliteMs.toFixed(2)}`);
      const body = gridView(grid, page, { serverMs }, dropForm(member, db, page.table, sessionOf(request).csrf));
      return reply.type('text/html; charset=utf-8').send(layout({ ...frame, title: page.table }, body).value);
    } catch (err) {
      return errorPage(reply, frame, err);
    }
  });

  app.get('/data/export.csv', async (request, reply) => {
    const frame = frameOf(request, 'Export');
    const query = request.query as { db?: unknown; table?: unknown };
    let first: IteratorResult<string>;
    let chunks: AsyncGenerator<string>;
    let total: number | undefined;
    try {
      const db = ownDatabase(memberOf(request), query.db);
      if (typeof query.table !== 'string' || !query.table) throw new AgentDbError('INVALID_ARGUMENTS', 'name a table');
      chunks = deps.browser.csv(db, query.table, (n) => (total = n));
      // The first chunk before any header: a missing table is still an error page, not a
      // broken download, and the row count can go in a header for the progress bar.
      first = await chunks.next();
    } catch (err) {
      return errorPage(reply, frame, err);
    }
    const table = query.table as string;
    const ascii = table.replace(/[^A-Za-z0-9._-]/g, '_');
    reply
      .type('text/csv; charset=utf-8')
      .header('content-disposition', `attachment; filename="${ascii}.csv"; filename*=UTF-8''${encodeURIComponent(table)}.csv`)
      .header('cache-control', 'no-store');
    if (total !== undefined) reply.header('x-total-rows', String(total));
    async function* all(): AsyncGenerator<string> {
      if (!first.done) yield first.value;
      // Readable.from asks for the next chunk only when the socket has taken the last one
      // (backpressure): a slow download holds one chunk in memory, not the table. A chunk that
      // fails mid-way aborts the response, so a partial file never looks complete.
      yield* chunks;
    }
    return reply.send(Readable.from(all(), { objectMode: false }));
  });

  app.post('/data/drop', async (request, reply) => {
    const frame = frameOf(request, 'Drop');
    const body = (request.body ?? {}) as Record<string, unknown>;
    try {
      const member = memberOf(request);
      const db = ownDatabase(member, body.db);
      const table = typeof body.table === 'string' ? body.table : '';
      if (!table || body.confirm !== table) throw new AgentDbError('INVALID_ARGUMENTS', 'type the table name exactly to confirm the drop; nothing was dropped');
      const { agent } = parseDatabaseId(db);
      // The member's own DATA_DROP_TABLE call: the same policy (a drop from a client takes an
      // admin; an agent's tables are its own), guard, executor and audit as any other drop.
      const answer = await deps.calls.call(
        { kind: 'member', workspace: member.workspace, member: { name: member.name, role: member.role } },
        { tool: 'DATA_DROP_TABLE', arguments: agent ? { table, agent } : { table, scope: 'workspace' } },
        { wait: true, maxWaitMs: 30_000 },
      );
      if ('status' in answer && answer.status) throw new AgentDbError('UNAVAILABLE', 'the drop has not finished yet; look again in a moment');
      const envelope = answer as Envelope;
      if (!envelope.ok) throw new AgentDbError(envelope.error.code as ErrorCode, envelope.error.message);
      return reply.redirect(`${dbHref(db)}&${dropNoticeQuery(sessionOf(request).csrf, db, table)}`, 303);
    } catch (err) {
      return errorPage(reply, frame, err);
    }
  });
}
