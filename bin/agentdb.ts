#!/usr/bin/env node
// The `agentdb` command. Runs as built JavaScript (dist/bin/agentdb.js): loading a TypeScript
// loader on every start-up cost more than most commands take.
import module from 'node:module';

// Node's compile cache (22.1+): every command is a fresh process compiling the same ~200-560
// modules, ~10 % of a command's start (session 26, Q1). On before anything else loads, which is
// why the command is imported below rather than at the top. It keeps its files under the OS temp
// folder (NODE_COMPILE_CACHE to move it, NODE_DISABLE_COMPILE_CACHE=1 to turn it off), and a
// folder it cannot write leaves it off, silently.
(module as { enableCompileCache?: () => unknown }).enableCompileCache?.();
const { main } = await import('../src/cli/main.ts');

// `agentdb approvals | head`: once the reader has gone, what is left to print has nowhere to
// go. Stop quietly, as Unix tools do, instead of dying on an unhandled EPIPE with a stack trace.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') process.exit(process.exitCode ?? 0);
    throw err;
  });
}

process.exitCode = await main(process.argv.slice(2));
