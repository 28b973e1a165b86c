import type { Redis } from 'ioredis';
import { result, type CheckResult } from './check.ts';

/** Past this share of maxmemory, Redis is close to refusing every write (warn, then fail). */
const MEMORY_WARN = 0.75;
const MEMORY_FAIL = 0.9;
/**
 * Clock offset from Redis's: approvals expire by Redis's clock, while history records commit
 * times and restores pick moments by this machine's; past a second the two disagree visibly,
 * past LEASE_TTL_MS-like spans (10 s) a restore "to 02:00" lands somewhere else.
 */
const CLOCK_WARN_MS = 1000;
const CLOCK_FAIL_MS = 10_000;

/** The fields of `INFO`, by name. */
export function parseInfo(text: string): Map<string, string> {
  const fields = new Map<string, string>();
  for (const line of text.split(/\r?\n/)) {
    const i = line.indexOf(':');
    if (i > 0 && !line.startsWith('#')) fields.set(line.slice(0, i), line.slice(i + 1).trim());
  }
  return fields;
}

/** A CONFIG GET value, or undefined where CONFIG is disabled (many managed Redis services rename it). */
async function configGet(redis: Redis, name: string): Promise<string | undefined> {
  try {
    const reply = (await redis.config('GET', name)) as string[];
    return reply[1];
  } catch {
    return undefined;
  }
}

/**
 * How to change a Redis setting for good: `flags` where Redis is started, or `CONFIG SET …`,
 * which lasts until Redis restarts, then `CONFIG REWRITE` into its config file. A Redis started
 * with flags alone has none (`config_file` empty in INFO: the redis-server `agentdb start` starts
 * when none answers is one), and CONFIG REWRITE answers "ERR The server is running without a
 * config file": the fix said to run it anyway (review N10).
 */
export function settingFix(info: Map<string, string>, flags: string, set: string): string {
  if (info.get('config_file')) return `${flags} where Redis is started, or ${set}, then CONFIG REWRITE`;
  return `${flags} where Redis is started: this Redis has no config file (started with flags alone), so ${set} lasts only until it restarts (and CONFIG REWRITE refuses)`;
}

function bytes(n: number): string {
  if (n >= 1024 ** 3) return `${(n / 1024 ** 3).toFixed(1)} GiB`;
  if (n >= 1024 ** 2) return `${(n / 1024 ** 2).toFixed(1)} MiB`;
  return `${Math.round(n / 1024)} KiB`;
}

/**
 * What agentdb needs of its Redis, read from `INFO` and `CONFIG GET`: persistence (parked
 * approvals, queued calls, schedules and leases live only there), a memory bound that refuses
 * writes rather than evicting keys, room under that bound, and a clock that agrees with this
 * machine's. `dev`: a Redis without persistence is a warning, not a failure (see `persistence`).
 */
export async function redisChecks(redis: Redis, opts: { dev?: boolean } = {}): Promise<CheckResult[]> {
  const info = parseInfo(await redis.info());
  return [await persistence(redis, info, opts.dev === true), ...memory(info), await clock(redis)];
}

/** Every Redis check, failed because Redis does not answer, or (`refusesWrites`) refuses writes: its own disk. */
export function redisUnreachable(why: string, refusesWrites = false): CheckResult[] {
  const fix = refusesWrites
    ? "Free space on the disk of Redis's folder (its AOF and RDB files), or fix what Redis's log names; then run agentdb doctor again."
    : 'Start Redis, or point REDIS_URL at one that runs; then run agentdb doctor again.';
  return ['redis-persistence', 'redis-maxmemory', 'redis-eviction-policy', 'redis-memory-headroom', 'clock'].map((check) => result(check, 'fail', why, fix));
}

/**
 * Durability: whether what agentdb keeps only in Redis (queued calls, parked approvals,
 * schedules, shard leases, and the registered workspaces, agents, members and keys) outlives a
 * Redis restart. No persistence at all fails a deployment; on a development machine whose Redis
 * may be wiped it is what one expects, so `dev` (`agentdb doctor --dev`) makes it a warning.
 * Review N5 (session 29): a new user's dev Redis met a bare FAIL that did not say it was about
 * durability, nor that it was fine for development.
 */
