import type { Redis } from 'ioredis';
import type { Surface } from '../contracts/agent-profile.ts';
import type { CallInput, MemberOfCall } from '../contracts/call.ts';
import { memberCaller } from '../contracts/name-pattern.ts';
import type { AgentSettings } from '../contracts/settings.ts';
import { MemberRegistry } from './members.ts';
import type { Keys } from '../redis/keys.ts';
import { whileRedisAnswers } from '../redis/connection.ts';
import { AgentKeyRing } from './agent-keys.ts';
import { AgentRegistry } from './agents.ts';
import type { PrincipalCache } from './principal-cache.ts';
import { hashKey, isKeyShaped } from './secret-key.ts';

/**
 * Who a bearer key speaks for: a registered agent (with the settings its key reaches and its
 * tool surface) or a member of a workspace (a person's client, fenced by role).
 */
export type Principal =
  | {
      kind: 'agent';
      workspace: string;
      agent: string;
      keyId: string;
      settings: AgentSettings;
      surface: Surface;
      /**
       * When the agent's registration began (`RegisteredAgent.createdAt`): an agent removed and
       * registered again under the name is another, and its key does not read the calls made
       * before (see `ResultQuery.memberSince`).
       */
      since?: number;
    }
  | {
      kind: 'member';
      workspace: string;
      member: MemberOfCall;
      /**
       * The member record's creation (`Member.createdAt`): a member revoked and added again under
       * the same name is someone else, and what the first one kept (MCP tasks) is not theirs.
       */
      since?: number;
    };

/**
 * Resolves bearer keys of either kind. Agent and member keys share one shape (`adb_…`), so a
 * key is looked up in both indexes; whichever holds it says what it is. With a
 * {@link PrincipalCache}, active keys seen recently skip the lookups until the registry changes.
 */
export class KeyAuthenticator {
  private readonly members: MemberRegistry;
  private readonly agentKeys: AgentKeyRing;

  constructor(
    private readonly redis: Redis,
    keys: Keys,
    private readonly cache?: PrincipalCache,
  ) {
    this.members = new MemberRegistry(redis, keys);
    this.agentKeys = new AgentKeyRing(redis, keys, new AgentRegistry(redis, keys));
  }

  /** The principal of `token`; undefined for anything that is not an active key. */
  async authenticate(token: string): Promise<Principal | undefined> {
    if (!this.cache || !isKeyShaped(token)) return this.lookup(token);
    return this.cache.through(hashKey(token), async () => {
      const principal = await this.lookup(token);
      return principal && { principal };
    });
  }

  /** Who `token` was last found to be, while Redis does not answer (`PrincipalCache.lastKnown`); undefined otherwise. */
  lastKnown(token: string): Principal | undefined {
    return this.cache && isKeyShaped(token) ? this.cache.lastKnown(hashKey(token)) : undefined;
  }

  /**
   * @throws AgentDbError UNAVAILABLE, in words and within about 3 s, when Redis does not answer:
   * the lookups would otherwise wait out ioredis's 20 retries per command (10 s and more, or no
   * answer at all) and end in its driver error, before any route's own outage answer.
   */
  private async lookup(token: string): Promise<Principal | undefined> {
    return whileRedisAnswers(this.redis, () => this.find(token));
  }

  private async find(token: string): Promise<Principal | undefined> {
    const [member, agent] = await Promise.all([this.members.authenticate(token), this.agentKeys.authenticate(token)]);
    if (member) return { kind: 'member', workspace: member.workspace, member: { name: member.name, role: member.role }, since: member.createdAt };
    if (agent) {
      return {
        kind: 'agent',
        workspace: agent.key.workspace,
        agent: agent.key.agent,
        keyId: agent.key.id,
        settings: agent.settings,
        surface: agent.agent.surface,
        since: agent.agent.createdAt,
      };
    }
    return undefined;
  }
}

/**
 * The caller name a principal's calls are keyed under (with its workspace and the call id):
 * the agent's slug, or `@<member>` for a person's client, which no agent slug can be.
 */
export function callerOf(p: Principal): string {
  return p.kind === 'agent' ? p.agent : memberCaller(p.member.name);
}

/** One tool call as a key holder sends it: the key says who calls and with which settings. */
export interface KeyedCall {
  tool: string;
  arguments?: unknown;
  callId?: string;
}

/**
 * The call a key holder's request becomes. A registered agent calls with its registered
 * settings (narrowed by its key's grants), never with settings of its own choosing; a member
 * calls as a person's client, fenced by the role their key carries.
 */
export function callInputFor(p: Principal, call: KeyedCall): CallInput {
  const base = {
    workspace: p.workspace,
    agent: callerOf(p),
    tool: call.tool,
    arguments: call.arguments ?? {},
    ...(call.callId !== undefined ? { callId: call.callId } : {}),
  };
  if (p.kind === 'agent') return { ...base, settings: p.settings, keyId: p.keyId, ...(p.since !== undefined ? { agentSince: p.since } : {}) };
  return { ...base, member: p.since === undefined ? p.member : { ...p.member, since: p.since } };
}
