import { spawn, type ChildProcess } from 'node:child_process';
import { Job, Queue } from 'bullmq';
import { afterEach, describe, expect, it } from 'vitest';
import type { Envelope } from '../../src/contracts/envelope.ts';
import { connectRedis } from '../../src/redis/connection.ts';
import { readExecutors } from '../../src/shards/executor-status-publisher.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { databaseId, shardOf } from '../../src/contracts/database-id.ts';
import type { ChildStatus } from '../../src/executor/executor-status.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { CLI, runCli, stop } from '../helpers/processes.ts';
import { callKey } from '../../src/contracts/call-identity.ts';

const FOREVER = 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT count(*) FROM c';
const settings = { database: 'agent' as const };

let sb: Sandbox | undefined;
const workers: ChildProcess[] = [];
afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => stop(w, 'SIGKILL')));
  await sb?.cleanup();
  sb = undefined;
});

/** `agentdb worker` with its log kept (JSON lines on stderr), once it says it is ready. */
function startWorker(env: Record<string, string>, logLevel = 'info'): Promise<{ log: () => string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...CLI, 'worker'], { env: { ...process.env, ...env, LOG_LEVEL: logLevel }, stdio: ['ignore', 'ignore', 'pipe'] });
    workers.push(child);
    let log = '';
    let ready = false;
    child.stderr.on('data', (d) => {
      log += d;
      if (!ready && /"msg":"worker ready"/.test(log)) {
        ready = true;
        resolve({ log: () => log });
      }
    });
    child.on('exit', (code) => {
      if (!ready) reject(new Error(`worker exited with ${code}: ${log}`));
    });
  });
}

const logLines = (log: string) =>
  log
    .split('\n')
    // The last piece may be a line still being written.
    .slice(0, -1)
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);

/** `count` agent databases `<prefix><i>/<agent>` on the same shard as `id`. */
function onShardOf(id: string, prefix: string, agent: string, count: number): { workspace: string; agent: string }[] {
  const want = shardOf(id, sb!.config.shardCount);
  const found = [];
  for (let i = 0; found.length < count; i++) {
    if (shardOf(databaseId(`${prefix}${i}`, agent), sb!.config.shardCount) === want) found.push({ workspace: `${prefix}${i}`, agent });
  }
  return found;
}

/** Every child of every worker, as the workers last published it. */
async function children(): Promise<ChildStatus[]> {
  const redis = connectRedis(sb!.config.redisUrl);
  try {
    return (await readExecutors(redis, keysFor(sb!.config.prefix))).flatMap((w) => w.pool.children);
  } finally {
    redis.disconnect();
  }
}

const poll = { interval: 50, timeout: 20_000 };

/** Records the order in which calls answer. */
function answers() {
  const order: string[] = [];
  return { order, track: (name: string, p: Promise<unknown>) => p.then((e) => (order.push(name), e as Envelope)) };
}

