import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { agentName, workspaceName } from '../contracts/names.ts';
import type { AgentSettings } from '../contracts/settings.ts';
import { AgentDbError } from '../errors.ts';
import type { Keys } from '../redis/keys.ts';
import type { AgentRegistry, RegisteredAgent } from './agents.ts';
import { workspaceChanged } from './registry-changes.ts';
import { hashKey, isKeyShaped, mintKey } from './secret-key.ts';

/**
 * What an agent key grants, fixed when it is minted from the agent's settings then: the data
 * toolkit (`database`) and the shared-data grant. A later change of the agent's settings
 * never widens a key already handed out — that takes a new key — but narrowing applies at once.
 */
export interface KeyGrants {
  database: AgentSettings['database'];
  sharedData: boolean;
}

/** One agent key as listed (never the key itself). */
export interface AgentKey {
  id: string;
  workspace: string;
  agent: string;
  grants: KeyGrants;
  createdAt: number;
  revoked: boolean;
  revokedAt?: number;
}

interface KeyRecord {
  agent: string;
  keyHash: string;
  grants: KeyGrants;
  createdAt: number;
  /**
   * The agent record's creation (`RegisteredAgent.createdAt`) when the key was minted: the key
   * is that agent's, not its name's. Absent from keys minted before it was kept (see {@link ofAgent}).
   */
  agentSince?: number;
  revoked: boolean;
  revokedAt?: number;
}

const DATABASE_ORDER = ['off', 'agent', 'workspace'] as const;

/** The narrower of two database settings. */
function narrower(a: AgentSettings['database'], b: AgentSettings['database']): AgentSettings['database'] {
  return DATABASE_ORDER[Math.min(DATABASE_ORDER.indexOf(a), DATABASE_ORDER.indexOf(b))]!;
}

/** An agent's settings as far as a key's grants reach. */
export function settingsUnderGrants(settings: AgentSettings, grants: KeyGrants): AgentSettings {
  return { ...settings, database: narrower(settings.database, grants.database), sharedData: settings.sharedData && grants.sharedData };
}

/**
 * Agent keys (`agentdb keys …`): bearer keys with which a registered agent calls over HTTP or
 * MCP. Like member keys, a key is shown once and kept only as its sha256; the index from hash to
 * key id is what a request is looked up by, and revoking removes the hash from it at once.
 */
