import type { Job } from 'bullmq';
import pino from 'pino';
import { expect, it } from 'vitest';
import { runShardOp, type ShardOpHandler } from '../../src/shards/ops/shard-ops.ts';
import type { ShardOpJobData } from '../../src/contracts/shard-op.ts';

// Session 29, F5: the fault ledger's five `agentdb restore --from-blob` at its end, on a full data
// disk, printed BullMQ's stack trace ("Error: ENOSPC: no space left on device, write"): the op's
// ENOSPC was thrown on as a fault (BullMQ ran it twice more), not answered as the disk being full.
it('answers a shard op that hit a full disk STORAGE_FULL, as an answer rather than a fault', async () => {
  const full: ShardOpHandler = async () => {
    throw Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
  };
  const broken: ShardOpHandler = async () => {
    throw new Error('something else');
  };
  const job = (op: string) => ({ id: 'op.1', data: { op, db: 'acme/scout' } }) as unknown as Job<ShardOpJobData>;
  const at = { shard: 0, logger: pino({ level: 'silent' }) } as unknown as Parameters<typeof runShardOp>[2];
  expect(await runShardOp({ full }, job('full'), at)).toMatchObject({ ok: false, error: { code: 'STORAGE_FULL', detail: expect.stringContaining('ENOSPC') } });
  // Any other fault still fails the job, for BullMQ to try again.
  await expect(runShardOp({ broken }, job('broken'), at)).rejects.toThrow('something else');
});
