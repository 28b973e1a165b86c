import type { Redis } from 'ioredis';
import type { Envelope } from '../contracts/envelope.ts';
import { completedEvent, STREAM_MAX_LEN } from './events.ts';
import type { Keys } from './keys.ts';
import { meterDay } from './usage.ts';

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

  constructor(
    redis: Redis,
    private readonly keys: Keys,
  ) {
    redis.defineCommand('agentdbComplete', { numberOfKeys: 3, lua: COMPLETE });
    this.redis = redis as CompletingRedis;
  }

  /** Publishes `call.completed` for `envelope`, metering `meter` when given. */
  async complete(envelope: Envelope, meter?: Metering): Promise<void> {
    const data = JSON.stringify(completedEvent(envelope));
    const day = meter ? meterDay(meter.at) : '';
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
}
