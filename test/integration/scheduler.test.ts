import fs from 'node:fs';
import path from 'node:path';
import { Queue, Worker } from 'bullmq';
import { afterEach, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { ApprovalStore } from '../../src/approvals/approval-store.ts';
import { connectRedis } from '../../src/redis/connection.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { Scheduler } from '../../src/schedule/scheduler.ts';
import { readUsage } from '../../src/calls/usage.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';

let sb: Sandbox;
afterEach(() => sb.cleanup());
const DAY = 24 * 3600 * 1000;

describe('the scheduler', () => {
  it('registers the nightly prune on its cron and time zone', async () => {
    sb = sandbox({ MAINTENANCE_CRON: '30 4 * * *', SCHEDULE_TZ: 'Europe/Paris' });
    const s = new Scheduler(sb.config, pino({ level: 'silent' }));
    await s.start();
    const next = new Date((await s.nextRun())!);
    expect(new Intl.DateTimeFormat('en-GB', { timeZone: 'Europe/Paris', hour: '2-digit', minute: '2-digit' }).format(next)).toBe('04:30');
    expect(next.getTime()).toBeGreaterThan(Date.now());
    await s.stop();
  });

  it('registers the nightly backup on BACKUP_CRON and BACKUP_TZ', async () => {
    sb = sandbox({ BACKUP_CRON: '15 1 * * *', BACKUP_TZ: 'America/New_York' });
    const s = new Scheduler(sb.config, pino({ level: 'silent' }));
    await s.start();
    const next = new Date((await s.nextBackup())!);
    expect(new Intl.DateTimeFormat('en-GB', { timeZone: 'America/New_York', hour: '2-digit', minute: '2-digit' }).format(next)).toBe('01:15');
    await s.stop();
  });

  it('removes finished jobs past RESULT_TTL_HOURS on a shard where no other job finishes', async () => {
    // Hostile review of issue 27: BullMQ removes a finished job by age only when another job of
    // its queue finishes, so a quiet shard kept a workspace's envelopes after its budget let them go.
    sb = sandbox();
    const redis = connectRedis(sb.config.redisUrl);
    const keys = keysFor(sb.config.prefix);
    const name = keys.queueName(sb.config.shardCount - 1);
    const queue = new Queue(name, { connection: redis, prefix: keys.bullPrefix });
    const worker = new Worker(name, async () => 'x'.repeat(1000), {
      connection: connectRedis(sb.config.redisUrl, { blocking: true }),
      prefix: keys.bullPrefix,
    });
    const done = new Promise<void>((resolve) => {
      let n = 0;
      worker.on('completed', () => ++n === 3 && resolve());
    });
    await queue.addBulk([1, 2, 3].map((i) => ({ name: 'c', data: { i } })));
    await done;
    await worker.close();
    const s = new Scheduler(sb.config, pino({ level: 'silent' }));
    // Within RESULT_TTL_HOURS they stay; a minute past it they go.
    expect((await s.prune(Date.now())).jobs).toBe(0);
    expect(await queue.getCompletedCount()).toBe(3);
    expect((await s.prune(Date.now() + sb.config.resultTtlS * 1000 + 60_000)).jobs).toBe(3);
    expect(await queue.getCompletedCount()).toBe(0);
    await s.stop();
    await queue.close();
    redis.disconnect();
  });

  it('trims finished calls and their completed events every RESULT_TRIM_EVERY_S, on a quiet shard too', async () => {
    // BullMQ's `completed` event carries the envelope beside the job, and its stream is trimmed
    // by count only: on a quiet shard it outlived the workspace budget's count of it.
    sb = sandbox({ RESULT_TRIM_EVERY_S: '120' });
    const redis = connectRedis(sb.config.redisUrl);
    const keys = keysFor(sb.config.prefix);
    const name = keys.queueName(0);
    const queue = new Queue(name, { connection: redis, prefix: keys.bullPrefix });
    const envelope = 'e'.repeat(5000);
    const worker = new Worker(name, async () => envelope, { connection: connectRedis(sb.config.redisUrl, { blocking: true }), prefix: keys.bullPrefix });
    const done = new Promise<void>((resolve) => worker.on('completed', () => resolve()));
    await queue.add('c', {});
    await done;
    await worker.close();
    const carrying = async () => (await redis.xrange(queue.keys.events!, '-', '+')).filter(([, fields]) => fields.join(' ').includes(envelope)).length;
    expect(await carrying()).toBe(1);
    const s = new Scheduler(sb.config, pino({ level: 'silent' }));
    await s.start();
    const scheduler = new Queue('{maintenance}', { connection: redis, prefix: keys.bullPrefix });
    expect(await scheduler.getJobScheduler('results-trim')).toMatchObject({ every: 120_000 });
    await scheduler.close();
    expect(await s.trimResults(Date.now())).toBe(0);
    expect(await carrying()).toBe(1);
    expect(await s.trimResults(Date.now() + sb.config.resultTtlS * 1000 + 60_000)).toBe(1);
    expect(await carrying()).toBe(0);
    await s.stop();
    await queue.close();
    redis.disconnect();
  });

  it('drops kept as_of moments past AS_OF_KEEP_MINUTES every minute, without a read of the past', async () => {
    sb = sandbox({ AS_OF_KEEP_MINUTES: '30' });
    const s = new Scheduler(sb.config, pino({ level: 'silent' }));
    await s.start();
    const redis = connectRedis(sb.config.redisUrl);
    const scheduler = new Queue('{maintenance}', { connection: redis, prefix: keysFor(sb.config.prefix).bullPrefix });
    expect(await scheduler.getJobScheduler('as-of-sweep')).toMatchObject({ every: 60_000 });
    await scheduler.close();
    redis.disconnect();
    const dir = path.join(sb.dataDir, 'as-of', 'acme', 'scout');
    fs.mkdirSync(dir, { recursive: true });
    const stale = path.join(dir, 'old.sqlite');
    const fresh = path.join(dir, 'new.sqlite');
    fs.writeFileSync(stale, 'x');
    fs.writeFileSync(fresh, 'x');
    // A moment's file's modification time is its last use: 31 and 20 minutes ago.
    const used = (minutes: number) => new Date(Date.now() - minutes * 60_000);
    fs.utimesSync(stale, used(31), used(31));
    fs.utimesSync(fresh, used(20), used(20));
    expect(s.sweepAsOf()).toBe(1);
    expect(fs.existsSync(stale)).toBe(false);
    expect(fs.existsSync(fresh)).toBe(true);
    await s.stop();
  });

  it('prunes usage days and finished approvals past retention, never a pending approval', async () => {
    sb = sandbox({ USAGE_RETENTION_DAYS: '10', APPROVAL_RETENTION_DAYS: '5' });
    const redis = connectRedis(sb.config.redisUrl);
    const keys = keysFor(sb.config.prefix);
    const now = Date.now();
    const day = (ago: number) => new Date(now - ago * DAY).toISOString().slice(0, 10);
    for (const ago of [0, 9, 11, 40]) {
      await redis.hincrby(keys.usage('acme', day(ago)), 'scout|DATA_QUERY_SQL|credits', 1);
      await redis.sadd(keys.usageIndex, `acme|${day(ago)}`);
    }
    const store = new ApprovalStore(redis, keys);
    const make = (id: string, ago: number) =>
      store.create({
        id,
        callId: id.slice(3),
        callKey: `acme.a.${id.slice(3)}`,
        digest: 'd',
        shard: 0,
        workspace: 'acme',
        agent: 'a',
        tool: 'DATA_WRITE_SQL',
        tier: 'write',
        database: 'acme/a',
        shared: false,
        sql: 'x',
        requester: 'a',
        createdAt: now - ago * DAY,
        expiresAt: now + DAY,
      });
    await make('ap_old-done', 7);
    await make('ap_old-pending', 7);
    await make('ap_new-done', 1);
    await redis.hset(keys.approval('ap_old-done'), 'state', 'rejected');
    await redis.hset(keys.approval('ap_new-done'), 'state', 'approved');

    const s = new Scheduler(sb.config, pino({ level: 'silent' }));
    expect(await s.prune(now)).toEqual({ usageDays: 2, approvals: 1, jobs: 0, results: 0, backups: 0 });
    expect((await readUsage(redis, keys, 'acme')).map((r) => r.day)).toEqual([day(9), day(0)]);
    expect(await store.get('ap_old-done')).toBeUndefined();
    expect(await store.get('ap_old-pending')).toMatchObject({ state: 'pending' });
    expect((await store.pages.list({ state: 'pending' })).map((a) => a.id)).toEqual(['ap_old-pending']);
    expect((await store.pages.list({ state: 'all' })).map((a) => a.id)).toEqual(['ap_new-done']);
    await s.stop();
    redis.disconnect();
  });
});
