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
