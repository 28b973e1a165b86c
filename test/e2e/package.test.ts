import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toolContracts } from '../../src/contracts/tools.ts';
import { sandbox } from '../helpers/harness.ts';
import { stop } from '../helpers/processes.ts';

// The package as a user gets it: `npm pack` of the build (the binary, the worker and its
// executor child as the other end-to-end tests run them), installed into an empty project, then
// imported from plain Node and type-checked with tsc.
const run = promisify(execFile);
const REPO = fileURLToPath(new URL('../../', import.meta.url));
const TSC = path.join(REPO, 'node_modules/typescript/bin/tsc');
const tmp = mkdtempSync(path.join(os.tmpdir(), 'agentdb-package-'));
const app = path.join(tmp, 'app');
const sb = sandbox();
let worker: ChildProcess | undefined;

beforeAll(async () => {
  // Packed from a copy of the checkout with its dist/, which test/global-setup.ts has just made
  // current by `npm run build`'s steps; without `prepare` (--ignore-scripts), which would build
  // it all again (15 s of CPU in tsc) and which the install of the checkout runs anyway.
  const source = path.join(tmp, 'source');
  const skip = new Set(['node_modules', '.git', '.ab-base'].map((d) => path.join(REPO, d)));
  cpSync(REPO, source, { recursive: true, filter: (from) => !skip.has(from.replace(/\/$/, '')) });
  symlinkSync(path.join(REPO, 'node_modules'), path.join(source, 'node_modules'), 'dir');
  const packed = await run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', tmp], { cwd: source, maxBuffer: 64 * 1024 * 1024 });
  const tarball = (JSON.parse(packed.stdout) as { filename: string }[])[0]!.filename;
  installOffline(tarball);
  // better-sqlite3 13 ships its native binaries (prebuilds/), so skipping install scripts skips
  // nothing the package needs; the tests below load it from the installed package itself.
  await run('npm', ['ci', '--offline', '--ignore-scripts', '--no-audit', '--no-fund'], { cwd: app });
}, 180_000);
afterAll(async () => {
  if (worker) await stop(worker);
  await sb.cleanup();
  rmSync(tmp, { recursive: true, force: true });
});

/**
 * An empty project depending on the tarball, with a lockfile made from the repository's (its
 * runtime entries only), so `npm ci --offline` installs from npm's cache, which the
 * repository's own `npm ci` filled: no network, and the versions the repository tests.
 */
function installOffline(tarball: string): void {
  const own = JSON.parse(readFileSync(path.join(REPO, 'package.json'), 'utf8')) as Record<string, unknown>;
  const lock = JSON.parse(readFileSync(path.join(REPO, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, { dev?: boolean; version?: string; resolved?: string }>;
  };
  const dependencies = { agentdb: `file:../${tarball}` };
  const packages: Record<string, unknown> = {
    '': { name: 'app', version: '1.0.0', dependencies },
    'node_modules/agentdb': { version: own.version, resolved: `file:../${tarball}`, dependencies: own.dependencies, bin: own.bin, engines: own.engines },
  };
  // With each tarball's URL written in (the repository's lock leaves them out), npm takes the
  // tarballs straight from its cache: it need not ask the registry where they are.
  const registry = process.env.npm_config_registry ?? 'https://registry.npmjs.org/';
  for (const [key, entry] of Object.entries(lock.packages)) {
    if (!key || entry.dev) continue;
    const name = key.slice(key.lastIndexOf('node_modules/') + 'node_modules/'.length);
    const resolved = entry.resolved ?? `${registry.replace(/\/?$/, '/')}${name}/-/${name.split('/').pop()}-${entry.version}.tgz`;
    packages[key] = { ...entry, resolved };
  }
  mkdirSync(app);
  // A plain project: no "type": "module", no TypeScript loader.
  writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'app', version: '1.0.0', private: true, dependencies }));
  writeFileSync(path.join(app, 'package-lock.json'), JSON.stringify({ name: 'app', version: '1.0.0', lockfileVersion: 3, requires: true, packages }));
}

