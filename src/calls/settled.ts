/**
 * `work()`'s promise with `after` run as it settles, whichever way, before anyone awaiting the
 * result hears of it: an async function's `try { return await work() } finally { after() }`
 * with one promise and one microtask, not an async frame, an await and a promise more (issue
 * 31: a call's job passed ~7 such layers in the worker). A synchronous throw of `work` rejects.
 */
export function settled<T>(work: () => Promise<T>, after: () => void): Promise<T> {
  let running: Promise<T>;
  try {
    running = work();
  } catch (err) {
    running = Promise.reject(err);
  }
  return running.then(
    (value) => {
      after();
      return value;
    },
    (err: unknown) => {
      after();
      throw err;
    },
  );
}
