import { forgetMessage } from '../registry/registry-changes.ts';

/**
 * Who an access token (by its hash) acts for at `resource`, as the principal cache keeps it: by
 * the token and the `/mcp` URL it was sent to, since it works at that one only.
 */
export function cacheKey(hash: string, resource: string): string {
  return `oauth ${hash} ${resource}`;
}

/**
 * The registry change announcing that the access token of hash `hash` ended (replaced by a
 * refresh, revoked by its client, its grant ended): the principal cache forgets only its entries,
 * where any other change makes every process look up every tenant's keys again (hostile review
 * T18, session 37: an OAuth client refreshing in a loop did that once a second).
 */
export function accessEnded(hash: string): string {
  return forgetMessage(`oauth ${hash} `);
}
