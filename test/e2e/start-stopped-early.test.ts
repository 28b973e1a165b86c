import fs from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { sandbox } from '../helpers/harness.ts';
import { childrenOf } from '../helpers/kill-in-statement.ts';
import { freePort } from '../helpers/own-redis.ts';
import { accepts, alive, type LiveCli, spawnCli } from '../helpers/processes.ts';

// Session 36, F15: `agentdb start` listened for SIGTERM only from "ready" (session 35 moved it
// just before that line). A stop during its start-up (a supervisor's, a deploy's) met the default
// action: the process ended at once, and the redis-server it had started, detached in a process
// group of its own, ran on. Now it listens from the first moment, and stops what it started.

const sb = sandbox();
const leftovers: number[] = [];
const apps: LiveCli[] = [];
afterAll(async () => {
  // A test that failed or timed out while waiting leaves its process running otherwise.
  for (const app of apps) if (app.child.exitCode === null && app.child.signalCode === null) app.child.kill('SIGKILL');
  for (const pid of leftovers) if (alive(pid)) process.kill(pid, 'SIGKILL');
  await sb.cleanup();
});

/** The redis-server among `pid`'s children, if it has started one yet. */
function redisChild(pid: number): number | undefined {
  try {
    return childrenOf(pid).find((c) => {
      try {
        return fs.readFileSync(`/proc/${c}/comm`, 'utf8').trim() === 'redis-server';
      } catch {
        return false;
      }
    });
  } catch {
    return undefined;
  }
}

/** Polls `check` until true (every 2 ms, at most 30 s); throws if `app` ends first. */
async function until(app: LiveCli, what: string, check: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!(await check())) {
    if (app.child.exitCode !== null || app.child.signalCode !== null) throw new Error(`agentdb start ended before ${what}: ${app.stderr()}`);
    if (Date.now() > deadline) throw new Error(`never ${what}: ${app.stderr()}`);
    await new Promise((r) => setTimeout(r, 2));
  }
}

const POINTS: { when: string; reached: (app: LiveCli, ports: { redis: number; http: number }) => Promise<void> }[] = [
  { when: 'as soon as its redis-server is a process', reached: (app) => until(app, 'a redis-server child', () => redisChild(app.child.pid!) !== undefined) },
  { when: 'as soon as its Redis answers', reached: (app, ports) => until(app, 'Redis answering', () => accepts(ports.redis)) },
  { when: 'on its "started a local redis-server" line', reached: (app) => app.stderrMatches(/started a local redis-server/) },
  { when: 'as soon as its HTTP port listens, before the workers are up', reached: (app, ports) => until(app, 'the HTTP port', () => accepts(ports.http)) },
];

describe('agentdb start stopped by SIGTERM during its start-up', () => {
  for (const point of POINTS) {
    it(`${point.when}: it stops, and so does the redis-server it started`, async () => {
      const ports = { redis: await freePort(), http: await freePort() };
      const app = spawnCli(['start'], { ...sb.env, REDIS_URL: `redis://127.0.0.1:${ports.redis}`, PORT: String(ports.http), LOG_LEVEL: 'info' });
      apps.push(app);
      let redisPid: number | undefined;
      try {
        await until(app, 'a redis-server child', () => (redisPid = redisChild(app.child.pid!)) !== undefined);
        leftovers.push(redisPid!);
        await point.reached(app, ports);
        app.child.kill('SIGTERM');
        const end = await app.exited;
        expect(end.code, end.stderr).toBe(0);
        expect(end.stderr).toMatch(/"signal":"SIGTERM".*"msg":"stopping"/);
        // Before "ready" (its HTTP port listening comes a moment before it, at most).
        if (!point.when.includes('HTTP')) expect(end.stderr).not.toContain('"msg":"agentdb ready"');
        // Main: still running, its parent gone.
        await expect.poll(() => alive(redisPid!), { timeout: 20_000 }).toBe(false);
      } finally {
        if (app.child.exitCode === null && app.child.signalCode === null) app.child.kill('SIGKILL');
      }
    }, 90_000);
  }
});
