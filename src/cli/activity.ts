import type { ActivityPage } from '../shards/history-client.ts';
import { ACTIVITY_PAGE, whoMade } from '../history/activity-view.ts';
import { cell } from './approvals-table.ts';
import { entryWhat } from './activity-entry-text.ts';
import { UsageError, type CommandContext } from './context.ts';
import { checkedDbFlag, withClient } from './history.ts';
import { jsonLine } from './json-line.ts';

const RATIONALE_WIDTH = 40;

/**
 * `agentdb activity DB [--json] [--limit N] [--before ID]`: a page of the database's history as
 * what was done, newest first (an operator command, as `agentdb history`). The table ends with
 * the `--before` of the next page.
 */
export async function activity(ctx: CommandContext, flags: { json?: boolean; limit?: string; before?: string }, db: string): Promise<number> {
  checkedDbFlag(db);
  let limit: number | undefined;
  if (flags.limit !== undefined) {
    limit = Number(flags.limit);
    if (!Number.isInteger(limit) || limit < 1 || limit > ACTIVITY_PAGE.max)
      throw new UsageError(`--limit: a whole number from 1 to ${ACTIVITY_PAGE.max}, not ${JSON.stringify(flags.limit)}`);
  }
  return withClient(ctx, 'activity', async (client) => {
    const page = await client.activity(
      db,
      { ...(limit !== undefined ? { limit } : {}), ...(flags.before !== undefined ? { before: flags.before } : {}) },
      'operator',
    );
    ctx.stdout.write(flags.json ? jsonLine(page) : activityTable(page));
    return 0;
  });
}

/** A page as `agentdb activity` prints it: a note when history is behind, a line an entry, where the next page starts. */
export function activityTable(page: ActivityPage): string {
  const lines = [
    `${page.database}: newest first`,
    ...(page.behind ? [`${page.behind.note}`] : []),
    ['time', 'by', 'tool', 'rows', 'approved by', 'what', 'rationale', 'position'].join('\t'),
  ];
  for (const e of page.entries)
    lines.push(
      [
        e.at,
        whoMade(e.by) ?? (e.kind === 'outside' || e.kind === 'gap' ? 'outside' : ''),
        e.tool ?? '',
        e.rowsChanged ?? '',
        e.approvedBy ?? '',
        entryWhat(e),
        e.rationale ? cell(e.rationale, RATIONALE_WIDTH) : '',
        e.id,
      ].join('\t'),
    );
  if (!page.entries.length) lines.push('(no commits in history)');
  if (page.next) lines.push('', `more: agentdb activity ${page.database} --before ${page.next}`);
  // One position per entry, the one `agentdb history` lists for the same commit; the flag says
  // which side of it a restore lands on. The table gave the state before each entry, which
  // --through then took with the opposite effect of history's position (session 32, N8).
  if (page.entries.length)
    lines.push(
      `undo an entry and every later one: agentdb restore ${page.database} --before <its position>; keep it and undo the later ones: --through <its position>`,
    );
  return `${lines.join('\n')}\n`;
}
