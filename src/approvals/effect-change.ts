import type { Effect, EffectTable } from '../contracts/effect.ts';

/**
 * What a person reads on an approval that superseded another: how the call's effect moved
 * between the approved one and the one it has now, table by table ("leads: 1 updated → 3
 * updated"), or that the counts are the same and the rows or values differ.
 */
export function effectChangeNote(approvedId: string, before: Effect | null | undefined, now: Effect): string {
  const head = `The data changed after approval ${approvedId} was given, so the call did not run: approve this one to run it with the effect it has now`;
  if (!before)
    return `The effect of approval ${approvedId} could not be shown when it was given, and the call would change rows, so it did not run: approve this one to run it with the effect it has now.`;
  const counts = (t: EffectTable | undefined) =>
    t
      ? [t.inserted && `${t.inserted} inserted`, t.updated && `${t.updated} updated`, t.deleted && `${t.deleted} deleted`].filter(Boolean).join(', ') ||
        'no rows'
      : 'no rows';
  const names = [...new Set([...before.tables, ...now.tables].map((t) => t.table))].sort();
  const moved = names.flatMap((name) => {
    const was = counts(before.tables.find((t) => t.table === name));
    const is = counts(now.tables.find((t) => t.table === name));
    return was === is ? [] : [`${name}: ${was} → ${is}`];
  });
  if (before.dropped && now.dropped && before.dropped.definition !== now.dropped.definition) moved.push(`${now.dropped.name}: its definition changed`);
  return `${head} (${moved.length ? moved.join('; ') : 'the same counts, but other rows or values'}).`;
}
