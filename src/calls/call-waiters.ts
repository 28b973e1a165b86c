import type { Envelope } from '../contracts/envelope.ts';
import type { StreamedEvent } from '../redis/events.ts';
import { callKey } from '../contracts/call-identity.ts';

type Waiter<T> = (value: T) => void;

/**
 * Everyone inside one client waiting on a call, by the call's key (`callKey`: workspace, agent
 * and call id — a bare call id may be another caller's): for its end (`call.completed`) or for it to be
 * parked (`approval.requested`). One event reader feeds them all.
 */
export class CallWaiters {
  private readonly completed = new Map<string, Set<Waiter<Envelope>>>();
  private readonly parked = new Map<string, Set<Waiter<Record<string, unknown>>>>();

  /** Resolves with the call's envelope when it completes. */
  completion(callId: string): Promise<Envelope> {
    return add(this.completed, callId);
  }

  /** Resolves with the approval's summary when the call is parked. */
  parking(callId: string): Promise<Record<string, unknown>> {
    return add(this.parked, callId);
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

  /** Stops waiting for the call altogether (it was answered without running). */
  forget(key: string): void {
    this.completed.delete(key);
    this.parked.delete(key);
  }

  /** Stops waiting for the call to be parked (it was answered some other way). */
  forgetParking(callId: string): void {
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
}

function add<T>(map: Map<string, Set<Waiter<T>>>, callId: string): Promise<T> {
  return new Promise((resolve) => {
    const set = map.get(callId) ?? new Set<Waiter<T>>();
    set.add(resolve);
    map.set(callId, set);
  });
}

function settle<T>(map: Map<string, Set<Waiter<T>>>, callId: string, value: T): void {
  const set = map.get(callId);
  map.delete(callId);
  for (const resolve of set ?? []) resolve(value);
}
