import type { FastifyReply } from 'fastify';
import { AgentDbError, ERRORS, type ErrorCode } from '../../errors.ts';
import { refusalHead } from '../error-reply.ts';
import { html } from './html.ts';
import { layout, type PageFrame } from './layout.ts';

/** A page that says what went wrong, with the registry's status. */
export function errorPage(reply: FastifyReply, frame: PageFrame, err: unknown): FastifyReply {
  if (!(err instanceof AgentDbError)) throw err;
  const code: ErrorCode = err.code;
  // The status the API answers (`refusalHead`): a refusal that knows when to ask again
  // (`retryAfter`) says it the way any HTTP client reads, as a 429 with Retry-After.
  refusalHead(reply, err);
  const page = layout(
    { ...frame, flash: { kind: 'error', text: `${code}: ${err.detail ?? ERRORS[code].message}` } },
    html`<p><a href="/data">← all databases</a></p>`,
  );
  return reply.type('text/html; charset=utf-8').send(page.value);
}
