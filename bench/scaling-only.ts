// The scaling scenario alone (`npm run build && node --import tsx bench/scaling-only.ts`):
// BENCH_ROUNDS rounds (default 3), BENCH_SCALING_CALLS calls a side (default 2000).
import { benchScaling } from './scaling.ts';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const rounds = Number(process.env.BENCH_ROUNDS ?? 3);
const calls = Number(process.env.BENCH_SCALING_CALLS ?? 2000);
console.log(JSON.stringify(await benchScaling(REDIS_URL, { rounds, calls }), null, 2));
