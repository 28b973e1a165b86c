import type { FastifyReply } from 'fastify';
import { AgentDbError, asSentence, ERRORS, type ErrorCode } from '../../errors.ts';
import { refusalHead } from '../error-reply.ts';
import { html, type Html } from './html.ts';
import { layout, type PageFrame } from './layout.ts';

/**
 * A refusal as a person reads it on the web page: a sentence, then its code as a small reference
 * (to look up in docs/errors.md or quote to an operator), both escaped. Pages showed `CODE: detail`
 * raw, a phrase after a constant's name (session 32, A3). Every web error path words its refusal
 * here: the error page, the inbox's and the data list's notices, OAuth's consent page.
 */
export function refusalText(sentence: string, code: string): Html {
  return html`${asSentence(sentence)} <small class="code">${code}</small>`;
}

/** The notice of a registry refusal: its detail as a sentence, or the registry's own sentence without one. */
export function refusalFlash(code: ErrorCode, detail?: string): NonNullable<PageFrame['flash']> {
  return { kind: 'error', text: refusalText(detail ?? ERRORS[code].message, code) };
}

/**
 * The notice of a refusal worded `code: description` (OAuth's, `invalid_scope: …`; a form's
 * `INVALID_ARGUMENTS: …` on the sign-in page), as {@link refusalText} words it; text without
 * such a code is shown as it is, escaped.
 */
export function codedFlash(text: string): NonNullable<PageFrame['flash']> {
  const coded = /^([a-z_]+|[A-Z_]+): (.+)$/s.exec(text);
  return { kind: 'error', text: coded ? refusalText(coded[2]!, coded[1]!) : text };
}

/** A page that says what went wrong, with the registry's status. */
export function errorPage(reply: FastifyReply, frame: PageFrame, err: unknown): FastifyReply {
  if (!(err instanceof AgentDbError)) throw err;
  // The status the API answers (`refusalHead`): a refusal that knows when to ask again
  // (`retryAfter`) says it the way any HTTP client reads, as a 429 with Retry-After.
  refusalHead(reply, err);
  const page = layout({ ...frame, flash: refusalFlash(err.code, err.detail) }, html`<p><a href="/data">← all databases</a></p>`);
  return reply.type('text/html; charset=utf-8').send(page.value);
}
