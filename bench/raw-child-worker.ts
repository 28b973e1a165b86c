// The "raw BullMQ + child" reference: BullMQ's worker with nothing of agentdb but the executor
// rule of DESIGN.md (SQLite runs in a child process, never in the process holding BullMQ locks).
// Its processor asks a forked child for one row by primary key and returns it. The gap between
// this and raw BullMQ is what the child's round trip alone costs on this machine. A fifth
// argument `insert`: the child adds a row per job instead (see raw-child.ts).
import { fork } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker } from 'bullmq';

const [redisUrl, prefix, concurrency, dbFile, mode] = process.argv.slice(2) as [string, string, string, string, string?];
const tsx = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
const child = fork(fileURLToPath(new URL('./raw-child.ts', import.meta.url)), mode ? [dbFile, mode] : [dbFile], {
  execArgv: ['--import', tsx],
  serialization: 'json',
});
await new Promise((resolve) => child.once('message', resolve));

const waiting = new Map<number, (rows: unknown) => void>();
child.on('message', (m: { id: number; rows: unknown }) => {
  waiting.get(m.id)?.(m.rows);
  waiting.delete(m.id);
});
let next = 0;
const ask = (key: number) =>
  new Promise((resolve) => {
    const id = next++;
    waiting.set(id, resolve);
    child.send({ id, key });
  });

const worker = new Worker('raw', async (job) => ({ ok: true, rows: await ask(mode ? job.data.i : job.data.i % 1000) }), {
  connection: { url: redisUrl },
  prefix,
  concurrency: Number(concurrency),
});
await worker.waitUntilReady();
process.stdout.write('ready\n');
process.on('SIGTERM', () => void worker.close().then(() => (child.kill(), process.exit(0))));
