import type { Envelope } from '../contracts/envelope.ts';
import type { StreamedEvent } from '../redis/event-types.ts';
import { callKey } from '../contracts/call-identity.ts';
import { AnnouncedOutcomes } from './announced-outcomes.ts';
import { LISTENER, Listener, type Owned, type Watch } from './call-wait-listener.ts';
import { lookEvery } from './call-wait-look.ts';

/** What a client holds for waits now: calls watched, waits on them, safety-net looks scheduled. */
export interface WaitCounts {
  /** Calls this client watches for their end now. */
  calls: number;
  /** Waits on those calls (several waits may share one call). */
  waits: number;
  /** Safety-net looks scheduled, for a call whose end event may be missed. */
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
  /** Outcomes the workers announced for calls waited on here, for a few seconds (see {@link AnnouncedOutcomes}). */
  private readonly announced = new AnnouncedOutcomes();
  /** The last stamp given a watch ({@link looking}): one counter, so a new watch never takes an old one's. */
  private stamps = 0;
  /** Told when a wait starts with none before it: the event reader, parked while nobody waits, reads again. */
  onBusy?: () => void;

  /** Whether nobody waits on any call here (the event reader parks: it has no one to tell). */
  idle(): boolean {
    return this.watches.size === 0;
  }

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
      const own = wait as Owned;
      own[LISTENER]?.remove();
      own[LISTENER] = undefined;
    }
  }

  /** Whether anyone waits for the call to complete. */
  awaitsCompletion(callId: string): boolean {
    return (this.watches.get(callId)?.completed.size ?? 0) > 0;
  }

  /**
   * Every `everyMs`, while anyone waits for the call's end, `look`s at its job once for all of
   * them (see call-wait-look.ts). An envelope found completes them all.
   */
  lookEvery(callId: string, everyMs: number, look: () => Promise<Envelope | undefined>): void {
    const watch = this.watches.get(callId);
    if (!watch || watch.completed.size === 0 || watch.look) return;
    lookEvery(watch, everyMs, look, {
      found: (env, stamp) => this.complete(callId, env, stamp),
      watched: () => this.watches.get(callId) === watch,
    });
  }

  /**
   * Runs every scheduled look now rather than at its time: once Redis is back after the
   * connection dropped, a job it lost while down (it came back empty) is answered at once
   * instead of at the next look, `timeoutMs` later (30 s by default).
   */
  lookNow(): void {
    for (const watch of [...this.watches.values()]) if (watch.look) watch.lookAtOnce?.();
  }

  /**
   * The call's watch's stamp now, taken before a look at its job and handed to {@link complete}
   * with what the look found: a job put back to run since ({@link putBack}) changes it.
   */
  looking(key: string): number | undefined {
    return this.watches.get(key)?.stamp;
  }

  /**
   * Hands the envelope to everyone waiting for the call, once. With `lookedAt` (a {@link looking}
   * stamp), only if the job was not put back to run since the look began: a look that read the
   * run before's refusal just before a send put the job back handed it to that send's new wait,
   * "nothing was written" of the run it put back (session 34, F13). Its caller answers its own
   * wait (and drops it); the others wait for the run put back. False when it answered no one for that.
   */
  complete(callId: string, envelope: Envelope, lookedAt?: number): boolean {
    const watch = this.watches.get(callId);
    if (!watch) return true;
    if (lookedAt !== undefined && (watch.stamp !== lookedAt || watch.puttingBack)) return false;
    this.release(callId, watch);
    for (const l of watch.completed) l.settle(envelope);
    // A call that ended is never parked: those waits stay pending, their callers moved on.
    for (const l of watch.parked) l.detach();
    return true;
  }

  /** Dispatches one stream event; `fetch` loads an envelope that travelled by reference. */
  onEvent(
    event: StreamedEvent,
    fetch: (key: string) => Promise<Envelope | undefined>,
    fetchApproval?: (id: string) => Promise<Record<string, unknown> | undefined>,
  ): void {
    if (event.type === 'approval.requested') {
      const { workspace, agent, id, effectByReference } = event.approval as { workspace: string; agent: string; id: string; effectByReference?: true };
      const key = callKey(workspace, agent, event.callId, event.memberSince);
      const watch = this.watches.get(key);
      if (!watch || watch.parked.size === 0) return;
      const parked = [...watch.parked];
      watch.parked.clear();
      this.releaseIfIdle(key, watch);
      // An effect too large for the stream travelled by reference (`eventSummary`): the caller is
      // told what it waits on whole, read from the approval.
      if (effectByReference && fetchApproval) {
        void fetchApproval(id).then(
          (whole) => {
            for (const l of parked) l.settle(whole ?? event.approval);
          },
          () => {
            for (const l of parked) l.settle(event.approval);
          },
        );
        return;
      }
      for (const l of parked) l.settle(event.approval);
      return;
    }
    if (event.type !== 'call.completed') return;
    const key = callKey(event.workspace, event.agent, event.callId, event.memberSince);
    if (!this.awaitsCompletion(key)) return;
    // Announced by the run a resend put back to run again, read late (a reader catching up):
    // not the outcome of the run the waits now wait for (see {@link putBack}).
    const stale = this.watches.get(key)!.endedBefore;
    if (stale !== undefined && event.at <= stale) return;
    if (event.envelope) {
      this.announced.remember(key, event.envelope, event.at);
      this.complete(key, event.envelope);
      return;
    }
    void fetch(key).then(
      (env) => env && this.complete(key, env),
      () => undefined,
    );
  }

  /**
   * The outcome a worker announced for the call within the last few seconds, if any (see
   * {@link AnnouncedOutcomes}), and only if the run that announced it is the job's run now: taken
   * at `takenAt` (its `processedOn`) or before it announced. A job put back to run again after a
   * retryable refusal is not finished, and the refusal its run before announced said "nothing was
   * written" of the run that then committed (session 34, F12: F11's refused-but-there).
   */
  justAnnounced(key: string, takenAt: number | undefined): Envelope | undefined {
    const got = this.announced.get(key);
    return got && takenAt !== undefined && got.announcedAt >= takenAt ? got.envelope : undefined;
  }

  /**
   * The call's job, whose run ended at `endedAt` (its `finishedOn`, the worker's clock) with a
   * retryable refusal, is being put back to run again by a send now waiting on it: that run's
   * announcement, read only now, is not the outcome waited for, nor is what a look begun before
   * or during the put-back found ({@link complete}'s `lookedAt`). Call what it returns once done.
   */
  putBack(key: string, endedAt: number): () => void {
    const watch = this.watches.get(key);
    if (!watch) return ignore;
    watch.endedBefore = Math.max(watch.endedBefore ?? 0, endedAt);
    watch.stamp = ++this.stamps;
    watch.puttingBack = (watch.puttingBack ?? 0) + 1;
    return () => {
      watch.puttingBack!--;
      watch.stamp = ++this.stamps;
    };
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
      for (const l of [...watch.completed, ...watch.parked]) l.fail(reason);
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
    let watch = this.watches.get(key);
    if (!watch) {
      watch = { completed: new Set(), parked: new Set(), stamp: ++this.stamps };
      this.watches.set(key, watch);
      if (this.watches.size === 1) this.onBusy?.();
    }
    const set = watch[kind] as Set<Listener<T>>;
    const listener = new Listener<T>(this, key, watch, set, signal);
    const wait = new Promise<T>((resolve, reject) => {
      listener.resolve = resolve;
      listener.reject = reject;
    });
    set.add(listener);
    listener.listen();
    // Marked handled: an abort may reject it before its waiter awaits it (between two awaits on
    // Redis); whoever awaits it still sees the rejection.
    wait.catch(ignore);
    (wait as Owned)[LISTENER] = listener as Listener<never>;
    return wait;
  }

  /** A wait's listener `listener` is gone: forgets it, and its watch once nobody waits on it. */
  removed<T>(key: string, watch: Watch, set: Set<Listener<T>>, listener: Listener<T>): void {
    if (this.watches.get(key) !== watch || !set.delete(listener)) return;
    this.releaseIfIdle(key, watch);
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

function ignore(): void {}
