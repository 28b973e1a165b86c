import { z } from 'zod';
import { ACTIVITY_PAGE } from '../../history/activity-view.ts';

// The arguments of the history shard ops (`history-ops.ts`), as whoever queues one sends them.

const actor = z.object({ who: z.string().min(1).max(200), via: z.enum(['key', 'operator']) }).strict();

/** Arguments of the `historyRestore` shard op (times already parsed to epoch ms). */
export const restoreArgs = z
  .object({
    at: z.number().finite().optional(),
    through: z.string().min(1).max(100).optional(),
    before: z.string().min(1).max(200).optional(),
    undo: z.string().min(1).max(100).optional(),
    into: z.string().min(1).max(200).optional(),
    dryRun: z.boolean().optional(),
    // The bytes of restore its caller already charged (`chargedRestore`): the op runs no restore of more whole MiB.
    paidBytes: z.number().int().min(0).optional(),
    by: actor,
  })
  .strict()
  .refine(
    (a) => [a.at, a.through, a.before, a.undo].filter((v) => v !== undefined).length === 1,
    'give exactly one of a time (at), a history position to keep (through) or to go back to just before (before), or an undo id (undo)',
  )
  .refine((a) => a.into === undefined || a.undo === undefined, 'an undo goes back in place; it takes no "into"');

export type RestoreArgs = z.infer<typeof restoreArgs>;

/** Arguments of the `historyActivity` shard op: a page's size and where it starts. */
export const activityArgs = z
  .object({
    limit: z.number().int().min(1).max(ACTIVITY_PAGE.max).optional(),
    before: z.string().min(1).max(200).optional(),
    at: z.string().min(1).max(200).optional(),
    after: z.string().min(1).max(200).optional(),
  })
  .strict()
  .refine(
    (a) => [a.before, a.at, a.after].filter((v) => v !== undefined).length <= 1,
    'give at most one of before (the page after an entry), at (the page from it) and after (the entries after a position, from the top)',
  );

/** Arguments of the `historyList` shard op: which of the last commits it lists (`RecentKind`; default `user`). */
export const listArgs = z.object({ commits: z.enum(['user', 'all', 'none']).optional() }).strict();
