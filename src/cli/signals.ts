/** The first SIGINT or SIGTERM from now on, and `stop()` to stop listening for it. */
export interface Interruption {
  signal: Promise<NodeJS.Signals>;
  stop(): void;
}

/**
 * Listens for SIGINT and SIGTERM, so a command can answer Ctrl-C in its own words. Until
 * `stop()`, those signals no longer end the process on their own.
 */
export function interruption(): Interruption {
  let done: (signal: NodeJS.Signals) => void = () => undefined;
  const stop = () => {
    process.off('SIGINT', done);
    process.off('SIGTERM', done);
  };
  const signal = new Promise<NodeJS.Signals>((resolve) => {
    done = (s) => {
      stop();
      resolve(s);
    };
  });
  process.on('SIGINT', done);
  process.on('SIGTERM', done);
  return { signal, stop };
}

/** Resolves on the first SIGINT or SIGTERM, so a command can shut down cleanly. */
export function untilSignal(): Promise<NodeJS.Signals> {
  return interruption().signal;
}
