import { Redis } from 'ioredis';
import { afterAll, beforeAll } from 'vitest';
import { ApprovalService } from '../../src/approvals/approval-service.ts';
import { ApprovalStore } from '../../src/approvals/approval-store.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { MemberRegistry } from '../../src/registry/members.ts';
import { REDIS_URL, sandbox, type Sandbox } from './harness.ts';

/** What {@link withApprovalStoreService} makes. */
export interface ApprovalStoreService {
  sb: Sandbox;
  redis: Redis;
  store: ApprovalStore;
  members: MemberRegistry;
  service: ApprovalService;
}

/**
 * A sandbox with no workers, its approval store (for tests that fill it directly, as a parked
 * write would), the member registry and the approval service that decides over both, for the
 * tests of one file: made before them and closed after; `set` receives them once made.
 */
export function withApprovalStoreService(set: (box: ApprovalStoreService) => void): void {
  let box: ApprovalStoreService | undefined;
  beforeAll(async () => {
    const sb = sandbox();
    const redis = new Redis(REDIS_URL);
    const keys = keysFor(sb.config.prefix);
    const members = new MemberRegistry(redis, keys);
    const service = new ApprovalService({ redis, prefix: sb.config.prefix, shardCount: sb.config.shardCount, members });
    box = { sb, redis, store: new ApprovalStore(redis, keys), members, service };
    set(box);
  });
  afterAll(async () => {
    await box?.service.close();
    box?.redis.disconnect();
    await box?.sb.cleanup();
  });
}
