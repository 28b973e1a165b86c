import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { CallIdLedger } from '../../src/calls/call-id-ledger.ts';
import { CALL_ID_LEDGER_DIR } from '../../src/contracts/database-id.ts';

// Hostile review of issue 27: the ledger's take is an INSERT … RETURNING read with get(), which
// resets the statement after its first row; SQLite then commits without running the WAL's
// autocheckpoint (it runs when a statement reaches SQLITE_DONE), so the WAL grew ~14 KB a call id
// and was never checkpointed while the worker kept the file open: 20,000 takes, a 397 MB WAL
// beside a 4 KB database, on the shared data volume and in no workspace's disk quota.
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-ledger-wal-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

it("keeps the ledger's WAL checkpointed while the file stays open", () => {
  const ledger = new CallIdLedger({ dataDir: dir, retentionMs: 3 * 24 * 3600 * 1000 });
  try {
    for (let i = 0; i < 5000; i++) {
      expect(
        ledger.take('acme', `acme.scout.${'x'.repeat(90)}-${i}`, { shard: i % 16, database: 'acme', fingerprint: 'f'.repeat(64) }, Date.now()),
      ).toBeUndefined();
    }
    // A used id is still refused to another call, and still given to its own.
    const first = { shard: 1, database: 'acme', fingerprint: 'f'.repeat(64) };
    expect(ledger.take('acme', `acme.scout.${'x'.repeat(90)}-7`, { ...first, fingerprint: 'e'.repeat(64) }, Date.now())).toMatchObject({
      fingerprint: first.fingerprint,
    });
    expect(ledger.take('acme', `acme.scout.${'x'.repeat(90)}-7`, first, Date.now())).toBeUndefined();
    const wal = fs.statSync(path.join(dir, CALL_ID_LEDGER_DIR, 'acme.sqlite-wal')).size;
    // The autocheckpoint (1000 pages, 4 MiB) reuses the WAL from its start; unchecked it was ~70 MB here.
    expect(wal).toBeLessThan(8 * 1024 * 1024);
    expect(fs.statSync(path.join(dir, CALL_ID_LEDGER_DIR, 'acme.sqlite')).size).toBeGreaterThan(100_000);
  } finally {
    ledger.close();
  }
});