export class AgentKeyRing {
  /**
   * When this ring last minted: two keys minted within one millisecond would otherwise share a
   * `createdAt`, and `list`, whose hash comes back in no order, could show them either way round.
   */
  private lastMintedAt = 0;

  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
    private readonly agents: AgentRegistry,
  ) {}

  /**
   * Mints a key for a registered agent, granting what its settings grant now.
   * @throws AgentDbError NOT_FOUND when the agent is not registered.
   */
  async mint(workspace: string, agent: string): Promise<{ key: string; info: AgentKey }> {
    const registered = await this.agents.get(workspace, agent);
    if (!registered) throw new AgentDbError('NOT_FOUND', `${workspace}/${agent} is not a registered agent.`);
    const key = mintKey();
    const id = `k_${randomBytes(6).toString('hex')}`;
    this.lastMintedAt = Math.max(Date.now(), this.lastMintedAt + 1);
    const record: KeyRecord = {
      agent,
      keyHash: hashKey(key),
      grants: { database: registered.settings.database, sharedData: registered.settings.sharedData },
      createdAt: this.lastMintedAt,
      agentSince: registered.createdAt,
      revoked: false,
    };
    await this.redis
      .multi()
      .hset(this.keys.agentKeys(workspace), id, JSON.stringify(record))
      .hset(this.keys.agentKeyIndex, record.keyHash, `${workspace}/${id}`)
      .exec();
    return { key, info: info(workspace, id, record) };
  }

  /**
   * Revokes key `id`: it stops working at once, in caches too (the revocation is announced in
   * the same transaction). @returns false when there was no active key.
   */
  async revoke(workspace: string, id: string): Promise<boolean> {
    if (!workspaceName.safeParse(workspace).success) return false;
    const raw = await this.redis.hget(this.keys.agentKeys(workspace), id);
    if (!raw) return false;
    const record = JSON.parse(raw) as KeyRecord;
    if (record.revoked) return false;
    const next: KeyRecord = { ...record, revoked: true, revokedAt: Date.now() };
    await this.redis
      .multi()
      .hdel(this.keys.agentKeyIndex, record.keyHash)
      .hset(this.keys.agentKeys(workspace), id, JSON.stringify(next))
      .publish(this.keys.registryChanges, workspaceChanged(workspace))
      .exec();
    return true;
  }

  /** Every key of `workspace` (of one agent, when given), revoked ones included, oldest first. */
  async list(workspace: string, agent?: string): Promise<AgentKey[]> {
    if (!workspaceName.safeParse(workspace).success) return [];
    const all = await this.redis.hgetall(this.keys.agentKeys(workspace));
    return Object.entries(all)
      .map(([id, raw]) => info(workspace, id, JSON.parse(raw) as KeyRecord))
      .filter((k) => agent === undefined || k.agent === agent)
      .sort((a, b) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  /**
   * Where key `id` of `agent` stands now, by id rather than by token: a call parked with it is
   * checked again when a person releases it, against what the registry says at that moment.
   */
  async standing(workspace: string, id: string, agent: string): Promise<KeyStanding> {
    const [raw, registered, workspaceExists] = await Promise.all([
      this.redis.hget(this.keys.agentKeys(workspace), id),
      this.agents.get(workspace, agent),
      this.redis.hexists(this.keys.workspaces, workspace),
    ]);
    if (!workspaceExists) return { ok: false, reason: `workspace "${workspace}" was removed` };
    if (!registered) return { ok: false, reason: `agent "${agent}" was removed` };
    const record = raw ? (JSON.parse(raw) as KeyRecord) : undefined;
    if (!record || record.agent !== agent || !ofAgent(record, registered))
      return { ok: false, reason: `the agent key ${id} it was made with no longer exists` };
    if (record.revoked) return { ok: false, reason: `the agent key ${id} it was made with was revoked` };
    return { ok: true, settings: settingsUnderGrants(registered.settings, record.grants) };
  }

  /**
   * The active key a bearer token is, with its agent as registered now; undefined for unknown,
   * malformed or revoked keys, and for keys whose agent or workspace is no longer registered.
   */
  async authenticate(token: string): Promise<{ key: AgentKey; settings: AgentSettings; agent: RegisteredAgent } | undefined> {
    if (!isKeyShaped(token)) return undefined;
    const keyHash = hashKey(token);
    const owner = await this.redis.hget(this.keys.agentKeyIndex, keyHash);
    if (!owner) return undefined;
    const slash = owner.indexOf('/');
    const workspace = owner.slice(0, slash);
    const id = owner.slice(slash + 1);
    const raw = await this.redis.hget(this.keys.agentKeys(workspace), id);
    if (!raw) return undefined;
    const record = JSON.parse(raw) as KeyRecord;
    // The record is the authority: an index entry left behind must not grant access.
    if (record.revoked || record.keyHash !== keyHash || !agentName.safeParse(record.agent).success) return undefined;
    const [agent, registered] = await Promise.all([this.agents.get(workspace, record.agent), this.redis.hexists(this.keys.workspaces, workspace)]);
    if (!agent || !registered || !ofAgent(record, agent)) return undefined;
    return { key: info(workspace, id, record), settings: settingsUnderGrants(agent.settings, record.grants), agent };
  }
}

/**
 * Whether a key is the agent's now registered under its name, not an earlier agent's: removing an
 * agent said its keys no longer work, yet registering the name again (for another purpose, or
 * after a key leaked) brought every key of the removed agent back, and the parked calls made with
 * them ran when released (hostile review T2). A key minted before its agent kept `agentSince`
 * is the agent's when minted after the agent's registration began.
 */
function ofAgent(record: KeyRecord, agent: RegisteredAgent): boolean {
  return record.agentSince !== undefined ? record.agentSince === agent.createdAt : record.createdAt >= agent.createdAt;
}

/** Where a key stands now: the settings it reaches, or why it no longer reaches any. */
export type KeyStanding = { ok: true; settings: AgentSettings } | { ok: false; reason: string };

function info(workspace: string, id: string, r: KeyRecord): AgentKey {
  return {
    id,
    workspace,
    agent: r.agent,
    grants: r.grants,
    createdAt: r.createdAt,
    revoked: r.revoked,
    ...(r.revokedAt !== undefined ? { revokedAt: r.revokedAt } : {}),
  };
}
