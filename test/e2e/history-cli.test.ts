import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { pastMs } from '../helpers/history.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { runCli, startCli, stop } from '../helpers/processes.ts';

// `agentdb history` and `agentdb restore` as an operator runs them: real processes (a worker,
// then one CLI process per command) against a real Redis and real files.
let sb: Sandbox;
let worker: ChildProcess;
let client: AgentDbClient;
let moment = 0;

const settings = { database: 'agent' as const };
const cli = (...args: string[]) => runCli(args, sb.env);
const json = (s: string) => JSON.parse(s.trim());
const count = async () =>
  ((await client.call({ workspace: 'acme', agent: 'scout', settings, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT count(*) FROM leads' } })) as any).result
    .rows[0][0];

beforeAll(async () => {
  sb = sandbox();
  worker = await startCli(['worker'], sb.env);
  client = sb.client();
  const write = (sql: string) => client.call({ workspace: 'acme', agent: 'scout', settings, tool: 'DATA_WRITE_SQL', arguments: { sql } });
  expect(await write('CREATE TABLE leads (id INTEGER PRIMARY KEY, email TEXT)')).toMatchObject({ ok: true });
  for (let i = 0; i < 3; i++) expect(await write(`INSERT INTO leads(email) VALUES ('a${i}@x')`)).toMatchObject({ ok: true });
  moment = Date.now();
  pastMs(moment + 1000);
  // An agent's enthusiastic DELETE, a whole second later.
  expect(await write('DELETE FROM leads')).toMatchObject({ ok: true });
});
afterAll(async () => {
  await stop(worker);
  await sb.cleanup();
});

describe('agentdb history', () => {
  it('lists the restorable range and the generations, as a table and as JSON', async () => {
    const table = await cli('history', 'acme/scout');
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/^acme\/scout: restorable from \S+ to \S+\n/);
    expect(table.stdout).toMatch(/g0000000001\t\S+\t\(current\)\t\d+\tfirst/);
    const out = await cli('history', 'acme/scout', '--json');
    const view = json(out.stdout);
    expect(view).toMatchObject({ database: 'acme/scout', generations: [{ id: 'g0000000001', endedAt: null }] });
    // The last commits' times, the newest the latest restorable moment: where an undo of the
    // last writes goes, without guessing with dry runs. Newest first, as the activity list.
    expect(view.recentCommits.length).toBeGreaterThanOrEqual(3);
    expect(view.recentCommits[0]).toMatchObject({ at: view.latest, generation: 'g0000000001', position: expect.stringMatching(/^g0000000001\./) });
    const times = view.recentCommits.map((c: { at: string }) => c.at);
    expect(times).toEqual([...times].sort().reverse());
    expect(table.stdout).toContain(`last ${view.recentCommits.length} commits, newest first`);
    expect(table.stdout).toContain(`committed at\tgeneration\tposition\n${view.latest}\tg0000000001\t${view.recentCommits[0].position}\n`);
  });

  it('says so for a database that does not exist (exit 1, coded JSON)', async () => {
    const out = await cli('history', 'acme/nobody');
    expect(out.code).toBe(1);
    expect(json(out.stdout)).toMatchObject({ error: { code: 'NOT_FOUND', hint: expect.stringContaining('<workspace>/<agent>') } });
    expect(json(out.stdout).error.hint).not.toContain('DATA_DESCRIBE_SCHEMA');
  });
});

describe('agentdb activity', () => {
  it('lists each commit as the call that made it, newest first, as JSON and as a table, with pages', async () => {
    const out = await cli('activity', 'acme/scout', '--json');
    expect(out.code, out.stderr).toBe(0);
    const page = json(out.stdout);
    expect(page.database).toBe('acme/scout');
    expect(page.entries.map((e: { statement: string }) => e.statement)).toEqual([
      'DELETE FROM leads',
      "INSERT INTO leads(email) VALUES ('a2@x')",
      "INSERT INTO leads(email) VALUES ('a1@x')",
      "INSERT INTO leads(email) VALUES ('a0@x')",
      'CREATE TABLE leads (id INTEGER PRIMARY KEY, email TEXT)',
    ]);
    expect(page.entries[0]).toMatchObject({ kind: 'call', by: 'agent:scout', tool: 'DATA_WRITE_SQL', rowsChanged: 3, restoreBefore: expect.any(String) });
    expect(page.next).toBeUndefined();

    const first = json((await cli('activity', 'acme/scout', '--json', '--limit', '2')).stdout);
    expect(first.entries).toHaveLength(2);
    const rest = json((await cli('activity', 'acme/scout', '--json', '--before', first.next)).stdout);
    expect([...first.entries, ...rest.entries].map((e: { id: string }) => e.id)).toEqual(page.entries.map((e: { id: string }) => e.id));

    const table = await cli('activity', 'acme/scout', '--limit', '1');
    expect(table.code).toBe(0);
    expect(table.stdout).toContain('acme/scout: newest first');
    expect(table.stdout).toContain(`agent:scout\tDATA_WRITE_SQL\t3\t\tDELETE FROM leads`);
    expect(table.stdout).toContain(`more: agentdb activity acme/scout --before ${first.entries[0].id}`);
  });

  it('refuses bad input: a usage error (exit 2) for a bad --limit, a coded error (exit 1) for a database never written', async () => {
    const bad = await cli('activity', 'acme/scout', '--limit', '0');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--limit');
    const none = await cli('activity', 'acme/nobody', '--json');
    expect(none.code).toBe(1);
    expect(json(none.stdout)).toMatchObject({ error: { code: 'NOT_FOUND' } });
  });
});

describe('agentdb restore', () => {
  it('--dry-run says where it goes and lists what it would take away, changing nothing; --json the plan', async () => {
    const out = await cli('restore', 'acme/scout', '--at', String(moment / 1000), '--dry-run');
    expect(out.code, out.stderr).toBe(0);
    // For a person: the moment, the snapshot, and the entries after the moment (the agent's DELETE).
    expect(out.stdout).toMatch(
      /^dry run, nothing changed: acme\/scout would be restored as of \S+ \(the last commit kept\), position g0000000001\.\d{8}\.\d+~[0-9a-f]{8}\n/,
    );
    // Commits a person counts, not the WAL frames they wrote.
    expect(out.stdout).toMatch(/\nbuilt from snapshot g0000000001 \(taken \S+\) and the \d+ commits? after it\n/);
    expect(out.stdout).not.toContain('frames');
    expect(out.stdout).toMatch(
      /\nit would take away 1 entry, newest first:\ntime\tby\ttool\trows\twhat\tposition\n\S+\tagent:scout\tDATA_WRITE_SQL\t3\tDELETE FROM leads\t\S+\n$/,
    );
    const plan = json((await cli('restore', 'acme/scout', '--at', String(moment / 1000), '--dry-run', '--json')).stdout);
    expect(plan).toMatchObject({ dryRun: true, snapshot: { id: 'g0000000001' }, frames: expect.any(Number), keeps: expect.stringMatching(/~[0-9a-f]{8}$/) });
    expect(plan.after).toMatchObject({ more: false, entries: [{ kind: 'call', statement: 'DELETE FROM leads', rowsChanged: 3 }] });
    // Through the state before the first insert: the three inserts and the DELETE, newest first.
    const entries = json((await cli('activity', 'acme/scout', '--json')).stdout).entries;
    const create = entries.at(-1);
    const through = json((await cli('restore', 'acme/scout', '--through', create.id, '--dry-run', '--json')).stdout);
    expect(through.keeps).toBe(create.id);
    expect(through.after.entries.map((e: { id: string }) => e.id)).toEqual(entries.slice(0, -1).map((e: { id: string }) => e.id));
    expect(await count()).toBe(0);
  });

  it('restores in place to unix seconds, says what it did with the undo id (--json: the answer), and --undo goes back', async () => {
    const out = await cli('restore', 'acme/scout', '--at', String(Math.floor(moment / 1000) + 1));
    expect(out.code, out.stderr).toBe(0);
    // For a person, as its dry run (review R1 low: it printed raw JSON): where it went, and its undo.
    const said = out.stdout.match(
      /^restored acme\/scout as of (\S+) \(the last commit kept\), position (\S+~[0-9a-f]{8})\nit took away 1 activity entry: agentdb activity acme\/scout --before \S+~[0-9a-f]{8} lists it, newest first, above position \2\nundo id (u[0-9a-z]+): agentdb restore acme\/scout --undo \3 puts back what was there before\n$/,
    );
    expect(said, out.stdout).not.toBeNull();
    expect(Date.parse(said![1]!)).toBeLessThanOrEqual(moment + 1000);
    expect(await count()).toBe(3);
    const undo = await cli('restore', 'acme/scout', '--undo', said![3]!, '--json');
    expect(undo.code, undo.stderr).toBe(0);
    const result = json(undo.stdout);
    expect(result).toMatchObject({ database: 'acme/scout', dryRun: false, undoId: expect.stringMatching(/^u/) });
    expect(undo.stderr).toContain(`agentdb restore acme/scout --undo ${result.undoId}`);
    expect(await count()).toBe(0);
    // An undo said for a person: which restore it undid, and its own undo.
    const again = await cli('restore', 'acme/scout', '--undo', result.undoId);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toMatch(
      new RegExp(
        `^undid restore ${result.undoId}: acme/scout is back as it was before that restore, as of \\S+ \\(the last commit kept\\)\nundo id (u[0-9a-z]+): agentdb restore acme/scout --undo \\1 `,
      ),
    );
    expect(await count()).toBe(3);
    const back = json((await cli('restore', 'acme/scout', '--undo', again.stdout.match(/undo id (u[0-9a-z]+)/)![1]!, '--json')).stdout);
    expect(back).toMatchObject({ undoId: expect.any(String) });
    expect(await count()).toBe(0);
  });

  it('--into forks at an ISO time into a new database of the workspace', async () => {
    const out = await cli('restore', 'acme/scout', '--at', new Date(moment).toISOString(), '--into', 'acme/scout-copy');
    expect(out.code, out.stderr).toBe(0);
    expect(out.stdout).toMatch(
      /^made acme\/scout-copy from acme\/scout as of \S+ \(the last commit kept\), position (\S+~[0-9a-f]{8})\nit left out the newest (\d+ activity entries|activity entry) of acme\/scout: agentdb activity acme\/scout lists (them|it), newest first, above position \1\n$/,
    );
    const copy = await client.call({
      workspace: 'acme',
      agent: 'scout-copy',
      settings,
      tool: 'DATA_QUERY_SQL',
      arguments: { sql: 'SELECT count(*) FROM leads' },
    });
    expect((copy as any).result.rows[0][0]).toBe(3);
    // --through a position forks too (its help said --into went only with --at), and says the position.
    const create = json((await cli('activity', 'acme/scout', '--json')).stdout).entries.at(-1);
    const fork = await cli('restore', 'acme/scout', '--through', create.id, '--into', 'acme/scout-first');
    expect(fork.code, fork.stdout + fork.stderr).toBe(0);
    const leftOut = json((await cli('activity', 'acme/scout', '--json')).stdout).entries.length - 1;
    expect(fork.stdout).toBe(
      `made acme/scout-first from acme/scout as of ${create.at} (the last commit kept), position ${create.id}\n` +
        `it left out the newest ${leftOut} activity entries of acme/scout: agentdb activity acme/scout lists them, newest first, above position ${create.id}\n`,
    );
    const first = await client.call({
      workspace: 'acme',
      agent: 'scout-first',
      settings,
      tool: 'DATA_QUERY_SQL',
      arguments: { sql: 'SELECT count(*) FROM leads' },
    });
    expect((first as any).result.rows[0][0]).toBe(0);
  });

  it('refuses bad input with a coded error (exit 1) or, for what cannot be read, a usage error (exit 2), changing nothing', async () => {
    // What cannot be read is refused before anything runs: those go beside the first restore.
    const [future, huge, upper, neither] = await Promise.all([
      cli('restore', 'acme/scout', '--at', String(Math.floor(Date.now() / 1000) + 3600)),
      cli('restore', 'acme/scout', '--at', '99999999999999999999999'),
      cli('history', 'ACME/Scout'),
      cli('restore', 'acme/scout'),
    ]);
    expect(future.code).toBe(1);
    expect(json(future.stdout)).toMatchObject({ error: { code: 'HISTORY_OUT_OF_RANGE' } });
    const stranger = await cli('restore', 'acme/scout', '--undo', 'u0000');
    expect(json(stranger.stdout)).toMatchObject({ error: { code: 'UNDO_NOT_FOUND' } });
    // One after another: two restores of acme/scout at once are refused (RESTORE_RUNNING), dry runs too.
    const exists = await cli('restore', 'acme/scout', '--at', String(Math.floor(moment / 1000)), '--into', 'acme/scout-copy');
    const preview = await cli('restore', 'acme/scout', '--at', String(moment / 1000), '--into', 'acme/scout-copy', '--dry-run', '--json');
    const previewShared = await cli('restore', 'acme/scout', '--at', String(moment / 1000), '--into', 'acme', '--dry-run', '--json');
    expect(json(exists.stdout)).toMatchObject({ error: { code: 'DATABASE_EXISTS' } });
    // The name first, whatever the moment: one before history begins is not what is wrong here.
    const existsEarly = await cli('restore', 'acme/scout', '--at', '1', '--into', 'acme/scout-copy');
    expect(json(existsEarly.stdout)).toMatchObject({ error: { code: 'DATABASE_EXISTS' } });
    // Its dry run plans the moment anyway and says why the restore itself is refused, as
    // `--from-blob --dry-run` does (exit 0).
    expect(preview.code, preview.stdout + preview.stderr).toBe(0);
    expect(json(preview.stdout)).toMatchObject({
      dryRun: true,
      into: 'acme/scout-copy',
      commits: expect.any(Number),
      refused: expect.stringMatching(/^DATABASE_EXISTS: database acme\/scout-copy already exists/),
    });
    expect(previewShared.code, previewShared.stdout + previewShared.stderr).toBe(0);
    expect(json(previewShared.stdout)).toMatchObject({ dryRun: true, into: 'acme', refused: expect.stringMatching(/^DATABASE_EXISTS: .*shared database/) });
    // A time or a database id that cannot be read is a bad command line, as with --from-blob.
    expect(huge.code).toBe(2);
    expect(huge.stderr).toContain('99999999999999999999999');
    expect(upper.code).toBe(2);
    expect(upper.stderr).toContain('a-z, 0-9, _ and -');
    expect(neither.code).toBe(2);
    expect(neither.stderr).toMatch(/--at TIME .* or --undo ID/);
    expect(await count()).toBe(0);
  });
});
