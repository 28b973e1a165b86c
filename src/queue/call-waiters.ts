import type { Envelope } from '../contracts/envelope.ts';
import type { StreamedEvent } from './events.ts';

type Waiter<T> = (value: T) => void;

/**
 * Everyone inside one client waiting on a call: for its end (`call.completed`) or for it to be
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

  /** Stops waiting for the call to be parked (it was answered some other way). */
  forgetParking(callId: string): void {
    this.parked.delete(callId);
  }

  /** Dispatches one stream event; `fetch` loads an envelope that travelled by reference. */
  onEvent(event: StreamedEvent, fetch: (callId: string) => Promise<Envelope | undefined>): void {
    if (event.type === 'approval.requested') {
      settle(this.parked, event.callId, event.approval);
      return;
    }
    if (event.type !== 'call.completed' || !this.completed.has(event.callId)) return;
    if (event.envelope) return this.complete(event.callId, event.envelope);
    void fetch(event.callId).then((env) => env && this.complete(event.callId, env));
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
