/**
 * A worker's stand-in for the executor child's parent: forks the built child, sends it a write
 * (which the test keeps waiting on SQLite's write lock) and a request behind it and prints `{"child": pid}` on stdout once
 * the message is written; the test then SIGKILLs this process, so the child answers a parent gone.
 * With `"dies": true` it prints the child's pid and SIGKILLs itself at once instead: the child,
 * still starting, says it is ready to a parent gone.
 * Run as `node blocked-write-parent.mjs '{"dataDir", "db": DbTarget, "dies"?}'`. Plain JavaScript on
 * the build (test/global-setup.ts makes it current), as `answer-first-child.mjs` is.
 */
import { forkExecutorChild } from '../../dist/src/executor/executor-spawn.js';

const { dataDir, db, dies } = JSON.parse(process.argv[2]);
const child = forkExecutorChild({ dataDir, heapLimitMb: 64, handleCacheSize: 2, maxResultBytes: 1024 * 1024 });
if (dies) {
  process.stdout.write(`${JSON.stringify({ child: child.pid })}\n`, () => process.kill(process.pid, 'SIGKILL'));
}
child.once('message', () => {
  const write = { op: 'write', db, sql: 'INSERT INTO t (v) VALUES (1)', params: [], callKey: 'w/a/blocked-1' };
  // Two requests in one message, as the worker pipelines them: the first's answer, done past the
  // child's flush interval, is sent before the second runs, without a callback.
  child.send(
    [
      { id: 1, req: write, ref: 0 },
      { id: 2, req: { op: 'stats' } },
    ],
    () => process.stdout.write(`${JSON.stringify({ child: child.pid })}\n`),
  );
});
