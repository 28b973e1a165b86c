// Process entry point: the scheduled jobs only (`node --import tsx workers/scheduler.ts`).
import { main } from '../src/cli/main.ts';

process.exitCode = await main(['scheduler', ...process.argv.slice(2)]);
