import { pageCursor, type PageCursor } from '../../contracts/browse.ts';
import { AgentDbError } from '../../errors.ts';

/** A keyset cursor as a URL parameter of the grid's page links (`after`, `before`). */
export const encodeCursor = (c: PageCursor): string => Buffer.from(JSON.stringify(c)).toString('base64url');

/**
 * The cursor a page link carries, back from its URL parameter. The link is the page's own, so
 * anything that does not decode to a cursor was damaged (cut by a mail client, edited): said
 * as such, with the way out, rather than as the field's zod issue.
 */
export function decodeCursor(text: string | undefined): PageCursor | undefined {
  if (text === undefined) return undefined;
  try {
    const parsed = pageCursor.safeParse(JSON.parse(Buffer.from(text, 'base64url').toString('utf8')));
    if (parsed.success) return parsed.data;
  } catch {
    // answered below
  }
  throw new AgentDbError('INVALID_ARGUMENTS', 'the page link is damaged; start from the first page');
}
