// bench/async-ledger.ts's hook, loaded by every process of its run (NODE_OPTIONS): counts the async
// resources the process creates, by type (with STACKS=1 all but promises by where too; with
// STACKS=promise only promises, by their first three frames, file and line), and
// appends the counts so far to $ASYNC_LEDGER_DIR/<pid>.jsonl on each SIGUSR2.
import { createHook } from 'node:async_hooks';
import { appendFileSync } from 'node:fs';
const counts = Object.create(null);
const stacks = Object.create(null);
const want = process.env.STACKS === '1';
const wantPromises = process.env.STACKS === 'promise';
createHook({
  init(_id, type) {
    counts[type] = (counts[type] ?? 0) + 1;
    if (wantPromises && type === 'PROMISE') {
      const s = new Error().stack
        .split('\n')
        .slice(1)
        .map((l) =>
          l
            .trim()
            .replace(/^at /, '')
            .replace(/\(?file:\/\/\S*?\/(dist|node_modules)\//, '$1/')
            .replace(/:\d+\)?$/, ''),
        )
        .filter((l) => !l.includes('async_hooks') && !l.includes('hook.mjs'))
        .slice(0, 3)
        .join(' < ');
      stacks[s] = (stacks[s] ?? 0) + 1;
    }
    if (want && type !== 'PROMISE') {
      const s = new Error().stack
        .split('\n')
        .slice(1)
        .map((l) => l.trim())
        .filter((l) => !l.includes('async_hooks') && !l.includes('hook.mjs'))
        .slice(0, 6)
        .join(' < ');
      const k = type + ' ' + s;
      stacks[k] = (stacks[k] ?? 0) + 1;
    }
  },
}).enable();
process.on('SIGUSR2', () => {
  appendFileSync(
    `${process.env.ASYNC_LEDGER_DIR}/${process.pid}.jsonl`,
    JSON.stringify({ argv: process.argv.slice(1).join(' ').slice(-120), counts: { ...counts }, stacks: { ...stacks } }) + '\n',
  );
});
