import { createHash } from 'node:crypto';
import { AgentDbError } from '../errors.ts';

/**
 * History positions as agentdb gives them out, marked with their database. A position
 * (`<generation>.<segment>.<n>`, a generation, a held call's id) is a place in one database's
 * history, but every database's history numbers its generations, segments and commits the same
 * way: a position copied from another database's activity list named a state here too, and a
 * restore `through` it went somewhere nobody meant (review low). Given out as
 * `<position>~<mark>`, the mark 8 hex digits of the SHA-256 of the database id, it is refused
 * (HISTORY_POSITION_FOREIGN) anywhere but its own database. Not a secret: anyone who may list a
 * database's activity may restore it, the mark only catches a position taken from the wrong one.
 */
const MARK = '~';

function markOf(db: string): string {
  return createHash('sha256').update(db).digest('hex').slice(0, 8);
}

/** Position `position` of database `db`'s history as given out: marked with its database. */
export function positionToken(db: string, position: string): string {
  return `${position}${MARK}${markOf(db)}`;
}

/**
 * The position `token` names in database `db`'s history. A position without a mark (the form
 * given out before marks, which scripts may have kept; documented in docs/history.md) is read as
 * this database's, as it always was.
 * @throws AgentDbError HISTORY_POSITION_FOREIGN for a position marked as another database's;
 *   INVALID_ARGUMENTS for a mark agentdb never gives out.
 */
export function positionIn(db: string, token: string): string {
  const at = token.lastIndexOf(MARK);
  if (at < 0) return token;
  const mark = token.slice(at + 1);
  // A mark agentdb never gives out (empty, upper case, cut) names no database: a mistyped
  // position, not another database's, which HISTORY_POSITION_FOREIGN would tell the person.
  if (!/^[0-9a-f]{8}$/.test(mark))
    throw new AgentDbError(
      'INVALID_ARGUMENTS',
      `${JSON.stringify(token)} is no history position: its mark after ~ is not 8 hex digits (as agentdb gives them out)`,
    );
  if (mark !== markOf(db))
    throw new AgentDbError(
      'HISTORY_POSITION_FOREIGN',
      `${JSON.stringify(token)} is a position of another database's history, not of ${db}'s: take one from ${db}'s own activity list`,
    );
  return token.slice(0, at);
}
