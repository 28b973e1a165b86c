import { describe, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { codeOf } from '../../src/errors.ts';
import { workspaceDiskUse } from '../../src/history/workspace-disk.ts';
import type { HistoryClient } from '../../src/shards/history-client.ts';
import type { Sandbox } from '../helpers/harness.ts';
import { withHistorySandbox } from '../helpers/history-sandbox.ts';

// Hostile review T3: a restore in place adds about its database's size to history each time,
// and nothing bounded it (history's own quota lets restores through): an admin's loop of
// restores of a 20 MB database grew the workspace 20.7 MB a restore, past its byte quota.
const QUOTA = 1024 * 1024;
const by = { who: 'operator:test', via: 'operator' as const };
let sb: Sandbox;
let client: AgentDbClient;
let history: HistoryClient;

withHistorySandbox({ env: { WORKSPACE_MAX_BYTES: String(QUOTA) } }, (box) => ({ sb, client, history } = box));

const write = (sql: string) => client.call({ workspace: 'acme', agent: 'scout', settings: { database: 'agent' }, tool: 'DATA_WRITE_SQL', arguments: { sql } });

describe('restores in place of a workspace near its byte quota (WORKSPACE_MAX_BYTES)', () => {
  it('are refused QUOTA_EXCEEDED once the next would pass it, so a loop of them stops near the quota', async () => {
    expect((await write('CREATE TABLE big (id INTEGER PRIMARY KEY, b BLOB)')).ok).toBe(true);
    const before = Date.now();
    expect(
      (await write('WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM c WHERE i<10) INSERT INTO big SELECT NULL, randomblob(10000) FROM c')).ok,
    ).toBe(true);
    const at = new Date(before).toISOString();
    let refusal: unknown;
    let restored = 0;
    for (; restored < 60 && refusal === undefined; restored++) {
      await history.restore('acme/scout', { at: restored % 2 === 0 ? new Date().toISOString() : at, by }, 'operator').catch((err: unknown) => {
        refusal = err;
      });
    }
    expect(refusal, `${restored} restores, none refused`).toBeDefined();
    expect(codeOf(refusal)).toBe('QUOTA_EXCEEDED');
    expect((refusal as { detail: string }).detail).toMatch(/^restore of acme\/scout in place refused: workspace acme holds \d+ bytes on disk/);
    const u = workspaceDiskUse(sb.config.dataDir, 'acme');
    // Stopped before passing it by more than one restore's worth (the database's size).
    expect(u.databaseBytes + u.historyBytes + u.ledgerBytes).toBeLessThan(QUOTA + 256 * 1024);

    // A dry run then still previews the moment, and says the restore itself would be refused
    // (review N3: it answered as if the restore would go through).
    const dry = await history.restore('acme/scout', { at, dryRun: true, by }, 'operator');
    expect(dry).toMatchObject({
      dryRun: true,
      refused: expect.stringMatching(/^QUOTA_EXCEEDED: restore of acme\/scout in place refused: workspace acme holds/),
    });
    expect(workspaceDiskUse(sb.config.dataDir, 'acme').historyBytes).toBe(u.historyBytes);
  });
});
