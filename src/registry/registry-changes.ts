/**
 * The messages of the registry channel (`keys.registryChanges`) that end only some of what a
 * `PrincipalCache` (principal-cache.ts) holds, and how it reads them. Any other message drops its whole cache.
 */

/** How a registry change that ends only some entries begins; the rest of the message is their keys' prefix. */
const FORGET = 'forget ';

/**
 * The registry change that ends only the entries whose key begins with `prefix`. Every other
 * message drops the whole cache, in every process: an OAuth client refreshing its token (60 a
 * minute per address), or revoking one, made every tenant's keys and tokens be looked up in Redis
 * again on their next requests (hostile review T18, session 37). An older server, which drops
 * everything on any message, still drops these.
 */
export function forgetMessage(prefix: string): string {
  return `${FORGET}${prefix}`;
}

/** How a registry change that ends only one workspace's entries begins; the rest of the message is its name. */
const WORKSPACE = 'workspace ';

/**
 * The registry change that ends only the entries of `workspace`'s principals (a key revoked, a
 * member added or revoked, an agent set or removed, the workspace set or
 * removed): each ends or narrows principals of that workspace only. Every one of these dropped
 * the whole cache in every process, so one workspace's admin changing its own members in a loop
 * made every tenant's keys be looked up in Redis again (hostile review T19, session 37). An older
 * server drops everything on it, as on any message it does not know.
 */
export function workspaceChanged(workspace: string): string {
  return `${WORKSPACE}${workspace}`;
}

/** What `message` ends: the entries under a key prefix, those of one workspace, or (neither) everything. */
export function changeOf(message: string): { prefix?: string; workspace?: string } {
  if (message.startsWith(FORGET) && message.length > FORGET.length) return { prefix: message.slice(FORGET.length) };
  if (message.startsWith(WORKSPACE) && message.length > WORKSPACE.length) return { workspace: message.slice(WORKSPACE.length) };
  return {};
}
