import type { FastifyReply } from 'fastify';
import { AgentDbError, ERRORS, type ErrorCode } from '../../errors.ts';
import { html } from './html.ts';
import { layout, type PageFrame } from './layout.ts';

/** A page that says what went wrong, with the registry's status. */
export function errorPage(reply: FastifyReply, frame: PageFrame, err: unknown): FastifyReply {
  if (!(err instanceof AgentDbError)) throw err;
  const code: ErrorCode = err.code;
  const status = ERRORS[code].status;
  // A refusal that knows when to ask again (RATE_LIMITED) says it the way any HTTP client reads.
  const retryAfterS = (err as { retryAfterS?: unknown }).retryAfterS;
  if (typeof retryAfterS === 'number') reply.header('retry-after', String(retryAfterS));
  const page = layout(
    { ...frame, flash: { kind: 'error', text: `${code}: ${err.detail ?? ERRORS[code].message}` } },
    html`<p><a href="/data">← all databases</a></p>`,
  );
  return reply.code(status).type('text/html; charset=utf-8').send(page.value);
}
