// The executor child (as built), SIGKILLed while it starts as long as its test says so — as an
// OOM killer or an operator's `kill` may hit a child that is starting. The test names a folder
// in AGENTDB_TEST_START_KILLS: each file in it is one kill, taken by the child that deletes it
// (unlink is atomic, so two children never take the same one), and a file named `always` kills
// every child. Plain JavaScript, so that it starts as fast as the built child it stands for.
import { readdirSync, unlinkSync } from 'node:fs';
import path from 'node:path';

const folder = process.env.AGENTDB_TEST_START_KILLS;
if (folder) {
  for (const name of readdirSync(folder)) {
    if (name === 'always') process.kill(process.pid, 'SIGKILL');
    try {
      unlinkSync(path.join(folder, name));
      process.kill(process.pid, 'SIGKILL');
    } catch {
      // another child took this one
    }
  }
}
await import('../../dist/src/executor/executor-child.js');
