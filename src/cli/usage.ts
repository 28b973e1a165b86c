import { readWorkspaceReport, type WorkspaceReport } from '../calls/usage.ts';
import type { WorkspaceLimitSource } from '../policy/plan-limits.ts';
import { connectAnswering } from '../redis/connection.ts';
import { keysFor } from '../redis/keys.ts';
import type { CommandContext } from './context.ts';
import { nameFlag } from './name-flag.ts';

/**
 * `agentdb usage --workspace W [--json]`: credits and calls per day, agent and tool, then the
 * workspace's disk (databases, bytes of files, history and offloaded results) against its plan,
 * and as text what it holds in Redis against its budget (see `WorkspaceRedisBudget`).
 * Run where the data folder is (AGENTDB_DATA_DIR): the disk figures are read from it.
 */
export async function usage(ctx: CommandContext, flags: { workspace: string; json?: boolean }): Promise<number> {
  const workspace = nameFlag('--workspace', flags.workspace);
  const redis = await connectAnswering(ctx.config.redisUrl, { name: 'agentdb-cli' });
  try {
    const report = await readWorkspaceReport(ctx.config, redis, keysFor(ctx.config.prefix), workspace);
    if (flags.json) {
      ctx.stdout.write(`${JSON.stringify({ credits: report.credits, disk: report.disk })}\n`);
      return 0;
    }
    ctx.stdout.write(`${['day', 'agent', 'tool', 'calls', 'credits'].join('\t')}\n`);
    for (const r of report.credits) ctx.stdout.write(`${[r.day, r.agent, r.tool, r.calls, r.credits].join('\t')}\n`);
    const total = report.credits.reduce((n, r) => n + r.credits, 0);
    ctx.stdout.write(`total credits: ${total}\n`);
    ctx.stdout.write(diskLines(report));
    // The budget binds where a call is enqueued, by that process's setting (the server's for HTTP
    // and MCP, a runtime's client its own): like the disk lines, say when this command lacks it.
    const { held, cap, from } = report.redis;
    const source = from === 'plan' ? `plan ${report.disk.plan}; REDIS_BYTES_PER_WORKSPACE not set for this command` : from;
    ctx.stdout.write(`redis: ${held} of ${cap} bytes (${source})\n`);
    return 0;
  } finally {
    redis.disconnect();
  }
}

function diskLines({ disk: d, diskFrom }: WorkspaceReport): string {
  const pct = (n: number, of: number) => `${Math.round((100 * n) / of)}%`;
  const from = ({ setting, from }: WorkspaceLimitSource) => (from === 'setting' ? setting : `plan ${d.plan}; ${setting} not set for this command`);
  return [
    `plan: ${d.plan}`,
    `databases: ${d.databases.length} of ${d.limits.maxDatabases} (${pct(d.databases.length, d.limits.maxDatabases)}, ${from(diskFrom.maxDatabases)})`,
    `disk bytes: ${d.bytes} of ${d.limits.maxBytes} (${pct(d.bytes, d.limits.maxBytes)}, ${from(diskFrom.maxBytes)}): files ${d.databaseBytes}, history ${d.historyBytes}, call-id ledger ${d.ledgerBytes}, offloaded results ${d.offloadedBytes}, past moments kept for as_of ${d.momentBytes}`,
    '',
  ].join('\n');
}
