// Process entry point: the scheduled jobs only (`node dist/workers/scheduler.js`, built).
import { main } from '../src/cli/main.ts';

process.exitCode = await main(['scheduler', ...process.argv.slice(2)]);
