import type { ChildProcess } from 'node:child_process';
import { statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sandbox } from '../helpers/harness.ts';
import { freePort } from '../helpers/own-redis.ts';
import { CLI, runCli, startCli, stop } from '../helpers/processes.ts';

const sb = sandbox();
let app: ChildProcess;
let port: number;
let agentKey: string;
let memberKey: string;
const clients: Client[] = [];

beforeAll(async () => {
  const cli = (...args: string[]) => runCli(args, sb.env);
  expect((await cli('workspaces', 'set', '--workspace', 'acme', '--plan', 'business')).code).toBe(0);
  expect((await cli('agents', 'set', '--workspace', 'acme', '--agent', 'scout', '--database', 'agent')).code).toBe(0);
  agentKey = (JSON.parse((await cli('keys', 'mint', '--workspace', 'acme', '--agent', 'scout', '--json')).stdout) as { key: string }).key;
  memberKey = (JSON.parse((await cli('members', 'add', '--workspace', 'acme', '--name', 'ada', '--role', 'admin', '--json')).stdout) as { key: string }).key;
  port = await freePort();
  app = await startCli(['start'], { ...sb.env, PORT: String(port) });
});
/** An SDK client of `agentdb mcp --stdio --key-file keyFile`, closed after the file. */
async function stdioClient(name: string, keyFile: string): Promise<Client> {
  const client = new Client({ name, version: '1' });
  await client.connect(
    new StdioClientTransport({
      command: process.execPath,
      args: [...CLI, 'mcp', '--stdio', '--key-file', keyFile],
      env: { ...(process.env as Record<string, string>), ...sb.env },
      stderr: 'pipe',
    }),
  );
  clients.push(client);
  return client;
}

afterAll(async () => {
  await Promise.all(clients.map((c) => c.close()));
  if (app) await stop(app);
  await sb.cleanup();
});

type Result = { structuredContent?: Record<string, unknown>; isError?: boolean };

