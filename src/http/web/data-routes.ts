import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Member } from '../../registry/members.ts';
import type { Envelope } from '../../contracts/envelope.ts';
import type { PageArgs } from '../../contracts/browse.ts';
import { AgentDbError, type ErrorCode } from '../../errors.ts';
import type { DataBrowser } from '../../shards/data-browser.ts';
import type { ApprovalService } from '../../approvals/approval-service.ts';
import { chargedApprovalPage } from '../../calls/activity-charge.ts';
import type { KeyedCalls } from '../../calls/bearer-key-calls.ts';
import { parseDatabaseId } from '../../contracts/database-id.ts';
import { resolveAccess, RULE } from '../../policy/access.ts';
import { stallDeadline } from '../../policy/stall-deadline.ts';
import { parseAsOf } from '../../contracts/as-of.ts';
import { databasesView, dbHref, droppedNote, tablesView } from './data-views.ts';
import { gridView, PAGE_SIZES, type GridQuery } from './grid-view.ts';
import { html, type Html } from './html.ts';
import { layout, type PageFrame } from './layout.ts';
import type { HistoryPanel } from './history-routes.ts';
import { decodeCursor } from './cursor-param.ts';
import { errorPage, refusalFlash } from './error-page.ts';
import { droppedTable, dropNoticeQuery } from './drop-notice.ts';
import { databaseField, formBody, requireTyped } from './web-form.ts';
import { memberOf, ownDatabase, sessionOf } from './web-request.ts';

/** What the data pages call. */
export interface DataRoutesDeps {
  browser: DataBrowser;
  /** Pending approvals by database, for the Data page's list. */
  approvals: Pick<ApprovalService, 'pendingByDatabase'>;
  calls: KeyedCalls;
  history: HistoryPanel;
}

// `dropped` and `proof` are the drop's redirect notice (drop-notice.ts), shown only when they match.
const databaseQuery = z.object({ db: databaseField, dropped: z.string().optional(), proof: z.string().optional() });

// `confirm` is checked against `table` by the handler: one rule across two fields, worded as such.
const dropBody = formBody({
  db: databaseField,
  table: z.string({ error: 'name the table to drop' }).min(1, 'name the table to drop'),
  confirm: z.string({ error: 'type the table name to confirm the drop' }),
});

const exportQuery = z.object({ db: databaseField, table: z.string({ error: 'name a table' }).min(1, 'name a table') });

const gridQuery = z.object({
  db: databaseField,
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
  /** The table as it was then (an ISO time; the form's `datetime-local` has no zone: UTC). */
  as_of: z.string().max(64).optional(),
});

/** A grid's `as_of` as a moment (epoch ms): a time only (a call id is an agent's). @throws AgentDbError INVALID_ARGUMENTS. */
function pastMoment(text: string): number {
  const parsed = parseAsOf(text);
  if (!('at' in parsed)) throw new AgentDbError('INVALID_ARGUMENTS', `as of: ${JSON.stringify(text)} is not a time (2026-12-01T02:00, UTC)`);
  return parsed.at;
}

const frameOf = (request: FastifyRequest, title: string): PageFrame => ({ title, member: memberOf(request), csrf: sessionOf(request).csrf, nav: 'data' });

/** The page's own words for a drop the access rules refuse a member, by the rule that refuses it. */
const DROP_DENIED: [rule: string, words: string][] = [
  [RULE.ownTables, "An agent's tables are dropped only by that agent."],
  [RULE.clientDropTakesAdmin, 'Only a workspace admin can drop a shared table.'],
];

/**
 * Who may drop here, said plainly; the form only where the drop would be allowed. The rules'
 * (src/policy/access.ts, `resolveAccess`), asked as the drop itself asks them: the page held a
 * copy of them (session 31, H6).
 */
function dropForm(member: Member, db: string, table: string, csrf: string): Html {
  const { agent } = parseDatabaseId(db);
  const caller = { kind: 'member', workspace: member.workspace, member: member.name, role: member.role } as const;
  const verdict = resolveAccess(caller, 'DATA_DROP_TABLE', agent === undefined ? { scope: 'workspace' } : { agent });
  if (!verdict.ok) {
    const words = DROP_DENIED.find(([rule]) => verdict.detail.startsWith(rule))?.[1] ?? verdict.detail;
    return html`<section class="danger-zone"><h2>Drop</h2><p class="muted" id="drop-denied">${words}</p></section>`;
  }
  return html`<section class="danger-zone"><h2>Drop this table</h2>
<p>Dropping removes the table and its rows for every agent of the workspace. It is recorded like any other drop, as yours.</p>
<form method="post" action="/data/drop" id="drop-form">
  <input type="hidden" name="_csrf" value="${csrf}"><input type="hidden" name="db" value="${db}"><input type="hidden" name="table" value="${table}">
  <label>Type <strong>${table}</strong> to confirm <input name="confirm" autocomplete="off" required></label>
  <button type="submit" class="danger">Drop table</button>
</form></section>`;
}

