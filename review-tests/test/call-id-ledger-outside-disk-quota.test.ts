import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { CallIdLedger } from '../../src/calls/call-id-ledger.ts';
import { workspaceDiskUse } from '../../src/history/workspace-disk.ts';

// H6 (low; not fixed; its WAL growth is H7 below). The call-id ledger (AGENTDB_DATA_DIR/call-ids/<workspace>.sqlite) grows
// by one row per call sent with the caller's own id, kept claimTtlS (3 days), and is not part of
// what WORKSPACE_MAX_BYTES counts (databases, history, offloaded results). Measured with the built
// CallIdLedger: 100,000 ids of ~100 characters in 4.0 s, 34.6 MB (346 B each). Bounded by the
// Redis budget's throughput (each call counted ~2.6 KB for 24 h): ~150k ids (~53 MB) per pro
// workspace, ~2.5M (~850 MB) per enterprise one, on the shared data volume.
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'review-h6-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

// H7 (high; fixed on f-H in fc8e679). The ledger's take is INSERT … RETURNING read with get():
// the statement is reset after its first row, and SQLite commits without its WAL autocheckpoint
// (run only when a statement reaches SQLITE_DONE). The WAL grows without bound while a worker
// keeps the file open. Measured on `agentdb start`: 500 POST /v1/calls with own call ids (3.8 s)
// left call-ids/quiet.sqlite-wal at 5.26 MB (10.5 KB a call) beside a 4 KB database; 20,000
// takes of the built CallIdLedger: 397 MB. At the rate limit (1,200/min) ~750 MB an hour per
// workspace, on the volume every workspace's databases share.
it("keeps a workspace's call-id ledger WAL checkpointed", () => {
  const ledger = new CallIdLedger({ dataDir: dir, retentionMs: 3 * 24 * 3600 * 1000 });
  try {
    for (let i = 0; i < 5000; i++) ledger.take('wal', `wal.a1.${'x'.repeat(90)}-${i}`, { shard: i % 16, database: 'wal', fingerprint: 'f'.repeat(64) }, Date.now());
    expect(fs.statSync(path.join(dir, 'call-ids', 'wal.sqlite-wal')).size).toBeLessThan(8 * 1024 * 1024);
  } finally {
    ledger.close();
  }
});

it("a workspace's call-id ledger counts in its disk use", () => {
  const ledger = new CallIdLedger({ dataDir: dir, retentionMs: 3 * 24 * 3600 * 1000 });
  for (let i = 0; i < 20_000; i++) ledger.take('evil', `evil.a1.${'x'.repeat(90)}-${i}`, { shard: i % 16, database: 'evil', fingerprint: 'f'.repeat(64) }, Date.now());
  let ledgerBytes = 0;
  for (const f of fs.readdirSync(path.join(dir, 'call-ids'))) ledgerBytes += fs.statSync(path.join(dir, 'call-ids', f)).size;
  const use = workspaceDiskUse(dir, 'evil');
  expect(ledgerBytes).toBeGreaterThan(1_000_000);
  expect(use.databaseBytes + use.historyBytes).toBeGreaterThanOrEqual(ledgerBytes);
});
