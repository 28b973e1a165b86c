import type { ChainableCommander, Redis } from 'ioredis';
import type { Envelope } from '../contracts/envelope.ts';
import type { AgentDbEvent, StreamedEvent } from './event-types.ts';

/** Whether stream id `a` comes before `b` (`<ms>-<seq>`; a bare `<ms>` is `<ms>-0`). */
export function idBefore(a: string, b: string): boolean {
  const [am = '0', as = '0'] = a.split('-');
  const [bm = '0', bs = '0'] = b.split('-');
  return BigInt(am) !== BigInt(bm) ? BigInt(am) < BigInt(bm) : BigInt(as) < BigInt(bs);
}

/**
 * Envelopes larger than this travel by reference: the stream must stay small. With
 * {@link STREAM_MAX_LEN}, the stream holds at most about 320 MB, whoever fills it (at 64 KiB and
 * 100,000 events it could reach 6.4 GB; issue 27); most envelopes are far under it.
 */
export const INLINE_ENVELOPE_BYTES = 16 * 1024;
/** The stream keeps about this many events (XADD MAXLEN ~); older ones are trimmed. */
export const STREAM_MAX_LEN = 20_000;

/** A `call.completed` event ready for the stream, and whether it carries its envelope. */
export interface CompletedEvent {
  json: string;
  inline: boolean;
  /** The envelope's own JSON, made once here: what the worker counts against the Redis budget too. */
  envelopeJson: string;
}

/**
 * The `call.completed` event for an envelope, inlined when small, as the JSON the stream
 * carries. Written out by hand so the envelope is serialised once, not once to measure it and
 * again inside the event: the output is exactly `JSON.stringify` of the event.
 */
export function completedEvent(envelope: Envelope, workspace: string, agent: string, memberSince?: number): CompletedEvent {
  const json = JSON.stringify(envelope);
  const inline = json.length <= INLINE_ENVELOPE_BYTES;
  const since = memberSince === undefined ? '' : `,"memberSince":${memberSince}`;
  const names = `"workspace":${JSON.stringify(workspace)},"agent":${JSON.stringify(agent)}${since}`;
  return {
    json: `{"type":"call.completed","callId":${JSON.stringify(envelope.callId)},${names},"ok":${envelope.ok}${inline ? `,"envelope":${json}` : ''},"at":${Date.now()}}`,
    inline,
    envelopeJson: json,
  };
}

/** Appends an event to the stream. */
export async function publishEvent(redis: Redis, streamKey: string, event: AgentDbEvent): Promise<void> {
  await redis.xadd(streamKey, 'MAXLEN', '~', STREAM_MAX_LEN, '*', 'type', event.type, 'data', JSON.stringify(event));
}

/**
 * Queues the append of an event on `multi`, so it lands with the transaction's other writes or
 * not at all: a reader that sees the event sees them too.
 */
export function appendEvent(multi: ChainableCommander, streamKey: string, event: AgentDbEvent): ChainableCommander {
  return multi.xadd(streamKey, 'MAXLEN', '~', STREAM_MAX_LEN, '*', 'type', event.type, 'data', JSON.stringify(event));
}

/** Runs a transaction made with {@link appendEvent}; throws the first of its commands' errors. */
export async function execEvent(multi: ChainableCommander): Promise<void> {
  const failed = (await multi.exec())?.find(([err]) => err);
  if (failed) throw failed[0];
}

/** Parses one XREAD/XRANGE entry. */
export function parseEntry([id, fields]: [string, string[]]): StreamedEvent | undefined {
  const i = fields.indexOf('data');
  if (i < 0) return undefined;
  try {
    // The parsed event takes the id itself: no copy of each event (every client's reader parses
    // every event). One that is not an object throws here, and is skipped.
    const event = JSON.parse(fields[i + 1]!) as StreamedEvent;
    event.id = id;
    return event;
  } catch {
    return undefined;
  }
}

/** Whose call a `call.completed` event is: what names it (`callKey`), and all a reader routes it by. */
export interface CompletedCaller {
  callId: string;
  workspace: string;
  agent: string;
  memberSince?: number;
}

const COMPLETED_HEAD = '{"type":"call.completed","callId":"';

/**
 * Whose call a `call.completed` entry is, read off the head of its JSON as {@link completedEvent}
 * writes it, without parsing the envelope behind it: a reader parses whole only the events a
 * caller of its own waits on, not every client's (issue 31). Undefined for any other entry, or
 * one whose head is not written that way (a name with an escape in it): parse it whole then.
 */
export function completedCaller(fields: string[]): CompletedCaller | undefined {
  const i = fields.indexOf('data');
  const json = i < 0 ? undefined : fields[i + 1];
  if (!json?.startsWith(COMPLETED_HEAD)) return undefined;
  const callId = plainString(json, COMPLETED_HEAD.length, '","workspace":"');
  const workspace = callId && plainString(json, callId.next, '","agent":"');
  const agent = workspace && plainString(json, workspace.next, '",');
  if (!agent) return undefined;
  const caller: CompletedCaller = { callId: callId.value, workspace: workspace.value, agent: agent.value };
  const since = SINCE_FIELD.exec(json.slice(agent.next - 1, agent.next + 40));
  if (since) caller.memberSince = Number(since[1]);
  return caller;
}

