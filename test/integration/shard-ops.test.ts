import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ShardOpClient } from '../../src/queue/shard-op-client.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';

describe('shard ops', () => {
  let box: Sandbox;
  let ops: ShardOpClient;
  beforeAll(async () => {
    box = sandbox();
    await box.pool([0, 1]);
    ops = new ShardOpClient({ redisUrl: box.config.redisUrl, prefix: box.config.prefix });
  });
  afterAll(async () => {
    await ops.close();
    await box.cleanup();
  });

  it('runs on the shard owner and answers its result', async () => {
    expect(await ops.run(1, 'ping', {})).toEqual({ ok: true, result: { pong: true } });
  });

  it('answers an unknown op with INVALID_ARGUMENTS, not a fault', async () => {
    const out = await ops.run(0, 'nope', {});
    expect(out).toMatchObject({ ok: false, error: { code: 'INVALID_ARGUMENTS' } });
  });

  it('answers even when its completion event goes unheard', async () => {
    const lost = new ShardOpClient({ redisUrl: box.config.redisUrl, prefix: box.config.prefix });
    try {
      // Shard 2 has no owner yet. Its event reader is readied, then deafened: only the job
      // itself can tell the outcome, which comes once an owner starts (after the wait began).
      const internals = lost as unknown as { forShard(shard: number): { ready: Promise<unknown>; events: { emit: () => boolean } } };
      const q = internals.forShard(2);
      await q.ready;
      q.events.emit = () => false;
      const answer = lost.run(2, 'ping', {}, { timeoutMs: 30_000 });
      await box.pool([2]);
      expect(await answer).toEqual({ ok: true, result: { pong: true } });
    } finally {
      await lost.close();
    }
  });

  it('does not take an op name from the prototype', async () => {
    expect(await ops.run(0, 'constructor', {})).toMatchObject({ ok: false, error: { code: 'INVALID_ARGUMENTS' } });
  });
});
