import { openBlobStore } from '../blobs/blob-stores.ts';
import { blobHoldings, type BlobHoldings } from '../history/blob-holdings.ts';
import { connectAnswering } from '../redis/connection.ts';
import { keysFor } from '../redis/keys.ts';
import { nextBackupRun } from '../schedule/scheduler.ts';
import { BackupLog, type ShardBackupState } from '../shards/backup-log.ts';
import { EXIT, type CommandContext } from './context.ts';

/**
 * `agentdb backups [--json]`: the backup schedule and its next run, each shard's last run and
 * its outcome (and its last success), and what the blob store holds per database (objects,
 * bytes, oldest and newest) and of offloaded results. Exit 1 when a shard's last run failed or
 * a shard was never backed up while others were: what a monitoring check wants to hear.
 */
export async function backups(ctx: CommandContext, flags: { json?: boolean }): Promise<number> {
  const { config } = ctx;
  const redis = await connectAnswering(config.redisUrl, { name: 'agentdb-cli' });
  const store = openBlobStore(config);
  try {
    const keys = keysFor(config.prefix);
    const [next, shards, held] = await Promise.all([nextBackupRun(redis, keys), new BackupLog(redis, keys).read(config.shardCount), blobHoldings(store)]);
    const schedule = { cron: config.backupCron, tz: config.backupTz, ...(next !== undefined ? { next: new Date(next).toISOString() } : {}) };
    const failing = shards.filter((s) => s.last && (s.last.error || s.last.failedDatabases > 0)).map((s) => s.shard);
    const ran = shards.some((s) => s.last);
    const never = ran ? shards.filter((s) => !s.last).map((s) => s.shard) : [];
    if (flags.json) {
      ctx.stdout.write(`${JSON.stringify({ schedule, shards, store: held, failing, never })}\n`);
    } else {
      ctx.stdout.write(
        `schedule: "${schedule.cron}" in ${schedule.tz} (BACKUP_CRON, BACKUP_TZ); next run ${schedule.next ?? 'unknown: no agentdb start or agentdb scheduler has registered it'}\n\n`,
      );
      ctx.stdout.write(`${['shard', 'last run ended', 'reason', 'outcome', 'last success'].join('\t')}\n`);
      for (const s of shards) ctx.stdout.write(`${shardLine(s)}\n`);
      ctx.stdout.write(`\n${storeLines(held)}`);
    }
    return failing.length || never.length ? EXIT.failed : EXIT.ok;
  } finally {
    await store.close();
    redis.disconnect();
  }
}

function shardLine(s: ShardBackupState): string {
  if (!s.last) return [s.shard, 'never', '-', '-', '-'].join('\t');
  const l = s.last;
  const outcome = l.error
    ? `FAILED ${l.error.code}: ${l.error.detail}`
    : l.failedDatabases > 0
      ? `FAILED for ${l.failedDatabases} of ${databasesWord(l.databases)} (agentdb backup now names them)`
      : `ok: ${databasesWord(l.databases)}, ${mb(l.bytes)} uploaded`;
  return [s.shard, iso(l.endedAt), l.reason, outcome, s.lastOk ? iso(s.lastOk.endedAt) : 'never'].join('\t');
}

function storeLines(held: BlobHoldings): string {
  const total = held.databases.reduce((n, d) => n + d.bytes, 0);
  const lines = [`blob store ${held.store}: backups of ${databasesWord(held.databases.length)}, ${mb(total)}`];
  if (held.databases.length) {
    lines.push(['database', 'objects', 'size', 'oldest', 'newest', 'manifest'].join('\t'));
    for (const d of held.databases) lines.push([d.database, d.objects, mb(d.bytes), iso(d.oldest), iso(d.newest), d.manifest ? 'yes' : 'MISSING'].join('\t'));
  }
  const r = held.results;
  lines.push(`offloaded results: ${r.objects} objects, ${mb(r.bytes)}${r.oldest !== undefined ? `, oldest ${iso(r.oldest)}` : ''}`);
  return `${lines.join('\n')}\n`;
}

const iso = (ms: number) => new Date(ms).toISOString();
const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MB`;

function databasesWord(n: number): string {
  return `${n} ${n === 1 ? 'database' : 'databases'}`;
}
