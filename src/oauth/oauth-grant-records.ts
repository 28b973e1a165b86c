import type { GrantLevel } from '../contracts/grant-scope.ts';

// The records a grant keeps in Redis: the grant itself, the code waiting for its token request,
// and what an access token's hash keys.

/**
 * What a person granted a client: to act as them (with their role, read from the registry on
 * every request) at one MCP endpoint, the resource (RFC 8707). A grant lives while its refresh
 * tokens do; revoking it ends every token of it at once.
 */
export interface OAuthGrant {
  id: string;
  workspace: string;
  member: string;
  /** The member record's creation: a member removed and added again does not inherit grants. */
  memberSince: number;
  clientId: string;
  clientName: string;
  /** The MCP endpoint URL the tokens are for. */
  resource: string;
  /**
   * How far the person let the client reach (the consent page's choice, within their role);
   * absent on grants made before scopes, which reach as far as the role.
   */
  level?: GrantLevel;
  createdAt: number;
  /** When a token of it was last issued. */
  refreshedAt: number;
  /** sha256 of its access token: a refresh replaces it, so a grant holds one at a time. */
  accessHash?: string;
}

/** A code waiting for its token request (single use, {@link GrantOptions.codeTtlS}). */
export interface CodeRecord {
  grantId: string;
  clientId: string;
  redirectUri: string;
  /** The authorization request named redirectUri, so the token request must as well. */
  redirectUriGiven?: boolean;
  challenge: string;
  resource: string;
}

/** What an access token's hash keys: its grant, and when it stops working. */
export interface AccessRecord {
  grantId: string;
  expiresAt: number;
}
