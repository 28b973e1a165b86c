import { mkdirSync } from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { databasePath, shardOf } from '../../src/contracts/database-id.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { runCli } from '../helpers/processes.ts';

let sb: Sandbox;
beforeAll(() => {
  sb = sandbox();
});
afterAll(async () => {
  await sb.cleanup();
});
const cli = (...args: string[]) => runCli(args, sb.env);

describe('agentdb workspaces | agents | keys', () => {
  it('registers a workspace, an agent and a key, lists them and revokes the key', async () => {
    expect(await cli('workspaces', 'set', '--workspace', 'acme', '--plan', 'enterprise')).toMatchObject({ code: 0, stdout: 'acme: plan enterprise\n' });
    expect(await cli('workspaces', 'set', '--workspace', 'acme', '--plan', 'gold')).toMatchObject({ code: 2 });
    const set = await cli('agents', 'set', '--workspace', 'acme', '--agent', 'scout', '--name', 'Scout', '--database', 'workspace', '--shared-data', '--json');
    expect(set.code).toBe(0);
    expect(JSON.parse(set.stdout)).toMatchObject({ slug: 'scout', displayName: 'Scout', settings: { database: 'workspace', sharedData: true } });
    expect(await cli('agents', 'set', '--workspace', 'ghost', '--agent', 'a')).toMatchObject({ code: 1, stdout: expect.stringContaining('NOT_FOUND') });

    const minted = await cli('keys', 'mint', '--workspace', 'acme', '--agent', 'scout', '--json');
    expect(minted.code).toBe(0);
    const key = JSON.parse(minted.stdout) as { id: string; key: string; grants: unknown };
    expect(key).toMatchObject({ key: expect.stringMatching(/^adb_/), grants: { database: 'workspace', sharedData: true } });
    expect(minted.stderr).toContain('will not be shown again');

    const listed = await cli('keys', 'list', '--workspace', 'acme', '--json');
    expect(listed.stdout).not.toContain(key.key);
    expect(JSON.parse(listed.stdout)).toEqual([expect.objectContaining({ id: key.id, agent: 'scout', revoked: false })]);
    expect(await cli('keys', 'revoke', '--workspace', 'acme', '--id', key.id)).toMatchObject({ code: 0 });
    expect(await cli('keys', 'revoke', '--workspace', 'acme', '--id', key.id)).toMatchObject({ code: 1 });
    expect((await cli('agents', 'list', '--workspace', 'acme')).stdout).toMatch(/scout\s+Scout\s+workspace/);
    expect((await cli('workspaces', 'list')).stdout).toMatch(/acme\s+enterprise/);
  });

  it('says so when a new agent is given a name that already has a database (a fork made under it)', async () => {
    const file = databasePath(sb.config.dataDir, 'acme', 'forked', shardOf('acme/forked', sb.config.shardCount));
    mkdirSync(path.dirname(file), { recursive: true });
    new Database(file).close();
    const [fresh, again] = [
      await cli('agents', 'set', '--workspace', 'acme', '--agent', 'forked'),
      await cli('agents', 'set', '--workspace', 'acme', '--agent', 'forked', '--name', 'Forked'),
    ];
    expect(fresh.code).toBe(0);
    expect(fresh.stderr).toContain('note: acme/forked already has a database');
    // The usual cause first: keyless calls (the README's) made it, before anyone registered the name.
    expect(fresh.stderr).toContain('made by calls as acme/forked without a key (`agentdb call` or the client library');
    // A restore from the backups on a new machine makes one without --into (session 38, N16).
    expect(fresh.stderr).toContain('by a restore (`restore --into`, or `restore --from-blob` bringing it from the backups)');
    // Registered without --database, it does not reach that database (session 36, N13: the note said it read and wrote it).
    expect(fresh.stderr).toContain(
      'registered with database "off" (no --database), forked has no tools and does not reach it: --database agent gives it what it holds',
    );
    // Said once, when the name is first registered.
    expect(again.stderr).toBe('');
    // The line a person reads names what --name set (review N10: it printed settings and surface only).
    expect(again.stdout).toMatch(/^acme\/forked: \{"name":"Forked",/);
  });

  it('keys mint for an agent nobody registered keeps NOT_FOUND and says which command registers it', async () => {
    const out = await cli('keys', 'mint', '--workspace', 'acme', '--agent', 'unregistered');
    expect(out.code).toBe(1);
    const { error } = JSON.parse(out.stdout) as { error: { code: string; message: string; hint: string } };
    expect(error.code).toBe('NOT_FOUND');
    expect(error.message).toContain('acme/unregistered is not a registered agent');
    expect(error.hint).toContain('agentdb agents set --workspace acme --agent unregistered --database agent');
    // Not the registry's hint for an agent's tool calls (tables, approvals).
    expect(error.hint).not.toContain('DATA_DESCRIBE_SCHEMA');
    // Other registry commands name the commands that list what is registered, not an agent's
    // tools (review N6: `agents set` in a workspace not registered pointed at DATA_DESCRIBE_SCHEMA).
    for (const args of [
      ['keys', 'revoke', '--workspace', 'acme', '--id', 'k_none'],
      ['agents', 'set', '--workspace', 'ghost', '--agent', 'a'],
      ['agents', 'remove', '--workspace', 'acme', '--agent', 'nobody'],
    ]) {
      const { error: refused } = JSON.parse((await cli(...args)).stdout) as { error: { code: string; hint: string } };
      expect(refused.code).toBe('NOT_FOUND');
      expect(refused.hint).not.toContain('DATA_DESCRIBE_SCHEMA');
      expect(refused.hint).toContain('`agentdb workspaces list`, `agentdb agents list --workspace W`');
    }
  });

  it('registers a db-surface agent and prints the db_* contract', async () => {
    const set = await cli(
      'agents',
      'set',
      '--workspace',
      'acme',
      '--agent',
      'legacy',
      '--surface',
      'db',
      '--mode',
      'write',
      '--policy',
      'require-approval',
      '--json',
    );
    expect(JSON.parse(set.stdout)).toMatchObject({
      settings: { database: 'agent' },
      surface: { kind: 'db', mode: 'write', schemaMode: 'read', policy: 'require-approval' },
    });
    expect(await cli('agents', 'set', '--workspace', 'acme', '--agent', 'legacy', '--mode', 'write')).toMatchObject({ code: 2 });
    const read = JSON.parse((await cli('tools', '--surface', 'db', '--json')).stdout) as { name: string }[];
    expect(read.map((t) => t.name)).toEqual(['db_query', 'db_schema']);
    const write = JSON.parse((await cli('tools', '--surface', 'db', '--mode', 'write', '--json')).stdout) as { name: string; inputSchema: unknown }[];
    expect(write.map((t) => t.name)).toEqual(['db_exec', 'db_query', 'db_schema']);
    expect(write[0]!.inputSchema).toEqual({
      additionalProperties: false,
      properties: { rationale: { type: 'string' }, statement: { type: 'string' } },
      type: 'object',
      required: ['statement', 'rationale'],
    });
    expect(JSON.parse((await cli('tools', '--json')).stdout)).toHaveLength(4);
  });
});
