// `npm run build && node --import tsx bench/mcp-oauth-commands.ts`: the Redis commands a `/mcp`
// call costs with an OAuth access token and with a member key (the same member), each build's
// `agentdb start` in turn on a redis-server of this run's own, so that no other traffic is
// counted. Commands are what the token's lookups cost whatever the machine's load: a token's
// call that asks Redis who it acts for pays round trips in turn that a key's cached call does
// not. DISTS (default `../.ab-base/dist,../dist`, relative to bench/), N calls a side (default
// 500). Prints GET and HGET per call, and every command per call, for each build and side.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Redis } from 'ioredis';
import { OAuthGrants } from '../src/oauth/oauth-grants.ts';
import { s256 } from '../src/oauth/oauth-token-format.ts';
import { keysFor } from '../src/redis/keys.ts';
import { MemberRegistry } from '../src/registry/members.ts';
import { WorkspaceRegistry } from '../src/registry/workspaces.ts';
import { OwnRedis } from '../test/helpers/own-redis.ts';
import { ownSignalFetch } from './own-signal-fetch.ts';
import { startProcess, stopProcess } from './process.ts';

const DISTS = (process.env.DISTS ?? '../.ab-base/dist,../dist').split(',');
const N = Number(process.env.N ?? 500);

/** Calls of each command so far, from INFO commandstats. */
async function commandCalls(redis: Redis): Promise<Map<string, number>> {
  const info = await redis.info('commandstats');
  return new Map([...info.matchAll(/cmdstat_([a-z|]+):calls=(\d+)/g)].map((m) => [m[1]!, Number(m[2])]));
}

async function measure(dist: string, redisUrl: string, n: number): Promise<void> {
  const prefix = `bench-oauthcmd${n}`;
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'agentdb-oauthcmd-'));
  const redis = new Redis(redisUrl);
  const keys = keysFor(prefix);
  await new WorkspaceRegistry(redis, keys).put('ws', 'pro');
  const members = new MemberRegistry(redis, keys);
  const added = await members.add('ws', 'ada', 'admin');
  const bin = fileURLToPath(new URL(`${dist}/bin/agentdb.js`, import.meta.url));
  const env = { REDIS_URL: redisUrl, AGENTDB_PREFIX: prefix, AGENTDB_DATA_DIR: dataDir, LOG_LEVEL: 'info', PORT: '0', HOST: '127.0.0.1', RATE_LIMITS: 'off' };
  const { child, output } = await startProcess(process.execPath, [bin, 'start'], env, /"msg":"agentdb ready"/);
  try {
    const url = /"address":"([^"]+)"/.exec(output)?.[1];
    if (!url) throw new Error(`mcp-oauth-commands: no address in: ${output}`);
    // Signed in as the OAuth tests do it: the person's consent, the code exchanged with PKCE.
    const grants = new OAuthGrants(redis, keys, members, { accessTtlS: 3600, refreshTtlS: 86_400 });
    const client = {
      clientId: 'adbc_benchbenchbenchbe',
      clientName: 'Bench',
      redirectUris: ['http://127.0.0.1/cb'],
      authMethod: 'none' as const,
      createdAt: 0,
    };
    const verifier = 'v'.repeat(43);
    const code = await grants.consent(added.member, client, {
      redirectUri: client.redirectUris[0]!,
      redirectUriGiven: true,
      challenge: s256(verifier),
      resource: `${url}/mcp`,
      level: 'write',
    });
    const tokens = await grants.exchangeCode(client, { code, verifier, redirectUri: client.redirectUris[0]! });
    for (const [side, bearer] of [
      ['key', added.key],
      ['token', tokens.access_token],
    ] as const) {
      const mcp = new Client({ name: 'bench', version: '1' });
      const transport = new StreamableHTTPClientTransport(new URL('/mcp', url), {
        requestInit: { headers: { authorization: `Bearer ${bearer}` } },
        fetch: ownSignalFetch,
      });
      await mcp.connect(transport);
      await mcp.listTools();
      const call = async (i: number) => {
        const r = await mcp.callTool({ name: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT ? AS v', params: [i] } });
        if (r.isError !== false) throw new Error(`mcp-oauth-commands: ${JSON.stringify(r)}`);
      };
      for (let i = 0; i < 50; i++) await call(i);
      const before = await commandCalls(redis);
      for (let i = 0; i < N; i++) await call(i);
      const after = await commandCalls(redis);
      await mcp.close();
      const per = (cmd: string) => ((after.get(cmd) ?? 0) - (before.get(cmd) ?? 0)) / N;
      let all = 0;
      for (const [cmd, calls] of after) all += calls - (before.get(cmd) ?? 0);
      console.log(`${dist} ${side}: GET ${per('get').toFixed(2)}, HGET ${per('hget').toFixed(2)}, all commands ${(all / N).toFixed(2)} per call`);
    }
  } finally {
    await stopProcess(child);
    redis.disconnect();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

const own = await OwnRedis.start();
try {
  for (const [n, dist] of DISTS.entries()) await measure(dist, own.url, n);
} finally {
  await own.kill();
}