async function persistence(redis: Redis, info: Map<string, string>, dev: boolean): Promise<CheckResult> {
  const check = 'redis-persistence';
  if (info.get('aof_enabled') === '1') {
    const fsync = await configGet(redis, 'appendfsync');
    if (fsync === 'no') {
      return result(
        check,
        'warn',
        'Durability: AOF is on, but appendfsync is "no": the OS decides when it reaches the disk, and a host crash can lose the last ~30 s of calls and decisions.',
        `Set appendfsync everysec: ${settingFix(info, '--appendfsync everysec', 'CONFIG SET appendfsync everysec')}.`,
      );
    }
    return result(check, 'ok', `AOF is on${fsync ? ` (appendfsync ${fsync})` : ''}: parked approvals and queued calls survive a Redis restart.`);
  }
  const fix = `Turn AOF on: ${settingFix(info, '--appendonly yes --appendfsync everysec', 'CONFIG SET appendonly yes')}. docker-compose.yml turns it on, and so does the redis-server \`agentdb start\` starts when none answers.`;
  const save = await configGet(redis, 'save');
  if (save) {
    return result(
      check,
      'warn',
      `Durability: AOF is off; only RDB snapshots (save "${save}"): what changed since the last snapshot (parked approvals, queued calls, decisions, keys minted) is lost when Redis restarts.`,
      fix,
    );
  }
  const lost = `Durability: AOF is off${save === undefined ? ' (and CONFIG is not available to read the RDB schedule)' : ' and so are RDB snapshots'}: a Redis restart loses every queued call, parked approval, schedule and shard lease, and every registered workspace, agent, member and key. agentdb works until then.`;
  return dev
    ? result(check, 'warn', `${lost} A warning with --dev: expected of a development Redis; a failure for a deployment.`, fix)
    : result(
        check,
        'fail',
        `${lost} A failure for a deployment; on a development machine whose Redis may be wiped it is expected: agentdb doctor --dev counts it as a warning.`,
        fix,
      );
}

function memory(info: Map<string, string>): CheckResult[] {
  const max = Number(info.get('maxmemory') ?? 0);
  const policy = info.get('maxmemory_policy') ?? 'unknown';
  const used = Number(info.get('used_memory') ?? 0);
  const system = Number(info.get('total_system_memory') ?? 0);
  const out: CheckResult[] = [];
  out.push(
    max > 0
      ? result('redis-maxmemory', 'ok', `maxmemory is ${bytes(max)}.`)
      : result(
          'redis-maxmemory',
          'warn',
          'maxmemory is not set: Redis grows until the host runs out of memory, and the kernel kills it (or whatever else runs there).',
          `Set maxmemory to what the host can give Redis, with maxmemory-policy noeviction: ${settingFix(info, '--maxmemory 1gb --maxmemory-policy noeviction', 'CONFIG SET maxmemory 1gb')}. The redis-server \`agentdb start\` starts when none answers sets none: for a Redis that lasts, run your own (docker-compose.yml's has 1gb).`,
        ),
  );
  out.push(
    policy === 'noeviction'
      ? result('redis-eviction-policy', 'ok', 'maxmemory-policy is noeviction: a full Redis refuses writes and never drops a key.')
      : result(
          'redis-eviction-policy',
          'fail',
          `maxmemory-policy is ${policy}: a full Redis evicts keys, and queued calls, parked approvals and shard leases vanish without a word.`,
          `Set maxmemory-policy noeviction: ${settingFix(info, '--maxmemory-policy noeviction', 'CONFIG SET maxmemory-policy noeviction')}.`,
        ),
  );
  const [limit, of] = max > 0 ? [max, 'maxmemory'] : [system, "the host's memory"];
  if (!limit) {
    out.push(result('redis-memory-headroom', 'ok', `Redis uses ${bytes(used)} (no limit to compare with).`));
  } else {
    const share = used / limit;
    const detail = `Redis uses ${bytes(used)}, ${Math.round(share * 100)}% of ${of} (${bytes(limit)}).`;
    const fix = `Raise ${max > 0 ? 'maxmemory' : "the host's memory"}, or lower what agentdb keeps (RESULT_TTL_HOURS, APPROVAL_RETENTION_DAYS, REDIS_BYTES_PER_WORKSPACE); see what uses it with redis-cli --bigkeys.`;
    const status = share >= MEMORY_FAIL ? 'fail' : share >= MEMORY_WARN ? 'warn' : 'ok';
    out.push(
      result(
        'redis-memory-headroom',
        status,
        status === 'ok' ? detail : `${detail} Past ${max > 0 ? 'it Redis refuses every write' : 'it the host runs out of memory'}.`,
        fix,
      ),
    );
  }
  return out;
}

async function clock(redis: Redis): Promise<CheckResult> {
  const before = Date.now();
  const [s, us] = await redis.time();
  const after = Date.now();
  const redisMs = Number(s) * 1000 + Math.floor(Number(us) / 1000);
  // Compared with the middle of the round trip; half of it is how far off that can be.
  const offset = redisMs - (before + after) / 2;
  const off = Math.abs(offset);
  const detail = `This machine's clock is ${off < 1 ? 'within a millisecond of' : `${Math.round(off)} ms ${offset > 0 ? 'behind' : 'ahead of'}`} Redis's (±${Math.ceil((after - before) / 2)} ms).`;
  const status = off >= CLOCK_FAIL_MS ? 'fail' : off >= CLOCK_WARN_MS ? 'warn' : 'ok';
  return result(
    'clock',
    status,
    status === 'ok' ? detail : `${detail} Approvals expire by Redis's clock, history and restores go by this one's.`,
    'Run NTP (chrony, systemd-timesyncd) on this machine and on the Redis host.',
  );
}
