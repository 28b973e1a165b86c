// What a request costs the server by how long the server slept before it: the open lead of
// docs/benchmarks.md (session 21), the server spending ~2x the CPU per request from Node's fetch
// as from node:http, taken apart.
//
// Run alone, after `npm run build`: `node --import tsx bench/http-idle-gap.ts` (GAP_CALLS,
// GAP_ROUNDS; FLOOR_DIST names another build's dist). Not part of `npm run bench`.
//
// The server is `POST /v1/calls` on the whole app as `agentdb start` builds it (dist's buildApp),
// its key check and keyed call answered from memory, in a process of its own. It is driven one
// call at a time by:
// - `fetch`: Node's fetch (undici), as every MCP client's SDK sends;
// - `node:http`: a kept-alive agent, one connection;
// - `raw fetch bytes`: a bare socket sending fetch's very bytes (its ten headers in its order),
//   alternating two connections as undici does, with a sleep of 0, 300 and 1,000 µs between an
//   answer and the next request (the caller's own time: ~0.3 ms for fetch, ~0.1 ms for node:http);
// - `raw node:http bytes`: node:http's bytes on one connection, with a sleep of 0 and 300 µs.
// Each side's server CPU per request is the server's main thread's run time (schedstat, ns), in
// alternated rounds (`GAP_SERVER=echo`: a bare node:http echo instead of the app, to tell the
// machine's share from the app's): if fetch's extra were in its bytes or its two connections, the raw sides
// would pay it at every gap; if it is in the gap, they pay it as the gap grows, whatever the bytes.
import { fork } from 'node:child_process';
import http from 'node:http';
import net from 'node:net';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { quantile, round } from './stats.ts';

const CALLS = Number(process.env.GAP_CALLS ?? 2000);
const ROUNDS = Number(process.env.GAP_ROUNDS ?? 4);
const SELF = fileURLToPath(import.meta.url);
const KEY = `adb_${'f'.repeat(43)}`;
const ENVELOPE = {
  ok: true,
  callId: '00000000-0000-4000-8000-000000000000',
  tool: 'DATA_QUERY_SQL',
  credits: 1,
  result: { columns: ['v'], rows: [['value-1']], truncated: false },
};
const PRINCIPAL = Object.freeze({ kind: 'agent', workspace: 'floor', agent: 'reader', keyId: 'k', settings: { database: 'agent' }, surface: { kind: 'data' } });

async function serve(): Promise<void> {
  if (process.env.GAP_SERVER === 'echo') {
    // The least a Node HTTP server does per request: what the machine charges any server for a wake.
    const server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        JSON.parse(Buffer.concat(chunks).toString());
        const out = JSON.stringify(ENVELOPE);
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(out) });
        res.end(out);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    process.on('message', (m) => m === 'stop' && process.exit(0));
    process.send!({ port: (server.address() as { port: number }).port });
    return;
  }
  const { buildApp } = await import(new URL(`${process.env.FLOOR_DIST ?? '../dist'}/src/http/app.js`, import.meta.url).href);
  const auth = { authenticate: async (token: string) => (token === KEY ? PRINCIPAL : undefined) };
  const calls = { call: async () => structuredClone(ENVELOPE) };
  const app = buildApp({ redis: {}, shardCount: 1, members: {}, approvals: {}, keyed: { auth, calls, waitMs: 1000, approvalWaitMs: 1000 } });
  await app.listen({ port: 0, host: '127.0.0.1' });
  process.on('message', (m) => m === 'stop' && process.exit(0));
  process.send!({ port: (app.server.address() as { port: number }).port });
}

/** The server's main thread's time on a CPU, in ns (precise, unlike /proc's ticks). */
const runNs = (pid: number) => Number(readFileSync(`/proc/${pid}/task/${pid}/schedstat`, 'utf8').split(' ')[0]);

