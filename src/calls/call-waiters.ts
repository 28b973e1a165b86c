import type { Envelope } from '../contracts/envelope.ts';
import type { StreamedEvent } from '../redis/events.ts';
import { callKey } from '../contracts/call-identity.ts';

type Waiter<T> = (value: T) => void;

/**
 * Everyone inside one client waiting on a call, by the call's key (`callKey`: workspace, agent
 * and call id — a bare call id may be another caller's): for its end (`call.completed`) or for it to be
 * parked (`approval.requested`). One event reader feeds them all.
 *
 * Several waits may share a key (the same call sent again under its id while the first still
 * waits, a lookup by id alongside): a wait that gives up drops only its own waiter
 * ({@link drop}). Dropping the key's every waiter left the first call deaf to its completion
 * until its `timeoutMs` fallback look, 30 s later, and timed a property test out.
 */
export class CallWaiters {
  private readonly completed = new Map<string, Set<Waiter<Envelope>>>();
  private readonly parked = new Map<string, Set<Waiter<Record<string, unknown>>>>();
  /** Each pending wait's own waiter, so it can be dropped alone. */
  private readonly own = new WeakMap<Promise<unknown>, () => void>();

  /** Resolves with the call's envelope when it completes. */
  completion(callId: string): Promise<Envelope> {
    return this.add(this.completed, callId);
  }

  /** Resolves with the approval's summary when the call is parked. */
  parking(callId: string): Promise<Record<string, unknown>> {
    return this.add(this.parked, callId);
  }

  /**
   * Stops the waits `waits` (promises {@link completion} or {@link parking} returned), leaving
   * everyone else waiting on the same call as they were. A wait already settled is ignored.
   */
  drop(...waits: (Promise<unknown> | undefined)[]): void {
    for (const wait of waits) {
      if (!wait) continue;
      this.own.get(wait)?.();
      this.own.delete(wait);
    }
  }

  /** Whether anyone waits for the call to complete. */
  awaitsCompletion(callId: string): boolean {
    return this.completed.has(callId);
  }

  /** Hands the envelope to everyone waiting for the call, once. */
  complete(callId: string, envelope: Envelope): void {
    settle(this.completed, callId, envelope);
    this.parked.delete(callId);
  }

  /** Dispatches one stream event; `fetch` loads an envelope that travelled by reference. */
  onEvent(event: StreamedEvent, fetch: (key: string) => Promise<Envelope | undefined>): void {
    if (event.type === 'approval.requested') {
      const { workspace, agent } = event.approval as { workspace: string; agent: string };
      settle(this.parked, callKey(workspace, agent, event.callId), event.approval);
      return;
    }
    if (event.type !== 'call.completed') return;
    const key = callKey(event.workspace, event.agent, event.callId);
    if (!this.completed.has(key)) return;
    if (event.envelope) return this.complete(key, event.envelope);
    void fetch(key).then((env) => env && this.complete(key, env));
  }

  private add<T>(map: Map<string, Set<Waiter<T>>>, key: string): Promise<T> {
    let remove!: () => void;
    const wait = new Promise<T>((resolve) => {
      const set = map.get(key) ?? new Set<Waiter<T>>();
      set.add(resolve);
      map.set(key, set);
      remove = () => {
        const now = map.get(key);
        if (now !== set) return;
        set.delete(resolve);
        if (set.size === 0) map.delete(key);
      };
    });
    this.own.set(wait, remove);
    return wait;
  }
}

function settle<T>(map: Map<string, Set<Waiter<T>>>, callId: string, value: T): void {
  const set = map.get(callId);
  map.delete(callId);
  for (const resolve of set ?? []) resolve(value);
}
