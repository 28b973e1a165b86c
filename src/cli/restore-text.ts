import { type ActivityEntry, whoMade } from '../history/activity-view.ts';
import type { BlobRestoreResult } from '../history/blob-restore.ts';
import type { RestoreResult } from '../shards/history-client.ts';
import { entryWhat } from './activity-entry-text.ts';

// What `agentdb restore` prints for a person, a restore done or a dry run; `--json` prints the
// answer itself, for scripts.

/**
 * What a restore did, as `agentdb restore` prints it (review R1 low: a restore printed raw JSON
 * where its dry run printed text): what was restored, to which moment (and position, when one
 * was given), and the undo id with the command that goes back.
 * @param req the history position the restore was asked for (`--through`, `--before`), if one was.
 */
export function restoredText(r: RestoreResult, req: { through?: string; before?: string; undo?: string }): string {
  // A state built from a snapshot alone (an undo's: the snapshot taken before the restore it
  // undoes) is dated by the snapshot, not by a commit (review N6, session 30).
  // Named as its dry run names it (session 35, N11): the position kept, and the last activity
  // entry kept when that position is agentdb's upkeep after it.
  const upkeep = r.commits > 0 && isUpkeep(r.kept, r.keeps);
  const position = req.undo !== undefined ? undefined : (r.keeps ?? req.through);
  const kept = `as of ${r.restoredTo} (${r.commits ? `the last commit kept${upkeep ? UPKEEP : ''}` : 'when its snapshot was taken'})${position !== undefined ? `, position ${position}` : ''}${req.before !== undefined ? `, just before position ${req.before}` : ''}`;
  const lines = [
    r.into
      ? `made ${r.into} from ${r.database} ${kept}`
      : req.undo !== undefined
        ? `undid restore ${req.undo}: ${r.database} is back as it was before that restore, ${undoneTo(r, kept)}`
        : `restored ${r.database} ${kept}`,
  ];
  if (upkeep && r.kept && req.undo === undefined) lines.push(keptEntryLine(r.kept));
  if (r.tookAway && req.undo === undefined) lines.push(tookAwayLine(r, r.tookAway));
  if (r.discardsCommits) lines.push(`it discarded the ${r.discardsCommits} commit${r.discardsCommits === 1 ? '' : 's'} made since the restore it undid`);
  if (r.undoId) lines.push(`undo id ${r.undoId}: agentdb restore ${r.database} --undo ${r.undoId} puts back what was there before`);
  return `${lines.join('\n')}\n`;
}

const UPKEEP = ": agentdb's own upkeep, listed by agentdb history --all-commits";

/** Whether the state kept (`keeps`) is agentdb's upkeep after the newest entry kept, which `agentdb history` leaves out. */
function isUpkeep(kept: ActivityEntry | undefined, keeps: string | undefined): boolean {
  return kept !== undefined && keeps !== undefined && kept.id !== keeps;
}

/**
 * What a restore done took away in place (a fork: left out), counted, with the command that lists
 * those entries (session 36, N13: past a page of the list it printed only a position).
 */
function tookAwayLine(r: RestoreResult, took: NonNullable<RestoreResult['tookAway']>): string {
  const n = took.entries;
  const entries = `${n} activity entr${n === 1 ? 'y' : 'ies'}`;
  const above = r.kept ? `, above position ${r.kept.id}` : '';
  const them = n === 1 ? 'it' : 'them';
  if (r.into)
    return `it left out the newest ${n === 1 ? '' : `${n} `}activity entr${n === 1 ? 'y' : 'ies'} of ${r.database}: agentdb activity ${r.database} lists ${them}, newest first${above}`;
  if (!n) return 'it took away no activity entry';
  return `it took away ${entries}: agentdb activity ${r.database}${took.listedBefore ? ` --before ${took.listedBefore}` : ''} lists ${them}, newest first${above}`;
}

/** The newest activity entry a restore keeps, a line: its time, who, tool, what and position. */
function keptEntryLine(kept: ActivityEntry): string {
  return `the last activity entry it keeps: ${[kept.at, whoMade(kept.by) ?? kept.kind, kept.tool, entryWhat(kept)].filter((v) => v).join(' ')}, position ${kept.id}`;
}

