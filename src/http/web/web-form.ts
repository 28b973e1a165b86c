import { z } from 'zod';
import { AgentDbError } from '../../errors.ts';

/**
 * A web form's body schema. Loose, not strict like the `/v1` bodies: the schema's output
 * replaces `request.body` before the preHandler reads the form's `_csrf` field (web-auth.ts),
 * and a stripped token would refuse every form as stale. Other unknown fields are kept, never read.
 */
export function formBody<Shape extends z.ZodRawShape>(shape: Shape) {
  return z.looseObject(shape);
}

/** The `db` a page or form names, worded as the page has always asked for it. */
export const databaseField = z.string({ error: 'name a database (?db=<workspace> or <workspace>/<agent>)' });

/**
 * One text field of input no schema has vouched for: a body that failed its schema (Fastify
 * leaves the unparsed input in place), where a page still needs a field to draw itself again
 * (sign-in's `next`), and the CSRF token, read before or without the route's schema.
 */
export function rawText(input: unknown, field: string): string | undefined {
  if (typeof input !== 'object' || input === null || !Object.hasOwn(input, field)) return undefined;
  const value: unknown = Reflect.get(input, field);
  return typeof value === 'string' ? value : undefined;
}

/**
 * A typed confirmation (a drop, a restore in place): the form goes on only when the person typed
 * `name` exactly; otherwise INVALID_ARGUMENTS with `refusal`, and nothing was done.
 */
export function requireTyped(typed: string | undefined, name: string, refusal: string): void {
  if (typed !== name) throw new AgentDbError('INVALID_ARGUMENTS', refusal);
}
