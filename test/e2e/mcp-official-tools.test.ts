import { execFile, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import type http from 'node:http';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sandbox } from '../helpers/harness.ts';
import { freePort } from '../helpers/own-redis.ts';
import { startKeyProxy } from '../helpers/conformance/key-proxy.ts';
import { CLI, runCli, startCli, stop } from '../helpers/processes.ts';

// The official MCP tools against real agentdb processes: the conformance suite's server
// scenarios over HTTP (against `agentdb start`), and the Inspector CLI over stdio (against
// `agentdb mcp --stdio`, its key in AGENTDB_KEY). Both run offline, from devDependencies.

const require = createRequire(import.meta.url);
const pkgDir = (name: string) => path.dirname(require.resolve(`${name}/package.json`));
const CONFORMANCE = path.join(pkgDir('@modelcontextprotocol/conformance'), 'dist', 'index.js');
const INSPECTOR = path.join(pkgDir('@modelcontextprotocol/inspector-cli'), 'build', 'index.js');
/** Lets the conformance CLI load on Node 20 (it imports fs.globSync, Node 22's). */
const CONFORMANCE_ON_NODE20 = fileURLToPath(new URL('../helpers/conformance/register.mjs', import.meta.url));

/**
 * The server scenarios that apply to agentdb, a tools-only server behind bearer keys. The
 * others, and why not, are in docs/mcp-http.md ("The official MCP tools").
 */
const SCENARIOS = ['server-initialize', 'ping', 'tools-list', 'dns-rebinding-protection'];

const sb = sandbox();
let app: ChildProcess;
let port: number;
let agentKey: string;
let proxy: http.Server;
let proxyUrl: string;
const outDir = mkdtempSync(path.join(os.tmpdir(), 'agentdb-conformance-'));

beforeAll(async () => {
  const cli = (...args: string[]) => runCli(args, sb.env);
  expect((await cli('workspaces', 'set', '--workspace', 'acme', '--plan', 'pro')).code).toBe(0);
  expect((await cli('agents', 'set', '--workspace', 'acme', '--agent', 'scout', '--database', 'agent')).code).toBe(0);
  agentKey = (JSON.parse((await cli('keys', 'mint', '--workspace', 'acme', '--agent', 'scout', '--json')).stdout) as { key: string }).key;
  port = await freePort();
  app = await startCli(['start'], { ...sb.env, PORT: String(port) });
  // The conformance CLI has no way to send a header, and /mcp takes no call without a key:
  // a pass-through proxy adds the bearer key and changes nothing else (also run by hand, docs/mcp-http.md).
  ({ server: proxy, url: proxyUrl } = await startKeyProxy(port, agentKey));
});
afterAll(async () => {
  await new Promise((resolve) => proxy?.close(resolve));
  if (app) await stop(app);
  await sb.cleanup();
  rmSync(outDir, { recursive: true, force: true });
});

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}
function run(args: string[], env: Record<string, string> = {}, cwd?: string): Promise<Run> {
  return new Promise((resolve) => {
    execFile(process.execPath, args, { env: { ...process.env, ...env }, cwd, timeout: 50_000, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) =>
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

interface Check {
  id: string;
  status: 'SUCCESS' | 'FAILURE' | 'WARNING' | 'INFO' | 'SKIPPED';
  errorMessage?: string;
}

/** The checks one scenario wrote (`-o` makes a folder per scenario run, holding checks.json). */
function checksOf(dir: string): Check[] {
  const found = readdirSync(dir, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('checks.json'));
  expect(found).toHaveLength(1);
  return JSON.parse(readFileSync(path.join(dir, found[0]!), 'utf8')) as Check[];
}

describe('the MCP conformance suite (server scenarios) against agentdb start', () => {
  it.each(SCENARIOS)('%s passes every check', async (scenario) => {
    const dir = path.join(outDir, scenario);
    const out = await run(['--import', CONFORMANCE_ON_NODE20, CONFORMANCE, 'server', '--url', proxyUrl, '--scenario', scenario, '-o', dir]);
    const checks = checksOf(dir);
    expect(
      checks.filter((c) => c.status === 'FAILURE' || c.status === 'WARNING'),
      out.stdout,
    ).toEqual([]);
    expect(checks.filter((c) => c.status === 'SUCCESS').length).toBeGreaterThan(0);
    expect(out.code, out.stdout + out.stderr).toBe(0);
  });
});

describe('the MCP Inspector CLI over stdio against agentdb mcp --stdio', () => {
  // From its own folder: inspector-cli 1.0.3 looks for `../package.json` from the working
  // directory but imports it from its module's, so elsewhere it fails to start.
  const inspector = (...args: string[]) =>
    run([INSPECTOR, process.execPath, ...CLI, 'mcp', '--stdio', ...args], { ...sb.env, AGENTDB_KEY: agentKey }, path.dirname(INSPECTOR));

  it('lists the four tools with their schemas and annotations', async () => {
    const out = await inspector('--method', 'tools/list');
    expect(out.code, out.stderr).toBe(0);
    const { tools } = JSON.parse(out.stdout) as {
      tools: { name: string; inputSchema: { type: string; properties: Record<string, unknown>; required?: string[] }; annotations: Record<string, boolean> }[];
    };
    expect(tools.map((t) => t.name).sort()).toEqual(['DATA_DESCRIBE_SCHEMA', 'DATA_DROP_TABLE', 'DATA_QUERY_SQL', 'DATA_WRITE_SQL']);
    const contract = JSON.parse((await runCli(['tools', '--json'], sb.env)).stdout) as { name: string; inputSchema: unknown }[];
    for (const t of tools) expect(t.inputSchema).toEqual(contract.find((c) => c.name === t.name)!.inputSchema);
    expect(tools.find((t) => t.name === 'DATA_QUERY_SQL')!.annotations).toMatchObject({ readOnlyHint: true, destructiveHint: false });
    expect(tools.find((t) => t.name === 'DATA_DROP_TABLE')!.annotations).toMatchObject({ readOnlyHint: false, destructiveHint: true });
  });

  it('calls the tools: a write, then a query that returns its rows', async () => {
    const made = await inspector('--method', 'tools/call', '--tool-name', 'DATA_WRITE_SQL', '--tool-arg', 'sql=CREATE TABLE leads (email TEXT, stage TEXT)');
    expect(made.code, made.stderr).toBe(0);
    expect(JSON.parse(made.stdout)).toMatchObject({ isError: false });
    const added = await inspector(
      '--method',
      'tools/call',
      '--tool-name',
      'DATA_WRITE_SQL',
      '--tool-arg',
      'sql=INSERT INTO leads VALUES (?, ?), (?, ?)',
      'params=["a@x.io","new","b@x.io","won"]',
    );
    expect(JSON.parse(added.stdout)).toMatchObject({ isError: false, structuredContent: { changes: 2 } });
    const read = await inspector('--method', 'tools/call', '--tool-name', 'DATA_QUERY_SQL', '--tool-arg', 'sql=SELECT email, stage FROM leads ORDER BY email');
    expect(read.code, read.stderr).toBe(0);
    const result = JSON.parse(read.stdout) as { isError: boolean; content: { type: string; text: string }[]; structuredContent: unknown };
    expect(result).toMatchObject({
      isError: false,
      structuredContent: {
        columns: ['email', 'stage'],
        rows: [
          ['a@x.io', 'new'],
          ['b@x.io', 'won'],
        ],
      },
    });
    // The text a model reads carries the rows inside the untrusted-data fence.
    expect(result.content[0]!.text).toContain('a@x.io');
  });
});
