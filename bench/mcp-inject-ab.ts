// `npm run build && node --import tsx bench/mcp-inject-ab.ts`: the CPU per `POST /mcp` (and
// `POST /v1/calls`) of two builds' whole app (`buildApp`, its app-wide hooks included), stub key
// check and keyed calls, through `inject()` (no socket), rounds alternating A B B A … in one
// process: the JavaScript a request costs on the server, where a loaded machine's drift between
// processes hides a few microseconds. DISTS (default `../.ab-base/dist,../dist`, relative to
// bench/), N requests per round (default 5000), R rounds (default 12).
import { median } from './stats.ts';

const DISTS = (process.env.DISTS ?? '../.ab-base/dist,../dist').split(',');
const N = Number(process.env.N ?? 5000);
const R = Number(process.env.R ?? 12);
const ENVELOPE = {
  ok: true,
  callId: '00000000-0000-4000-8000-000000000000',
  tool: 'DATA_QUERY_SQL',
  credits: 1,
  result: { columns: ['v'], rows: [['value-1']], truncated: false },
};
const PRINCIPAL = Object.freeze({ kind: 'agent', workspace: 'floor', agent: 'reader', keyId: 'k', settings: { database: 'agent' }, surface: { kind: 'data' } });
const KEY = `adb_${'f'.repeat(43)}`;
const args = (i: number) => ({ sql: 'SELECT v FROM kv WHERE id = ?', params: [i % 1000] });

interface App {
  inject(opts: object): Promise<{ statusCode: number; body: string }>;
}

const apps: App[] = [];
for (const dist of DISTS) {
  const { buildApp } = (await import(new URL(`${dist}/src/http/app.js`, import.meta.url).href)) as {
    buildApp: (deps: object) => App & { ready(): Promise<void> };
  };
  const auth = { authenticate: async (token: string) => (token === KEY ? PRINCIPAL : undefined) };
  const calls = { call: async () => structuredClone(ENVELOPE) };
  const app = buildApp({ redis: {}, shardCount: 1, members: {}, approvals: {}, keyed: { auth, calls, waitMs: 1000, approvalWaitMs: 1000 } });
  await app.ready();
  apps.push(app);
}
const sides = {
  mcp: (app: App, i: number) =>
    app.inject({
      method: 'POST',
      url: '/mcp',
      headers: {
        host: '127.0.0.1',
        authorization: `Bearer ${KEY}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2025-06-18',
      },
      payload: JSON.stringify({ jsonrpc: '2.0', id: i, method: 'tools/call', params: { name: 'DATA_QUERY_SQL', arguments: args(i) } }),
    }),
  v1: (app: App, i: number) =>
    app.inject({
      method: 'POST',
      url: '/v1/calls',
      headers: { host: '127.0.0.1', authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      payload: JSON.stringify({ tool: 'DATA_QUERY_SQL', arguments: args(i) }),
    }),
};
const cpu = { mcp: DISTS.map(() => [] as number[]), v1: DISTS.map(() => [] as number[]) };
for (const [k, one] of Object.entries(sides) as [keyof typeof sides, (typeof sides)['mcp']][]) {
  for (const app of apps) {
    for (let i = 0; i < 2000; i++) {
      const res = await one(app, i);
      if (res.statusCode !== 200) throw new Error(`mcp-inject-ab ${k}: ${res.statusCode} ${res.body}`);
    }
  }
  for (let r = 0; r < R; r++) {
    for (let j = 0; j < apps.length; j++) {
      const at = r % 2 ? apps.length - 1 - j : j;
      const before = process.cpuUsage();
      for (let i = 0; i < N; i++) await one(apps[at]!, i);
      const used = process.cpuUsage(before);
      cpu[k][at]!.push((used.user + used.system) / N);
    }
  }
}
for (const k of ['mcp', 'v1'] as const) {
  const [a, b] = cpu[k];
  const line = DISTS.map((d, j) => `${d} ${median(cpu[k][j]!).toFixed(1)}`).join(', ');
  const paired = a && b ? `; paired ${median(a.map((x, i) => b[i]! / x)).toFixed(3)}, lower in ${a.filter((x, i) => b[i]! < x).length} of ${R}` : '';
  console.log(`${k}: µs of CPU per request: ${line}${paired}`);
}