/** A member's or agent key's `memberSince` right after the agent's name, as {@link completedEvent} writes it. */
const SINCE_FIELD = /^,"memberSince":(\d+)[,}]/;

/**
 * The JSON string from `from` to the closing quote that `then` starts, when nothing in it is
 * escaped (then its text is its value), and where what follows `then` begins.
 */
function plainString(json: string, from: number, then: string): { value: string; next: number } | undefined {
  const end = json.indexOf('"', from);
  if (end < 0 || !json.startsWith(then, end)) return undefined;
  const value = json.slice(from, end);
  return value.includes('\\') ? undefined : { value, next: end + then.length };
}

/** The id of the newest event, or `0-0` when there is none: where a new reader starts. */
export async function latestEventId(redis: Redis, streamKey: string): Promise<string> {
  const last = (await redis.xrevrange(streamKey, '+', '-', 'COUNT', 1)) as [string, string[]][];
  return last[0]?.[0] ?? '0-0';
}

/**
 * Follows the event stream on its own blocking connection from `from` onwards, handing each
 * event to `onEvent`. One reader serves every call a client waits on. Survives reconnects:
 * it resumes from the last id it saw, so no event is skipped. With `wanted`, a `call.completed`
 * event whose caller it declines (a call nobody here waits on) is skipped unparsed.
 */
export class EventReader {
  private lastId: string;
  private running = false;
  private loop?: Promise<void>;
  // A read pending on a connection that is reconnecting is never settled by `disconnect()`
  // (ioredis flushes its queue only when a live socket closes): a client closed during a Redis
  // outage waited for it for good. `stop` ends the read under way itself instead, by this.
  // Not a race against one promise of the reader's life: each `Promise.race` leaves a reaction
  // on a promise that never settles, holding that read's reply, and the reader makes one per
  // call (~1.1 KB a call kept until the client closed; docs/benchmarks.md, session 25).
  private endRead?: () => void;
  /** Set while parked (see `idle`): since when, and how to go on. */
  private parked?: { since: number; resume: () => void };

  /**
   * `idle`: asked before each read; true parks the reader (no XREAD) until {@link resume}. A
   * client's reader with no call waited on would otherwise be woken by every completion of the
   * service's stream, each costing its process a wake, a reply and the next XREAD's write.
   */
  constructor(
    private readonly redis: Redis,
    private readonly streamKey: string,
    from: string,
    private readonly onEvent: (event: StreamedEvent) => void,
    private readonly wanted?: (caller: CompletedCaller) => boolean,
    private readonly idle?: () => boolean,
  ) {
    this.lastId = from;
  }

  /** When it parked (`Date.now()`), or undefined while it reads. */
  parkedSince(): number | undefined {
    return this.parked?.since;
  }

  /**
   * Reads again, from where it stopped, or from `from` when that is later (the newest event: what
   * lay between was nobody's here, none being waited on while parked). No-op unless parked.
   */
  resume(from?: string): void {
    const parked = this.parked;
    if (!parked) return;
    this.parked = undefined;
    if (from !== undefined && idBefore(this.lastId, from)) this.lastId = from;
    parked.resume();
  }

  /** Starts following; returns at once. */
  start(): void {
    if (this.running) return;
    this.running = true;
    this.loop = this.follow();
  }

  /** Stops following and closes the connection. */
  async stop(): Promise<void> {
    this.running = false;
    this.resume();
    this.endRead?.();
    this.redis.disconnect();
    await this.loop;
  }

  private async follow(): Promise<void> {
    while (this.running) {
      if (this.idle?.()) {
        await new Promise<void>((resume) => (this.parked = { since: Date.now(), resume }));
        if (!this.running) return;
      }
      let reply: [string, [string, string[]][]][] | null;
      try {
        reply = await this.read();
        if (!this.running) return;
      } catch {
        if (!this.running) return;
        // The connection retries by itself; wait a moment rather than spin.
        await new Promise((r) => setTimeout(r, 100));
        continue;
      }
      for (const [, entries] of reply ?? []) {
        for (const entry of entries) {
          this.lastId = entry[0];
          if (this.wanted) {
            const caller = completedCaller(entry[1]);
            if (caller && !this.wanted(caller)) continue;
          }
          const event = parseEntry(entry);
          if (event) this.onEvent(event);
        }
      }
      // Let the callers just woken run first: the next XREAD's socket write (tens of µs) would
      // otherwise delay every answer, and the caller's next enqueue. Nothing is missed
      // meanwhile: the read resumes from `lastId`.
      if (reply) await new Promise((resolve) => setImmediate(resolve));
    }
  }

  /** The next XREAD's reply; null once {@link stop} has ended it, whether or not Redis answers. */
  private read(): Promise<[string, [string, string[]][]][] | null> {
    const reading = this.redis.xread('COUNT', 1000, 'BLOCK', 5000, 'STREAMS', this.streamKey, this.lastId) as Promise<[string, [string, string[]][]][] | null>;
    return new Promise((resolve, reject) => {
      this.endRead = () => resolve(null);
      reading.then(resolve, reject);
    });
  }
}
