import type { ChildProcess } from 'node:child_process';
import { chmodSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { runCli, startCli, stop } from '../helpers/processes.ts';

let sb: Sandbox;
let worker: ChildProcess;
let client: AgentDbClient;
/** Member keys as `members add` printed them. */
const keyOf: Record<string, string> = {};

beforeAll(async () => {
  sb = sandbox();
  worker = await startCli(['worker'], sb.env);
  client = sb.client();
});
afterAll(async () => {
  await stop(worker);
  await sb.cleanup();
});

const cli = (...args: string[]) => runCli(args, sb.env);
const json = (s: string) => JSON.parse(s.trim());

/** Parks a write through `agentdb call --no-wait`; answers its call and approval ids. */
async function parkWrite(sql: string, args: { params?: unknown[]; rationale?: string } = {}): Promise<{ callId: string; id: string }> {
  const out = await cli(
    'call',
    '--no-wait',
    '--workspace',
    'acme',
    '--agent',
    'scout',
    '--settings',
    '{"database":"agent","approval":"write"}',
    'DATA_WRITE_SQL',
    JSON.stringify({ sql, rationale: 'the agent wants notes', ...args }),
  );
  const answer = json(out.stdout);
  expect(answer).toMatchObject({ ok: false, status: 'awaiting_approval', approval: { id: expect.any(String), tier: 'write' } });
  return { callId: answer.callId, id: answer.approval.id };
}

describe('agentdb members', () => {
  it('adds members and prints each key once, with a warning that it will not be shown again', async () => {
    // Two members apart: added at once, not one after another.
    const [added, bob] = await Promise.all([
      cli('members', 'add', '--workspace', 'acme', '--name', 'ada', '--role', 'admin'),
      cli('members', 'add', '--workspace', 'acme', '--name', 'bob', '--role', 'member', '--json'),
    ]);
    expect(added.code).toBe(0);
    expect(added.stdout).toMatch(/key: adb_[A-Za-z0-9_-]{32,}\n/);
    expect(added.stdout).toMatch(/will not be shown again/);
    keyOf.ada = /key: (adb_\S+)/.exec(added.stdout)![1]!;
    expect(bob.code).toBe(0);
    expect(json(bob.stdout)).toMatchObject({ member: { workspace: 'acme', name: 'bob', role: 'member' }, key: expect.stringMatching(/^adb_/) });
    expect(bob.stderr).toMatch(/will not be shown again/);
    keyOf.bob = json(bob.stdout).key;
  });

  it('refuses an active name again (coded JSON, ALREADY_EXISTS, exit 1) and bad flags (usage, exit 2)', async () => {
    const cases = [
      ['members', 'add', '--workspace', 'acme', '--name', 'x', '--role', 'owner'],
      ['members', 'add', '--name', 'x'],
      ['members', 'add', '--workspace', 'acme', '--name', 'Not OK'],
      ['members', 'rename', '--workspace', 'acme'],
      ['members', 'list', '--workspace', 'acme', '--colour'],
    ];
    // Each is refused without adding anyone: run at once, not one after another.
    const [again, ...outs] = await Promise.all([
      cli('members', 'add', '--workspace', 'acme', '--name', 'ada', '--role', 'member'),
      ...cases.map((args) => cli(...args)),
    ]);
    // The command line was right; the name is taken (session 34, N10).
    expect(again.code).toBe(1);
    expect(json(again.stdout)).toMatchObject({ error: { code: 'ALREADY_EXISTS' } });
    for (const [i, out] of outs.entries()) {
      expect(out.code, cases[i]!.join(' ')).toBe(2);
      expect(out.stderr).toMatch(/^agentdb members( \w+)?: .+\n(\(Did you mean \w+\?\)\n)?Run 'agentdb members( \w+)? --help' for its usage\.\n$/);
    }
  });

  it('lists and revokes', async () => {
    keyOf.cy = /key: (adb_\S+)/.exec((await cli('members', 'add', '--workspace', 'acme', '--name', 'cy')).stdout)![1]!;
    const revoked = await cli('members', 'revoke', '--workspace', 'acme', '--name', 'cy');
    expect(revoked.code).toBe(0);
    const twice = await cli('members', 'revoke', '--workspace', 'acme', '--name', 'cy');
    expect(twice.code).toBe(1);
    expect(json(twice.stdout)).toMatchObject({ error: { code: 'NOT_FOUND' } });
    const [list, table] = await Promise.all([cli('members', 'list', '--workspace', 'acme', '--json'), cli('members', 'list', '--workspace', 'acme')]);
    expect(json(list.stdout).map((m: { name: string; role: string; revoked: boolean }) => [m.name, m.role, m.revoked])).toEqual([
      ['ada', 'admin', false],
      ['bob', 'member', false],
      ['cy', 'member', true],
    ]);
    expect(table.stdout).toMatch(/^name\s+role\s+state\s+added\n/);
    expect(table.stdout).toMatch(/\ncy\s+member\s+revoked\s/);
    expect(table.stdout).not.toContain('adb_');
  });
});

describe('agentdb approvals', () => {
  it('lists a parked call, and an approval with a member key makes the waiting call finish', async () => {
    const { callId, id } = await parkWrite('CREATE TABLE notes (body TEXT)');
    const [listed, table] = await Promise.all([cli('approvals', 'list', '--workspace', 'acme', '--json'), cli('approvals', 'list')]);
    expect(listed.code).toBe(0);
    expect(json(listed.stdout)).toContainEqual(
      expect.objectContaining({ id, callId, state: 'pending', agent: 'scout', tool: 'DATA_WRITE_SQL', sql: 'CREATE TABLE notes (body TEXT)' }),
    );
    expect(table.stdout).toMatch(/^id\s+state\s+workspace\/agent\s+tool\s+sql or table\s+params\s+rationale\s+requester\s+created\s+expires\s+decided\s+ran\n/);
    expect(table.stdout).toContain(id);
    expect(table.stdout).toContain('acme/scout');

    const waiting = client.result(callId, { workspace: 'acme', agent: 'scout', wait: true });
    // The key from a file: nothing of it on the command line, and no warning.
    const keyFile = path.join(sb.dataDir, 'bob.key');
    writeFileSync(keyFile, `${keyOf.bob!}\n`, { mode: 0o600 });
    const approved = await cli('approvals', 'approve', id, '--key-file', keyFile, '--reason', 'fine by me');
    expect(approved.code).toBe(0);
    // A person reads a line of what was decided, not the record (that is --json's).
    // It follows the call it let run for a few seconds: with a worker running, how it ran.
    expect(approved.stdout).toBe(`approved ${id} (call ${callId} of acme/scout) by bob: it ran: ok; reason: fine by me\n`);
    expect(approved.stderr).toBe('');
    expect(await waiting).toMatchObject({ ok: true, callId, tool: 'DATA_WRITE_SQL' });

    const [q, again] = await Promise.all([
      cli('call', '--workspace', 'acme', '--agent', 'scout', '--settings', '{"database":"agent"}', 'DATA_QUERY_SQL', '{"sql":"SELECT count(*) FROM notes"}'),
      runCli(['approvals', 'reject', id], { ...sb.env, AGENTDB_MEMBER_KEY: keyOf.ada! }),
    ]);
    expect(json(q.stdout)).toMatchObject({ ok: true });
    expect(again.code).toBe(1);
    expect(json(again.stdout)).toMatchObject({ error: { code: 'APPROVAL_CONFLICT' } });
  });

  it('approving a write whose data changed since it was asked says it did not run and is asked again, naming the new approval', async () => {
    // Review N6 (session 30): the line said "it runs now" of a call that then committed nothing
    // and waited for a person again under a new approval, which nobody was told.
    const now = (sql: string) =>
      cli('call', '--workspace', 'acme', '--agent', 'scout', '--settings', '{"database":"agent"}', 'DATA_WRITE_SQL', JSON.stringify({ sql }));
    expect((await now('CREATE TABLE jots (body TEXT)')).code).toBe(0);
    expect((await now("INSERT INTO jots VALUES ('a')")).code).toBe(0);
    const { callId, id } = await parkWrite('DELETE FROM jots');
    // The data changes after the approval was asked: the DELETE would now remove two rows, not one.
    expect((await now("INSERT INTO jots VALUES ('b')")).code).toBe(0);
    const approved = await runCli(['approvals', 'approve', id], { ...sb.env, AGENTDB_MEMBER_KEY: keyOf.ada! });
    expect(approved.code).toBe(0);
    const next = /asked again as (ap_\S+) /.exec(approved.stdout)?.[1];
    expect(approved.stdout).toBe(
      `approved ${id} (call ${callId} of acme/scout) by ada: it did not run: its data changed since the approval was asked, so nothing was committed and it is asked again as ${next} (agentdb approvals show ${next})\n`,
    );
    expect(json((await cli('approvals', 'show', next!, '--json')).stdout)).toMatchObject({ state: 'pending', callId, supersedes: id });
    // Left decided, as the other tests leave theirs.
    expect((await runCli(['approvals', 'reject', next!, '--reason', 'not now'], { ...sb.env, AGENTDB_MEMBER_KEY: keyOf.ada! })).code).toBe(0);
  });

  it('shows one approval whole with its effect: --json has the rows before and after, the text a diff', async () => {
    const made = await client.call({
      workspace: 'acme',
      agent: 'scout',
      settings: { database: 'agent' },
      tool: 'DATA_WRITE_SQL',
      arguments: { sql: 'CREATE TABLE shown (id INTEGER PRIMARY KEY, body TEXT)' },
    });
    expect(made).toMatchObject({ ok: true });
    expect(
      await client.call({
        workspace: 'acme',
        agent: 'scout',
        settings: { database: 'agent' },
        tool: 'DATA_WRITE_SQL',
        arguments: { sql: "INSERT INTO shown VALUES (1, 'old'), (2, 'kept')" },
      }),
    ).toMatchObject({ ok: true });
    const { id } = await parkWrite("UPDATE shown SET body = 'new' WHERE id = 1");
    const [shown, text, missing] = await Promise.all([
      cli('approvals', 'show', id, '--json'),
      cli('approvals', 'show', id),
      cli('approvals', 'show', 'ap_nothing_here'),
    ]);
    expect(shown.code).toBe(0);
    expect(json(shown.stdout)).toMatchObject({
      id,
      state: 'pending',
      effect: {
        tables: [{ table: 'shown', inserted: 0, updated: 1, deleted: 0 }],
        rows: [{ table: 'shown', op: 'update', key: { rowid: 1 }, before: { id: 1, body: 'old' }, after: { id: 1, body: 'new' } }],
        cut: false,
        digest: expect.stringMatching(/^[0-9a-f]{64}$/),
      },
    });
    expect(text.code).toBe(0);
    expect(text.stdout).toContain('shown: 0 inserted, 1 updated, 0 deleted');
    expect(text.stdout).toContain('update shown {"rowid":1} body: "old" → "new"');
    expect(missing.code).toBe(1);
    expect(json(missing.stdout)).toMatchObject({ error: { code: 'NOT_FOUND' } });
  });

  it('rejects with a reason, as an operator naming the member: the call finishes with APPROVAL_REJECTED and never runs', async () => {
    const { callId, id } = await parkWrite('CREATE TABLE never_made (x)');
    const waiting = client.result(callId, { workspace: 'acme', agent: 'scout', wait: true });
    const rejected = await cli('approvals', 'reject', id, '--operator', '--by', 'ada', '--reason', 'no new tables today');
    expect(rejected.code).toBe(0);
    expect(rejected.stdout).toBe(
      `rejected ${id} (call ${callId} of acme/scout) by ada: it will not run; the agent gets APPROVAL_REJECTED and the reason; reason: no new tables today\n`,
    );
    const env = await waiting;
    expect(env).toMatchObject({ ok: false, callId, error: { code: 'APPROVAL_REJECTED' } });
    expect(JSON.stringify(env)).toContain('no new tables today');
    const q = await cli(
      'call',
      '--workspace',
      'acme',
      '--agent',
      'scout',
      '--settings',
      '{"database":"agent"}',
      'DATA_QUERY_SQL',
      '{"sql":"SELECT * FROM never_made"}',
    );
    expect(json(q.stdout)).toMatchObject({ ok: false, error: { code: 'SQL_ERROR' } });
  });

  it('refuses unknown, revoked and other-workspace members and keys, and unknown ids; the call stays pending', async () => {
    const [added, { id }] = await Promise.all([
      cli('members', 'add', '--workspace', 'elsewhere', '--name', 'eve', '--role', 'admin', '--json'),
      parkWrite('CREATE TABLE pending_one (x)'),
    ]);
    const eve = json(added.stdout).key as string;
    // Each is refused without deciding anything: run at once, not one after another.
    const byName = ['nobody', 'cy', 'eve'];
    // A key proves who decides: an unknown or revoked one is nobody; another workspace's member
    // does not even learn that the approval exists.
    const keys = [
      [`adb_${'x'.repeat(43)}`, 'UNAUTHENTICATED'],
      [keyOf.cy!, 'UNAUTHENTICATED'],
      [eve, 'NOT_FOUND'],
    ] as const;
    const [byNameOuts, keyOuts, unknown] = await Promise.all([
      Promise.all(byName.map((by) => cli('approvals', 'approve', id, '--operator', '--by', by))),
      Promise.all(keys.map(([key]) => cli('approvals', 'approve', id, '--key', key))),
      cli('approvals', 'approve', 'ap_nope', '--key', keyOf.ada!),
    ]);
    for (const [i, out] of byNameOuts.entries()) {
      expect(out.code, byName[i]).toBe(1);
      expect(json(out.stdout)).toMatchObject({ error: { code: 'NOT_PERMITTED', message: expect.any(String), hint: expect.any(String) } });
    }
    for (const [i, out] of keyOuts.entries()) {
      expect(out.code, keys[i]![1]).toBe(1);
      expect(json(out.stdout)).toMatchObject({ error: { code: keys[i]![1] } });
    }
    // The hint names where the CLI takes a key from, not HTTP's header (the revoked key's answer).
    const unauthenticated = json(keyOuts[1]!.stdout) as { error: { hint: string } };
    expect(unauthenticated.error.hint).toContain('AGENTDB_MEMBER_KEY or --key-file PATH');
    expect(unauthenticated.error.hint).not.toContain('Authorization');
    expect(unknown.code).toBe(1);
    expect(json(unknown.stdout)).toMatchObject({ error: { code: 'NOT_FOUND' } });
    const pending = json((await cli('approvals', 'list', '--workspace', 'acme', '--json')).stdout);
    expect(pending).toContainEqual(expect.objectContaining({ id, state: 'pending' }));
  });

  it('warns of a key file other users can read, and still decides with it', async () => {
    const { id } = await parkWrite('CREATE TABLE open_file (x)');
    const keyFile = path.join(sb.dataDir, 'open.key');
    writeFileSync(keyFile, keyOf.bob!, { mode: 0o644 });
    chmodSync(keyFile, 0o644);
    const out = await cli('approvals', 'reject', id, '--key-file', keyFile);
    expect(out.code, out.stderr).toBe(0);
    expect(out.stderr).toContain(`agentdb: warning: --key-file ${keyFile} can be read by other users; chmod 600 it\n`);
  });

  it('saves a new key alone to a file (--save-key) that --key-file decides with, and refuses a file holding the printed words', async () => {
    const saved = path.join(sb.dataDir, 'dee.key');
    const added = await cli('members', 'add', '--workspace', 'acme', '--name', 'dee', '--save-key', saved);
    expect(added.code, added.stderr).toBe(0);
    expect(added.stdout).toBe(`added acme/dee (member); key saved to ${saved} (mode 600)\n`);
    expect(readFileSync(saved, 'utf8')).toMatch(/^adb_[A-Za-z0-9_-]{32,}\n$/);
    expect(statSync(saved).mode & 0o777).toBe(0o600);
    // Never over a file that exists: it may hold another key.
    const [again, { id }, fay] = await Promise.all([
      cli('members', 'add', '--workspace', 'acme', '--name', 'eve', '--save-key', saved),
      parkWrite('CREATE TABLE saved_key (x)'),
      cli('members', 'add', '--workspace', 'acme', '--name', 'fay'),
    ]);
    expect(again.code).toBe(2);
    expect(again.stderr).toContain('the file exists; not overwritten');
    // What `members add > words.key` leaves: refused as a usage error naming the way, not sent.
    const words = path.join(sb.dataDir, 'words.key');
    writeFileSync(words, fay.stdout, { mode: 0o600 });
    const [approved, refused] = await Promise.all([cli('approvals', 'approve', id, '--key-file', saved), cli('approvals', 'reject', id, '--key-file', words)]);
    expect(approved.code, approved.stderr).toBe(0);
    expect(approved.stderr).not.toContain('warning');

    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain(`--key-file ${words} holds more than a key`);
    expect(refused.stderr).toContain('--save-key PATH');
  });

  it('takes --key still, with a warning on stderr that it is visible to others', async () => {
    const out = await cli('approvals', 'approve', 'ap_nope', '--key', keyOf.ada!);
    expect(out.code).toBe(1);
    expect(json(out.stdout)).toMatchObject({ error: { code: 'NOT_FOUND' } });
    expect(out.stderr).toMatch(
      /^agentdb: warning: a key given with --key is visible to other users \(ps\) and kept in shell history; use --key-file PATH, --key-file - \(stdin\) or AGENTDB_MEMBER_KEY\n$/,
    );
  });

  it('exits 2 with a usage line on bad flags', async () => {
    // Refused before anything is read or written: run at once, not one after another.
    const cases = [
      ['approvals', 'approve', 'ap_x'],
      ['approvals', 'approve', 'ap_x', '--by', 'ada'],
      ['approvals', 'approve', 'ap_x', '--operator'],
      ['approvals', 'approve', 'ap_x', '--operator', '--by', 'ada', '--key', 'adb_x'],
      ['approvals', 'approve', '--key', 'adb_x'],
      ['approvals', 'approve', 'ap_x', '--key-file', path.join(sb.dataDir, 'no-such.key')],
      ['approvals', 'approve', 'ap_x', '--key-file', '-'],
      ['approvals', 'approve', 'ap_x', '--key-file', '-', '--key', 'adb_x'],
      ['approvals', 'approve', 'ap_x', '--operator', '--by', 'ada', '--key-file', '-'],
      ['approvals', 'decide', 'ap_x', '--by', 'ada'],
      ['approvals', 'list', '--state', 'maybe'],
      ['approvals', 'list', '--workspace', '../x'],
      ['approvals', 'list', '--by', 'ada'],
    ];
    const outs = await Promise.all(cases.map((args) => cli(...args)));
    for (const [i, out] of outs.entries()) {
      expect(out.code, cases[i]!.join(' ')).toBe(2);
      expect(out.stderr).toMatch(/^agentdb approvals( \w+)?: .+\n(\(Did you mean \w+\?\)\n)?Run 'agentdb approvals( \w+)? --help' for its usage\.\n$/);
    }
  });

  it('shows a reviewer the params and rationale: shortened in the table, whole in --json', async () => {
    const rationale = `Keeps the lead the research agent found, so that outreach can write to them tomorrow. ${'More context. '.repeat(10)}`;
    const params = ['ada@northwind.io', 'Ada Lovelace', 'Northwind Traders Ltd, 1 Long Street, Somewhere'];
    const { id } = await parkWrite('INSERT INTO notes (body) VALUES (? || ? || ?)', { params, rationale });
    const [tableOut, listedOut] = await Promise.all([
      cli('approvals', 'list', '--workspace', 'acme'),
      cli('approvals', 'list', '--workspace', 'acme', '--json'),
    ]);
    const table = tableOut.stdout;
    const row = table.split('\n').find((l) => l.startsWith(id))!;
    expect(row).toContain('["ada@northwind.io","Ada Lovelace",');
    expect(row).toContain('Keeps the lead the research agent found');
    expect(row).toContain('…');
    expect(row).not.toContain('Somewhere');
    const listed = json(listedOut.stdout) as { id: string }[];
    expect(listed.find((a) => a.id === id)).toMatchObject({ params, rationale });
  });

  it('decides by the call id as well as the approval id, and says what to pass when neither is known', async () => {
    const { callId, id } = await parkWrite('CREATE TABLE by_call_id (x)');
    // The key on stdin (`--key-file -`).
    const approved = await runCli(['approvals', 'approve', callId, '--key-file', '-', '--json'], sb.env, `${keyOf.bob!}\n`);
    expect(approved.code, approved.stderr).toBe(0);
    expect(approved.stderr).toBe('');
    // --json: the decided record, for scripts.
    expect(json(approved.stdout)).toMatchObject({ id, callId, state: 'approved', decidedBy: 'bob', decidedVia: 'key' });
    const [again, unknown] = await Promise.all([
      cli('approvals', 'reject', callId, '--operator', '--by', 'ada'),
      cli('approvals', 'approve', 'no-such-call', '--key', keyOf.ada!),
    ]);
    expect(again.code).toBe(1);
    expect(json(again.stdout)).toMatchObject({ error: { code: 'APPROVAL_CONFLICT' } });
    expect(unknown.code).toBe(1);
    expect(json(unknown.stdout).error.message).toMatch(/ap_… id that `agentdb approvals list` shows, or the callId of the parked call/);
  });

  it('refuses an id that names both an approval and another parked call, rather than guess', async () => {
    const { id } = await parkWrite('CREATE TABLE meant_one (x)');
    // Another agent picks the first approval's id as its own call id.
    const decoy = await client.call(
      {
        workspace: 'acme',
        agent: 'decoy',
        settings: { database: 'agent', approval: 'write' },
        callId: id,
        tool: 'DATA_WRITE_SQL',
        arguments: { sql: 'CREATE TABLE decoy (x)' },
      },
      { wait: false },
    );
    expect(decoy).toMatchObject({ status: 'awaiting_approval' });
    const out = await cli('approvals', 'approve', id, '--key', keyOf.bob!);
    // An id on the command line that names two: INVALID_ARGUMENTS, exit 2 (give the approval's own id).
    expect(out.code).toBe(2);
    expect(json(out.stdout)).toMatchObject({ error: { code: 'INVALID_ARGUMENTS', message: expect.stringContaining('names 2 approvals') } });
    const pending = json((await cli('approvals', 'list', '--workspace', 'acme', '--json')).stdout) as { id: string; state: string }[];
    expect(pending.filter((a) => a.id === id || a.id === (decoy as { approval: { id: string } }).approval.id).map((a) => a.state)).toEqual([
      'pending',
      'pending',
    ]);
  });

  it('keeps the audit: --state all shows who decided, when, why and what ran', async () => {
    const [allOut, tableOut] = await Promise.all([
      cli('approvals', 'list', '--workspace', 'acme', '--state', 'all', '--json'),
      cli('approvals', 'list', '--workspace', 'acme', '--state', 'all'),
    ]);
    const all = json(allOut.stdout) as {
      sql: string;
      state: string;
      decidedBy?: string;
      reason?: string;
      ran?: { ok: boolean };
    }[];
    expect(all.find((a) => a.sql === 'CREATE TABLE notes (body TEXT)')).toMatchObject({
      state: 'approved',
      decidedBy: 'bob',
      reason: 'fine by me',
      ran: { ok: true },
    });
    expect(all.find((a) => a.sql === 'CREATE TABLE never_made (x)')).toMatchObject({ state: 'rejected', decidedBy: 'ada' });
    expect(all.find((a) => a.sql === 'CREATE TABLE never_made (x)')?.ran).toBeUndefined();
    const table = tableOut.stdout;
    expect(table).toMatch(/approved .*bob \d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ "fine by me"\s+ok \d{4}/);
    expect(table).toMatch(/rejected .*ada .*"no new tables today"/);
  });
});
