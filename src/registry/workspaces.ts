import type { Redis } from 'ioredis';
import { workspaceName } from '../contracts/names.ts';
import { PLANS, UNREGISTERED_PLAN, type Plan } from '../contracts/settings.ts';
import { AgentDbError } from '../errors.ts';
import type { Keys } from '../redis/keys.ts';
import { workspaceChanged } from './registry-changes.ts';

/** A registered workspace and the plan its limits follow. */
export interface Workspace {
  name: string;
  plan: Plan;
  createdAt: number;
}

interface WorkspaceRecord {
  plan: Plan;
  createdAt: number;
}

/**
 * How long a worker-side or client-side reader trusts a plan it looked up. Plans change by
 * hand and rarely; one lookup per call would put a Redis round trip on the hottest path.
 */
const PLAN_CACHE_MS = 1000;

/**
 * The durable registry of workspaces (`agentdb workspaces …`): which exist and on which plan.
 * A workspace's plan sets its limits (tables, database size); nobody calling can pick it.
 */
export class WorkspaceRegistry {
  private readonly planCache = new Map<string, { plan: Plan; until: number }>();

  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
  ) {}

  /**
   * Registers `name` on `plan`, or changes the plan of a registered one.
   * @throws AgentDbError INVALID_ARGUMENTS for a bad name or plan.
   */
  async put(name: string, plan: Plan): Promise<Workspace> {
    const ws = workspaceName.safeParse(name);
    if (!ws.success) throw new AgentDbError('INVALID_ARGUMENTS', ws.error.issues[0]?.message);
    if (!PLANS.includes(plan)) throw new AgentDbError('INVALID_ARGUMENTS', `plan must be one of ${PLANS.join(', ')}, not ${String(plan)}.`);
    const current = await this.get(name);
    const record: WorkspaceRecord = { plan, createdAt: current?.createdAt ?? Date.now() };
    await this.redis.multi().hset(this.keys.workspaces, name, JSON.stringify(record)).publish(this.keys.registryChanges, workspaceChanged(name)).exec();
    this.planCache.delete(name);
    return { name, ...record };
  }

  /** The registered workspace `name`, or undefined. */
  async get(name: string): Promise<Workspace | undefined> {
    if (!workspaceName.safeParse(name).success) return undefined;
    const raw = await this.redis.hget(this.keys.workspaces, name);
    if (!raw) return undefined;
    return { name, ...(JSON.parse(raw) as WorkspaceRecord) };
  }

  /** Every registered workspace, by name. */
  async list(): Promise<Workspace[]> {
    const all = await this.redis.hgetall(this.keys.workspaces);
    return Object.entries(all)
      .map(([name, raw]) => ({ name, ...(JSON.parse(raw) as WorkspaceRecord) }))
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  /** Unregisters `name` (its agents and their keys stay until removed). @returns false when unknown. */
  async remove(name: string): Promise<boolean> {
    this.planCache.delete(name);
    // Announced: a removed workspace's keys stop working at once, in caches too.
    const [[, removed] = []] =
      (await this.redis.multi().hdel(this.keys.workspaces, name).publish(this.keys.registryChanges, workspaceChanged(name)).exec()) ?? [];
    return removed === 1;
  }

  /**
   * The plan a call in `workspace` runs on: the registered one, or {@link UNREGISTERED_PLAN}.
   * Remembered for a second, so a plan change reaches every caller within that.
   */
  /** The plan {@link planOf} would answer from what it read within the last second, or undefined: it must ask Redis. */
  planKnown(workspace: string, now = Date.now()): Plan | undefined {
    const hit = this.planCache.get(workspace);
    return hit && hit.until > now ? hit.plan : undefined;
  }

  async planOf(workspace: string): Promise<Plan> {
    const now = Date.now();
    const hit = this.planKnown(workspace, now);
    if (hit) return hit;
    const plan = (await this.get(workspace))?.plan ?? UNREGISTERED_PLAN;
    if (this.planCache.size > 10_000) this.planCache.clear();
    this.planCache.set(workspace, { plan, until: now + PLAN_CACHE_MS });
    return plan;
  }
}