/**
 * Counts a view that reads on a database's owner as a lookup (a tenth of a call) against the
 * member's and workspace's rates.
 * @throws AgentDbError RATE_LIMITED (with `retryAfter`) past them.
 */
async function chargeView(deps: DataRoutesDeps, member: Pick<Member, 'workspace' | 'name'>, what: string): Promise<void> {
  const limited = await deps.calls.chargeMemberLookup(member.workspace, member.name);
  if (!limited) return;
  throw new AgentDbError('RATE_LIMITED', `the workspace's rate limit is spent for now (${what} counts a tenth of a call); reload in ${limited.retryAfterS} s`, {
    retryAfter: limited.retryAfterS,
  });
}

/** `/data` (databases), `/data/db` (tables), `/data/table` (grid), `/data/export.csv`, and the admin drop. */
export function dataRoutes(app: FastifyInstance, deps: DataRoutesDeps): void {
  app.get('/data', async (request, reply) => {
    const member = memberOf(request);
    // The list counts its workspace's pending approvals by database, reading every one's small
    // fields: charged as an inbox page is (session 30, T7), a lookup and a call per 1,000 read.
    const read = await chargedApprovalPage(
      (workspace, name, points) => deps.calls.chargeMemberLookup(workspace, name, points),
      member,
      (onRead) => Promise.all([deps.browser.databases(member.workspace), deps.approvals.pendingByDatabase(member.workspace, onRead)]),
    );
    if ('limited' in read) {
      const why = `the workspace's rate limit is spent for now (the list of databases counts a tenth of a call, and a call more per 1,000 pending approvals it counted); reload in ${read.limited.retryAfterS} s`;
      return errorPage(reply, frameOf(request, 'Data'), new AgentDbError('RATE_LIMITED', why, { retryAfter: read.limited.retryAfterS }));
    }
    const [dbs, pending] = read.page;
    const { figures, limited } = await deps.browser.figuresOf(
      dbs.map((d) => d.id),
      (points) => deps.calls.chargeMemberLookup(member.workspace, member.name, points),
    );
    const frame = frameOf(request, 'Data');
    // Past the rate, the list still shows, its figures not counted anew: dashes, and why.
    const flash = limited
      ? refusalFlash(
          'RATE_LIMITED',
          `the workspace's rate limit is spent for now (each database's figures count a tenth of a call); reload in ${limited.retryAfterS} s for them`,
        )
      : undefined;
    return reply.type('text/html; charset=utf-8').send(layout({ ...frame, ...(flash ? { flash } : {}) }, databasesView(member, dbs, figures, pending)).value);
  });

  // `attachValidation` here and below: a bad query or form is an error page like any other refusal, not the API's JSON.
  const zod = app.withTypeProvider<ZodTypeProvider>();
  zod.get('/data/db', { schema: { querystring: databaseQuery }, attachValidation: true }, async (request, reply) => {
    const frame = frameOf(request, 'Database');
    try {
      if (request.validationError) throw request.validationError;
      const member = memberOf(request);
      const db = ownDatabase(member, request.query.db);
      // The tables page counts every row of every table on the database's owner (a describe, which
      // DATA_DESCRIBE_SCHEMA is charged as a call): charged as a grid page is, or reloading it held
      // an executor at no cost, ~8 ms of CPU for 20 MB of tables (hostile review T4).
      await chargeView(deps, member, 'a page of its tables');
      const flash = droppedTable(request.query, sessionOf(request).csrf, db);
      const [described, history] = await Promise.all([
        deps.browser.tables(db, { workspace: member.workspace, member: member.name }),
        deps.history.summary(db, member),
      ]);
      const page = layout(
        { ...frame, title: db, ...(flash ? { flash: { kind: 'ok' as const, text: droppedNote(db, flash) } } : {}) },
        tablesView(db, described, history),
      );
      return reply.type('text/html; charset=utf-8').send(page.value);
    } catch (err) {
      return errorPage(reply, frame, err);
    }
  });

  zod.get('/data/table', { schema: { querystring: gridQuery }, attachValidation: true }, async (request, reply) => {
    const frame = frameOf(request, 'Table');
    try {
      const member = memberOf(request);
      if (request.validationError) throw request.validationError;
      const q = request.query;
      const db = ownDatabase(member, q.db);
      // A page sorts and counts on the database's owner as a query does: charged as a lookup (a
      // tenth of a call), or a member held an executor at no cost, a sorted page of an unindexed
      // column of a 20 MB table costing ~68 ms of CPU, 5× a key-ordered one (hostile review T3).
      await chargeView(deps, member, 'a page of a table');
      const after = decodeCursor(q.after);
      const before = decodeCursor(q.before);
      const fresh = !after && !before;
      const asOf = q.as_of ? pastMoment(q.as_of) : undefined;
      const args: PageArgs = {
        table: q.table,
        dir: q.dir,
        limit: q.size,
        ...(q.sort ? { sort: q.sort } : {}),
        ...(after ? { after } : {}),
        ...(before ? { before } : {}),
        ...(fresh && q.page ? { offset: (q.page - 1) * q.size } : {}),
        ...(fresh && q.total === undefined ? { count: true } : {}),
        ...(asOf !== undefined ? { asOf } : {}),
      };
      const started = performance.now();
      const page = await deps.browser.page(db, args, { workspace: member.workspace, member: member.name });
      const serverMs = performance.now() - started;
      const grid: GridQuery = {
        db,
        table: page.table,
        size: q.size,
        dir: q.dir,
        ...(q.sort ? { sort: q.sort } : {}),
        ...(fresh ? { p: q.page ?? 1 } : q.p ? { p: q.p } : {}),
        ...(page.total !== undefined ? { total: page.total } : q.total !== undefined ? { total: q.total } : {}),
        ...(q.as_of ? { asOf: q.as_of } : {}),
      };
      reply.header('server-timing', `shard;dur=${serverMs.toFixed(2)}, sqlite;dur=${page.sqliteMs.toFixed(2)}`);
      // Nothing is dropped from the past: the drop form belongs to the table as it is.
      const drop = asOf === undefined ? dropForm(member, db, page.table, sessionOf(request).csrf) : html``;
      const body = gridView(grid, page, { serverMs }, drop);
      return reply.type('text/html; charset=utf-8').send(layout({ ...frame, title: page.table }, body).value);
    } catch (err) {
      return errorPage(reply, frame, err);
    }
  });

  zod.get('/data/export.csv', { schema: { querystring: exportQuery }, attachValidation: true }, async (request, reply) => {
    const frame = frameOf(request, 'Export');
    let first: IteratorResult<string>;
    let chunks: AsyncGenerator<string>;
    let total: number | undefined;
    try {
      if (request.validationError) throw request.validationError;
      const member = memberOf(request);
      const db = ownDatabase(member, request.query.db);
      // An export reads the whole table on the database's owner, chunk by chunk: bounded in how
      // many run at once, it was free, so one member starting them back to back kept an executor
      // busy at no cost (hostile review T4). Each is charged a grid page's lookup as it starts.
      await chargeView(deps, member, 'an export');
      // Past the member's, the workspace's or the process's bound of exports at once, the first
      // `next()` refuses (RATE_LIMITED, 429 with Retry-After) and the page says so.
      // A slot taken back for another workspace (the process full) ends the answer at once: its
      // reader may be one that takes nothing, and would never ask for the chunk that says so.
      const stop = () => void reply.raw.destroy();
      chunks = deps.browser.csv(db, request.query.table, { workspace: member.workspace, member: member.name }, (n) => (total = n), stop);
      // The first chunk before any header: a missing table is still an error page, not a
      // broken download, and the row count can go in a header for the progress bar.
      first = await chunks.next();
    } catch (err) {
      return errorPage(reply, frame, err);
    }
    // Past the try, the query passed its schema.
    const { table } = request.query;
    const ascii = table.replace(/[^A-Za-z0-9._-]/g, '_');
    reply
      .type('text/csv; charset=utf-8')
      .header('content-disposition', `attachment; filename="${ascii}.csv"; filename*=UTF-8''${encodeURIComponent(table)}.csv`)
      .header('cache-control', 'no-store');
    if (total !== undefined) reply.header('x-total-rows', String(total));
    // For the progress bar's words when a download is cut off at the bound (EXPORT_MAX_BYTES).
    reply.header('x-export-max-bytes', String(deps.browser.exportMaxBytes));
    async function* all(): AsyncGenerator<string> {
      if (!first.done) yield first.value;
      // Readable.from asks for the next piece only once the socket took the last (backpressure): a slow
      // download holds one chunk in memory. A chunk failing mid-way aborts it: never a file that looks whole.
      yield* chunks;
    }
    // However the answer ends (read to its end, or its client gone, before this point too), the
    // export ends with it and gives its slot back: a stream stopped before it reached `chunks` (not
    // started, or at the first chunk) does not stop them, and the slot was held until a restart.
    const end = () => void chunks.return(undefined).catch(() => undefined);
    if (reply.raw.destroyed) end();
    else reply.raw.once('close', end);
    const body = Readable.from(all(), { objectMode: false });
    // A reader that takes nothing for DOWNLOAD_STALL_SECONDS is cut off, its slot given back.
    stallDeadline(body, deps.browser.exportStallMs, () => void reply.raw.destroy());
    return reply.send(body);
  });

  zod.post('/data/drop', { schema: { body: dropBody }, attachValidation: true }, async (request, reply) => {
    const frame = frameOf(request, 'Drop');
    try {
      const member = memberOf(request);
      if (request.validationError) throw request.validationError;
      const { table, confirm } = request.body;
      const db = ownDatabase(member, request.body.db);
      requireTyped(confirm, table, 'type the table name exactly to confirm the drop; nothing was dropped');
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
