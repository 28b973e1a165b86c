// What a call's parts cost Redis, in bytes, as the workspace budget counts them.

/**
 * What a call costs Redis beside its JSON: BullMQ's job hash and its fields, the queue and
 * events entries, the call-id claim and this ledger's own entry. Measured at about 1.6 KB for a
 * small call (2.6 KB in all, with ~1 KB of arguments and envelope; issue 27).
 */
export const CALL_OVERHEAD_BYTES = 1536;

/**
 * Room a call holds in its workspace's budget from its enqueue to its completion, for the
 * envelope it will leave: two copies (the job and BullMQ's event stream) of a 64 KiB envelope,
 * the default MAX_RESULT_BYTES. Counting only a queued call's arguments let calls queued behind a
 * slow statement all pass the check and then each leave an envelope: the hostile review had 298
 * calls admitted under a 4 MiB budget hold 39 MB once they ran (9.4 times the budget). So a
 * workspace has at most its budget / 128 KiB calls queued, running or parked at once (about 1,000
 * on pro), and passes its budget by at most what a call over the check adds.
 */
export const ENVELOPE_RESERVE_BYTES = 2 * 64 * 1024;

/**
 * The bytes `value` takes in Redis as JSON: its length rounded up to the allocator's size class
 * (jemalloc has four classes per doubling), as `MEMORY USAGE` counts it.
 */
export function jsonBytes(value: unknown): number {
  return jsonTextBytes(JSON.stringify(value) ?? '');
}

/** {@link jsonBytes} of JSON already made, so a value written anyway is not serialised a second time to be counted. */
export function jsonTextBytes(json: string): number {
  return sizeClassBytes(Buffer.byteLength(json));
}

/** {@link jsonTextBytes} of JSON whose UTF-8 length `n` is already known. */
export function sizeClassBytes(n: number): number {
  if (n <= 16) return 16;
  const step = 2 ** Math.max(Math.floor(Math.log2(n - 1)) - 2, 3);
  return Math.ceil(n / step) * step;
}
