import type { OAuthClient } from '../../src/oauth/oauth-clients.ts';
import type { OAuthGrants } from '../../src/oauth/oauth-grants.ts';
import { s256 } from '../../src/oauth/oauth-token-format.ts';
import type { Member } from '../../src/registry/members.ts';

/** The PKCE verifier and the resource the grant tests sign in with. */
export const OAUTH_VERIFIER = 'v'.repeat(43);
export const OAUTH_RESOURCE = 'http://agentdb.test/mcp';

/**
 * A member's consent to `client` (write, PKCE S256, the client's first redirect URI) exchanged
 * for tokens, as an app does after the person clicks Allow: the grant tests' sign-in.
 */
export async function signInTo(grants: OAuthGrants, member: Member, client: OAuthClient) {
  const redirectUri = client.redirectUris[0]!;
  const code = await grants.consent(member, client, {
    redirectUri,
    redirectUriGiven: true,
    challenge: s256(OAUTH_VERIFIER),
    resource: OAUTH_RESOURCE,
    level: 'write',
  });
  return grants.exchangeCode(client, { code, verifier: OAUTH_VERIFIER, redirectUri });
}
