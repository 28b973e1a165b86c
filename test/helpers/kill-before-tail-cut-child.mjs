/**
 * The executor child as built, told to SIGKILL itself between SQLite's failed commit on a full
 * disk and its cut of the frames left past the WAL index's end (`uncommitted-tail.ts`): what a
 * kill from outside at that moment leaves. Plain JavaScript on the build, as `built-child.ts`.
 */
process.env.AGENTDB_TEST_KILL_BEFORE_TAIL_CUT = '1';
await import('../../dist/src/executor/executor-child.js');
