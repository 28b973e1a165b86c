#!/usr/bin/env node
// The `agentdb` command. Runs as built JavaScript (dist/bin/agentdb.js): loading a TypeScript
// loader on every start-up cost more than most commands take.
import { main } from '../src/cli/main.ts';

process.exitCode = await main(process.argv.slice(2));
