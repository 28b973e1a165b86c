import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApprovalService } from '../../src/approvals/approval-service.ts';
import { buildApp } from '../../src/http/app.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { AgentRegistry } from '../../src/registry/agents.ts';
import { MemberRegistry } from '../../src/registry/members.ts';
import { HistoryClient } from '../../src/shards/history-client.ts';
import { ShardOpClient } from '../../src/shards/shard-op-client.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { OwnRedis } from '../helpers/own-redis.ts';
import { spawnCli, stop, type LiveCli } from '../helpers/processes.ts';

// The operator commands wait on a shard op's job. A tester killed Redis while `agentdb restore`,
// `backup now` and `history` waited on theirs: each stayed silent 40 s and more (over 300 s
// once), where a call answers UNAVAILABLE within a few seconds. No worker runs here, so each op
// stays queued, waiting, when Redis dies.
/** Reports the timers a CLI process ran after it answered (see the file). */
const TIMERS_AFTER_ANSWER = fileURLToPath(new URL('../helpers/timers-after-answer.mjs', import.meta.url));
let own: OwnRedis;
let sb: Sandbox;
const running: LiveCli[] = [];

beforeAll(async () => {
  own = await OwnRedis.start();
  sb = sandbox({ REDIS_URL: own.url });
});

afterAll(async () => {
  await Promise.all(running.map((c) => stop(c.child, 'SIGKILL')));
  await sb.cleanup();
  await own.remove();
});

/** How many shard ops are queued in the test's Redis. */
async function queuedOps(): Promise<number> {
  const r = new Redis(own.url, { maxRetriesPerRequest: 1 });
  r.on('error', () => undefined);
  try {
    return (await r.keys(`${sb.config.prefix}:*:op.*`)).filter((k) => !k.endsWith(':lock')).length;
  } finally {
    r.disconnect();
  }
}

describe('a Redis outage while an operator command waits on its shard op', () => {
  // Each also exits as soon as it has answered, on its own: they used to print at ~3 s and exit at
  // ~5 s, held by ioredis's 2 s grace before destroying a socket that Redis had already dropped
  // (src/redis/connection.ts). No clock is read: the process reports the timers that ran after
  // its answer, and each must have been a 0 ms one.
  it('restore, backup now and history answer UNAVAILABLE naming REDIS_URL and whether the op may still run, then exit', async () => {
    const commands = [
      ['restore', 'acme/writer', '--at', new Date().toISOString(), '--into', 'acme/w1'],
      ['backup', 'now', '--db', 'acme/writer'],
      ['history', 'acme/writer'],
    ];
    const before = await queuedOps();
    const clis = commands.map((args) => spawnCli(args, { ...sb.env, NODE_OPTIONS: `--import ${TIMERS_AFTER_ANSWER}` }));
    running.push(...clis);
    await expect.poll(queuedOps, { interval: 50, timeout: 15_000 }).toBe(before + 3);
    await own.kill();
    for (const [i, cli] of clis.entries()) {
      const done = await cli.exited;
      expect(done.code, commands[i]!.join(' ')).toBe(3);
      expect(JSON.parse(done.stdout)).toMatchObject({
        error: {
          code: 'UNAVAILABLE',
          message: expect.stringMatching(new RegExp(`Redis at ${own.url} does not answer.*had been handed to Redis: it may still run`)),
        },
      });
      expect(done.stderr).not.toMatch(/\n\s+at /);
      const report = /^timers-after-answer: (.*)$/m.exec(done.stderr);
      expect(report, done.stderr).not.toBeNull();
      const held = (JSON.parse(report![1]!) as { ms: number; at: string }[]).filter((t) => t.ms > 1);
      expect(held, commands[i]!.join(' ')).toEqual([]);
    }
  }, 30_000);

  it('GET /v1/databases/:db/history and POST …/restore answer 503 UNAVAILABLE the same way', async () => {
    await own.start();
    const redis = new Redis(own.url);
    redis.on('error', () => undefined);
    const keys = keysFor(sb.config.prefix);
    const members = new MemberRegistry(redis, keys);
    const approvals = new ApprovalService({ redis, prefix: sb.config.prefix, shardCount: sb.config.shardCount, members });
    const ops = new ShardOpClient({ redisUrl: own.url, prefix: sb.config.prefix });
    const app = buildApp({
      redis,
      shardCount: sb.config.shardCount,
      members,
      approvals,
      history: new HistoryClient(ops, sb.config.shardCount, new AgentRegistry(redis, keys)),
    });
    try {
      const { key } = await members.add('acme', 'ada', 'admin');
      const headers = { authorization: `Bearer ${key}` };
      const before = await queuedOps();
      const answers = Promise.all([
        app.inject({ method: 'GET', url: '/v1/databases/acme%2Fwriter/history', headers }),
        app.inject({ method: 'POST', url: '/v1/databases/acme%2Fwriter/restore', headers, payload: { at: new Date().toISOString(), into: 'acme/w2' } }),
      ]);
      await expect.poll(queuedOps, { interval: 50, timeout: 15_000 }).toBe(before + 2);
      await own.kill();
      for (const res of await answers) {
        expect(res.statusCode).toBe(503);
        expect(res.json()).toMatchObject({
          error: { code: 'UNAVAILABLE', message: expect.stringMatching(new RegExp(`Redis at ${own.url} does not answer.*may still run`)) },
        });
      }
    } finally {
      await app.close();
      await approvals.close();
      await ops.close();
      redis.disconnect();
    }
  }, 30_000);
});
