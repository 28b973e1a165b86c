// REPRO (review R1, session 22), not in the suite (*.repro.ts): copy it to
// test/integration/<name>.test.ts and run it with -t empty. Eight sequential writers on one shard,
// Redis SIGKILLed and restarted EMPTY mid-traffic; every answer is checked against the rows.
// Helper F (session 22) found the "hang" R1 saw was this test's, not the callers': with
// timeoutMs 600 s, a call in flight at the kill (its job went with the wipe) waits for its look at
// timeoutMs, which answers UNAVAILABLE mayStillRun (call-job-lost.test.ts), by design; the other
// writers had answered and stopped (`stop`), but `inflight` kept their last call, so the STUCK
// lines listed them (their waits gone, their events read: what a finished call looks like), and
// `await run` waited the 600 s. Instrumented runs: every one listed as stuck had returned `ok`.
// timeoutMs is now 10 s (those calls answer within the test) and `inflight` forgets answered calls.
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { OwnRedis } from '../helpers/own-redis.ts';

let own: OwnRedis;
let sb: Sandbox;
let client: AgentDbClient;
const who = (c: number) => ({ workspace: 'flt', agent: `w${c % 2}`, settings: { database: 'agent' as const } });
beforeAll(async () => {
  own = await OwnRedis.start();
  sb = sandbox({ SHARD_COUNT: '1', REDIS_URL: own.url });
  await sb.pool();
  client = sb.client();
  for (const c of [0, 1])
    expect(await client.call({ ...who(c), tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (v TEXT)' } })).toMatchObject({ ok: true });
});
afterAll(async () => {
  await sb.cleanup();
  await own.remove();
});

async function traffic(fault: () => Promise<void>) {
  const answers = new Map<string, { c: number; code: string; tries: number }>();
  let stop = false;
  const inflight = new Map<number, { v: string; at: number; tries: number }>();
  const timer = setInterval(() => {
    const old = [...inflight.values()].filter((f) => Date.now() - f.at > 8000);
    if (old.length) {
      const rr = (
        client as unknown as {
          redis: {
            status: string;
            commandQueue: { length: number; toArray?: () => { command: { name: string; args: unknown[] } }[] };
            offlineQueue: { length: number };
            _addedScriptHashes?: object;
          };
        }
      ).redis;
      const cq = rr.commandQueue.toArray ? rr.commandQueue.toArray().map((c) => c.command.name + ':' + String(c.command.args[0]).slice(0, 40)) : [];
      console.log(
        'CONN',
        rr.status,
        rr.commandQueue.length,
        rr.offlineQueue.length,
        JSON.stringify(cq.slice(0, 6)),
        JSON.stringify(Object.keys(rr._addedScriptHashes ?? {})),
      );
      const cl = client as unknown as {
        waiters: { watches: Map<string, { completed: Set<unknown>; look?: unknown }> };
        reader?: Promise<{ lastId: string; running: boolean }>;
      };
      const w = cl.waiters.watches;
      void cl.reader?.then((r) =>
        console.log(
          'STUCK',
          Date.now(),
          JSON.stringify(old),
          answers.size,
          'reader',
          r.lastId,
          r.running,
          'watches',
          JSON.stringify(w ? [...w.keys()] : 'n/a'),
        ),
      );
    }
  }, 5000);
  let after = 0;
  const run = Promise.all(
    Array.from({ length: 8 }, async (_, c) => {
      for (let i = 0; !stop; i++) {
        const v = `${fault.name}-${c}-${i}`;
        for (let tries = 1; ; tries++) {
          inflight.set(c, { v, at: Date.now(), tries });
          const a = await client.call(
            { ...who(c), callId: v, tool: 'DATA_WRITE_SQL', arguments: { sql: 'INSERT INTO t (v) VALUES (?)', params: [v] } },
            { timeoutMs: 10_000 },
          );
          const code = a.ok ? 'ok' : (a as { error: { code: string } }).error.code;
          if (code === 'UNAVAILABLE' && tries < 200) {
            await new Promise((r) => setTimeout(r, 200));
            continue;
          }
          answers.set(v, { c, code, tries });
          inflight.delete(c);
          break;
        }
      }
    }),
  );
  await expect.poll(() => answers.size, { timeout: 60_000 }).toBeGreaterThan(100);
  await fault();
  const start = answers.size;
  await new Promise((r) => setTimeout(r, 1000));
  await expect.poll(() => answers.size - start, { timeout: 60_000 }).toBeGreaterThan(200);
  after = answers.size - start;
  stop = true;
  await run;
  clearInterval(timer);
  const rows = new Map<string, number>();
  for (const c of [0, 1]) {
    const r = await client.call({
      ...who(c),
      tool: 'DATA_QUERY_SQL',
      arguments: { sql: "SELECT group_concat(v || ':' || n, ',') FROM (SELECT v, count(*) n FROM t GROUP BY v)" },
    });
    const all = (r as unknown as { result: { rows: [string][] } }).result.rows[0]![0] ?? '';
    for (const pair of all.split(',')) if (pair) rows.set(pair.split(':')[0]!, Number(pair.split(':')[1]));
  }
  const codes: Record<string, number> = {};
  const wrong: string[] = [];
  for (const [v, a] of answers) {
    codes[a.code] = (codes[a.code] ?? 0) + 1;
    const n = rows.get(v) ?? 0;
    if (a.code === 'ok' ? n !== 1 : n !== 0) wrong.push(`${v} ${a.code} rows=${n} tries=${a.tries}`);
  }
  for (const [v, n] of rows) if (v.startsWith(fault.name) && (n !== 1 || !answers.has(v))) wrong.push(`${v} unanswered rows=${n}`);
  console.log(
    fault.name,
    JSON.stringify({ calls: answers.size, after, codes, retried: [...answers.values()].filter((a) => a.tries > 1).length, wrong: wrong.slice(0, 10) }),
  );
  expect(wrong).toEqual([]);
}

it('Redis SIGKILLed and restarted empty mid-traffic', async () => {
  await traffic(async function emptyRestart() {
    await own.kill();
    own.wipe();
    await own.start();
  });
}, 300_000);

it('Redis SIGSTOPped 4 s mid-traffic', async () => {
  await traffic(async function sigstop() {
    own.signal('SIGSTOP');
    await new Promise((r) => setTimeout(r, 4000));
    own.signal('SIGCONT');
  });
}, 300_000);
