import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { withFullDisk } from '../../src/history/full-disk-where.ts';

// Session 38, F19's ledger: a restore in place refused on a full disk said "Disk I/O error (the
// disk that holds the database is full) (the disk that holds both the databases and their history
// (…) is full: …)": SQLite's mapper's generic words, then which disk. Which disk replaces them.
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-full-generic-'));
afterAll(() => fs.rmSync(dataDir, { recursive: true, force: true }));

describe('withFullDisk on SQLite full disk words', () => {
  it('names the disk once, in place of the generic words', () => {
    const db = { id: 'acme/a', path: path.join(dataDir, 'shards', '0', 'acme', 'a.db') };
    const said = withFullDisk('Disk I/O error (the disk that holds the database is full)', dataDir, db);
    expect(said).not.toContain('(the disk that holds the database is full)');
    expect(said).toMatch(/^Disk I\/O error \(the disk that holds both the databases and their history \(.*\) is full: free space on it, then try again\)$/);
  });

  // Session 38, F20's ledger: a restore in place refused by Node's copy read "ENOSPC: no space left
  // on device, copyfile '…/snapshot.sqlite' -> '…/aplace.sqlite.restore-28984.tmp' (the databases' disk …)".
  it("drops the paths of Node's ENOSPC words, keeping the call and the disk", () => {
    const db = { id: 'acme/a', path: path.join(dataDir, 'shards', '0', 'acme', 'a.db') };
    const node = `ENOSPC: no space left on device, copyfile '${dataDir}/history/acme/a/g1/snapshot.sqlite' -> '${db.path}.restore-1.tmp'`;
    const said = withFullDisk(node, dataDir, db);
    expect(said).not.toContain('snapshot.sqlite');
    expect(said).not.toContain('.restore-1.tmp');
    expect(said).toMatch(
      /^no space left on the disk \(copyfile\) \(the disk that holds both the databases and their history \(.*\) is full: free space on it, then try again\)$/,
    );
  });
});
