import type { Redis } from 'ioredis';
import { agentName, workspaceName } from '../contracts/names.ts';
import { AgentDbError } from '../errors.ts';
import { whileRedisAnswers } from '../redis/connection.ts';
import type { Keys } from '../redis/keys.ts';
import { withScripts, type ScriptedRedis } from '../redis/lua-scripts.ts';
import { workspaceChanged } from './registry-changes.ts';
import { hashKey, isKeyShaped, mintKey } from './secret-key.ts';

/** What a member may decide: any approval of the workspace; an admin also shared drops. */
export type Role = 'member' | 'admin';

/** A person who may decide approvals in one workspace. */
export interface Member {
  workspace: string;
  name: string;
  role: Role;
  createdAt: number;
}

/**
 * The stored form of a member (a field of `keys.members(ws)`, as JSON). The key itself is never
 * stored: only its sha256, which is also the field of `keys.memberKeys` that finds the member
 * from a bearer token in one lookup. A revoked record stays, so `list` can show who once had
 * access, but its hash is removed from `memberKeys` so the key stops working at once.
 */
interface MemberRecord {
  role: Role;
  keyHash: string;
  createdAt: number;
  revoked: boolean;
  revokedAt?: number;
}

const ROLES: readonly Role[] = ['member', 'admin'];
/** How long a revoked member's mark beside the approvals is kept (see `MemberRegistry.revoke`). */
const REVOKED_MARK_MS = 24 * 3600 * 1000;
/** Compare-and-set retries; only concurrent changes to the same member ever need one. */
const MAX_ATTEMPTS = 8;

function parseRecord(raw: string | null | undefined): MemberRecord | undefined {
  if (!raw) return undefined;
  return JSON.parse(raw) as MemberRecord;
}

const validNames = (workspace: string, name: string) => workspaceName.safeParse(workspace).success && agentName.safeParse(name).success;

/**
 * What a refused member key is told, the same for every cause (unknown, revoked, or an agent's
 * key, which is valid elsewhere and the usual mistake), so a refusal names nothing that exists.
 */
export const NOT_A_MEMBER_KEY =
  "The key is not an active member key: unknown, revoked, or an agent's key (this takes a person's key, from `agentdb members add`).";

/**
 * One member as a decider, the name and when it was added: a name revoked and added again is
 * another decider. The field of `keys.revokedDeciders` (see `MemberRegistry.revoke`).
 */
export const deciderId = (workspace: string, name: string, createdAt: number): string => `${workspace}/${name}/${createdAt}`;

/**
 * The durable registry of members in Redis: who may decide approvals, with which role, and the
 * hash of the key their HTTP requests carry. The CLI and the approval core resolve names here;
 * the HTTP adapter resolves bearer keys. Nothing here logs, so a key can never reach a log.
 */
export class MemberRegistry {
  private readonly redis: ScriptedRedis;

  constructor(
    private readonly raw: Redis,
    private readonly keys: Keys,
  ) {
    this.redis = withScripts(raw);
  }

