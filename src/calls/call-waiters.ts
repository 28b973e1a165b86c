import type { Envelope } from '../contracts/envelope.ts';
import type { StreamedEvent } from '../redis/events.ts';
import { callKey } from '../contracts/call-identity.ts';

/** One wait: how to settle it, and how to stop listening to its signal once it is settled. */
interface Listener<T> {
  resolve: (value: T) => void;
  reject: (err: unknown) => void;
  /** Stops listening to the signal, for a wait left pending (a parked wait of a call that ended). */
  detach: () => void;
}

/** Everyone in one client waiting on one call, and the one look at its job they share. */
interface Watch {
  completed: Set<Listener<Envelope>>;
  parked: Set<Listener<Record<string, unknown>>>;
  /** The shared safety-net look at the job (see {@link CallWaiters.lookEvery}), while anyone waits for its end. */
  look?: NodeJS.Timeout;
}

/** What a client holds for waits now: calls watched, waits on them, safety-net looks scheduled. */
export interface WaitCounts {
  calls: number;
  waits: number;
  looks: number;
}

/** Why waits ended without their call's end: the client closed. */
export class WaitEnded extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'WaitEnded';
  }
}

/**
 * Everyone inside one client waiting on a call, by the call's key (`callKey`: workspace, agent
 * and call id — a bare call id may be another caller's): for its end (`call.completed`) or for it
 * to be parked (`approval.requested`). One event reader feeds them all.
 *
 * One watch per call, reference-counted: each wait is a listener on it, and the watch — with the
 * one look at the job that it shares among them ({@link lookEvery}) — goes when its last
 * listener does: settled, dropped ({@link drop}), or aborted by its signal (an HTTP request whose
 * client went away, an MCP cancel). Every wait once kept a 30 s look of its own until the call
 * ended, and 20,000 abandoned `?wait=true` requests on one parked call kept Redis at 2,700
 * commands a second for the day the approval could take.
 *
 * Several waits may share a key (the same call sent again under its id while the first still
 * waits, a lookup by id alongside): a wait that gives up drops only its own listener.
 */
export class CallWaiters {
  private readonly watches = new Map<string, Watch>();
  /** Each pending wait's own removal, so it can be dropped alone. */
  private readonly own = new WeakMap<Promise<unknown>, () => void>();

  /**
   * Resolves with the call's envelope when it completes. With `signal`, rejects with its reason
   * once it aborts, and stops listening.
   */
  completion(callId: string, signal?: AbortSignal): Promise<Envelope> {
    return this.add('completed', callId, signal);
  }

  /** Resolves with the approval's summary when the call is parked; `signal` as for {@link completion}. */
  parking(callId: string, signal?: AbortSignal): Promise<Record<string, unknown>> {
    return this.add('parked', callId, signal);
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
    return (this.watches.get(callId)?.completed.size ?? 0) > 0;
  }

  /**
   * Every `everyMs`, while anyone waits for the call's end, `look`s at its job once for all of
   * them: the safety net under the event that normally ends the waits (a completion published
   * while this client's reader was away). An envelope found completes them all.
   */
  lookEvery(callId: string, everyMs: number, look: () => Promise<Envelope | undefined>): void {
    const watch = this.watches.get(callId);
    if (!watch || watch.completed.size === 0 || watch.look) return;
    const next = () => {
      watch.look = setTimeout(() => {
        look().then(
          (env) => {
            if (env) return this.complete(callId, env);
            if (watch.look && this.watches.get(callId) === watch) next();
          },
          // Redis away: the waits' outage answer is their caller's; look again next time.
          () => watch.look && this.watches.get(callId) === watch && next(),
        );
      }, everyMs).unref();
    };
    next();
  }

  /** Hands the envelope to everyone waiting for the call, once. */
  complete(callId: string, envelope: Envelope): void {
    const watch = this.watches.get(callId);
    if (!watch) return;
    this.release(callId, watch);
    for (const l of watch.completed) l.resolve(envelope);
    // A call that ended is never parked: those waits stay pending, their callers moved on.
    for (const l of watch.parked) l.detach();
  }