const BIN = () => path.join(app, 'node_modules/.bin/agentdb');
/** The framework adapters' subpaths. */
const FRAMEWORKS = ['ai-sdk', 'openai-agents', 'langchain'];

describe('the packed package, installed into an empty project', () => {
  it('ships built JavaScript and declarations only, with tsx no dependency of it', () => {
    const manifest = JSON.parse(readFileSync(path.join(app, 'node_modules/agentdb/package.json'), 'utf8')) as Record<string, Record<string, unknown>>;
    expect(manifest.dependencies).not.toHaveProperty('tsx');
    expect(manifest.bin).toEqual({ agentdb: './dist/bin/agentdb.js' });
    expect(manifest.exports).toEqual({
      '.': { types: './dist/src/index.d.ts', default: './dist/src/index.js' },
      ...Object.fromEntries(FRAMEWORKS.map((sub) => [`./${sub}`, { types: `./dist/src/frameworks/${sub}.d.ts`, default: `./dist/src/frameworks/${sub}.js` }])),
    });
    expect(() => readFileSync(path.join(app, 'node_modules/agentdb/src/index.ts'))).toThrow();
    expect(() => readFileSync(path.join(app, 'node_modules/tsx/package.json'))).toThrow();
    // The web page's script, compiled by the build: `agentdb start` serves it from this file.
    expect(readFileSync(path.join(app, 'node_modules/agentdb/dist/src/http/web/browser/app.js'), 'utf8')).toContain('new EventSource(');
    // The Lua scripts, which tsc does not copy: the build does, and the loader reads them from there.
    const lua = readdirSync(path.join(REPO, 'src/redis/scripts')).filter((f) => f.endsWith('.lua'));
    expect(lua.length).toBeGreaterThan(0);
    expect(readdirSync(path.join(app, 'node_modules/agentdb/dist/src/redis/scripts')).sort()).toEqual(lua.sort());
  });

  it('runs the built agentdb: --version, and tools --json as the zod schemas define it', async () => {
    const version = await run(process.execPath, [BIN(), '--version']);
    expect(version.stdout.trim()).toBe(JSON.parse(readFileSync(path.join(REPO, 'package.json'), 'utf8')).version);
    const tools = await run(process.execPath, [BIN(), 'tools', '--json']);
    expect(JSON.parse(tools.stdout)).toEqual(JSON.parse(JSON.stringify(toolContracts())));
  });

  it('loads, for agentdb tools --json, its own built files and commander: no tsx, zod, Redis, BullMQ, SQLite or HTTP', async () => {
    const trace = path.join(tmp, 'trace.txt');
    writeFileSync(
      path.join(tmp, 'hooks.mjs'),
      `import { appendFileSync } from 'node:fs';
export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context);
  appendFileSync(${JSON.stringify(trace)}, resolved.url + '\\n');
  return resolved;
}\n`,
    );
    writeFileSync(path.join(tmp, 'trace.mjs'), "import { register } from 'node:module';\nregister('./hooks.mjs', import.meta.url);\n");
    await run(process.execPath, ['--import', pathUrl(path.join(tmp, 'trace.mjs')), BIN(), 'tools', '--json']);
    const loaded = [...new Set(readFileSync(trace, 'utf8').trim().split('\n'))].filter((u) => u.startsWith('file:'));
    const packages = new Set(loaded.map((u) => /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(u)?.[1]));
    expect([...packages].sort()).toEqual(['agentdb', 'commander']);
    expect(loaded.filter((u) => u.includes('/node_modules/agentdb/') && !u.includes('/node_modules/agentdb/dist/'))).toEqual([]);
  });

  it('is imported by plain Node: a call through a worker started from the built binary, whose executor child is forked from the build', async () => {
    worker ??= await startWorker();
    writeFileSync(
      path.join(app, 'use.mjs'),
      `import { AgentDbClient } from 'agentdb';
const client = new AgentDbClient({ redisUrl: process.env.REDIS_URL, prefix: process.env.AGENTDB_PREFIX, shardCount: 4 });
const who = { workspace: 'acme', agent: 'plain', settings: { database: 'agent' } };
const made = await client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (x)' } });
const read = await client.call({ ...who, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 6 * 7 AS n' } });
await client.close();
console.log(JSON.stringify([made, read]));\n`,
    );
    const out = await run(process.execPath, ['use.mjs'], { cwd: app, env: { ...process.env, ...sb.env } });
    expect(JSON.parse(out.stdout)).toEqual([
      expect.objectContaining({ ok: true, result: expect.objectContaining({ changes: 0 }) }),
      expect.objectContaining({ ok: true, result: expect.objectContaining({ rows: [[42]] }) }),
    ]);
  });

  it('imports each framework subpath: without its framework it throws naming the package, with it the agent gets its tools', async () => {
    writeFileSync(
      path.join(app, 'frameworks.mjs'),
      `const out = {};
for (const sub of ${JSON.stringify(FRAMEWORKS)}) {
  out[sub] = await import('agentdb/' + sub).then(() => 'loaded', (err) => ({ code: err.code, message: err.message }));
}
console.log(JSON.stringify(out));\n`,
    );
    const missing = JSON.parse((await run(process.execPath, ['frameworks.mjs'], { cwd: app })).stdout) as Record<string, { code: string; message: string }>;
    expect(missing['ai-sdk']).toMatchObject({ code: 'UNSUPPORTED_FRAMEWORK', message: expect.stringContaining('needs the package ai (7.x)') });
    expect(missing['openai-agents']).toMatchObject({ code: 'UNSUPPORTED_FRAMEWORK', message: expect.stringContaining('@openai/agents') });
    expect(missing.langchain).toMatchObject({ code: 'UNSUPPORTED_FRAMEWORK', message: expect.stringContaining('@langchain/core') });

    // The frameworks as an app installs them beside agentdb: the repository's, linked in.
    for (const pkg of ['ai', '@openai/agents', '@langchain/core', '@langchain/langgraph']) {
      mkdirSync(path.dirname(path.join(app, 'node_modules', pkg)), { recursive: true });
      symlinkSync(path.join(REPO, 'node_modules', pkg), path.join(app, 'node_modules', pkg), 'dir');
    }
    for (const cmd of [
      ['workspaces', 'set', '--workspace', 'acme', '--plan', 'pro'],
      ['agents', 'set', '--workspace', 'acme', '--agent', 'framed', '--database', 'agent'],
    ]) {
      await run(process.execPath, [BIN(), ...cmd], { env: { ...process.env, ...sb.env } });
    }
    worker ??= await startWorker();
    writeFileSync(
      path.join(app, 'framed.mjs'),
      `import { AgentDbClient } from 'agentdb';
const client = new AgentDbClient({ redisUrl: process.env.REDIS_URL, prefix: process.env.AGENTDB_PREFIX, shardCount: 4 });
const who = { workspace: 'acme', agent: 'framed' };
const out = {};
for (const sub of ${JSON.stringify(FRAMEWORKS)}) {
  const { agentDbTools } = await import('agentdb/' + sub);
  const db = await agentDbTools(client, who);
  out[sub] = (Array.isArray(db.tools) ? db.tools.map((t) => t.name) : Object.keys(db.tools)).sort();
}
const { agentDbTools } = await import('agentdb/ai-sdk');
const db = await agentDbTools(client, who);
out.read = await db.tools.DATA_QUERY_SQL.execute({ sql: 'SELECT 6 * 7 AS n' }, { toolCallId: 'c1', messages: [] });
await client.close();
console.log(JSON.stringify(out));\n`,
    );
    const framed = JSON.parse((await run(process.execPath, ['framed.mjs'], { cwd: app, env: { ...process.env, ...sb.env } })).stdout) as Record<
      string,
      unknown
    >;
    const names = ['DATA_DESCRIBE_SCHEMA', 'DATA_DROP_TABLE', 'DATA_QUERY_SQL', 'DATA_WRITE_SQL'];
    for (const sub of FRAMEWORKS) expect(framed[sub], sub).toEqual(names);
    expect(framed.read).toMatchObject({ isError: false, data: { rows: [[42]] } });
  });

  it('type-checks the TypeScript snippets of the README and docs/ with tsc, answers narrowing on ok and status', async () => {
    const pages = [
      'README.md',
      ...readdirSync(path.join(REPO, 'docs'))
        .filter((f) => f.endsWith('.md'))
        .map((f) => `docs/${f}`),
    ];
    const snippets = pages.flatMap((page) =>
      [...readFileSync(path.join(REPO, page), 'utf8').matchAll(/```ts\n([\s\S]*?)```/g)].map((m, i) => ({ page, i, code: m[1]! })),
    );
    // The README's runtime example, and the approvals walk-through of docs/approvals.md.
    expect(snippets.filter((s) => s.page === 'README.md').length).toBeGreaterThanOrEqual(1);
    expect(snippets.filter((s) => s.page === 'docs/approvals.md').length).toBeGreaterThanOrEqual(1);
    // A fence read wrong (```ts twice, say) yields an empty snippet, which type-checks trivially.
    // (```ts is for agentdb's own snippets; other programs' code, such as another MCP client's
    // configuration in docs/mcp-http.md, is fenced ```typescript and not checked here.)
    for (const { page, i, code } of snippets) expect(code, `${page} snippet ${i + 1}`).toContain("from 'agentdb'");
    const files = snippets.map(({ page, i, code }) => {
      const file = `${path.basename(page, '.md').toLowerCase()}-${i + 1}.mts`;
      writeFileSync(path.join(app, file), code);
      return file;
    });
    // And the answers really are typed: a field only a narrowed answer has is an error unnarrowed.
    writeFileSync(
      path.join(app, 'narrowing.mts'),
      `import { AgentDbClient, type CallAnswer } from 'agentdb';
declare const answer: CallAnswer;
// @ts-expect-error approval exists only once status says awaiting_approval
answer.approval;
// @ts-expect-error result exists only once ok says true
answer.result;
if (answer.status === 'awaiting_approval') answer.approval.id.toUpperCase();
if (answer.ok) Object.keys(answer.result);
else if (answer.status === undefined) answer.error.code.toUpperCase();
export const client: AgentDbClient = new AgentDbClient();\n`,
    );
    writeFileSync(
      path.join(app, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          module: 'nodenext',
          target: 'es2022',
          strict: true,
          noEmit: true,
          // As most projects do; narrowing.mts above still fails should the package's types
          // not resolve (everything would be any, and the expected errors would not come).
          skipLibCheck: true,
          types: ['node'],
          typeRoots: [path.join(REPO, 'node_modules/@types')],
        },
        files: [...files, 'narrowing.mts'],
      }),
    );
    const checked = await run(process.execPath, [TSC, '-p', 'tsconfig.json'], { cwd: app }).catch((err: { stdout: string }) => err);
    expect(checked.stdout).toBe('');
  });
});

function pathUrl(file: string): string {
  return new URL(`file://${file}`).href;
}

/** `agentdb worker` from the installed package; resolves once it is ready. */
function startWorker(): Promise<ChildProcess> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN(), 'worker'], { env: { ...process.env, ...sb.env, LOG_LEVEL: 'info' }, stdio: ['ignore', 'ignore', 'pipe'] });
    let log = '';
    const onData = (d: Buffer) => {
      log += d;
      if (!log.includes('"msg":"worker ready"')) return;
      child.stderr!.off('data', onData);
      child.stderr!.resume();
      resolve(child);
    };
    child.stderr!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`the installed agentdb worker exited with ${code}: ${log}`)));
  });
}
