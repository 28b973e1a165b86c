#!/usr/bin/env node
// The `agentdb` command. Runs as built JavaScript (dist/bin/agentdb.js): loading a TypeScript
// loader on every start-up cost more than most commands take.
import { main } from '../src/cli/main.ts';

// `agentdb approvals | head`: once the reader has gone, what is left to print has nowhere to
// go. Stop quietly, as Unix tools do, instead of dying on an unhandled EPIPE with a stack trace.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') process.exit(process.exitCode ?? 0);
    throw err;
  });
}

process.exitCode = await main(process.argv.slice(2));
