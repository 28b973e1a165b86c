// Loaded into a CLI process with `node --import`: tells which timers held the process open after
// it answered. A command that has printed its answer has nothing left to do, so every timer that
// still runs after that (a library's grace before it destroys a socket, a reconnect, a poll not
// cleared) only keeps the process from exiting. At exit it prints one line to stderr,
// `timers-after-answer: [{"ms":…,"at":"…"}]`: each ref'd timer whose callback ran after the first
// write to stdout, with the delay it was set for and where it was set. Plain JavaScript, loaded
// into the built CLI as it is.
import { createHook } from 'node:async_hooks';

/** Timers still pending, by async id: their delay and where they were set. */
const pending = new Map();
const ran = [];
let answered = false;

createHook({
  init(id, type, _trigger, resource) {
    if (type !== 'Timeout') return;
    const at = (new Error().stack ?? '')
      .split('\n')
      .slice(1)
      .filter((line) => !/node:internal|timers-after-answer/.test(line))
      .slice(0, 4)
      .map((line) => line.trim())
      .join(' < ');
    pending.set(id, { resource, ms: resource._idleTimeout, at });
  },
  before(id) {
    const t = pending.get(id);
    if (answered && t?.resource.hasRef()) ran.push({ ms: t.ms, at: t.at });
  },
  destroy(id) {
    pending.delete(id);
  },
}).enable();

const write = process.stdout.write.bind(process.stdout);
process.stdout.write = (...args) => {
  answered = true;
  return write(...args);
};

process.on('exit', () => {
  process.stderr.write(`timers-after-answer: ${JSON.stringify(ran)}\n`);
});