  /**
   * Registers `name` in `workspace` and mints its key, which is returned this once and never
   * stored. Re-adding a revoked name is allowed and mints a new key.
   * @throws AgentDbError INVALID_ARGUMENTS for a bad name or role; ALREADY_EXISTS for a name
   *   already active (its key cannot be shown again, so a second add is no success).
   */
  async add(workspace: string, name: string, role: Role): Promise<{ member: Member; key: string }> {
    const ws = workspaceName.safeParse(workspace);
    if (!ws.success) throw new AgentDbError('INVALID_ARGUMENTS', ws.error.issues[0]?.message);
    // Members share the agent-name alphabet: the access issue puts both in one namespace.
    const nm = agentName.safeParse(name);
    if (!nm.success) throw new AgentDbError('INVALID_ARGUMENTS', nm.error.issues[0]?.message.replace(/^agent/, 'member name'));
    if (!ROLES.includes(role)) throw new AgentDbError('INVALID_ARGUMENTS', `role must be member or admin, not ${String(role)}.`);

    const key = mintKey();
    const keyHash = hashKey(key);
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const raw = await this.redis.hget(this.keys.members(workspace), name);
      const current = parseRecord(raw);
      if (current && !current.revoked) {
        throw new AgentDbError('ALREADY_EXISTS', `Member ${name} is already active in ${workspace}: pick another name, or revoke it first to mint a new key.`);
      }
      // Strictly after the revoked record's: createdAt is the decider's identity (`deciderId`), and a
      // name revoked and added again within one millisecond took the revoked one's, its mark included.
      const createdAt = Math.max(Date.now(), (current?.createdAt ?? 0) + 1);
      const record: MemberRecord = { role, keyHash, createdAt, revoked: false };
      // A revoked record's hash left the index when it was revoked; drop it again in case.
      if (await this.cas(workspace, name, raw ?? '', record, current?.keyHash ?? '', keyHash)) {
        return { member: { workspace, name, role, createdAt }, key };
      }
    }
    throw new AgentDbError('UNAVAILABLE', `${workspace}/${name} kept changing while it was being added.`);
  }

  /**
   * Revokes `name`: its key stops working at once, and `get` no longer finds it.
   * @returns false when there was no active member by that name.
   */
  async revoke(workspace: string, name: string): Promise<boolean> {
    if (!validNames(workspace, name)) return false;
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const raw = await this.redis.hget(this.keys.members(workspace), name);
      const current = parseRecord(raw);
      if (!current || current.revoked) return false;
      // Marked first, beside the approvals: a decision whose re-check found the member before this
      // revoke is then refused by its transition (approval-transition.lua), so none lands after the
      // revoke; the member record and the approvals are in different slots, one script cannot do both.
      // Kept a day: the mark is needed for the one round trip between a decision's re-check and its
      // transition; pruned here, so revocations never pile up in Redis.
      const at = Date.now();
      await this.redis
        .multi()
        .zadd(this.keys.revokedDeciders, at, deciderId(workspace, name, current.createdAt))
        .zremrangebyscore(this.keys.revokedDeciders, '-inf', at - REVOKED_MARK_MS)
        .exec();
      const next: MemberRecord = { ...current, revoked: true, revokedAt: Date.now() };
      if (await this.cas(workspace, name, raw!, next, current.keyHash, '')) return true;
    }
    throw new AgentDbError('UNAVAILABLE', `${workspace}/${name} kept changing while it was being revoked.`);
  }

  /** The active member `name` of `workspace`; undefined when unknown or revoked. */
  async get(workspace: string, name: string): Promise<Member | undefined> {
    if (!validNames(workspace, name)) return undefined;
    const raw = await this.redis.hget(this.keys.members(workspace), name);
    const record = parseRecord(raw);
    if (!record || record.revoked || (await this.revokeBegun(workspace, name, raw!, record))) return undefined;
    return { workspace, name, role: record.role, createdAt: record.createdAt };
  }

  /** The active member a key belongs to; undefined for unknown, malformed or revoked keys. */
  async authenticate(key: string): Promise<Member | undefined> {
    if (!isKeyShaped(key)) return undefined;
    return this.authenticateHash(hashKey(key));
  }

  /**
   * The active member whose key hashes to `keyHash`: a web session keeps only the hash, and
   * asks on every request, so a revoked key signs its sessions out at once.
   */
  async authenticateHash(keyHash: string): Promise<Member | undefined> {
    // With Redis down: UNAVAILABLE in words within seconds, not 10 s of retries and a driver error.
    return whileRedisAnswers(this.raw, () => this.lookupHash(keyHash));
  }

  private async lookupHash(keyHash: string): Promise<Member | undefined> {
    const owner = await this.redis.hget(this.keys.memberKeys, keyHash);
    if (!owner) return undefined;
    const slash = owner.indexOf('/');
    const workspace = owner.slice(0, slash);
    const name = owner.slice(slash + 1);
    const raw = await this.redis.hget(this.keys.members(workspace), name);
    const record = parseRecord(raw);
    // The record is the authority: an index entry left behind by anything must not grant access.
    if (!record || record.revoked || record.keyHash !== keyHash) return undefined;
    if (await this.revokeBegun(workspace, name, raw!, record)) return undefined;
    return { workspace, name, role: record.role, createdAt: record.createdAt };
  }

  /** Every member of `workspace` ever added, revoked ones included, by name. */
  async list(workspace: string): Promise<(Member & { revoked: boolean })[]> {
    if (!workspaceName.safeParse(workspace).success) return [];
    const all = await this.redis.hgetall(this.keys.members(workspace));
    return Object.entries(all)
      .map(([name, raw]) => {
        const r = parseRecord(raw)!;
        return { workspace, name, role: r.role, createdAt: r.createdAt, revoked: r.revoked };
      })
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  /**
   * Whether a revoke of this active record began (its mark is written) but did not finish: the
   * revoke failed between its two steps (Redis gone, the process killed). Such a member can no
   * longer decide (the transition meets the mark), so it is revoked everywhere, its key too, and
   * the revoke is finished here; until then `list` still shows it active.
   */
  private async revokeBegun(workspace: string, name: string, raw: string, record: MemberRecord): Promise<boolean> {
    if ((await this.redis.zscore(this.keys.revokedDeciders, deciderId(workspace, name, record.createdAt))) === null) return false;
    await this.cas(workspace, name, raw, { ...record, revoked: true, revokedAt: Date.now() }, record.keyHash, '');
    return true;
  }

  private async cas(workspace: string, name: string, expected: string, record: MemberRecord, dropHash: string, addHash: string): Promise<boolean> {
    // member-cas.lua: writes only if the record still holds `expected`, and moves the key index
    // with it, so a record and its key hash can never disagree.
    const done = await this.redis.agentdbMemberCas(
      this.keys.members(workspace),
      this.keys.memberKeys,
      name,
      expected,
      JSON.stringify(record),
      dropHash,
      addHash,
      addHash ? `${workspace}/${name}` : '',
      this.keys.registryChanges,
      workspaceChanged(workspace),
    );
    return done === 1;
  }
}
