import type { Redis } from 'ioredis';
import type { Keys } from './keys.ts';
import { withScripts } from './lua-scripts.ts';

/**
 * Statements killed from outside, remembered per workspace in Redis (outside-kill-note.lua): the
 * store a worker's executor notes each such kill in (`OutsideKillCounts`, src/executor/
 * outside-kills.ts), so a worker started again, or another worker the shard moved to, still
 * knows a statement killed once before. One script per kill; nothing while statements run.
 */
export function outsideKillCounts(redis: Redis, keys: Keys): { note(workspace: string, digest: string, windowMs: number, cap: number): Promise<number> } {
  const scripted = withScripts(redis);
  return {
    note: async (workspace, digest, windowMs, cap) =>
      Number(await scripted.agentdbOutsideKillNote(keys.outsideKills(workspace), digest, String(windowMs), String(cap))),
  };
}