describe('a worker with a pool of executor children', () => {
  it("answers other databases on the same shard while one runs a long statement, and shows it in 'agentdb executors'", async () => {
    // A deadline far past what the test needs, on a loaded machine too (10 s was not enough
    // with a load average of 12 on 2 cores): the test ends the statement itself once it is done.
    sb = sandbox({ SHARD_COUNT: '2', EXECUTOR_POOL_SIZE: '4', STATEMENT_TIMEOUT_MS: '60000' });
    await startWorker(sb.env);
    const client = sb.client();
    const { order, track } = answers();
    const slow = track('a', client.call({ callId: 'slow-a', workspace: 'slow', agent: 'a', settings, tool: 'DATA_QUERY_SQL', arguments: { sql: FOREVER } }));
    // Waited for in the published status, then read once through the CLI: each `agentdb
    // executors` is a process start (~0.3 s of CPU), and a poll of it ran a dozen under load.
    await expect.poll(async () => (await children()).find((c) => c.callId === 'slow-a')?.state, poll).toBe('running');
    const listed = JSON.parse((await runCli(['executors', '--json'], sb.env)).stdout)[0]?.pool.children.find((c: ChildStatus) => c.callId === 'slow-a');
    expect(listed).toMatchObject({ state: 'running', database: 'slow/a', op: 'query', runningMs: expect.any(Number) });
    const table = await runCli(['executors'], sb.env);
    expect(table.stdout).toMatch(/running\tslow\/a\tslow-a\tquery\t\d+\.\d s/);

    const others = onShardOf('slow/a', 'quick', 'b', 4).map((who, i) =>
      track(`other${i}`, client.call({ ...who, settings, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT ? AS i', params: [i] } })),
    );
    expect((await Promise.all(others)).map((e) => e.ok)).toEqual([true, true, true, true]);
    // Still running after all of them: end it by killing its child, rather than wait out its deadline.
    const running = (await children()).find((c) => c.callId === 'slow-a');
    expect(running).toMatchObject({ state: 'running', pid: expect.any(Number) });
    process.kill(running!.pid!, 'SIGKILL');
    expect(await slow).toMatchObject({ ok: false, error: { code: 'UNAVAILABLE' } });
    expect(order.at(-1)).toBe('a');
  });

  it('leaves two of four children for everyone else while one workspace runs two slow statements', async () => {
    // The deadline is what w/c waits out; x and y, on the two free children, answer well within it.
    sb = sandbox({ EXECUTOR_POOL_SIZE: '4', STATEMENT_TIMEOUT_MS: '3000' });
    await startWorker(sb.env);
    const client = sb.client();
    const { order, track } = answers();
    const slowSent = Date.now();
    const slowA = track('w/a', client.call({ workspace: 'w', agent: 'a', settings, tool: 'DATA_QUERY_SQL', arguments: { sql: FOREVER } }));
    const slowB = track('w/b', client.call({ workspace: 'w', agent: 'b', settings, tool: 'DATA_QUERY_SQL', arguments: { sql: FOREVER } }));
    await expect.poll(async () => (await children()).filter((c) => c.database === 'w/a' || c.database === 'w/b').length, poll).toBe(2);
    let thirdAt = 0;
    const third = track(
      'w/c',
      client.call({ workspace: 'w', agent: 'c', settings, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 3' } }).then((e) => {
        thirdAt = Date.now();
        return e;
      }),
    );
    const x = track('x', client.call({ workspace: 'x', agent: 'a', settings, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1' } }));
    const y = track('y', client.call({ workspace: 'y', agent: 'a', settings, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (v)' } }));
    expect([(await x).ok, (await y).ok]).toEqual([true, true]);
    expect((await children()).filter((c) => c.database?.startsWith('w/')).length).toBe(2);
    expect([await slowA, await slowB]).toMatchObject([{ error: { code: 'STATEMENT_TIMEOUT' } }, { error: { code: 'STATEMENT_TIMEOUT' } }]);
    expect(await third).toMatchObject({ ok: true, result: { rows: [[3]] } });
    expect(order.slice(0, 2).sort()).toEqual(['x', 'y']);
    // w/c runs only once a slow statement of its workspace has passed its deadline, 3 s after it
    // began (after it was sent). Not the order of answers: a failure is answered once BullMQ has
    // stored it, and w/c's ok may come first.
    expect(thirdAt - slowSent).toBeGreaterThanOrEqual(2900);
  });

  it('loses no call and runs none twice when a child is killed under load on 20 databases', async () => {
    sb = sandbox({ EXECUTOR_POOL_SIZE: '2', EXECUTOR_WORKSPACE_SHARE: '2' });
    const worker = await startWorker(sb.env);
    const client = sb.client();
    // 240 calls: enough that the kill lands mid-load (checked below), as 500 did in twice the time.
    const PER_DB = 12;
    const dbs = Array.from({ length: 20 }, (_, i) => ({ workspace: `load${i}`, agent: 'a', settings }));
    const made = await Promise.all(dbs.map((who) => client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (v TEXT)' } })));
    expect(made.every((e) => e.ok)).toBe(true);
    const [first] = await children();
    const pid = first!.pid!;
    let answered = 0;
    // A few milliseconds of work each, so the load lasts while the child is killed.
    const sql = 'INSERT INTO t SELECT ? FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 20000) SELECT count(*) FROM c)';
    const calls = dbs.flatMap((who, d) =>
      Array.from({ length: PER_DB }, (_, i) => {
        const callId = `k-${d}-${i}`;
        return client
          .call({ ...who, callId, tool: 'DATA_WRITE_SQL', arguments: { sql, params: [callId] } })
          .then((e) => (answered++, { callId, d, e: e as Envelope }));
      }),
    );
    await expect.poll(() => answered, { interval: 2, timeout: 30_000 }).toBeGreaterThan(20);
    expect(answered).toBeLessThan(calls.length / 2);
    process.kill(pid, 'SIGKILL');
    const outcomes = await Promise.all(calls);

    const failed = outcomes.filter((o) => !o.e.ok);
    expect(failed.length).toBeLessThanOrEqual(1);
    for (const f of failed) expect(f.e).toMatchObject({ error: { code: 'UNAVAILABLE' } });
    for (let d = 0; d < dbs.length; d++) {
      const rows = await client.call({ ...dbs[d]!, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT v, count(*) FROM t GROUP BY v', max_rows: 1000 } });
      const counts = new Map((rows as unknown as { result: { rows: [string, number][] } }).result.rows.map(([v, n]) => [v, n]));
      for (const o of outcomes.filter((x) => x.d === d)) {
        if (o.e.ok) expect(counts.get(o.callId), o.callId).toBe(1);
        // A write whose child died answers from its record: failed means not committed.
        else expect(counts.get(o.callId) ?? 0, o.callId).toBe(0);
      }
      expect([...counts.values()].every((n) => n === 1)).toBe(true);
      expect(counts.size).toBeLessThanOrEqual(PER_DB);
    }
    // The worker says which child died, and replaces it.
    await expect.poll(() => logLines(worker.log()).some((l) => l.msg === 'executor child respawned'), poll).toBe(true);
    // A send to the dead child can fail before its exit is seen: then the worker says so when
    // it replaces it (and hands what it sent to another child), not that it died.
    const deathMsgs = ['executor child died during a statement', 'executor child exited', 'replacing executor child'];
    const death = logLines(worker.log()).find((l) => l.childPid === pid && deathMsgs.includes(l.msg as string));
    expect(death).toMatchObject({ childPid: pid, child: expect.any(Number) });
    if (failed[0]) expect(death).toMatchObject({ callId: failed[0].callId, database: `load${failed[0].d}/a` });
  });

  it('commits 32 concurrent writes to one database in the order the executor received them', async () => {
    sb = sandbox({ EXECUTOR_POOL_SIZE: '4', EXECUTOR_WORKSPACE_SHARE: '4' });
    const worker = await startWorker(sb.env, 'trace');
    const client = sb.client();
    const who = { workspace: 'ord', agent: 'a', settings };
    expect(await client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (c TEXT)' } })).toMatchObject({ ok: true });
    // Other databases keep children busy, so the line is free to move between them.
    const noise = Array.from({ length: 64 }, (_, i) =>
      client.call({
        workspace: 'noise',
        agent: `n${i % 8}`,
        settings,
        tool: 'DATA_QUERY_SQL',
        arguments: { sql: 'SELECT count(*) FROM (SELECT 1 UNION ALL SELECT 2)' },
      }),
    );
    const writes = Array.from({ length: 32 }, (_, i) =>
      client.call({ ...who, callId: `ord-${i}`, tool: 'DATA_WRITE_SQL', arguments: { sql: 'INSERT INTO t VALUES (?)', params: [`ord-${i}`] } }),
    );
    expect((await Promise.all([...writes, ...noise])).every((e) => e.ok)).toBe(true);
    const committed = await client.call({ ...who, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT c FROM t ORDER BY rowid', max_rows: 100 } });
    const commitOrder = (committed as unknown as { result: { rows: [string][] } }).result.rows.map(([c]) => c);
    await expect
      .poll(() => logLines(worker.log()).filter((l) => l.msg === 'statement received' && l.database === 'ord/a' && l.op === 'write').length, poll)
      .toBe(33);
    const received = logLines(worker.log())
      .filter((l) => l.msg === 'statement received' && l.database === 'ord/a' && l.op === 'write' && String(l.callId).startsWith('ord-'))
      .map((l) => l.callId);
    expect(commitOrder).toHaveLength(32);
    expect(commitOrder).toEqual(received);
  });

  it("answers a quiet workspace's read at the next free child while five other workspaces keep runaway statements going", async () => {
    // Five: oldest-first would answer the read after the three waiting ahead of it, past the
    // bound below; each more costs a round of kills and child starts.
    const RUNAWAYS = 5;
    sb = sandbox({ SHARD_COUNT: '1', EXECUTOR_POOL_SIZE: '2', STATEMENT_TIMEOUT_MS: '1000' });
    const worker = await startWorker(sb.env);
    const client = sb.client();
    const quiet = { workspace: 'quiet', agent: 'a', settings };
    expect(await client.call({ ...quiet, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (v)' } })).toMatchObject({ ok: true });
    // Each workspace keeps one runaway in flight, back to back, until the test ends.
    let stopping = false;
    const seen = new Set<string>();
    const runaway = async (workspace: string) => {
      while (!stopping) {
        const e = await client.call({ workspace, agent: 'a', settings, tool: 'DATA_QUERY_SQL', arguments: { sql: FOREVER } }).catch(() => undefined);
        if (stopping || !e) return;
        expect(e).toMatchObject({ ok: false, error: { code: 'STATEMENT_TIMEOUT' } });
        seen.add(workspace);
      }
    };
    const loops = Array.from({ length: RUNAWAYS }, (_, i) => runaway(`runaway${i}`));
    try {
      // Every runaway workspace has had its turn, so every one has a statement queued or running.
      await expect.poll(() => seen.size, { interval: 50, timeout: 60_000 }).toBe(RUNAWAYS);
      const sentAt = Date.now();
      const read = await client.call({ ...quiet, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT count(*) FROM t' } });
      const answeredAt = Date.now();
      expect(read).toMatchObject({ ok: true, result: { rows: [[0]] } });
      // The runaways the worker killed while the read waited, by the time it logged each kill. Not
      // their answers: a failure is answered once BullMQ has stored it, so a runaway killed just
      // before the read was sent could be answered after it, and counted as one it waited for.
      const kills = () =>
        logLines(worker.log())
          .filter((l) => l.msg === 'statement timed out; killing its executor child' && String(l.database).startsWith('runaway'))
          .map((l) => l.time as number);
      // The runaways were still coming: one is killed after the read (and every kill before it is logged).
      await expect.poll(() => kills().some((at) => at > answeredAt), poll).toBe(true);
      // Oldest-first served it after the RUNAWAYS - 2 waiting ahead of it; fair share at the next
      // free child (two children, so at most both runaways that held them).
      expect(kills().filter((at) => at >= sentAt && at <= answeredAt).length).toBeLessThanOrEqual(2);
    } finally {
      stopping = true;
    }
    await Promise.all(loops);
    // Each kill replaces a child (a process start): on a loaded 2-core machine this takes a while.
  }, 150_000);

  it('puts an agent past AGENT_SHARD_CONCURRENCY back in the queue; all its calls complete, and another agent is served meanwhile', async () => {
    sb = sandbox({
      SHARD_COUNT: '2',
      WORKER_CONCURRENCY: '4',
      AGENT_SHARD_CONCURRENCY: '2',
      EXECUTOR_POOL_SIZE: '2',
      EXECUTOR_WORKSPACE_SHARE: '2',
      STATEMENT_TIMEOUT_MS: '2500',
    });
    await startWorker(sb.env);
    const client = sb.client();
    const shard = shardOf('acme/greedy', sb.config.shardCount);
    const queue = new Queue(keysFor(sb.config.prefix).queueName(shard), {
      connection: { url: sb.config.redisUrl },
      prefix: keysFor(sb.config.prefix).bullPrefix,
    });
    try {
      const { order, track } = answers();
      // Each runs until its deadline: the agent's calls take at least 2.5 s each, one at a time.
      const greedy = Array.from({ length: 5 }, (_, i) =>
        track(
          `g${i}`,
          client.call({ callId: `greedy-${i}`, workspace: 'acme', agent: 'greedy', settings, tool: 'DATA_QUERY_SQL', arguments: { sql: FOREVER } }),
        ),
      );
      await expect.poll(() => queue.getDelayedCount(), poll).toBeGreaterThan(0);
      const [other] = onShardOf('acme/greedy', 'team', 'polite', 1);
      const served = await track('polite', client.call({ ...other!, settings, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 42' } }));
      expect(served).toMatchObject({ ok: true, result: { rows: [[42]] } });
      const done = await Promise.all(greedy);
      expect(done.every((e) => !e.ok && e.error.code === 'STATEMENT_TIMEOUT')).toBe(true);
      expect(order[0]).toBe('polite');
      // Put back many times, more than its attempts, and never failed for it.
      // The caller hears of a result just before BullMQ records the job's completion.
      for (let i = 0; i < greedy.length; i++) await expect.poll(() => queue.getJobState(callKey('acme', 'greedy', `greedy-${i}`)), poll).toBe('completed');
      const jobs = await Promise.all(greedy.map((_, i) => Job.fromId(queue, callKey('acme', 'greedy', `greedy-${i}`))));
      // One attempt each (the one that completed it), none for the times it was put back.
      for (const job of jobs) expect(job!.attemptsMade).toBe(1);
      expect(Math.max(...jobs.map((j) => j!.attemptsStarted))).toBeGreaterThan(jobs[0]!.opts.attempts!);
    } finally {
      await queue.close();
    }
  });
});
