import type { ActivityEntry } from '../shards/history-client.ts';
import { cell } from './approvals-table.ts';

const SQL_WIDTH = 60;

/** What the entry did, in one cell: the SQL cut (and by how much), a restore's target, or an outside write. */
export function entryWhat(e: ActivityEntry): string {
  if (e.kind === 'outside') return '(a commit made outside agentdb)';
  if (e.kind === 'gap')
    return `(a program outside agentdb wrote to the file: history took a snapshot, holding ${e.held ?? 0} call${e.held === 1 ? '' : 's'} listed above it too)`;
  if (e.kind === 'unknown') return '(older than the activity kept: not known)';
  const sql = cell(e.statement ?? '', SQL_WIDTH);
  const whole = e.statementCut ? `${sql} [+${e.statementCut} bytes]` : sql;
  return e.heldIn ? `${whole} [in gap ${e.heldIn}: restores only with it]` : whole;
}
