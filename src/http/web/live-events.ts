import type { Redis } from 'ioredis';
import type { StreamedEvent } from '../../redis/event-types.ts';
import { type CompletedCaller, EventReader, latestEventId } from '../../redis/events.ts';

/** Approved calls whose run the inbox still waits to hear of, at most (the oldest is forgotten past it). */
const AWAITED_RUNS = 1_000;

/** What names an approved call's completion: its workspace, agent and call id. */
const runKey = (workspace: string, agent: string, callId: string) => `${workspace}\u0000${agent}\u0000${callId}`;

/** One open event stream of a browser: its workspace and how to reach it. */
interface Listener {
  workspace: string;
  send(event: { type: string; id: string }): void;
  /** Ends the browser's stream (shutdown). */
  end(): void;
}

/**
 * Approval events of agentdb's Redis stream, fanned out to the browsers showing an inbox.
 * One reader on one blocking connection serves every browser (a connection per tab would not
 * scale); it starts with the first browser and follows from the newest event. Browsers get only
 * the event's type and approval id, then fetch what changed through an authenticated request.
 *
 * An approved call runs after its decision, so the decided list's "ran" cell is known only later:
 * the approved call's `call.completed` is sent on as `approval.ran` (session 38, N16: a person who
 * approved in the inbox saw that cell empty until they reloaded). Only those completions are
 * parsed; every other call's is skipped unread.
 */
export class LiveEvents {
  private readonly listeners = new Set<Listener>();
  /** Approved calls not yet heard to have run ({@link runKey}), and their approval's workspace and id. */
  private readonly awaited = new Map<string, { workspace: string; id: string }>();
  private reader?: EventReader;
  private starting?: Promise<void>;

  constructor(
    private readonly redis: Redis,
    private readonly connect: () => Redis,
    private readonly streamKey: string,
  ) {}

  /** Adds a listener; returns the function that removes it. */
  async subscribe(listener: Listener): Promise<() => void> {
    this.listeners.add(listener);
    // A failed start (Redis down) is not remembered: the next browser tries again.
    this.starting ??= this.start().catch((err: unknown) => {
      this.starting = undefined;
      throw err;
    });
    try {
      await this.starting;
    } catch (err) {
      this.listeners.delete(listener);
      throw err;
    }
    return () => this.listeners.delete(listener);
  }

  /** Stops the reader (app shutdown). */
  async close(): Promise<void> {
    for (const l of [...this.listeners]) l.end();
    this.listeners.clear();
    await this.starting?.catch(() => undefined);
    const reader = this.reader;
    this.reader = undefined;
    await reader?.stop();
  }

  private async start(): Promise<void> {
    const from = await latestEventId(this.redis, this.streamKey);
    this.reader = new EventReader(
      this.connect(),
      this.streamKey,
      from,
      (e) => this.dispatch(e),
      (c: CompletedCaller) => this.awaited.has(runKey(c.workspace, c.agent, c.callId)),
    );
    this.reader.start();
  }

  private dispatch(e: StreamedEvent): void {
    if (e.type === 'call.completed') {
      const key = runKey(e.workspace, e.agent, e.callId);
      const ran = this.awaited.get(key);
      if (!ran) return;
      this.awaited.delete(key);
      return this.send(ran.workspace, { type: 'approval.ran', id: ran.id });
    }
    const { workspace, id, agent, callId, state } = e.approval;
    if (typeof workspace !== 'string' || typeof id !== 'string') return;
    if (typeof agent === 'string' && typeof callId === 'string')
      this.await(runKey(workspace, agent, callId), state === 'approved' ? { workspace, id } : undefined);
    this.send(workspace, { type: e.type, id });
  }

  /** Waits for the run of an approved call (`ran`), or no more (a call parked again, rejected, expired). */
  private await(key: string, ran: { workspace: string; id: string } | undefined): void {
    this.awaited.delete(key);
    if (!ran) return;
    this.awaited.set(key, ran);
    if (this.awaited.size > AWAITED_RUNS) this.awaited.delete(this.awaited.keys().next().value!);
  }

  private send(workspace: string, event: { type: string; id: string }): void {
    for (const l of this.listeners) if (l.workspace === workspace) l.send(event);
  }
}
