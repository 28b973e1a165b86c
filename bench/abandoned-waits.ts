// Redis commands/s before, during and after many abandoned `GET /v1/calls/<id>?wait=true` on one
// parked call (issue 27 part 4): each used to leave a look at the job every 30 s behind it, for
// as long as the approval could wait (48 → 2,715 commands/s after 20,000, still 2,763 three
// minutes later). The goal: back to idle within seconds.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { keysFor } from '../src/redis/keys.ts';
import { AgentKeyRing } from '../src/registry/agent-keys.ts';
import { AgentRegistry } from '../src/registry/agents.ts';
import { WorkspaceRegistry } from '../src/registry/workspaces.ts';
import { OwnRedis } from '../test/helpers/own-redis.ts';
import { startProcess, stopProcess } from './process.ts';
import { round } from './stats.ts';

const BIN = fileURLToPath(new URL('../dist/bin/agentdb.js', import.meta.url));

/** What the scenario reports: Redis commands per second in each phase, and when it was idle again. */
export interface AbandonedWaits {
  waits: number;
  abortAfterMs: number;
  inFlight: number;
  idleCommandsPerSec: number;
  duringCommandsPerSec: number;
  /** Commands/s in each second after the last wait was aborted. */
  afterCommandsPerSec: number[];
  /** Their mean: the level Redis settled at. */
  afterMeanCommandsPerSec: number;
  /** Seconds after the last abort until a second's commands were within 2× idle (+ 20); undefined: never in the window. */
  backToIdleAfterS: number | undefined;
  goal: string;
}

/**
 * Runs `agentdb start` (HTTP and workers in one process, as deployed) against a Redis of its own,
 * so that every command counted is agentdb's; parks one write; then opens `waits` long-polls on
 * it, `inFlight` at a time, each aborted after `abortAfterMs`, and samples INFO's command count
 * every second before, during and after.
 */
export async function benchAbandonedWaits(opts: {
  waits: number;
  abortAfterMs: number;
  inFlight: number;
  idleSeconds: number;
  afterSeconds: number;
}): Promise<AbandonedWaits> {
  const redisServer = await OwnRedis.start();
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'agentdb-bench-waits-'));
  const prefix = 'bench-waits';
  const redis = new Redis(redisServer.url);
  const keys = keysFor(prefix);
  await new WorkspaceRegistry(redis, keys).put('acme', 'pro');
  const agents = new AgentRegistry(redis, keys);
  await agents.put('acme', 'careful', { displayName: 'Careful', settings: { database: 'agent', approval: 'write' } });
  const { key } = await new AgentKeyRing(redis, keys, agents).mint('acme', 'careful');
  const env = {
    REDIS_URL: redisServer.url,
    AGENTDB_PREFIX: prefix,
    AGENTDB_DATA_DIR: dataDir,
    LOG_LEVEL: 'warn',
    PORT: '0',
    HOST: '127.0.0.1',
    // Longer than the whole scenario: only the callers going away ends their waits.
    HTTP_WAIT_MS: '600000',
  };
  const { child, output } = await startProcess(process.execPath, [BIN, 'start'], { ...env, LOG_LEVEL: 'info' }, /"msg":"agentdb ready"/);
  const url = /"address":"([^"]+)"/.exec(output)?.[1];
  try {
    if (!url) throw new Error(`bench waits: no address in agentdb start's output: ${output}`);
    const auth = { authorization: `Bearer ${key}` };
    const parked = await fetch(new URL('/v1/calls?wait=false', url), {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE gated (x)' }, callId: 'parked-1' }),
    });
    const answer = (await parked.json()) as { status?: string };
    if (answer.status !== 'awaiting_approval') throw new Error(`bench waits: the write did not park: ${JSON.stringify(answer)}`);

    const sampler = new CommandRate(redis);
    await sampler.start();
    const idle = await sampler.over(opts.idleSeconds);

    const duringStart = await sampler.mark();
    let next = 0;
    const one = async () => {
      const ac = new AbortController();
      const timer = setTimeout(() => ac.abort(), opts.abortAfterMs);
      try {
        await fetch(new URL('/v1/calls/parked-1?wait=true', url), { headers: auth, signal: ac.signal });
      } catch {
        // aborted, as meant
      } finally {
        clearTimeout(timer);
      }
    };
    await Promise.all(
      Array.from({ length: opts.inFlight }, async () => {
        while (next < opts.waits) {
          next++;
          await one();
        }
      }),
    );
    const during = await sampler.since(duringStart);

    const after: number[] = [];
    for (let s = 0; s < opts.afterSeconds; s++) after.push(await sampler.over(1));
    const limit = 2 * idle + 20;
    const back = after.findIndex((rate) => rate <= limit);
    return {
      waits: opts.waits,
      abortAfterMs: opts.abortAfterMs,
      inFlight: opts.inFlight,
      idleCommandsPerSec: round(idle),
      duringCommandsPerSec: round(during),
      afterCommandsPerSec: after.map((r) => round(r)),
      afterMeanCommandsPerSec: round(after.reduce((a, b) => a + b, 0) / after.length),
      backToIdleAfterS: back < 0 ? undefined : back + 1,
      goal: 'back to idle (within 2x idle + 20 commands/s) within seconds of the last abort',
    };
  } finally {
    await stopProcess(child);
    redis.disconnect();
    await redisServer.stop();
    rmSync(dataDir, { recursive: true, force: true });
    rmSync(redisServer.dir, { recursive: true, force: true });
  }
}

/** Redis's own count of commands processed (INFO stats), as a rate over a stretch of time. */
class CommandRate {
  constructor(private readonly redis: Redis) {}

  async start(): Promise<void> {
    await this.mark();
  }

  /** The count and the time now. */
  async mark(): Promise<{ commands: number; at: number }> {
    const info = await this.redis.info('stats');
    const commands = Number(/total_commands_processed:(\d+)/.exec(info)?.[1] ?? Number.NaN);
    return { commands, at: performance.now() };
  }

  /** Commands per second since `from` (the INFO asking counts itself: one a sample). */
  async since(from: { commands: number; at: number }): Promise<number> {
    const now = await this.mark();
    return (now.commands - from.commands - 1) / ((now.at - from.at) / 1000);
  }

  /** Commands per second over the next `seconds`. */
  async over(seconds: number): Promise<number> {
    const from = await this.mark();
    await new Promise((r) => setTimeout(r, seconds * 1000));
    return this.since(from);
  }
}

/** Prints the scenario's line. */
export function printAbandonedWaits(r: AbandonedWaits): void {
  console.log(
    `abandoned waits: ${r.waits} GET ?wait=true on one parked call, each aborted after ${r.abortAfterMs} ms (${r.inFlight} in flight): Redis ${r.idleCommandsPerSec} commands/s idle, ${r.duringCommandsPerSec} during, ${r.afterMeanCommandsPerSec} after (each second: ${r.afterCommandsPerSec.join(', ')}); back to idle ${r.backToIdleAfterS === undefined ? 'not within the window' : `after ${r.backToIdleAfterS} s`} (goal: within seconds)`,
  );
}