  /** Dispatches one stream event; `fetch` loads an envelope that travelled by reference. */
  onEvent(event: StreamedEvent, fetch: (key: string) => Promise<Envelope | undefined>): void {
    if (event.type === 'approval.requested') {
      const { workspace, agent } = event.approval as { workspace: string; agent: string };
      const watch = this.watches.get(callKey(workspace, agent, event.callId));
      if (!watch || watch.parked.size === 0) return;
      const parked = [...watch.parked];
      watch.parked.clear();
      this.releaseIfIdle(callKey(workspace, agent, event.callId), watch);
      for (const l of parked) l.resolve(event.approval);
      return;
    }
    if (event.type !== 'call.completed') return;
    const key = callKey(event.workspace, event.agent, event.callId);
    if (!this.awaitsCompletion(key)) return;
    if (event.envelope) return this.complete(key, event.envelope);
    void fetch(key).then(
      (env) => env && this.complete(key, env),
      () => undefined,
    );
  }

  /** How many calls, waits and looks this client holds now (for tests and metrics). */
  counts(): WaitCounts {
    let waits = 0;
    let looks = 0;
    for (const w of this.watches.values()) {
      waits += w.completed.size + w.parked.size;
      if (w.look) looks++;
    }
    return { calls: this.watches.size, waits, looks };
  }

  /** Ends every wait with `reason` (the client is closing) and stops every look. */
  close(reason: Error): void {
    const all = [...this.watches.entries()];
    for (const [key, watch] of all) {
      this.release(key, watch);
      for (const l of [...watch.completed, ...watch.parked]) l.reject(reason);
    }
  }

  private add<T>(kind: 'completed' | 'parked', key: string, signal?: AbortSignal): Promise<T> {
    if (signal?.aborted) {
      // Marked handled as the others below are: a waiter that gave up before it got here may
      // never await it (an MCP client gone while its call was being enqueued left ten unhandled
      // rejections in the abandoned-waits test).
      const gone = Promise.reject(signal.reason) as Promise<T>;
      gone.catch(() => undefined);
      return gone;
    }
    let remove!: () => void;
    const wait = new Promise<T>((resolve, reject) => {
      let watch = this.watches.get(key);
      if (!watch) {
        watch = { completed: new Set(), parked: new Set() };
        this.watches.set(key, watch);
      }
      const set = watch[kind] as Set<Listener<T>>;
      const onAbort = () => {
        remove();
        reject(signal!.reason);
      };
      const detach = () => signal?.removeEventListener('abort', onAbort);
      const listener: Listener<T> = {
        resolve: (value) => {
          detach();
          resolve(value);
        },
        reject: (err) => {
          detach();
          reject(err);
        },
        detach,
      };
      const w = watch;
      remove = () => {
        detach();
        if (this.watches.get(key) !== w || !set.delete(listener)) return;
        this.releaseIfIdle(key, w);
      };
      set.add(listener);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
    // Marked handled: an abort may reject it before its waiter awaits it (between two awaits on
    // Redis); whoever awaits it still sees the rejection.
    wait.catch(() => undefined);
    this.own.set(wait, remove);
    return wait;
  }

  /** Forgets the watch, and its look, once nobody waits on it any more. */
  private releaseIfIdle(key: string, watch: Watch): void {
    if (watch.completed.size === 0 && watch.look) {
      clearTimeout(watch.look);
      watch.look = undefined;
    }
    if (watch.completed.size === 0 && watch.parked.size === 0) this.release(key, watch);
  }

  private release(key: string, watch: Watch): void {
    if (watch.look) clearTimeout(watch.look);
    watch.look = undefined;
    if (this.watches.get(key) === watch) this.watches.delete(key);
  }
}
