#!/usr/bin/env node
// The CLI runs the TypeScript sources directly through tsx's loader: one less build step
// between a fresh clone and `npm start`.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../src/cli/main.ts');
process.exitCode = await main(process.argv.slice(2));
