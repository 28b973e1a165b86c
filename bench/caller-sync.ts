// `node --import tsx bench/caller-sync.ts <a/src/calls/client.ts> [b/src/calls/client.ts]`: the
// caller's part of a call before its admission script is sent (issue 31), two builds of the
// client library side by side in this process, rounds alternating A B B A …. Each sequential
// call (wait: false, no worker: it answers queued) is timed from `call()` to the moment the
// client hands the admission-and-add script to ioredis (its budget's `admitCall`, wrapped):
// the checks of cached state and the awaits between them, all this side of Redis. Medians of
// the per-call times, and of each round's CPU per whole call. Its own prefix per side, its
// keys deleted at the end. ROUNDS (default 8), CALLS (default 2000).
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { connectRedis } from '../src/redis/connection.ts';
import { keysFor } from '../src/redis/keys.ts';
import { publishShardCount } from '../src/redis/service-shard-count.ts';
import type { AgentDbClient } from '../src/calls/client.ts';
import { median } from './stats.ts';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const ROUNDS = Number(process.env.ROUNDS ?? 8);
const CALLS = Number(process.env.CALLS ?? 2000);
const modules = [process.argv[2], process.argv[3] ?? fileURLToPath(new URL('../src/calls/client.ts', import.meta.url))].map((m) => {
  if (!m) throw new Error('usage: caller-sync.ts <a/src/calls/client.ts> [b/src/calls/client.ts]');
  return path.resolve(m);
});

interface Side {
  name: string;
  prefix: string;
  client: AgentDbClient;
  /** Set by the wrapped admitCall: when the script was handed over. */
  sentAt: number;
  syncUs: number[];
  cpuUs: number[];
}

const admin = connectRedis(REDIS_URL);
const sides: Side[] = [];
const input = { workspace: 'acme', agent: 'sync', settings: { database: 'agent' as const }, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1' } };
const opts = { wait: false, timeoutMs: 1 };
try {
  for (const [i, mod] of modules.entries()) {
    const prefix = `csync-${i === 0 ? 'A' : 'B'}-${randomUUID().slice(0, 8)}`;
    await publishShardCount(admin, keysFor(prefix), 16);
    const { AgentDbClient: Client } = (await import(mod)) as { AgentDbClient: typeof AgentDbClient };
    const client = new Client({ redisUrl: REDIS_URL, prefix, shardCount: 16, rateLimits: false, redisBytesPerWorkspace: 2 ** 40 });
    const side: Side = { name: i === 0 ? 'A' : 'B', prefix, client, sentAt: 0, syncUs: [], cpuUs: [] };
    // The same instance both builds wire into their enqueue (client.ts: `budget`).
    const budget = (client as unknown as { budget: { admitCall: (...a: unknown[]) => Promise<unknown> } }).budget;
    const admit = budget.admitCall.bind(budget);
    budget.admitCall = (...a: unknown[]) => {
      side.sentAt = performance.now();
      return admit(...a);
    };
    for (let w = 0; w < 300; w++) await client.call(input, opts);
    sides.push(side);
  }
  for (let r = 0; r < ROUNDS; r++) {
    for (const side of r % 2 === 0 ? sides : [...sides].reverse()) {
      const times: number[] = [];
      const cpu = process.cpuUsage();
      for (let c = 0; c < CALLS; c++) {
        const t0 = performance.now();
        await side.client.call(input, opts);
        times.push((side.sentAt - t0) * 1000);
      }
      const u = process.cpuUsage(cpu);
      side.cpuUs.push((u.user + u.system) / CALLS);
      side.syncUs.push(median(times));
    }
  }
  for (const s of sides) {
    console.log(
      `${s.name} ${modules[s.name === 'A' ? 0 : 1]}: call() to script handed over, median of round medians ${median(s.syncUs).toFixed(1)} µs ` +
        `(rounds ${s.syncUs.map((x) => x.toFixed(1)).join(' ')}); CPU per whole call ${median(s.cpuUs).toFixed(1)} µs`,
    );
  }
} finally {
  for (const s of sides) {
    await s.client.close();
    let cursor = '0';
    do {
      const [next, found] = await admin.scan(cursor, 'MATCH', `*${s.prefix}*`, 'COUNT', 1000);
      cursor = next;
      if (found.length) await admin.del(...found);
    } while (cursor !== '0');
  }
  admin.disconnect();
}