/**
 * Where an undo went, dated. Built from its snapshot alone, the state is the one just before the
 * restore it undid, which no commit changed since that snapshot; the snapshot may be hours older
 * (a backup's, taken and not written since), and "as of" its time read as hours lost (review N8,
 * session 32).
 */
function undoneTo(r: RestoreResult, kept: string): string {
  return r.commits ? kept : `unchanged since its snapshot of ${r.restoredTo}`;
}

/**
 * What a restore from the blob store of one database did (or, a dry run, would do), as `agentdb
 * restore DB --from-blob` prints it: it printed JSON alone where the other restores print lines
 * for a person. The moment, the backup it is built from, what was downloaded; `--json` gives the answer.
 */
export function blobRestoredText(r: BlobRestoreResult): string {
  // Built from a snapshot alone, the moment is the snapshot's, not a commit's: a nightly
  // backup's snapshot is taken after the last commit, which the old words then misdated.
  const kept = `as of ${r.restoredTo} (${r.commits ? 'the last commit kept' : 'when its snapshot was taken'})`;
  const from = `built from snapshot ${r.snapshot.id} (taken ${r.snapshot.at})${r.commits ? ` and the ${r.commits} commit${r.commits === 1 ? '' : 's'} after it` : ' alone'}`;
  if (r.dryRun) {
    const where = r.into ? `${r.into} would be made from ${r.database}'s backup` : `${r.database} would be restored from its backup`;
    const lines = [`dry run, nothing changed: ${where} in the blob store ${kept}`, from];
    if (r.refused) lines.push(`the restore itself would be refused: ${r.refused}`);
    return `${lines.join('\n')}\n`;
  }
  const what = r.into ? `made ${r.into} from ${r.database}'s backup` : `restored ${r.database} from its backup`;
  return `${what} in the blob store ${kept}\n${from}; ${r.downloaded} bytes downloaded and verified\n${r.note ? `${r.note}\n` : ''}`;
}

/**
 * A restore's dry run as `agentdb restore --dry-run` prints it for a person: the moment and
 * position it goes to, the snapshot and the commits it applies, then what it would take away (or
 * a fork leave out), an activity entry a line, newest first.
 */
export function dryRunText(r: RestoreResult): string {
  const where = r.into ? `${r.into} would be made from ${r.database}` : `${r.database} would be restored`;
  // A state past the newest entry kept is agentdb's own upkeep after it, a commit `agentdb
  // history` leaves out: name the entry too (review N5: the moment named was in no list).
  const kept = r.after?.kept;
  const upkeep = isUpkeep(kept, r.keeps);
  const lines = [
    `dry run, nothing changed: ${where} as of ${r.restoredTo} (the last commit kept${upkeep ? UPKEEP : ''})${r.keeps ? `, position ${r.keeps}` : ''}`,
    ...(upkeep && kept ? [keptEntryLine(kept)] : []),
    // Commits, not WAL frames: a person counts what was done, not the pages it wrote (review R1 low).
    `built from snapshot ${r.snapshot.id} (taken ${r.snapshot.at})${r.commits ? ` and the ${r.commits} commit${r.commits === 1 ? '' : 's'} after it` : ' alone'}`,
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
      const count = after.count ?? after.entries.length;
      lines.push(
        '',
        `${r.into ? `${r.into} would leave out` : 'it would take away'} ${after.count === undefined && after.more ? 'at least ' : ''}${count} entr${count === 1 ? 'y' : 'ies'}, ${after.more ? `the newest ${after.entries.length} first` : 'newest first'}:`,
        ['time', 'by', 'tool', 'rows', 'what', 'position'].join('\t'),
      );
      for (const e of after.entries)
        lines.push(
          [e.at, whoMade(e.by) ?? (e.kind === 'outside' || e.kind === 'gap' ? 'outside' : ''), e.tool ?? '', e.rowsChanged ?? '', entryWhat(e), e.id].join(
            '\t',
          ),
        );
      if (after.more) {
        // The command that goes on from the last one shown, and where to stop: the entry kept.
        const rest = after.count === undefined ? 'more' : `${after.count - after.entries.length} more`;
        const stop = after.kept ? `, above position ${after.kept.id}` : '';
        lines.push(`(and ${rest}: agentdb activity ${r.database} --before ${after.entries.at(-1)!.id} lists them, newest first${stop})`);
      }
    }
  }
  return `${lines.join('\n')}\n`;
}
