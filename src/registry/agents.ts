import type { Redis } from 'ioredis';
import { agentProfile, type AgentProfile, type AgentProfileInput } from '../contracts/agent-profile.ts';
import { agentName, workspaceName } from '../contracts/names.ts';
import { PLANS } from '../contracts/settings.ts';
import { AgentDbError } from '../errors.ts';
import type { Keys } from '../redis/keys.ts';
import { workspaceChanged } from './registry-changes.ts';

/** A registered agent: its slug, workspace and profile. */
export interface RegisteredAgent extends AgentProfile {
  workspace: string;
  slug: string;
  createdAt: number;
  updatedAt: number;
}

type AgentRecord = AgentProfile & { createdAt: number; updatedAt: number };

/**
 * The durable registry of agents (`agentdb agents …`): each agent's display name, settings
 * and tool surface, in a registered workspace. A call made with the agent's key runs with
 * these settings, whatever the holder of the key would like.
 */
export class AgentRegistry {
  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
  ) {}

  /**
   * Registers `slug` in `workspace`, or replaces its profile. The workspace must be registered
   * first (its plan is what the agent's limits follow).
   * @throws AgentDbError INVALID_ARGUMENTS for a bad name or profile, NOT_FOUND for an
   * unregistered workspace.
   */
  async put(workspace: string, slug: string, input: AgentProfileInput): Promise<RegisteredAgent> {
    const ws = workspaceName.safeParse(workspace);
    if (!ws.success) throw new AgentDbError('INVALID_ARGUMENTS', ws.error.issues[0]?.message);
    const nm = agentName.safeParse(slug);
    if (!nm.success) throw new AgentDbError('INVALID_ARGUMENTS', nm.error.issues[0]?.message);
    const profile = agentProfile.safeParse(input);
    if (!profile.success) {
      const i = profile.error.issues[0];
      throw new AgentDbError('INVALID_ARGUMENTS', `${i?.path.join('.')}: ${i?.message}`);
    }
    if (!(await this.redis.hexists(this.keys.workspaces, workspace))) {
      throw new AgentDbError(
        'NOT_FOUND',
        `Workspace ${workspace} is not registered: run "agentdb workspaces set --workspace ${workspace} --plan pro" (or ${PLANS.filter((p) => p !== 'pro').join(', ')}) first.`,
      );
    }
    const now = Date.now();
    const current = await this.get(workspace, slug);
    const record: AgentRecord = { ...profile.data, createdAt: current?.createdAt ?? now, updatedAt: now };
    // Announced: narrower settings apply at once to keys whose principal a server has cached.
    await this.redis
      .multi()
      .hset(this.keys.agents(workspace), slug, JSON.stringify(record))
      .publish(this.keys.registryChanges, workspaceChanged(workspace))
      .exec();
    return { workspace, slug, ...record };
  }

  /** The registered agent `slug` of `workspace`, or undefined. */
  async get(workspace: string, slug: string): Promise<RegisteredAgent | undefined> {
    if (!workspaceName.safeParse(workspace).success || !agentName.safeParse(slug).success) return undefined;
    const raw = await this.redis.hget(this.keys.agents(workspace), slug);
    return raw ? { workspace, slug, ...(JSON.parse(raw) as AgentRecord) } : undefined;
  }

  /** Every registered agent of `workspace`, by slug. */
  async list(workspace: string): Promise<RegisteredAgent[]> {
    if (!workspaceName.safeParse(workspace).success) return [];
    const all = await this.redis.hgetall(this.keys.agents(workspace));
    return Object.entries(all)
      .map(([slug, raw]) => ({ workspace, slug, ...(JSON.parse(raw) as AgentRecord) }))
      .sort((a, b) => (a.slug < b.slug ? -1 : a.slug > b.slug ? 1 : 0));
  }

  /**
   * Unregisters an agent. Its keys stop working at once (a key only works for an agent that is
   * registered); its database is left alone. @returns false when unknown.
   */
  async remove(workspace: string, slug: string): Promise<boolean> {
    if (!workspaceName.safeParse(workspace).success || !agentName.safeParse(slug).success) return false;
    const [[, raw] = [], [, removed] = []] =
      (await this.redis
        .multi()
        .hget(this.keys.agents(workspace), slug)
        .hdel(this.keys.agents(workspace), slug)
        .publish(this.keys.registryChanges, workspaceChanged(workspace))
        .exec()) ?? [];
    // Answered once the clock is past the removed registration's creation: an agent registered
    // and removed within a millisecond, then registered again, got the same `createdAt`, and with
    // it the earlier registration's call keys (`callKey`), which are apart by it alone (hostile
    // review T5: 77 of 200 remove-and-set cycles in one process). Waits a millisecond at most,
    // unless the clock was stepped back (then up to a second, past which it is left as it is).
    if (removed === 1 && typeof raw === 'string') await clockPast((JSON.parse(raw) as AgentRecord).createdAt);
    return removed === 1;
  }
}

/** Resolves once `Date.now()` is past `at`, or after a second. */
async function clockPast(at: number): Promise<void> {
  const until = Date.now() + 1000;
  while (Date.now() <= at && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 1));
}
