import type { Envelope } from '../contracts/envelope.ts';

/** How long, and for how many calls, an announced outcome is kept for `result()`. */
const ANNOUNCED_MS = 5000;
const ANNOUNCED_MAX = 1024;

/**
 * Outcomes the workers announced for calls waited on in this client, for a few seconds: the
 * announcement leaves before BullMQ marks the job finished (a round trip sooner for the caller),
 * so a `result()` asked at once after `call()` answered found the job unfinished and said
 * `queued` (seen once in CI). Bounded in count and time: it only bridges that gap.
 */
export class AnnouncedOutcomes {
  private readonly announced = new Map<string, { envelope: Envelope; at: number; announcedAt: number }>();

  /**
   * The outcome announced for the call (by its `callKey`) within the last {@link ANNOUNCED_MS}, if
   * any, with when its run announced it (`announcedAt`, the worker's clock: the event's `at`).
   */
  get(key: string): { envelope: Envelope; announcedAt: number } | undefined {
    const got = this.announced.get(key);
    if (!got) return undefined;
    if (Date.now() - got.at <= ANNOUNCED_MS) return got;
    this.announced.delete(key);
    return undefined;
  }

  /** Keeps the call's announced outcome, dropping the oldest past {@link ANNOUNCED_MAX}. */
  remember(key: string, envelope: Envelope, announcedAt: number): void {
    this.announced.delete(key);
    if (this.announced.size >= ANNOUNCED_MAX) this.announced.delete(this.announced.keys().next().value!);
    this.announced.set(key, { envelope, at: Date.now(), announcedAt });
  }
}