const body = (i: number) => JSON.stringify({ tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT v FROM kv WHERE id = ?', params: [i % 1000] } });
const HEADERS = { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' };

/** A kept-alive socket sending whole requests and reading their answers by content-length. */
function rawConnection(port: number) {
  const socket = net.connect(port, '127.0.0.1');
  let buffered = '';
  let want = -1;
  let answered: (() => void) | undefined;
  socket.on('data', (d: Buffer) => {
    buffered += d.toString('latin1');
    for (;;) {
      if (want < 0) {
        const end = buffered.indexOf('\r\n\r\n');
        if (end < 0) return;
        want = end + 4 + Number(/content-length: (\d+)/i.exec(buffered.slice(0, end))![1]);
      }
      if (buffered.length < want) return;
      buffered = buffered.slice(want);
      want = -1;
      const done = answered!;
      answered = undefined;
      done();
    }
  });
  return {
    ready: new Promise((resolve) => socket.once('connect', resolve)),
    send: (request: string) =>
      new Promise<void>((resolve) => {
        answered = resolve;
        socket.write(request, 'latin1');
      }),
    close: () => socket.destroy(),
  };
}

/** node:http's request as it goes on the wire: its four headers, in its order. */
function httpBytes(port: number, json: string): string {
  return (
    `POST /v1/calls HTTP/1.1\r\nauthorization: ${HEADERS.authorization}\r\ncontent-type: application/json\r\n` +
    `content-length: ${Buffer.byteLength(json)}\r\nHost: 127.0.0.1:${port}\r\nConnection: keep-alive\r\n\r\n${json}`
  );
}

/** fetch's request as it goes on the wire (Node 24, undici 7): its headers, in its order. */
function fetchBytes(port: number, json: string): string {
  return (
    `POST /v1/calls HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\nconnection: keep-alive\r\nauthorization: ${HEADERS.authorization}\r\n` +
    `content-type: application/json\r\naccept: */*\r\naccept-language: *\r\nsec-fetch-mode: cors\r\nuser-agent: node\r\n` +
    `accept-encoding: gzip, deflate\r\ncontent-length: ${Buffer.byteLength(json)}\r\n\r\n${json}`
  );
}

const sleeper = new Int32Array(new SharedArrayBuffer(4));
/** Sleeps the caller's thread (not a spin: its core is free for others, as a caller's own work leaves the server's). */
const sleepUs = (us: number) => us > 0 && Atomics.wait(sleeper, 0, 0, us / 1000);

type Side = { name: string; open: () => Promise<{ one: (i: number) => Promise<void>; close: () => void }> };

function sides(port: number): Side[] {
  const url = `http://127.0.0.1:${port}/v1/calls`;
  const raw = (gapUs: number, like: 'fetch' | 'node:http' = 'fetch'): Side => ({
    name: like === 'fetch' ? `raw fetch bytes, 2 connections, ${gapUs} µs gap` : `raw node:http bytes, 1 connection, ${gapUs} µs gap`,
    open: async () => {
      const conns = like === 'fetch' ? [rawConnection(port), rawConnection(port)] : [rawConnection(port)];
      await Promise.all(conns.map((c) => c.ready));
      const bytes = like === 'fetch' ? fetchBytes : httpBytes;
      return {
        one: async (i) => {
          await conns[i % conns.length]!.send(bytes(port, body(i)));
          sleepUs(gapUs);
        },
        close: () => {
          for (const c of conns) c.close();
        },
      };
    },
  });
  return [
    {
      name: 'fetch',
      open: async () => ({
        one: async (i) => {
          const res = await fetch(url, { method: 'POST', headers: HEADERS, body: body(i) });
          await res.text();
        },
        close: () => {},
      }),
    },
    {
      name: 'node:http',
      open: async () => {
        const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
        return {
          one: (i) =>
            new Promise<void>((resolve, reject) => {
              const json = body(i);
              const req = http.request(url, { method: 'POST', agent, headers: { ...HEADERS, 'content-length': Buffer.byteLength(json) } }, (res) => {
                res.resume();
                res.on('end', resolve);
              });
              req.on('error', reject);
              req.end(json);
            }),
          close: () => agent.destroy(),
        };
      },
    },
    raw(0),
    raw(0, 'node:http'),
    raw(300),
    raw(300, 'node:http'),
    raw(1000),
  ];
}

async function main() {
  const child = fork(SELF, ['serve'], { execArgv: ['--import', 'tsx'] });
  try {
    const { port } = await new Promise<{ port: number }>((resolve) => child.once('message', (m) => resolve(m as { port: number })));
    const pid = child.pid!;
    const all = sides(port);
    const cpu = new Map<string, number[]>(all.map((s) => [s.name, []]));
    const p50 = new Map<string, number[]>(all.map((s) => [s.name, []]));
    const run = async (side: Side, n: number, keep: boolean) => {
      const { one, close } = await side.open();
      const latencies: number[] = [];
      const before = runNs(pid);
      for (let i = 0; i < n; i++) {
        const t = performance.now();
        await one(i);
        latencies.push(performance.now() - t);
      }
      const used = (runNs(pid) - before) / 1000 / n;
      close();
      if (!keep) return;
      cpu.get(side.name)!.push(used);
      p50.get(side.name)!.push(
        quantile(
          latencies.sort((a, b) => a - b),
          0.5,
        ),
      );
    };
    for (const side of all) await run(side, Math.min(1000, CALLS), false);
    // Alternated, in both orders, so a slow spell of the shared machine falls on every side.
    for (let r = 0; r < ROUNDS; r++) for (const side of r % 2 ? [...all].reverse() : all) await run(side, CALLS, true);
    const median = (xs: number[]) =>
      quantile(
        [...xs].sort((a, b) => a - b),
        0.5,
      );
    const rows = all.map((s) => ({
      side: s.name,
      serverUsPerCall: round(median(cpu.get(s.name)!)),
      rounds: cpu.get(s.name)!.map((x) => Math.round(x)),
      p50Ms: round(median(p50.get(s.name)!)),
    }));
    console.log(JSON.stringify({ calls: CALLS, rounds: ROUNDS, sides: rows }));
    for (const r of rows) console.log(`${r.side.padEnd(40)} server ${r.serverUsPerCall} µs a call (rounds ${r.rounds.join(', ')}), p50 ${r.p50Ms} ms`);
  } finally {
    await new Promise((resolve) => {
      child.once('exit', resolve);
      child.send('stop');
    });
  }
}

if (process.argv[2] === 'serve') await serve();
else await main();