describe('MCP against running processes', () => {
  it('agentdb start serves POST /mcp to the official SDK client', async () => {
    const client = new Client({ name: 'e2e', version: '1' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`), { requestInit: { headers: { authorization: `Bearer ${agentKey}` } } }),
    );
    clients.push(client);
    expect((await client.listTools()).tools).toHaveLength(4);
    expect(await client.callTool({ name: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (x)' } })).toMatchObject({ isError: false });
    expect((await client.callTool({ name: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT count(*) AS n FROM t' } })) as Result).toMatchObject({
      structuredContent: { rows: [[0]] },
    });
  });

  it('agentdb mcp --stdio --key-file serves a local client, with the same principal rules', async () => {
    const keyFile = path.join(sb.dataDir, 'member.key');
    writeFileSync(keyFile, `${memberKey}\n`, { mode: 0o600 });
    const client = await stdioClient('e2e-stdio', keyFile);
    expect((await client.listTools()).tools.map((t) => t.name)).toContain('DATA_DROP_TABLE');
    // The admin's client reads the agent's tables by naming it, and cannot write them.
    expect(await client.callTool({ name: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT count(*) AS n FROM t', agent: 'scout' } })).toMatchObject({
      isError: false,
      structuredContent: { rows: [[0]] },
    });
    expect(await client.callTool({ name: 'DATA_WRITE_SQL', arguments: { sql: 'INSERT INTO t VALUES (1)', agent: 'scout' } })).toMatchObject({
      isError: true,
      structuredContent: { error: { code: 'NOT_PERMITTED' } },
    });
  });

  it('serves with a key keys mint --save-key wrote: the key alone, mode 600, never printed', async () => {
    const keyFile = path.join(sb.dataDir, 'scout-saved.key');
    const minted = await runCli(['keys', 'mint', '--workspace', 'acme', '--agent', 'scout', '--save-key', keyFile, '--json'], sb.env);
    expect(minted.code, minted.stderr).toBe(0);
    expect(JSON.parse(minted.stdout)).toMatchObject({ workspace: 'acme', agent: 'scout', keyFile });
    expect(minted.stdout).not.toContain('adb_');
    expect(statSync(keyFile).mode & 0o777).toBe(0o600);
    const client = await stdioClient('e2e-saved-key', keyFile);
    expect(await client.callTool({ name: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT count(*) AS n FROM t' } })).toMatchObject({
      isError: false,
      structuredContent: { rows: [[0]] },
    });
  });

  it('agentdb mcp --stdio stops serving a key revoked while its client runs', async () => {
    const cli = (...args: string[]) => runCli(args, sb.env);
    expect((await cli('agents', 'set', '--workspace', 'acme', '--agent', 'brief', '--database', 'agent')).code).toBe(0);
    const minted = JSON.parse((await cli('keys', 'mint', '--workspace', 'acme', '--agent', 'brief', '--json')).stdout) as { key: string; id: string };
    const client = new Client({ name: 'e2e-stdio-revoked', version: '1' });
    await client.connect(
      new StdioClientTransport({
        command: process.execPath,
        args: [...CLI, 'mcp', '--stdio'],
        env: { ...(process.env as Record<string, string>), ...sb.env, AGENTDB_KEY: minted.key },
        stderr: 'pipe',
      }),
    );
    clients.push(client);
    expect(await client.callTool({ name: 'DATA_DESCRIBE_SCHEMA', arguments: {} })).toMatchObject({ isError: false });
    expect((await cli('keys', 'revoke', '--workspace', 'acme', '--id', minted.id)).code).toBe(0);
    await expect(client.callTool({ name: 'DATA_DESCRIBE_SCHEMA', arguments: {} })).rejects.toMatchObject({ code: -32001 });
    await expect(client.listTools()).rejects.toMatchObject({ code: -32001 });
  });

  it('agentdb mcp --stdio answers every request read before stdin ends', async () => {
    // A client (or a shell pipe) may write its requests and close stdin at once: the tool call
    // still running then must still be answered before the process exits.
    const lines = [
      { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'pipe', version: '1' } } },
      { jsonrpc: '2.0', method: 'notifications/initialized' },
      { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 7 AS n' } } },
    ];
    const out = await runCli(['mcp', '--stdio', '--key', agentKey], sb.env, lines.map((l) => `${JSON.stringify(l)}\n`).join(''));
    expect(out.code).toBe(0);
    // --key still works, and says on stderr (never stdout, the protocol's) that others can see it.
    expect(out.stderr).toContain('agentdb: warning: a key given with --key is visible to other users (ps)');
    const answers = out.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { id: number; result?: Result });
    expect(answers.map((a) => a.id)).toEqual([1, 2]);
    expect(answers[1].result).toMatchObject({ isError: false, structuredContent: { rows: [[7]] } });
  });

  it('agentdb mcp --stdio takes its key from AGENTDB_KEY (read by the config, as every setting) when --key is not given', async () => {
    const lines = [
      {
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'env-key', version: '1' } },
      },
      { jsonrpc: '2.0', method: 'notifications/initialized' },
      { jsonrpc: '2.0', id: 2, method: 'tools/list' },
    ];
    const out = await runCli(['mcp', '--stdio'], { ...sb.env, AGENTDB_KEY: agentKey }, lines.map((l) => `${JSON.stringify(l)}\n`).join(''));
    expect(out.code, out.stderr).toBe(0);
    const answers = out.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { id: number; result?: { tools?: unknown[] } });
    expect(answers[1]).toMatchObject({ id: 2, result: { tools: expect.any(Array) } });
    expect(answers[1]!.result!.tools).toHaveLength(4);
    // Neither: a bad command line, and nothing is looked up.
    expect(await runCli(['mcp', '--stdio'], { ...sb.env, AGENTDB_KEY: '' })).toMatchObject({ code: 2, stderr: expect.stringContaining('AGENTDB_KEY') });
    // Stdin is the protocol's: the key cannot come from it.
    expect(await runCli(['mcp', '--stdio', '--key-file', '-'], sb.env, `${agentKey}\n`)).toMatchObject({
      code: 2,
      stdout: '',
      stderr: expect.stringContaining('stdin carries the protocol here'),
    });
  });

  it('agentdb mcp refuses a key that does not work, without saying more', async () => {
    const out = await runCli(['mcp', '--stdio'], { ...sb.env, AGENTDB_KEY: `adb_${'Q'.repeat(43)}` });
    expect(out).toMatchObject({ code: 1, stdout: '' });
    const [first, where, ...rest] = out.stderr.split('\n');
    expect(first).toBe('agentdb mcp: the key is not an active agent or member key');
    // Where it looked (the usual mistake is a client config without the server's REDIS_URL or
    // prefix), and nothing about the key.
    expect(where).toContain(`prefix ${JSON.stringify(sb.env.AGENTDB_PREFIX)}`);
    expect(where).toContain('REDIS_URL');
    expect(rest).toEqual(['']);
  });
});
