import type { Redis } from 'ioredis';
import { EventReader, latestEventId } from '../../redis/events.ts';
import type { StreamedEvent } from '../../redis/event-types.ts';

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
 */
export class LiveEvents {
  private readonly listeners = new Set<Listener>();
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
    this.reader = new EventReader(this.connect(), this.streamKey, from, (e) => this.dispatch(e));
    this.reader.start();
  }

  private dispatch(e: StreamedEvent): void {
    if (e.type !== 'approval.requested' && e.type !== 'approval.decided') return;
    const workspace = e.approval.workspace;
    const id = e.approval.id;
    if (typeof workspace !== 'string' || typeof id !== 'string') return;
    for (const l of this.listeners) if (l.workspace === workspace) l.send({ type: e.type, id });
  }
}
