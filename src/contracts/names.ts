import { z } from 'zod';

/**
 * Workspace and agent names become folder and file names, so they are held to a narrow
 * alphabet: no dots, slashes or upper case (which would collide on case-insensitive disks).
 */
export const NAME_PATTERN = /^[a-z0-9][a-z0-9_-]{0,62}$/;

const nameSchema = (what: string) =>
  z
    .string({ error: (issue) => (issue.input === undefined ? `${what} is required` : `${what} must be a string`) })
    .regex(NAME_PATTERN, `${what} must be 1 to 63 of a-z, 0-9, _ and -, starting with a letter or digit`);

/** A workspace name, e.g. `acme`. */
export const workspaceName = nameSchema('workspace');
/** An agent name (slug), e.g. `outreach`. */
export const agentName = nameSchema('agent');

/**
 * The caller name under which a person's client calls (`@<member>`). Calls are keyed by
 * workspace, caller and call id; `@` is outside the agent alphabet, so a member's calls can
 * never share a key (results, idempotency, approvals) with an agent's of the same name.
 */
export function memberCaller(member: string): string {
  return `@${member}`;
}

/** An agent name, or a member's caller name (`@<member>`). */
export const callerName = z
  .string({ error: (issue) => (issue.input === undefined ? 'agent is required' : 'agent must be a string') })
  .regex(/^@?[a-z0-9][a-z0-9_-]{0,62}$/, 'agent must be 1 to 63 of a-z, 0-9, _ and -, starting with a letter or digit');
