// An `agentdb worker` process of a benchmark's own (its prefix, its data folder, its settings).
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { loadConfig, type Config } from '../src/config.ts';
import { AgentDbClient } from '../src/calls/client.ts';
import { deleteKeys } from '../test/helpers/harness.ts';
import { childPids } from './cpu.ts';
import type { CallingClient } from './pk-read.ts';
import { startProcess } from './process.ts';

const BIN = fileURLToPath(new URL('../dist/bin/agentdb.js', import.meta.url));

/** A private corner of Redis and a data folder, shared by the workers started in it one after another. */
export interface BenchSite {
  config: Config;
  env: Record<string, string>;
  client: AgentDbClient;
  /** Starts `agentdb worker` with extra settings (from another build's `bin/agentdb.js` when given); resolves once it is ready. */
  worker(settings?: Record<string, string>, bin?: string): Promise<{ pid: number; stop(signal?: NodeJS.Signals): Promise<void> }>;
  close(): Promise<void>;
}

/**
 * CALLER_BASE: another build's `dist/src/index.js`, whose `AgentDbClient` calls the same site
 * beside this checkout's (an A/B of the caller; the worker is the same for both). Undefined
 * when unset. Closed by the caller of this. `setting` names another variable holding such a path
 * (CALLER_THIS: a build of this checkout, so that both sides run built code alike: run by tsx,
 * this checkout's caller spent ~20% more CPU a call at 64 in flight than the same code built).
 */
export async function baseCaller(site: BenchSite, setting = 'CALLER_BASE'): Promise<(CallingClient & { close(): Promise<void> }) | undefined> {
  const from = process.env[setting];
  if (!from) return undefined;
  const { AgentDbClient: Base } = (await import(pathToFileURL(path.resolve(from)).href)) as { AgentDbClient: typeof AgentDbClient };
  return new Base({ redisUrl: site.env.REDIS_URL!, ...clientSettings(site.config) });
}

/** A bench client's settings: no rate limits, and the site's REDIS_BYTES_PER_WORKSPACE (a long run's calls fill a plan's). */
function clientSettings(config: Config) {
  return { prefix: config.prefix, shardCount: config.shardCount, rateLimits: false as const, redisBytesPerWorkspace: config.redisBytesPerWorkspace };
}

/** Makes a site; `close()` stops its workers and removes its keys and files. */
export function benchSite(redisUrl: string, name: string, settings: Record<string, string> = {}): BenchSite {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), `agentdb-bench-${name}-`));
  const env = { REDIS_URL: redisUrl, AGENTDB_PREFIX: `bench-${name}-${randomUUID().slice(0, 8)}`, AGENTDB_DATA_DIR: dataDir, ...settings };
  const config = loadConfig(env);
  const client = new AgentDbClient({ redisUrl, ...clientSettings(config) });
  const running = new Set<(signal?: NodeJS.Signals) => Promise<void>>();
  return {
    config,
    env,
    client,
    async worker(extra = {}, bin = BIN) {
      const { child } = await startProcess(process.execPath, [bin, 'worker'], { ...env, LOG_LEVEL: 'info', ...extra }, /"msg":"worker ready"/);
      const stop = (signal: NodeJS.Signals = 'SIGTERM') =>
        new Promise<void>((resolve) => {
          running.delete(stop);
          if (child.exitCode !== null || child.signalCode !== null) return resolve();
          // A child in the middle of a runaway statement would never see its worker go.
          if (signal === 'SIGKILL') {
            for (const pid of childPids(child.pid!)) {
              try {
                process.kill(pid, 'SIGKILL');
              } catch {
                // It ended meanwhile (a runaway killed at its deadline): nothing left to kill.
              }
            }
          }
          child.once('exit', () => resolve());
          child.kill(signal);
        });
      running.add(stop);
      return { pid: child.pid!, stop };
    },
    async close() {
      await Promise.all([...running].map((stop) => stop('SIGKILL')));
      await client.close();
      await deleteKeys(config.prefix);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
