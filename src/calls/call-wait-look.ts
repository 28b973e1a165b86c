import type { Envelope } from '../contracts/envelope.ts';
import type { Watch } from './call-wait-listener.ts';

/** What the look asks of the watches it serves (`CallWaiters`). */
export interface LookOwner {
  /** Hands what a look found to the waits, unless the job was put back to run since `stamp`; false when it answered no one. */
  found(envelope: Envelope, stamp: number): boolean;
  /** Whether `watch` is still the one kept for its call (not released, nor replaced). */
  watched(): boolean;
}

/**
 * Every `everyMs`, while anyone waits for the call's end, `look`s at its job once for all of
 * them: the safety net under the event that normally ends the waits (a completion published
 * while the client's reader was away). Sets `watch.look` (the timer) and `watch.lookAtOnce`
 * (run it now, for `CallWaiters.lookNow`); releasing the watch clears the timer, which ends it.
 */
export function lookEvery(watch: Watch, everyMs: number, look: () => Promise<Envelope | undefined>, owner: LookOwner): void {
  let underWay = false;
  let again = false;
  const looking = () => {
    underWay = true;
    const stamp = watch.stamp;
    const then = (env?: Envelope) => {
      underWay = false;
      // Found under a stamp since changed (the job put back to run): looked at again next time.
      if (env && owner.found(env, stamp)) return;
      // `look` stays set while a look runs (a fired timer is still truthy): what release clears.
      if (!watch.look || !owner.watched()) return;
      if (again) {
        again = false;
        looking();
      } else next();
    };
    // Redis away: the waits' outage answer is their caller's; look again next time.
    look().then(then, () => then());
  };
  const next = () => {
    watch.look = setTimeout(looking, everyMs).unref();
  };
  watch.lookAtOnce = () => {
    // A look sent before Redis came back may fail with the old connection: one more after it.
    if (underWay) {
      again = true;
      return;
    }
    clearTimeout(watch.look);
    looking();
  };
  next();
}
