import { AgentDbError } from '../errors.ts';
import { listGenerations, listSegments, type HistoryPosition, type HistorySource } from './history-files.ts';
import { readCommits } from './segment-index.ts';

/**
 * The history position a state id names, for a restore `through` it: `<generation>.<segment>.<n>`
 * (an activity entry's id: the state just after that commit) or `<generation>` (the state the
 * generation begins with: its snapshot, and for a restore's linked generation its base commit).
 * Unlike a time, it tells apart commits captured in the same millisecond.
 * @throws AgentDbError INVALID_ARGUMENTS for text of another form; HISTORY_OUT_OF_RANGE for a state no longer (or never) in this history.
 */
export function commitPosition(source: HistorySource, id: string): HistoryPosition {
  const m = /^(g\d{10})(?:\.(\d{8})\.(\d{1,9}))?$/.exec(id);
  if (!m) throw new AgentDbError('INVALID_ARGUMENTS', `${JSON.stringify(id)} is no history position (an activity entry's id, <generation>.<segment>.<n>)`);
  const [, generation, segment, n] = m;
  const gen = listGenerations(source).find((g) => g.name === generation && g.snapshot);
  const gone = () => new AgentDbError('HISTORY_OUT_OF_RANGE', `${JSON.stringify(id)} is no longer (or never was) in this database's history`);
  if (!gen) throw gone();
  const base = gen.snapshot!.base;
  // A linked generation begins with its snapshot plus its base commit: that is its first state.
  if (segment === undefined)
    return base ? { generation: gen.name, segment: base.segment, frames: base.frames } : { generation: gen.name, segment: '', frames: 0 };
  const seg = listSegments(gen).find((s) => s.name === segment);
  const commit = seg ? readCommits(seg.indexPath, seg.closed)[Number(n)] : undefined;
  if (!commit) throw gone();
  return { generation: gen.name, segment: seg!.name, frames: commit.frames };
}
