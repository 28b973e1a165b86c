/** Latency figures of one run, in milliseconds, and its throughput. */
export interface RunStats {
  calls: number;
  seconds: number;
  callsPerSec: number;
  p50Ms: number;
  p99Ms: number;
}

/** The q-th quantile (0..1) of already sorted numbers. */
export function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

/** The median of numbers in any order (the input is left as it is). */
export function median(xs: readonly number[]): number {
  return quantile(
    [...xs].sort((a, b) => a - b),
    0.5,
  );
}

/** Summarises per-call latencies (ms) over a run that took `seconds`. */
export function summarise(latencies: number[], seconds: number): RunStats {
  const sorted = [...latencies].sort((a, b) => a - b);
  return {
    calls: latencies.length,
    seconds: round(seconds),
    callsPerSec: round(latencies.length / seconds),
    p50Ms: round(quantile(sorted, 0.5)),
    p99Ms: round(quantile(sorted, 0.99)),
  };
}

export function round(n: number, digits = 3): number {
  const f = 10 ** digits;
  return Math.round(n * f) / f;
}

/** Runs `one` `total` times with at most `inFlight` at once; returns each call's latency in ms. */
export async function drive(total: number, inFlight: number, one: (i: number) => Promise<unknown>): Promise<{ latencies: number[]; seconds: number }> {
  const latencies: number[] = [];
  let next = 0;
  const started = performance.now();
  const lane = async () => {
    while (next < total) {
      const i = next++;
      const t = performance.now();
      await one(i);
      latencies.push(performance.now() - t);
    }
  };
  await Promise.all(Array.from({ length: inFlight }, lane));
  return { latencies, seconds: (performance.now() - started) / 1000 };
}
