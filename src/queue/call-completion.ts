import type { Redis } from 'ioredis';
import type { Envelope } from '../contracts/envelope.ts';
import { completedEventJson, STREAM_MAX_LEN } from './events.ts';
import type { Keys } from './keys.ts';
import { meterDay } from './usage.ts';

const DAY_MS = 24 * 3600 * 1000;

// One script, so a completion costs the worker one command: publish `call.completed` and, when
// the call is metered, add its credits and count under its workspace, agent, tool and day.
const COMPLETE = `
redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', 'type', 'call.completed', 'data', ARGV[2])
if ARGV[3] ~= '' then
  redis.call('HINCRBY', KEYS[2], ARGV[3] .. '|credits', ARGV[4])
  redis.call('HINCRBY', KEYS[2], ARGV[3] .. '|calls', 1)
  redis.call('SADD', KEYS[3], ARGV[5])
end
return 1`;

type CompletingRedis = Redis & {
  agentdbComplete(events: string, usage: string, index: string, maxLen: number, data: string, field: string, credits: number, member: string): Promise<number>;
};

/** What one completed call meters: nothing for a replay, which was metered the first time. */
export interface Metering {
  workspace: string;
  agent: string;
  credits: number;
  at: number;
}

/**
 * Announces completed calls on the event stream and meters them, in one Redis command each.
 */
export class CallCompletion {
  private readonly redis: CompletingRedis;
  /** The UTC day last metered under, and its bounds: formatting a date on every call shows up. */
  private day = { from: 0, to: 0, name: '' };

  constructor(
    redis: Redis,
    private readonly keys: Keys,
  ) {
    redis.defineCommand('agentdbComplete', { numberOfKeys: 3, lua: COMPLETE });
    this.redis = redis as CompletingRedis;
  }

  /** Publishes `call.completed` for `envelope`, metering `meter` when given. */
  async complete(envelope: Envelope, meter?: Metering): Promise<void> {
    const data = completedEventJson(envelope);
    const day = meter ? this.dayOf(meter.at) : '';
    await this.redis.agentdbComplete(
      this.keys.events,
      meter ? this.keys.usage(meter.workspace, day) : this.keys.usage('-', '-'),
      this.keys.usageIndex,
      STREAM_MAX_LEN,
      data,
      meter ? `${meter.agent}|${envelope.tool}` : '',
      meter?.credits ?? 0,
      meter ? `${meter.workspace}|${day}` : '',
    );
  }

  private dayOf(at: number): string {
    if (at < this.day.from || at >= this.day.to) {
      const from = Math.floor(at / DAY_MS) * DAY_MS;
      this.day = { from, to: from + DAY_MS, name: meterDay(at) };
    }
    return this.day.name;
  }
}
