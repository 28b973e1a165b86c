// Process entry point: shard workers only (`node --import tsx workers/shard-worker.ts --shards 0-7`).
import { main } from '../src/cli/main.ts';

process.exitCode = await main(['worker', ...process.argv.slice(2)]);
