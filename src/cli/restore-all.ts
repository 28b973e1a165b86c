import os from 'node:os';
import { errorBody } from '../errors.ts';
import { HISTORY_HINTS } from '../history/history-hints.ts';
import { restoreAllFromBlob, type DisasterRestoreLine } from '../shards/disaster-restore.ts';
import type { HistoryClient } from '../shards/history-client.ts';
import type { CommandContext } from './context.ts';
import { exitForAll, type Failure } from './exit-status.ts';

/**
 * `agentdb restore --from-blob --all | --workspace W [--at T] [--dry-run] [--json]`: the disaster
 * restore of every database the blob store holds (or W's) that is missing here. One line per
 * database as it ends and a total (`--json`: one JSON line each, then the summary); exit 1 when
 * any failed, 3 when each that failed may pass later (`exitForAll`).
 */
export async function restoreAll(
  ctx: CommandContext,
  client: HistoryClient,
  flags: { workspace?: string; at?: string; dryRun?: boolean; by?: string; json?: boolean },
): Promise<number> {
  const by = { who: `operator:${flags.by ?? os.userInfo().username}`, via: 'operator' as const };
  const failures: Failure[] = [];
  const summary = await restoreAllFromBlob(
    client,
    {
      ...(flags.workspace !== undefined ? { workspace: flags.workspace } : {}),
      ...(flags.at !== undefined ? { at: flags.at } : {}),
      ...(flags.dryRun ? { dryRun: true } : {}),
      by,
    },
    (line) => {
      if (line.outcome === 'failed') failures.push(line.error);
      ctx.stdout.write(flags.json ? `${JSON.stringify(asJson(line))}\n` : `${text(line, flags.dryRun === true)}\n`);
    },
  );
  const scope = flags.workspace !== undefined ? `of workspace ${flags.workspace} ` : '';
  // "1 database", not "1 databases": the total is read by a person.
  const databases = `${summary.databases} ${summary.databases === 1 ? 'database' : 'databases'}`;
  ctx.stdout.write(
    flags.json
      ? `${JSON.stringify({ total: summary })}\n`
      : `total: ${databases} ${scope}with a backup in the blob store (${summary.store}): ${summary.restored} ${flags.dryRun ? 'would be restored' : 'restored'}, ${summary.skipped} skipped (they exist here), ${summary.failed} failed\n`,
  );
  return exitForAll(failures);
}

function text(line: DisasterRestoreLine, dryRun: boolean): string {
  switch (line.outcome) {
    case 'restored':
      return `${line.database}: ${dryRun ? 'would restore' : 'restored'} to ${line.result.restoredTo} (${line.result.commits} commits, ${line.result.downloaded} bytes downloaded)`;
    case 'skipped':
      return `${line.database}: skipped, it exists here`;
    case 'failed':
      return `${line.database}: FAILED ${line.error.code}: ${line.error.detail}`;
  }
}

function asJson(line: DisasterRestoreLine): unknown {
  return line.outcome === 'failed'
    ? { database: line.database, outcome: line.outcome, error: errorBody(line.error.code, line.error.detail, HISTORY_HINTS) }
    : line;
}
