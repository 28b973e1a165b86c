import { z } from 'zod';
import type { Tier } from './tools.ts';

/**
 * The OAuth scopes a person may grant an MCP client (advertised as `scopes_supported`), each
 * including the ones before it: `read` (describe and query), `write` (and write), `drop` (and
 * drop, for an admin). A grant is named by its highest scope, its level.
 */
export const GRANT_SCOPES = ['read', 'write', 'drop'] as const;

/** How far an OAuth grant reaches: its highest scope. */
export const grantLevel = z.enum(GRANT_SCOPES);
export type GrantLevel = z.output<typeof grantLevel>;

const rank = (level: GrantLevel): number => GRANT_SCOPES.indexOf(level);

/** The most a member of `role` may grant: what their own key may do. */
export function roleLevel(role: 'member' | 'admin'): GrantLevel {
  return role === 'admin' ? 'drop' : 'write';
}

/** The narrower of two levels. */
export function narrowerLevel(a: GrantLevel, b: GrantLevel): GrantLevel {
  return rank(a) <= rank(b) ? a : b;
}

/** A level as the space-separated scope of a token response (RFC 6749 §3.3): `read write` for `write`. */
export function scopeOfLevel(level: GrantLevel): string {
  return GRANT_SCOPES.slice(0, rank(level) + 1).join(' ');
}

/**
 * The level a requested `scope` asks for: its highest scope agentdb knows. Scopes agentdb does
 * not know are left out (RFC 6749 §3.3 lets a server grant less than asked, and clients send
 * their own, such as `openid`); undefined when it names none of agentdb's.
 */
export function levelOfScope(scope: string | undefined): GrantLevel | undefined {
  const asked = new Set((scope ?? '').split(' '));
  return [...GRANT_SCOPES].reverse().find((s) => asked.has(s));
}

/** Whether a grant of `level` covers a tool of `tier`. */
export function levelAllows(level: GrantLevel, tier: Tier): boolean {
  return rank(level) >= rank(tier === 'destructive' ? 'drop' : tier);
}
