import { describe, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { codeOf } from '../../src/errors.ts';
import { workspaceDiskUse } from '../../src/history/workspace-disk.ts';
import type { HistoryClient } from '../../src/shards/history-client.ts';
import type { Sandbox } from '../helpers/harness.ts';
import { withHistorySandbox } from '../helpers/history-sandbox.ts';

// Review L2: a restore was checked with its database's size now, not the size of the moment it
// restores to: one back to a larger moment could pass the workspace's byte quota by up to that
// size (a fork of it too), and one back to a smaller moment, which frees bytes, was refused.
const MB = 1024 * 1024;
const QUOTA = 3 * MB;
const by = { who: 'operator:test', via: 'operator' as const };
let sb: Sandbox;
let client: AgentDbClient;
let history: HistoryClient;

withHistorySandbox({ env: { WORKSPACE_MAX_BYTES: String(QUOTA) } }, (box) => ({ sb, client, history } = box));

const write = (sql: string) => client.call({ workspace: 'acme', agent: 'scout', settings: { database: 'agent' }, tool: 'DATA_WRITE_SQL', arguments: { sql } });
const bytesOf = () => {
  const u = workspaceDiskUse(sb.config.dataDir, 'acme');
  return u.databaseBytes + u.historyBytes + u.ledgerBytes + u.momentBytes;
};
const refusalOf = (p: Promise<unknown>) =>
  p.then(
    () => undefined,
    (err: unknown) => err,
  );

describe("a restore against the workspace's byte quota, at the size of the moment it restores to", () => {
  it('lets one back to a smaller moment through past the quota, and refuses one back to a larger moment, dry run alike', async () => {
    expect((await write('CREATE TABLE big (id INTEGER PRIMARY KEY, b BLOB)')).ok).toBe(true);
    const small = new Date().toISOString();
    await new Promise((r) => setTimeout(r, 5)); // the next commit a millisecond on from `small`
    expect(
      (await write('WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM c WHERE i<20) INSERT INTO big SELECT NULL, randomblob(100000) FROM c')).ok,
    ).toBe(true);
    const large = new Date().toISOString();
    const past = bytesOf();
    expect(past, 'the workspace is past its quota').toBeGreaterThan(QUOTA);

    // Back to the empty table: the file shrinks by ~2 MB, history gains a few pages.
    const dryShrink = await history.restore('acme/scout', { at: small, dryRun: true, by }, 'operator');
    expect(dryShrink.refused).toBeUndefined();
    const shrink = await refusalOf(history.restore('acme/scout', { at: small, by }, 'operator'));
    expect(shrink, 'a restore that frees bytes is not refused').toBeUndefined();
    const after = bytesOf();
    expect(after).toBeLessThan(past);

    // Forward again to the 2 MB moment: the file grows back and history gains its pages.
    // Checked at the file's size now (a few pages), it passed.
    const dryGrow = await history.restore('acme/scout', { at: large, dryRun: true, by }, 'operator');
    expect(dryGrow.restoredBytes).toBeGreaterThan(2 * 1000 * 1000);
    expect(dryGrow.refused).toMatch(
      /^QUOTA_EXCEEDED: restore of acme\/scout in place refused: workspace acme holds \d+ bytes on disk and this would add about \d+/,
    );
    const grow = await refusalOf(history.restore('acme/scout', { at: large, by }, 'operator'));
    expect(codeOf(grow)).toBe('QUOTA_EXCEEDED');
    expect(`QUOTA_EXCEEDED: ${(grow as { detail: string }).detail}`).toBe(dryGrow.refused);

    // A fork of the 2 MB moment, from the database as small as it is now, likewise.
    const dryFork = await history.restore('acme/scout', { at: large, into: 'acme/copy', dryRun: true, by }, 'operator');
    expect(dryFork.refused).toMatch(/^QUOTA_EXCEEDED: restore of acme\/scout into acme\/copy refused/);
    const fork = await refusalOf(history.restore('acme/scout', { at: large, into: 'acme/copy', by }, 'operator'));
    expect(codeOf(fork)).toBe('QUOTA_EXCEEDED');
    expect(workspaceDiskUse(sb.config.dataDir, 'acme').databases).toEqual(['acme/scout']);
    expect(bytesOf()).toBeLessThanOrEqual(after + 64 * 1024);
  });
});
