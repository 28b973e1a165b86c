/**
 * Workspace and agent names become folder and file names, so they are held to a narrow
 * alphabet: no dots, slashes or upper case (which would collide on case-insensitive disks).
 * Apart from names.ts's schemas: the executor child and the CLI check names with it and load
 * no zod for that (zod's 95 modules are a third of a child's start).
 */
export const NAME_PATTERN = /^[a-z0-9][a-z0-9_-]{0,62}$/;

/**
 * The caller name under which a person's client calls (`@<member>`). Calls are keyed by
 * workspace, caller and call id; `@` is outside the agent alphabet, so a member's calls can
 * never share a key (results, idempotency, approvals) with an agent's of the same name.
 */
export function memberCaller(member: string): string {
  return `@${member}`;
}
