// The noisy-neighbour and hostile scenarios alone (`npm run build && node --import tsx bench/isolation-only.ts`):
// BENCH_ROUNDS rounds (default 3) of BENCH_PHASE_SECONDS-second phases (default 4).
import { benchIsolation } from './isolation.ts';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const rounds = Number(process.env.BENCH_ROUNDS ?? 3);
const phaseSeconds = Number(process.env.BENCH_PHASE_SECONDS ?? 4);
const isolation = await benchIsolation(REDIS_URL, { rounds, phaseSeconds });
console.log(JSON.stringify(isolation, null, 2));
const nn = isolation.noisyNeighbour;
console.log(`noisy neighbour (~${nn.slowStatementMs} ms statements): read p50 ×${nn.ratios.p50}, p99 ×${nn.ratios.p99} (goal p99 <= 1.5)`);
const h = isolation.hostile;
console.log(`hostile agent (32 runaway in flight): read p50 ×${h.ratios.p50}, p99 ×${h.ratios.p99}, NO_WORKER ${h.readersNoWorker} (goal p99 <= 3, none)`);
