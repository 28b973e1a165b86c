// Process entry point: shard workers only (`node dist/workers/shard-worker.js --shards 0-7`, built).
import { main } from '../src/cli/main.ts';

process.exitCode = await main(['worker', ...process.argv.slice(2)]);
