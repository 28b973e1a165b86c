// What a drop of a referenced table costs (session 33, R7; R6's figures): the check taken before
// a person is asked (`tryDropAlone`) and the drop itself, for a parent p of N rows and a child c
// of N rows whose key to p is NULL in every row (so the drop is allowed). The child key is
// declared with no type and indexed, R6's case: its index cannot serve SQLite's lookup of each
// deleted parent row (see drop-cascade.ts). On a real file, hardened as the handle cache does.
// Run: node --import tsx bench/drop-referenced.ts [N…]
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { hardenConnection } from '../src/guard/engine-check.ts';
import { ensureCallsTable } from '../src/sqlite/call-record.ts';
import { drop, dropTarget, tryDropAlone } from '../src/sqlite/sqlite-ops.ts';

const sizes = process.argv.slice(2).map(Number);
for (const n of sizes.length > 0 ? sizes : [2_000, 20_000]) {
  for (const childType of ['', 'INTEGER']) {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'agentdb-drop-bench-'));
    const db = new Database(path.join(dir, 'db.sqlite'));
    try {
      hardenConnection(db);
      db.pragma('journal_mode = WAL');
      ensureCallsTable(db);
      db.exec(`CREATE TABLE p (id INTEGER PRIMARY KEY, v TEXT); CREATE TABLE c (id INTEGER PRIMARY KEY, pid ${childType} REFERENCES p(id));
        CREATE INDEX c_pid ON c(pid);
        WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < ${n}) INSERT INTO p SELECT i, 'v' || i FROM k;
        INSERT INTO c SELECT id, NULL FROM p;`);
      const timed = (run: () => unknown) => {
        const cpu = process.cpuUsage();
        const t = performance.now();
        run();
        return `${(performance.now() - t).toFixed(1)} ms (CPU ${(process.cpuUsage(cpu).user / 1000).toFixed(0)} ms)`;
      };
      const check = timed(() => tryDropAlone(db, dropTarget(db, 'p')));
      const dropped = timed(() => drop(db, 'p', 'bench-drop'));
      console.log(`n=${n} child key ${childType || '(no type)'}, indexed: check ${check}; drop ${dropped}`);
    } finally {
      db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }
}
