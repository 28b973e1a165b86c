import { z } from 'zod';
import { NAME_PATTERN } from './name-pattern.ts';

// The schemas of names; the pattern itself, and memberCaller, are in name-pattern.ts.

const nameSchema = (what: string) =>
  z
    .string({ error: (issue) => (issue.input === undefined ? `${what} is required` : `${what} must be a string`) })
    .regex(NAME_PATTERN, `${what} must be 1 to 63 of a-z, 0-9, _ and -, starting with a letter or digit`);

/** A workspace name, e.g. `acme`. */
export const workspaceName = nameSchema('workspace');
/** An agent name (slug), e.g. `outreach`. */
export const agentName = nameSchema('agent');

/** An agent name, or a member's caller name (`@<member>`). */
export const callerName = z
  .string({ error: (issue) => (issue.input === undefined ? 'agent is required' : 'agent must be a string') })
  .regex(/^@?[a-z0-9][a-z0-9_-]{0,62}$/, 'agent must be 1 to 63 of a-z, 0-9, _ and -, starting with a letter or digit');
