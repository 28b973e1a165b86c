import { whoMade } from '../history/activity-view.ts';
import type { RestoreResult } from '../shards/history-client.ts';
import { entryWhat } from './activity-entry-text.ts';

/**
 * A restore's dry run as `agentdb restore --dry-run` prints it for a person: the moment and
 * position it goes to, the snapshot and what it applies, then what it would take away (or a fork
 * leave out), an activity entry a line, newest first. `--json` prints the plan itself.
 */
export function dryRunText(r: RestoreResult): string {
  const where = r.into ? `${r.into} would be made from ${r.database}` : `${r.database} would be restored`;
  const lines = [
    `dry run, nothing changed: ${where} as of ${r.restoredTo} (the last commit kept)${r.keeps ? `, position ${r.keeps}` : ''}`,
    `from snapshot ${r.snapshot.id} (${r.snapshot.at}), then ${r.commits} commit${r.commits === 1 ? '' : 's'} (${r.frames} frames)`,
  ];
  if (r.refused) lines.push(`the restore itself would be refused: ${r.refused}`);
  if (r.note) lines.push(r.note);
  if (r.discardsCommits !== undefined)
    lines.push(`it discards the ${r.discardsCommits} commit${r.discardsCommits === 1 ? '' : 's'} made since the restore it undoes`);
  const after = r.after;
  if (after) {
    if (after.note) lines.push(after.note);
    else if (!after.entries.length)
      lines.push(
        r.into ? 'the new database would hold every entry of the activity list' : 'it takes nothing away: no entry of the activity list is after that moment',
      );
    else {
      lines.push(
        '',
        `${r.into ? `${r.into} would leave out` : 'it would take away'} ${after.more ? `at least ${after.entries.length}` : after.entries.length} entr${after.entries.length === 1 && !after.more ? 'y' : 'ies'}, newest first:`,
        ['time', 'by', 'tool', 'rows', 'what', 'id'].join('\t'),
      );
      for (const e of after.entries)
        lines.push(
          [e.at, whoMade(e.by) ?? (e.kind === 'outside' || e.kind === 'gap' ? 'outside' : ''), e.tool ?? '', e.rowsChanged ?? '', entryWhat(e), e.id].join(
            '\t',
          ),
        );
      if (after.more) lines.push(`(and more: agentdb activity ${r.database} lists them all)`);
    }
  }
  return `${lines.join('\n')}\n`;
}
